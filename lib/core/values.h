// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Parsers for config values as people write them: sizes, percentages, time
// spans, booleans, plain integers. Each takes the value text (surrounding
// whitespace ignored) and returns the value or an Error whose message says
// what was expected and what is wrong, without file, line or key: the caller
// adds those. Pure, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "result.h"

namespace memprotd {

inline constexpr uint64_t kUsecPerSec = 1'000'000;

// A size as written in config: bytes (with K/M/G/T suffixes, base 1024), a
// percentage of MemTotal, or "infinity". Unset means "not given".
// to_string() gives the largest exact suffix ("512M", "4097"), "12.5%",
// "infinity" or "unset"; resolve() gives UINT64_MAX for infinity.
struct SizeSpec {
    enum class Kind { Unset, Bytes, Percent, Infinity };
    Kind kind = Kind::Unset;
    uint64_t bytes = 0;   // for Bytes
    double percent = 0;   // for Percent, 0..100

    static SizeSpec of_bytes(uint64_t b) { return {Kind::Bytes, b, 0}; }
    static SizeSpec of_percent(double p) { return {Kind::Percent, 0, p}; }
    [[nodiscard]] bool set() const { return kind != Kind::Unset; }
    // Bytes for a host with `mem_total` bytes of RAM; `fallback` when unset.
    [[nodiscard]] uint64_t resolve(uint64_t mem_total, uint64_t fallback = 0) const;
    [[nodiscard]] std::string to_string() const;  // "512M", "75%", "infinity"
};

// "512M", "1G", "1.5G", "4096", "75%", "12.5%", "infinity". Only the
// suffixes K, M, G, T (upper case, base 1024); "KB", "KiB", "B" are errors.
// Error message (no file/line/key) says what was expected and what is wrong.
Result<SizeSpec> parse_size(std::string_view text);
// systemd time spans: "5s", "1min", "500ms", "1min 30s", bare number = seconds.
// Returned in microseconds. Units: us usec ms msec s sec second(s) m min
// minute(s) h hr hour(s) d day(s) w week(s). Negative values, unknown units
// and overflow are errors.
Result<uint64_t> parse_timespan_us(std::string_view text);
// Only percentages 0..100%: "10%" → 0.10. A bare "0.1" is an error.
Result<double> parse_percent(std::string_view text);
// yes/no/true/false/on/off/1/0.
Result<bool> parse_boolean(std::string_view text);
// Only decimal digits, nothing around them: "100" → 100; "", "+1", " 1",
// and values beyond UINT64_MAX → nullopt.
std::optional<uint64_t> parse_digits_u64(std::string_view digits);

// A time span for messages, largest units first: "1s", "1min 30s", "150ms",
// "0". parse_timespan_us() reads it back.
std::string format_timespan(uint64_t us);

}  // namespace memprotd
