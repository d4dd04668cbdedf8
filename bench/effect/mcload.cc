// SPDX-License-Identifier: LGPL-2.1-or-later
//
// mcload: a load generator for a real memcached (text protocol), for the
// effectiveness benchmark's memcached scenario (bench/effect/README.md).
//
// Fill phase (--fill SIZE): keys 0..N-1 (N = SIZE / --value) are set with
// `noreply`, in pipelined batches each closed by a `version` round trip, over
// all connections at once. Values are about 1/4 random bytes and 3/4 a
// pattern, so zram compresses memcached's memory roughly like real values.
//
// Run phase: --conns connections, one thread each. Every operation is a get
// (--read-ratio) or a set of a fresh value, of a key drawn uniformly or from
// YCSB's zipf (--theta), zipf ranks scattered over the keys as in kvload.
// With --rate OPS (the total over all connections) each connection sends on
// its own fixed schedule (open loop) and latency is measured from the time
// an operation was due, not from when it was sent: a server stall shows as
// the latency of every operation that should have been sent during it, not
// only of the one that waited (no coordinated omission). --rate 0 is closed
// loop: each connection sends its next operation when the last one is
// answered, latency from the send.
//
// --probe-rate OPS adds --probe-conns connections (1) beside them that send
// on their own fixed schedules (open loop, OPS in all, latency from the due
// time, as above) whatever the others do; several keep one slow reply from
// holding up the probes behind it on the same connection: with a closed loop (--rate 0) the closed connections say
// what the server delivers (ops/s) and the probe what a request arriving at
// a steady rate waits (its latency, which a stall cannot hide). The probe's
// operations are not in ops_s or the other fields; they are counted apart.
//
// Output (stdout, one JSON object a line, the keys kvload prints so the
// benchmark's analysis reads either): a "ready" event once the fill is done
// (or at once when there is none), then one line a second with ops/s,
// reads, writes, latency quantiles (µs), misses (gets that found no value)
// and errors (error replies, lost connections), and a summary at the end.
// With a probe, each second also has probe_ops, probe_p50_us, probe_p99_us,
// probe_max_us and probe_hist, the probe's latency histogram of that second
// as [[upper_ns, count], ...] (non-empty buckets, ~3% wide): the benchmark
// merges the seconds of a window into one histogram and takes its p99.
// --duration 0 runs until SIGTERM/SIGINT. A server that cannot be reached
// at the start is one error line naming it, and exit status 1; a connection
// lost later counts as an error and is opened again.
//
//   mcload [--server HOST:PORT] [--fill SIZE] [--value BYTES] [--keys N]
//          [--dist uniform|zipf] [--theta 0.99] [--read-ratio 0.9] [--conns 4]
//          [--rate OPS] [--probe-rate OPS] [--probe-conns N] [--duration S] [--seed N]
//          [--fill-only]

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common.h"

namespace {

using effect::Histogram;
using effect::Rng;
using effect::Zipf;

constexpr const char* kProg = "mcload";
using effect::kSecNs;
constexpr uint64_t kFillBatch = 128;  // sets between two round trips in the fill

struct Options : effect::LoadOptions {
    std::string host = "127.0.0.1";
    std::string port = "11211";
    uint64_t fill = 0;
    uint64_t value = 4096;
    uint64_t keys = 0;
    int conns = 4;
    double rate = 0;
    double probe_rate = 0;
    int probe_conns = 1;
    bool fill_only = false;
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

// Value bytes: a random pool to take the first quarter from (at an offset
// that varies per write), and the pattern the rest repeats.
class Values {
public:
    Values(uint64_t size, uint64_t seed) : size_(size), pool_((64u << 10) + size), pattern_(size) {
        Rng rng(seed);
        for (size_t i = 0; i + 8 <= pool_.size(); i += 8) {
            const uint64_t r = rng.next();
            std::memcpy(pool_.data() + i, &r, 8);
        }
        for (size_t i = 0; i < pattern_.size(); ++i)
            pattern_[i] = static_cast<char>('a' + i % 16);
    }
    // Appends one value (size bytes) to out; salt picks the random part.
    void append(std::string& out, uint64_t salt) const {
        const uint64_t rnd = size_ / 4;
        out.append(pool_.data() + (salt * 8191) % (64u << 10), rnd);
        out.append(pattern_.data() + rnd, size_ - rnd);
    }

private:
    uint64_t size_;
    std::vector<char> pool_;
    std::vector<char> pattern_;
};

// One TCP connection with a read buffer. Every call returns false when the
// connection failed or the run was stopped while it waited.
class Conn {
public:
    ~Conn() { close_fd(); }
    // Connects; on failure returns the reason.
    std::optional<std::string> open(const Options& opt) {
        close_fd();
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        const int rc = getaddrinfo(opt.host.c_str(), opt.port.c_str(), &hints, &res);
        if (rc != 0)
            return std::string(gai_strerror(rc));
        std::string err = "no address";
        for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
            const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                err = std::strerror(errno);
                continue;
            }
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                fd_ = fd;
                break;
            }
            err = std::strerror(errno);
            ::close(fd);
        }
        freeaddrinfo(res);
        if (fd_ < 0)
            return err;
        const int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        // Waits wake up every 200 ms to see whether the run was stopped.
        const timeval tv{0, 200'000};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        return std::nullopt;
    }
    bool send_all(std::string_view data) {
        while (!data.empty()) {
            const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) && !g_stop.load())
                continue;
            if (n <= 0)
                return false;
            data.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
    // The next line without its "\r\n".
    bool read_line(std::string& line) {
        for (;;) {
            const size_t eol = buf_.find("\r\n", pos_);
            if (eol != std::string::npos) {
                line.assign(buf_, pos_, eol - pos_);
                pos_ = eol + 2;
                return true;
            }
            if (!fill_buffer())
                return false;
        }
    }
    // Skips n bytes of data (a value and its "\r\n").
    bool skip(size_t n) {
        while (buf_.size() - pos_ < n) {
            n -= buf_.size() - pos_;
            pos_ = buf_.size();
            if (!fill_buffer())
                return false;
        }
        pos_ += n;
        return true;
    }

private:
    bool fill_buffer() {
        if (pos_ > 0) {
            buf_.erase(0, pos_);
            pos_ = 0;
        }
        char tmp[65536];
        for (;;) {
            const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
            if (n > 0) {
                buf_.append(tmp, static_cast<size_t>(n));
                return true;
            }
            if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) && !g_stop.load())
                continue;
            return false;
        }
    }
    void close_fd() {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
        buf_.clear();
        pos_ = 0;
    }
    int fd_ = -1;
    std::string buf_;
    size_t pos_ = 0;
};

enum class Reply { Hit, Miss, Stored, Error, Lost };

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The reply to one get: "VALUE <key> <flags> <bytes> [<cas>]", the data,
// "END"; or "END" alone (a miss); or an error line.
Reply read_get_reply(Conn& c) {
    std::string line;
    if (!c.read_line(line))
        return Reply::Lost;
    if (line == "END")
        return Reply::Miss;
    if (!starts_with(line, "VALUE "))
        return Reply::Error;  // ERROR, CLIENT_ERROR ..., SERVER_ERROR ...
    const size_t key_end = line.find(' ', 6);
    const size_t flags_end = key_end == std::string::npos ? key_end : line.find(' ', key_end + 1);
    if (flags_end == std::string::npos)
        return Reply::Error;
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(line.c_str() + flags_end + 1, &end, 10);
    if (end == line.c_str() + flags_end + 1 || (*end != '\0' && *end != ' '))
        return Reply::Error;
    if (!c.skip(static_cast<size_t>(bytes) + 2) || !c.read_line(line))
        return Reply::Lost;
    return line == "END" ? Reply::Hit : Reply::Error;
}

Reply read_set_reply(Conn& c) {
    std::string line;
    if (!c.read_line(line))
        return Reply::Lost;
    return line == "STORED" ? Reply::Stored : Reply::Error;
}

void append_set(std::string& out, uint64_t key, const Values& values, uint64_t value_size, uint64_t salt,
                bool noreply) {
    out += "set k" + std::to_string(key) + " 0 0 " + std::to_string(value_size) + (noreply ? " noreply\r\n" : "\r\n");
    values.append(out, salt);
    out += "\r\n";
}

[[noreturn]] void unreachable(const Options& opt, const std::string& why) {
    std::fprintf(stderr, "%s: cannot reach memcached at %s:%s: %s\n", kProg, opt.host.c_str(), opt.port.c_str(),
                 why.c_str());
    std::exit(1);
}

// Sets keys id, id + step, ... below n with noreply, kFillBatch at a time,
// each batch closed by a `version` round trip (so the server has taken it
// and its buffers stay small). Exits on a lost connection.
void fill_part(const Options& opt, const Values& values, uint64_t n, uint64_t id, uint64_t step) {
    Conn c;
    if (auto err = c.open(opt))
        unreachable(opt, *err);
    std::string out, line;
    uint64_t k = id;
    while (k < n && !g_stop.load()) {
        out.clear();
        for (uint64_t i = 0; i < kFillBatch && k < n; ++i, k += step)
            append_set(out, k, values, opt.value, k, /*noreply=*/true);
        out += "version\r\n";
        if (!c.send_all(out) || !c.read_line(line))
            unreachable(opt, "connection lost during the fill");
        if (!starts_with(line, "VERSION"))
            unreachable(opt, "unexpected reply during the fill: " + line);
    }
}

// Per-second counts shared by the connection threads, indexed by the second
// (since start_ns) in which an operation completed.
// The probe's operations go to `probe` only (errors to probe_errors).
struct Second {
    Histogram h;
    Histogram probe;
    uint64_t reads = 0, writes = 0, misses = 0, errors = 0, probe_errors = 0;
};
struct Shared {
    std::mutex mu;
    std::vector<Second> per_second;
    Histogram total;
    Histogram probe_total;
    uint64_t misses = 0, errors = 0, probe_errors = 0;
    uint64_t start_ns = 0;
    void add(uint64_t done_ns, uint64_t lat_ns, bool read, Reply r, bool probe) {
        const uint64_t sec = (done_ns - start_ns) / kSecNs;
        std::lock_guard lock(mu);
        if (sec >= per_second.size())
            per_second.resize(sec + 1);
        Second& s = per_second[sec];
        const bool err = r == Reply::Error || r == Reply::Lost;
        if (probe && err) {
            ++s.probe_errors;
            ++probe_errors;
        } else if (probe) {
            s.probe.add(lat_ns);
            probe_total.add(lat_ns);
        }
        if (probe)
            return;
        if (err) {
            ++s.errors;
            ++errors;
            return;
        }
        s.h.add(lat_ns);
        total.add(lat_ns);
        ++(read ? s.reads : s.writes);
        if (r == Reply::Miss) {
            ++s.misses;
            ++misses;
        }
    }
};

void sleep_until(uint64_t t_ns) {
    const timespec ts{static_cast<time_t>(t_ns / kSecNs), static_cast<long>(t_ns % kSecNs)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR && !g_stop.load()) {
    }
}

// How one connection sends: its id (seed and start offset), the interval
// between its operations (0: closed loop) and whether it is the probe.
// Its first operation is due slot/of of an interval after the start, so
// that connections of one kind spread over one interval.
struct Schedule {
    int id;
    uint64_t interval_ns;
    bool probe;
    int slot;
    int of;
};

// One connection's operations until the stop.
void run_conn(Schedule sched, const Options& opt, const Values& values, uint64_t keys, Shared& sh) {
    const int id = sched.id;
    const uint64_t interval_ns = sched.interval_ns;
    Rng rng(opt.seed * 7919 + static_cast<uint64_t>(id) + 1);
    std::unique_ptr<Zipf> zipf;
    if (opt.zipf)
        zipf = std::make_unique<Zipf>(keys, opt.theta);
    Conn c;
    bool connected = !c.open(opt).has_value();
    std::string out;
    // Connections start spread over one interval, not all at once.
    uint64_t due = sh.start_ns + interval_ns * static_cast<uint64_t>(sched.slot) / static_cast<uint64_t>(sched.of);
    while (!g_stop.load(std::memory_order_relaxed)) {
        if (interval_ns > 0) {
            sleep_until(due);
            if (g_stop.load())
                break;
        } else {
            due = effect::now_ns();
        }
        const uint64_t rank = opt.zipf ? zipf->next(rng) : rng.below(keys);
        const uint64_t key = opt.zipf ? (rank * effect::kScramble) % keys : rank;
        const bool read = rng.unit() < opt.read_ratio;
        out.clear();
        if (read)
            out = "get k" + std::to_string(key) + "\r\n";
        else
            append_set(out, key, values, opt.value, rng.next(), /*noreply=*/false);
        Reply r = Reply::Lost;
        if (!connected)
            connected = !c.open(opt).has_value();
        if (connected && c.send_all(out))
            r = read ? read_get_reply(c) : read_set_reply(c);
        if (g_stop.load())
            break;  // an operation cut short by the stop is not counted
        if (r == Reply::Lost || r == Reply::Error)
            connected = false;  // the stream may be out of step: start afresh
        const uint64_t done = effect::now_ns();
        sh.add(done, done - due, read, r, sched.probe);
        if (r == Reply::Lost)
            usleep(100'000);
        due += interval_ns;
    }
}

void usage() {
    std::fprintf(stderr,
                 "usage: mcload [--server HOST:PORT] [--fill SIZE] [--value BYTES] [--keys N]\n"
                 "              [--dist uniform|zipf] [--theta T] [--read-ratio R] [--conns N]\n"
                 "              [--rate OPS] [--probe-rate OPS] [--probe-conns N] [--duration S] [--seed N]\n"
                 "              [--fill-only]\n");
}

void set_server(Options& o, const std::string& s) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
        effect::die(kProg, "--server takes HOST:PORT, not " + s);
    o.host = s.substr(0, colon);
    o.port = s.substr(colon + 1);
    if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']')
        o.host = o.host.substr(1, o.host.size() - 2);
}

// Takes a if it is one of this program's own options; false otherwise.
bool parse_own(effect::Args& args, const std::string& a, Options& o) {
    if (a == "--server")
        set_server(o, args.value());
    else if (a == "--fill")
        o.fill = effect::parse_size(args.value());
    else if (a == "--value")
        o.value = effect::parse_size(args.value());
    else if (a == "--keys")
        o.keys = std::stoull(args.value());
    else if (a == "--conns")
        o.conns = std::stoi(args.value());
    else if (a == "--rate")
        o.rate = std::stod(args.value());
    else if (a == "--probe-rate")
        o.probe_rate = std::stod(args.value());
    else if (a == "--probe-conns")
        o.probe_conns = std::stoi(args.value());
    else if (a == "--fill-only")
        o.fill_only = true;
    else
        return false;
    return true;
}

Options parse(int argc, char** argv) {
    auto o = effect::parse_load_args<Options>(kProg, argc, argv, usage, parse_own);
    if (o.value < 16 || o.value > (1u << 20))
        effect::die(kProg, "--value must be 16 bytes to 1 MiB");
    if (o.fill > 0)
        o.keys = o.fill / o.value;
    if (o.keys == 0)
        effect::die(kProg, "--fill SIZE (at least one value) or --keys N is needed");
    if (o.fill_only && o.fill == 0)
        effect::die(kProg, "--fill-only needs --fill");
    if (o.duration < 0 || o.conns < 1 || o.conns > 64 || o.rate < 0 || o.probe_rate < 0 || o.probe_conns < 1 ||
        o.probe_conns > 64)
        effect::die(kProg, "bad --duration, --conns, --rate, --probe-rate or --probe-conns");
    if (o.read_ratio < 0 || o.read_ratio > 1)
        effect::die(kProg, "--read-ratio must be in [0, 1]");
    effect::check_theta(kProg, o);
    return o;
}

// The fill over all connections, or a check that the server answers; then
// the "ready" line.
void fill_and_ready(const Options& opt, const Values& values) {
    const uint64_t t0 = effect::now_ns();
    if (opt.fill > 0) {
        std::vector<std::thread> threads;
        for (int i = 0; i < opt.conns; ++i)
            threads.emplace_back(fill_part, std::cref(opt), std::cref(values), opt.keys, static_cast<uint64_t>(i),
                                 static_cast<uint64_t>(opt.conns));
        for (auto& th : threads)
            th.join();
    } else {
        Conn c;
        std::string line;
        if (auto err = c.open(opt))
            unreachable(opt, *err);
        if (!c.send_all("version\r\n") || !c.read_line(line) || !starts_with(line, "VERSION"))
            unreachable(opt, "no reply to `version`");
    }
    std::printf("{\"prog\":\"mcload\",\"event\":\"ready\",\"keys\":%" PRIu64 ",\"fill_mb\":%.1f,\"fill_s\":%.2f,"
                "\"server\":\"%s:%s\"}\n",
                opt.keys, static_cast<double>(opt.fill) / 1048576.0,
                static_cast<double>(effect::now_ns() - t0) / 1e9, opt.host.c_str(), opt.port.c_str());
    std::fflush(stdout);
}

// The probe's fields of a line: its operations, latency quantiles, errors
// and, with_hist, its histogram as [[upper_ns, count], ...].
void append_probe(std::string& line, const Histogram& h, uint64_t errors, bool with_hist) {
    effect::appendf(line,
                    ",\"probe_ops\":%" PRIu64 ",\"probe_p50_us\":%.2f,\"probe_p99_us\":%.2f,\"probe_max_us\":%.1f"
                    ",\"probe_errors\":%" PRIu64,
                    h.count(), effect::us(h.quantile(0.5)), effect::us(h.quantile(0.99)), effect::us(h.max()), errors);
    if (!with_hist)
        return;
    line += ",\"probe_hist\":[";
    bool first = true;
    h.each_bucket([&](uint64_t upper_ns, uint64_t count) {
        effect::appendf(line, "%s[%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", upper_ns, count);
        first = false;
    });
    line += "]";
}

void print_second(Shared& sh, uint64_t i, double start_ts, uint64_t keys, bool probe) {
    Second s;
    {
        std::lock_guard lock(sh.mu);
        if (i < sh.per_second.size())
            s = sh.per_second[i];
    }
    std::string line = effect::second_line(kProg, i + 1, start_ts + static_cast<double>(i + 1), s.h, s.reads,
                                           s.writes, keys);
    effect::appendf(line, ",\"misses\":%" PRIu64 ",\"errors\":%" PRIu64, s.misses, s.errors);
    if (probe)
        append_probe(line, s.probe, s.probe_errors, /*with_hist=*/true);
    effect::print_line(std::move(line));
}

// The run phase: the connection threads, a line a second, the summary.
void run(const Options& opt, const Values& values) {
    Shared sh;
    sh.start_ns = effect::now_ns();
    const double start_ts = effect::wall_clock_at(sh.start_ns);
    const uint64_t interval_ns =
        opt.rate > 0 ? static_cast<uint64_t>(1e9 * static_cast<double>(opt.conns) / opt.rate) : 0;
    const bool probe = opt.probe_rate > 0;
    std::vector<std::thread> threads;
    for (int i = 0; i < opt.conns; ++i)
        threads.emplace_back(run_conn, Schedule{i, interval_ns, false, i, opt.conns}, std::cref(opt),
                             std::cref(values), opt.keys, std::ref(sh));
    const auto probe_ns = probe ? static_cast<uint64_t>(1e9 * opt.probe_conns / opt.probe_rate) : 0;
    for (int i = 0; probe && i < opt.probe_conns; ++i)
        threads.emplace_back(run_conn, Schedule{opt.conns + i, probe_ns, true, i, opt.probe_conns}, std::cref(opt),
                             std::cref(values), opt.keys, std::ref(sh));
    const uint64_t stop_ns = effect::run_seconds(
        g_stop, threads, sh.start_ns, opt.duration, [](uint64_t) {},
        [&](uint64_t i) { print_second(sh, i, start_ts, opt.keys, probe); });
    std::string line = effect::summary_line(kProg, static_cast<double>(stop_ns - sh.start_ns) / 1e9, sh.total);
    effect::appendf(line, ",\"misses\":%" PRIu64 ",\"errors\":%" PRIu64, sh.misses, sh.errors);
    if (probe)
        append_probe(line, sh.probe_total, sh.probe_errors, /*with_hist=*/false);
    effect::print_line(std::move(line));
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    effect::on_stop_signals(on_signal);
    const Values values(opt.value, opt.seed);
    fill_and_ready(opt, values);
    if (!opt.fill_only && !g_stop.load())
        run(opt, values);
    return 0;
}
