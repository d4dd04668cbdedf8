// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Small helpers shared by the effectiveness workloads (kvload, cacheread,
// mcload): size/duration parsing, a fast PRNG, a zipf generator, a log-linear
// latency histogram and JSON-line output. No dependencies beyond the C++
// standard library and libc, so the binaries run unchanged in the test guest.
#pragma once

#include <time.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace effect {

inline uint64_t now_ns() {
    struct timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] inline void die(const char* prog, const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", prog, msg.c_str());
    std::exit(2);
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
