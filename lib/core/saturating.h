// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Byte arithmetic that saturates instead of wrapping: sizes never go below 0
// nor above kUnlimited, and a double converts back to bytes without
// undefined behaviour. Used by every step of the engine.
#pragma once

#include <cstdint>
#include <string>

#include "model.h"

namespace memprotd {

// 0 for negatives and NaN, kUnlimited from the largest double below 2^64 up.
inline uint64_t to_u64(double v) {
    if (!(v > 0))
        return 0;
    if (v >= 18446744073709549568.0)  // largest double below 2^64
        return kUnlimited;
    return static_cast<uint64_t>(v);
}

// The share `part / whole` of `total`, rounded down, computed exactly (so
// shares of one total never sum above it); `part` ≤ `whole`, `whole` > 0.
// Sums of many sizes may exceed 64 bits, so `whole` is 128 bits wide
// (ByteSum: GCC's and Clang's 128-bit integer; __extension__ keeps
// -Wpedantic quiet about it).
__extension__ using ByteSum = unsigned __int128;
inline uint64_t share_of(uint64_t total, uint64_t part, ByteSum whole) {
    return static_cast<uint64_t>(static_cast<ByteSum>(total) * part / whole);
}

inline uint64_t sat_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
inline uint64_t sat_add(uint64_t a, uint64_t b) { return a > kUnlimited - b ? kUnlimited : a + b; }

// Down to a multiple of `to` (0: unchanged).
inline uint64_t round_down(uint64_t v, uint64_t to) { return to ? v - v % to : v; }
inline uint64_t round_up(uint64_t v, uint64_t to) { return round_down(sat_add(v, to ? to - 1 : 0), to); }

// Seconds as microseconds (sampled time is in µs).
inline int64_t seconds_us(double seconds) { return static_cast<int64_t>(seconds * 1e6); }

// A per-second rate of a counter; 0 when it went backwards (a recreated
// cgroup) or no time passed.
inline double counter_rate(uint64_t now, uint64_t prev, double dt_s) {
    if (now < prev || dt_s <= 0)
        return 0;
    return static_cast<double>(now - prev) / dt_s;
}

}  // namespace memprotd
