// SPDX-License-Identifier: LGPL-2.1-or-later
#include "values.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "text.h"

namespace memprotd {

namespace {

Error value_error(std::string message) { return Error{{}, 0, {}, std::move(message)}; }

// A decimal number as written: "12", "12.5". No sign, no exponent: config
// values are read by people, and "1e3M" is more likely a typo than intent.
struct Decimal {
    std::string_view integer;   // at least one digit
    std::string_view fraction;  // digits after '.', possibly empty
    std::string_view rest;      // what follows the number
};

std::optional<Decimal> scan_decimal(std::string_view s) {
    size_t i = 0;
    while (i < s.size() && is_digit(s[i]))
        ++i;
    if (i == 0)
        return std::nullopt;
    Decimal d{s.substr(0, i), {}, {}};
    if (i < s.size() && s[i] == '.') {
        size_t j = i + 1;
        while (j < s.size() && is_digit(s[j]))
            ++j;
        if (j == i + 1)
            return std::nullopt;  // "5." is not a number a person meant
        d.fraction = s.substr(i + 1, j - i - 1);
        i = j;
    }
    d.rest = s.substr(i);
    return d;
}

std::optional<uint64_t> to_u64(std::string_view digits) {
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc{} || ptr != digits.data() + digits.size())
        return std::nullopt;
    return v;
}

// integer.fraction × multiplier, rounded down, or nullopt on overflow.
std::optional<uint64_t> scale(const Decimal& d, uint64_t multiplier) {
    auto whole = to_u64(d.integer);
    if (!whole)
        return std::nullopt;
    uint64_t v = 0;
    if (__builtin_mul_overflow(*whole, multiplier, &v))
        return std::nullopt;
    if (!d.fraction.empty()) {
        // long double keeps 64 bits of mantissa on x86, enough for the
        // fractional part of anything that did not overflow above.
        long double frac = 0;
        long double place = 1;
        for (char c : d.fraction) {
            place /= 10;
            frac += static_cast<long double>(c - '0') * place;
        }
        auto extra = static_cast<uint64_t>(std::floor(frac * static_cast<long double>(multiplier)));
        if (__builtin_add_overflow(v, extra, &v))
            return std::nullopt;
    }
    return v;
}

std::optional<double> decimal_to_double(std::string_view digits) {
    double v = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc{} || ptr != digits.data() + digits.size())
        return std::nullopt;
    return v;
}

// "75%" / "12.5%" → 75 / 12.5, with the error message for `what`.
Result<double> parse_percent_number(std::string_view text) {
    std::string_view t = trim(text);
    if (t.empty() || t.back() != '%')
        return value_error(fmt::format("expected a percentage like \"10%\", got \"{}\"", text));
    std::string_view num = t.substr(0, t.size() - 1);
    if (!num.empty() && num.front() == '-')
        return value_error(fmt::format("expected a percentage 0..100%, got the negative \"{}\"", text));
    auto d = scan_decimal(num);
    if (!d || !d->rest.empty())
        return value_error(fmt::format("expected a percentage like \"10%\" or \"12.5%\", got \"{}\"", text));
    auto v = decimal_to_double(num);
    if (!v)
        return value_error(fmt::format("expected a percentage like \"10%\", got \"{}\"", text));
    if (*v > 100)
        return value_error(fmt::format("expected a percentage 0..100%, got \"{}\"", text));
    return *v;
}

struct TimeUnit {
    std::string_view name;
    uint64_t usec;
};

// systemd's spellings (src/basic/time-util.c), minus months and years, which
// no interval here should be measured in.
constexpr TimeUnit kTimeUnits[] = {
    {"us", 1},
    {"usec", 1},
    {"ms", 1000},
    {"msec", 1000},
    {"s", kUsecPerSec},
    {"sec", kUsecPerSec},
    {"second", kUsecPerSec},
    {"seconds", kUsecPerSec},
    {"m", 60 * kUsecPerSec},
    {"min", 60 * kUsecPerSec},
    {"minute", 60 * kUsecPerSec},
    {"minutes", 60 * kUsecPerSec},
    {"h", 3600 * kUsecPerSec},
    {"hr", 3600 * kUsecPerSec},
    {"hour", 3600 * kUsecPerSec},
    {"hours", 3600 * kUsecPerSec},
    {"d", 86400 * kUsecPerSec},
    {"day", 86400 * kUsecPerSec},
    {"days", 86400 * kUsecPerSec},
    {"w", 7 * 86400 * kUsecPerSec},
    {"week", 7 * 86400 * kUsecPerSec},
    {"weeks", 7 * 86400 * kUsecPerSec},
};

}  // namespace

uint64_t SizeSpec::resolve(uint64_t mem_total, uint64_t fallback) const {
    switch (kind) {
        case Kind::Unset:
            return fallback;
        case Kind::Bytes:
            return bytes;
        case Kind::Infinity:
            return std::numeric_limits<uint64_t>::max();
        case Kind::Percent: {
            // long double: 64-bit mantissa keeps byte precision for any RAM size.
            long double v = static_cast<long double>(mem_total) * static_cast<long double>(percent) / 100;
            if (v >= static_cast<long double>(std::numeric_limits<uint64_t>::max()))
                return std::numeric_limits<uint64_t>::max();
            return static_cast<uint64_t>(v);
        }
    }
    return fallback;
}

std::string SizeSpec::to_string() const {
    switch (kind) {
        case Kind::Unset:
            return "unset";
        case Kind::Infinity:
            return "infinity";
        case Kind::Percent:
            return fmt::format("{}%", percent);
        case Kind::Bytes: {
            static constexpr std::pair<char, int> kSuffixes[] = {{'T', 40}, {'G', 30}, {'M', 20}, {'K', 10}};
            if (bytes != 0) {
                for (auto [suffix, shift] : kSuffixes) {
                    uint64_t unit = uint64_t{1} << shift;
                    if (bytes % unit == 0)
                        return fmt::format("{}{}", bytes / unit, suffix);
                }
            }
            return fmt::format("{}", bytes);
        }
    }
    return {};
}

// Accepted: plain bytes ("4096"), K/M/G/T with base 1024 and an optional
// fraction ("1.5G", rounded down to whole bytes), "75%" (0..100, decimals
// allowed) and "infinity". Suffixes are upper case, as in systemd. "KB",
// "KiB", "B" and lower-case suffixes are rejected rather than guessed at:
// "KB" means 1000 to some readers, and a protection off by 2.4% per step is
// the kind of mistake nobody notices.
Result<SizeSpec> parse_size(std::string_view text) {
    std::string_view t = trim(text);
    if (t.empty())
        return value_error("expected a size like \"512M\", \"75%\" or \"infinity\", got \"\"");
    if (t == "infinity")
        return SizeSpec{SizeSpec::Kind::Infinity, 0, 0};
    if (t.back() == '%') {
        auto p = parse_percent_number(t);
        if (!p)
            return p.error();
        return SizeSpec::of_percent(*p);
    }
    if (t.front() == '-')
        return value_error(fmt::format("expected a size >= 0, got the negative \"{}\"", text));
    auto d = scan_decimal(t);
    if (!d)
        return value_error(fmt::format("expected a size like \"512M\", \"75%\" or \"infinity\", got \"{}\"", text));
    uint64_t multiplier = 1;
    if (d->rest.empty()) {
        if (!d->fraction.empty())
            return value_error(fmt::format("expected a whole number of bytes (or a K, M, G, T suffix), got \"{}\"", text));
    } else if (d->rest == "K") {
        multiplier = uint64_t{1} << 10;
    } else if (d->rest == "M") {
        multiplier = uint64_t{1} << 20;
    } else if (d->rest == "G") {
        multiplier = uint64_t{1} << 30;
    } else if (d->rest == "T") {
        multiplier = uint64_t{1} << 40;
    } else {
        return value_error(fmt::format("expected a size with suffix K, M, G or T (base 1024), \"%\" or none, got "
                                       "\"{}\" (unknown suffix \"{}\")",
                                       text, d->rest));
    }
    auto bytes = scale(*d, multiplier);
    if (!bytes)
        return value_error(fmt::format("expected a size below 16E, got \"{}\" (too large)", text));
    return SizeSpec::of_bytes(*bytes);
}

// systemd's parse_sec(): components "<number>[unit]" separated by optional
// whitespace, summed; a number without a unit is seconds; fractions allowed
// ("1.5s"), rounded down to whole microseconds.
Result<uint64_t> parse_timespan_us(std::string_view text) {
    std::string_view t = trim(text);
    if (t.empty())
        return value_error("expected a time span like \"5s\", \"500ms\" or \"2min 30s\", got \"\"");
    if (t.front() == '-')
        return value_error(fmt::format("expected a time span >= 0, got the negative \"{}\"", text));
    uint64_t total = 0;
    std::string_view rest = t;
    while (!(rest = trim_left(rest)).empty()) {
        auto d = scan_decimal(rest);
        if (!d)
            return value_error(
                fmt::format("expected a time span like \"5s\", \"500ms\" or \"2min 30s\", got \"{}\"", text));
        std::string_view after = trim_left(d->rest);
        size_t n = 0;
        while (n < after.size() && is_alpha(after[n]))
            ++n;
        std::string_view unit = after.substr(0, n);
        uint64_t usec = kUsecPerSec;
        if (!unit.empty()) {
            auto it = std::find_if(std::begin(kTimeUnits), std::end(kTimeUnits),
                                   [unit](const TimeUnit& u) { return u.name == unit; });
            if (it == std::end(kTimeUnits))
                return value_error(fmt::format("expected a time span with unit us, ms, s, min, h, d or w, got \"{}\" "
                                               "(unknown unit \"{}\")",
                                               text, unit));
            usec = it->usec;
        }
        rest = after.substr(n);
        if (!rest.empty() && !is_space(rest.front()) && !is_digit(rest.front()))
            return value_error(
                fmt::format("expected a time span like \"5s\", \"500ms\" or \"2min 30s\", got \"{}\"", text));
        auto part = scale(*d, usec);
        if (!part || __builtin_add_overflow(total, *part, &total))
            return value_error(fmt::format("expected a time span that fits in 64 bits of microseconds, got \"{}\"",
                                           text));
    }
    return total;
}

Result<double> parse_percent(std::string_view text) {
    auto p = parse_percent_number(text);
    if (!p)
        return p.error();
    return *p / 100;
}

// systemd's parse_boolean(): case-insensitive, with the one-letter forms.
Result<bool> parse_boolean(std::string_view text) {
    std::string_view t = trim(text);
    for (auto yes : {"1", "yes", "y", "true", "t", "on"})
        if (iequals(t, yes))
            return true;
    for (auto no : {"0", "no", "n", "false", "f", "off"})
        if (iequals(t, no))
            return false;
    return value_error(fmt::format("expected a boolean (yes/no, true/false, on/off, 1/0), got \"{}\"", text));
}

std::optional<uint64_t> parse_digits_u64(std::string_view digits) { return to_u64(digits); }

std::string format_timespan(uint64_t us) {
    if (us == 0)
        return "0";
    struct Step {
        uint64_t usec;
        std::string_view suffix;
    };
    static constexpr Step kSteps[] = {{3600 * kUsecPerSec, "h"}, {60 * kUsecPerSec, "min"},
                                      {kUsecPerSec, "s"},        {1000, "ms"},
                                      {1, "us"}};
    std::string out;
    for (const auto& step : kSteps) {
        if (us >= step.usec) {
            if (!out.empty())
                out += ' ';
            out += fmt::format("{}{}", us / step.usec, step.suffix);
            us %= step.usec;
        }
    }
    return out;
}

}  // namespace memprotd
