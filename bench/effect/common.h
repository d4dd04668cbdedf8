// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Small helpers shared by the effectiveness workloads (kvload, cacheread,
// mcload): size/duration parsing, command-line walking and the options kvload
// and mcload share, a fast PRNG, a zipf generator, a log-linear latency
// histogram, and the per-second and summary JSON lines with the loop that
// paces the per-second ones. No dependencies beyond the C++ standard library and
// libc, so the binaries run unchanged in the test guest.
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace effect {

constexpr uint64_t kSecNs = 1'000'000'000ULL;

inline uint64_t now_ns() {
    struct timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] inline void die(const char* prog, const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", prog, msg.c_str());
    std::exit(2);
}

// Installs handler for SIGTERM and SIGINT, the signals that stop a run.
inline void on_stop_signals(void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
}

// "512M", "1G", "4096", "1.5G" -> bytes; 0 on error.
inline uint64_t parse_size(std::string_view s) {
    if (s.empty())
        return 0;
    char* end = nullptr;
    const std::string str(s);
    errno = 0;
    const double v = std::strtod(str.c_str(), &end);
    if (errno != 0 || end == str.c_str() || v < 0)
        return 0;
    double mult = 1;
    switch (*end) {
        case '\0': break;
        case 'k': case 'K': mult = 1024.0; ++end; break;
        case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
        case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
        default: return 0;
    }
    if (*end == 'i' || *end == 'B')
        ++end;
    if (*end == 'B')
        ++end;
    if (*end != '\0')
        return 0;
    return static_cast<uint64_t>(v * mult);
}

// "90", "90s", "2m", "500ms" -> seconds (double); negative on error.
inline double parse_seconds(std::string_view s) {
    const std::string str(s);
    char* end = nullptr;
    const double v = std::strtod(str.c_str(), &end);
    if (end == str.c_str())
        return -1;
    const std::string_view unit(end);
    if (unit.empty() || unit == "s")
        return v;
    if (unit == "ms")
        return v / 1000.0;
    if (unit == "m" || unit == "min")
        return v * 60.0;
    return -1;
}

// Walks a program's arguments in order. Errors go through die(prog, ...).
class Args {
public:
    Args(const char* prog, int argc, char** argv) : prog_(prog), argc_(argc), argv_(argv) {}
    // Moves to the next argument and stores it in a; false after the last.
    bool next(std::string& a) {
        if (++i_ >= argc_)
            return false;
        a = current_ = argv_[i_];
        return true;
    }
    // The argument after the current option, which it consumes; exits with
    // "<option> needs a value" when there is none.
    std::string value() {
        if (i_ + 1 >= argc_)
            die(prog_, current_ + " needs a value");
        return argv_[++i_];
    }
    // The current option's value, which must be first or second (else
    // "<option> takes <first> or <second>"); true for second.
    bool either(const char* first, const char* second) {
        const std::string v = value();
        if (v != first && v != second)
            die(prog_, current_ + " takes " + first + " or " + second);
        return v == second;
    }
    // For an argument no option took: -h/--help prints usage and exits 0;
    // anything else prints usage and exits with "unknown argument <a>".
    [[noreturn]] void reject(void (*usage)()) const {
        usage();
        if (current_ == "-h" || current_ == "--help")
            std::exit(0);
        die(prog_, "unknown argument " + current_);
    }
    const char* prog() const { return prog_; }

private:
    const char* prog_;
    int argc_;
    char** argv_;
    int i_ = 0;
    std::string current_;
};

// The options kvload and mcload share: how keys are drawn, the share of
// reads, the run's length (0: until SIGTERM/SIGINT) and the PRNG seed.
struct LoadOptions {
    bool zipf = false;
    double theta = 0.99;
    double read_ratio = 0.9;
    double duration = 60;
    uint64_t seed = 1;
};

// Takes a if it is one of --dist uniform|zipf, --theta T, --read-ratio R,
// --duration S or --seed N (reading its value from args); false otherwise.
inline bool parse_load_option(Args& args, const std::string& a, LoadOptions& o) {
    if (a == "--dist")
        o.zipf = args.either("uniform", "zipf");
    else if (a == "--theta")
        o.theta = std::stod(args.value());
    else if (a == "--read-ratio")
        o.read_ratio = std::stod(args.value());
    else if (a == "--duration")
        o.duration = parse_seconds(args.value());
    else if (a == "--seed")
        o.seed = std::stoull(args.value());
    else
        return false;
    return true;
}

// Exits when a zipf theta is outside (0, 1); the last check of a parse.
inline void check_theta(const char* prog, const LoadOptions& o) {
    if (o.zipf && (o.theta <= 0 || o.theta >= 1))
        die(prog, "--theta must be in (0, 1)");
}

// Parses argv into an O, which derives from LoadOptions: the shared options
// through parse_load_option, the program's own through own(args, a, o),
// which returns false for an argument it does not know (Args::reject with
// usage then). Checks no values; the caller does.
template <class O, class Own>
O parse_load_args(const char* prog, int argc, char** argv, void (*usage)(), Own own) {
    O o;
    Args args(prog, argc, argv);
    std::string a;
    while (args.next(a)) {
        if (!parse_load_option(args, a, o) && !own(args, a, o))
            args.reject(usage);
    }
    return o;
}

// xoshiro256** — fast, good enough for key and offset selection.
class Rng {
public:
    explicit Rng(uint64_t seed) {
        for (auto& x : s_) {
            seed += 0x9e3779b97f4a7c15ULL;
            uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            x = z ^ (z >> 31);
        }
    }
    uint64_t next() {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    // Uniform in [0, n).
    uint64_t below(uint64_t n) {
        __extension__ using u128 = unsigned __int128;
        return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64);
    }
    // Uniform in [0, 1).
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::array<uint64_t, 4> s_{};
};

// Log-linear histogram of nanosecond latencies: 32 sub-buckets per power of
// two (about 3% resolution), from 1 ns to ~1 min.
class Histogram {
public:
    static constexpr int kSub = 32;
    static constexpr int kPow = 36;
    void add(uint64_t ns) {
        ++count_;
        ++buckets_[static_cast<size_t>(index(ns))];
        if (ns > max_)
            max_ = ns;
    }
    uint64_t count() const { return count_; }
    uint64_t max() const { return max_; }
    void clear() {
        buckets_.fill(0);
        count_ = 0;
        max_ = 0;
    }
    void merge(const Histogram& o) {
        for (size_t i = 0; i < buckets_.size(); ++i)
            buckets_[i] += o.buckets_[i];
        count_ += o.count_;
        if (o.max_ > max_)
            max_ = o.max_;
    }
    // Calls f(upper_ns, count) for each non-empty bucket, lowest first: a
    // sparse copy another program merges with others and takes quantiles
    // of as quantile() does (the upper edge of the bucket that holds it).
    template <class F>
    void each_bucket(F f) const {
        for (size_t i = 0; i < buckets_.size(); ++i)
            if (buckets_[i] > 0)
                f(upper(static_cast<int>(i)), buckets_[i]);
    }
    // The q-quantile (0..1) in ns (upper edge of its bucket, capped at max).
    uint64_t quantile(double q) const {
        if (count_ == 0)
            return 0;
        const auto want = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
        uint64_t seen = 0;
        for (size_t i = 0; i < buckets_.size(); ++i) {
            seen += buckets_[i];
            if (seen >= want && buckets_[i] > 0) {
                const uint64_t hi = upper(static_cast<int>(i));
                return hi < max_ ? hi : max_;
            }
        }
        return max_;
    }

private:
    static int index(uint64_t ns) {
        if (ns < kSub)
            return static_cast<int>(ns);
        const int p = 63 - __builtin_clzll(ns);  // ns in [2^p, 2^(p+1))
        const int shift = p - 5;                 // kSub = 2^5
        const int sub = static_cast<int>((ns >> shift) & (kSub - 1));
        const int i = (p - 4) * kSub + sub;
        return i < kSub * kPow ? i : kSub * kPow - 1;
    }
    static uint64_t upper(int i) {
        if (i < kSub)
            return static_cast<uint64_t>(i);
        const int p = i / kSub + 4;
        const int sub = i % kSub;
        return ((static_cast<uint64_t>(kSub + sub) + 1) << (p - 5)) - 1;
    }
    std::array<uint64_t, static_cast<size_t>(kSub * kPow)> buckets_{};
    uint64_t count_ = 0;
    uint64_t max_ = 0;
};

// Zipf ranks are scattered over the keys as (rank * kScramble) % keys: a
// prime larger than any key count used here, so that is a bijection.
constexpr uint64_t kScramble = 2654435761ULL;

// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record
// synthetic databases"): O(n) set-up, O(1) per draw. Rank 0 is the hottest.
class Zipf {
public:
    Zipf(uint64_t n, double theta) : n_(n), theta_(theta) {
        double zetan = 0;
        for (uint64_t i = 1; i <= n; ++i)
            zetan += 1.0 / std::pow(static_cast<double>(i), theta);
        const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
        alpha_ = 1.0 / (1.0 - theta);
        zetan_ = zetan;
        eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / zetan);
    }
    uint64_t next(Rng& rng) const {
        const double u = rng.unit();
        const double uz = u * zetan_;
        if (uz < 1.0)
            return 0;
        if (uz < 1.0 + std::pow(0.5, theta_))
            return 1;
        const auto r = static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
        return r < n_ ? r : n_ - 1;
    }

private:
    uint64_t n_;
    double theta_;
    double alpha_ = 0, zetan_ = 0, eta_ = 0;
};

inline double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Appends printf-style formatted text to out.
__attribute__((format(printf, 2, 3))) inline void appendf(std::string& out, const char* fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        const size_t at = out.size();
        out.resize(at + static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
        out.resize(at + static_cast<size_t>(n));
    }
    va_end(again);
}

// The latency fields of a JSON line, from h, in µs: ,"p50_us",
// ,"p99_us", ,"p999_us" (two decimals) and ,"max_us" (one).
inline void append_latency(std::string& out, const Histogram& h) {
    appendf(out, ",\"p50_us\":%.2f,\"p99_us\":%.2f,\"p999_us\":%.2f,\"max_us\":%.1f", us(h.quantile(0.5)),
            us(h.quantile(0.99)), us(h.quantile(0.999)), us(h.max()));
}

// The start of a per-second line of kvload and mcload, with these fields in
// this order: prog, t (the second, from 1), ts (wall-clock time at its end),
// ops_s, reads, writes, p50_us, p99_us, p999_us, max_us, keys. The program
// appends its own fields and prints it with print_line.
inline std::string second_line(const char* prog, uint64_t t, double ts, const Histogram& h, uint64_t reads,
                               uint64_t writes, uint64_t keys) {
    std::string out;
    appendf(out,
            "{\"prog\":\"%s\",\"t\":%" PRIu64 ",\"ts\":%.3f,\"ops_s\":%" PRIu64 ",\"reads\":%" PRIu64
            ",\"writes\":%" PRIu64,
            prog, t, ts, h.count(), reads, writes);
    append_latency(out, h);
    appendf(out, ",\"keys\":%" PRIu64, keys);
    return out;
}

// The start of a summary line of kvload and mcload: prog, summary (true),
// seconds, ops, ops_s, p50_us, p99_us, p999_us, max_us, from the whole run's
// histogram over secs seconds. Printed with print_line.
inline std::string summary_line(const char* prog, double secs, const Histogram& total) {
    std::string out;
    appendf(out, "{\"prog\":\"%s\",\"summary\":true,\"seconds\":%.2f,\"ops\":%" PRIu64 ",\"ops_s\":%.0f", prog, secs,
            total.count(), static_cast<double>(total.count()) / secs);
    append_latency(out, total);
    return out;
}

// Closes the JSON object in line and writes it as one line to stdout, flushed.
inline void print_line(std::string line) {
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
}

// The wall-clock time (seconds since the epoch) at the monotonic instant
// mono_ns, which is in the past.
inline double wall_clock_at(uint64_t mono_ns) {
    timespec rt{};
    clock_gettime(CLOCK_REALTIME, &rt);
    return static_cast<double>(rt.tv_sec) + static_cast<double>(rt.tv_nsec) / 1e9 -
           static_cast<double>(now_ns() - mono_ns) / 1e9;
}

// The main thread's part of a run that started at start_ns, once workers
// are going: every 100 ms, tick(t) with the monotonic time t, then print(i)
// for each second i (from 0, covering [start + i s, start + (i + 1) s)) that
// ended half a second or more before t; the grace lets operations that
// completed at a second's very end, or stalled in a fault, land in it. That
// until stop is set or duration seconds have passed (0: until stop); then it
// sets stop, joins the workers and prints each second that ended by then and
// was not printed yet. Every second is printed once, in order. Returns the
// instant after the join.
template <class Tick, class Print>
uint64_t run_seconds(std::atomic<bool>& stop, std::vector<std::thread>& workers, uint64_t start_ns, double duration,
                     Tick tick, Print print) {
    const uint64_t end_ns = duration > 0 ? start_ns + static_cast<uint64_t>(duration * 1e9) : ~0ULL;
    uint64_t printed = 0;
    while (!stop.load()) {
        usleep(100'000);
        const uint64_t t = now_ns();
        tick(t);
        while (t >= start_ns + (printed + 1) * kSecNs + kSecNs / 2)
            print(printed++);
        if (t >= end_ns)
            break;
    }
    stop = true;
    for (auto& w : workers)
        w.join();
    const uint64_t stop_ns = now_ns();
    while (start_ns + (printed + 1) * kSecNs <= stop_ns)
        print(printed++);
    return stop_ns;
}

// Resident set of this process in bytes (VmRSS), 0 if unreadable.
inline uint64_t rss_bytes() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long size = 0, resident = 0;
    const int n = std::fscanf(f, "%lu %lu", &size, &resident);
    std::fclose(f);
    return n == 2 ? static_cast<uint64_t>(resident) * 4096ULL : 0;
}

}  // namespace effect
