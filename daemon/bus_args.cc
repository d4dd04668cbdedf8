// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bus_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <variant>

namespace memprotd::bus_args {

void invalid(const std::string& message) {
    throw sdbus_compat::make_error(kInvalidArgs, message);
}

std::string excerpt(std::string_view text) {
    size_t cut = std::min(text.size(), kMaxValueString);
    // Never split a UTF-8 sequence: an error reply must be valid UTF-8 or
    // sd-bus refuses to send it.
    while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    std::string out;
    out.reserve(cut + 3);
    for (char c : text.substr(0, cut)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
    if (cut < text.size())
        out += "…";
    return out;
}

void check_slice_name(const std::string& unit) {
    if (unit.empty())
        invalid("empty unit name");
    if (unit.size() > kMaxUnitName)
        invalid(fmt::format("unit name longer than {} bytes", kMaxUnitName));
    if (std::optional<std::string> problem = slice_name_problem(unit))
        invalid(*problem);
}

void check_length(const std::string& unit) {
    if (unit.size() > kMaxUnitName)
        invalid(fmt::format("unit name longer than {} bytes", kMaxUnitName));
}

Mode mode_arg(const std::string& mode) {
    const std::optional<Mode> m = mode_from_name(mode);
    if (!m)
        invalid(fmt::format("unknown mode \"{}\": expected enforce, dry-run or paused", excerpt(mode)));
    return *m;
}

namespace {

// The value of a size key: t bytes, or s in config syntax; "" unsets.
SizeSpec size_value(std::string_view key, const sdbus::Variant& v) {
    if (v.containsValueOfType<uint64_t>())
        return SizeSpec::of_bytes(v.get<uint64_t>());
    if (v.containsValueOfType<std::string>()) {
        const auto s = v.get<std::string>();
        if (s.empty())
            return {};
        if (s.size() > kMaxValueString)
            invalid(fmt::format("{}: value too long", key));
        Result<SizeSpec> r = parse_size(s);
        if (!r)
            invalid(fmt::format("{}: {}", key, r.error().message));
        return *r;
    }
    invalid(fmt::format("{}: expected t (bytes) or s (\"512M\", \"75%\", \"infinity\"), got type {}", key,
                        v.peekValueType()));
}

// A time span key: t microseconds, or s in config syntax ("10min"); "" unsets.
std::optional<uint64_t> timespan_value(std::string_view key, const sdbus::Variant& v) {
    uint64_t us = 0;
    std::string text;
    if (v.containsValueOfType<uint64_t>()) {
        us = v.get<uint64_t>();
        text = std::to_string(us) + "us";
    } else if (v.containsValueOfType<std::string>()) {
        text = v.get<std::string>();
        if (text.empty())
            return std::nullopt;
        if (text.size() > kMaxValueString)
            invalid(fmt::format("{}: value too long", key));
        Result<uint64_t> r = parse_timespan_us(text);
        if (!r)
            invalid(fmt::format("{}: {}", key, r.error().message));
        us = *r;
    } else {
        invalid(fmt::format("{}: expected t (microseconds) or s (\"10min\"), got type {}", key,
                            v.peekValueType()));
    }
    if (std::optional<std::string> problem =
            working_set_window_problem(us, fmt::format("\"{}\"", excerpt(text))))
        invalid(fmt::format("{}: {}", key, *problem));
    return us;
}

// A weight key: any integer type; "" unsets.
std::optional<uint32_t> weight_value(std::string_view key, const sdbus::Variant& v) {
    int64_t w = 0;
    if (v.containsValueOfType<uint32_t>())
        w = v.get<uint32_t>();
    else if (v.containsValueOfType<int32_t>())
        w = v.get<int32_t>();
    else if (v.containsValueOfType<uint64_t>())
        w = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), 1'000'000));
    else if (v.containsValueOfType<int64_t>())
        w = v.get<int64_t>();
    else if (v.containsValueOfType<std::string>() && v.get<std::string>().empty())
        return std::nullopt;
    else
        invalid(fmt::format("{}: expected u, got type {}", key, v.peekValueType()));
    if (std::optional<std::string> problem = weight_problem(w))
        invalid(fmt::format("{}: {}", key, *problem));
    return static_cast<uint32_t>(w);
}

// A boolean key: b, or s in config syntax; "" unsets.
std::optional<bool> boolean_value(std::string_view key, const sdbus::Variant& v) {
    if (v.containsValueOfType<bool>())
        return v.get<bool>();
    if (v.containsValueOfType<std::string>()) {
        const auto s = v.get<std::string>();
        if (s.empty())
            return std::nullopt;
        Result<bool> b = parse_boolean(s);
        if (!b)
            invalid(fmt::format("{}: \"{}\" is not a boolean", key, excerpt(s)));
        return *b;
    }
    invalid(fmt::format("{}: expected b, got type {}", key, v.peekValueType()));
}

// Sets the field of one kPolicyKeys entry from the caller's variant, decoded
// by the field's type.
struct ApplyVariant {
    std::string_view key;
    const sdbus::Variant& value;
    SlicePolicy& policy;

    void operator()(std::optional<uint32_t> SlicePolicy::*f) const { policy.*f = weight_value(key, value); }
    void operator()(SizeSpec SlicePolicy::*f) const { policy.*f = size_value(key, value); }
    void operator()(std::optional<bool> SlicePolicy::*f) const { policy.*f = boolean_value(key, value); }
    void operator()(std::optional<uint64_t> SlicePolicy::*f) const { policy.*f = timespan_value(key, value); }
};

}  // namespace

// `base` (the unit's runtime policy so far) with the keys applied.
SlicePolicy merge_policy(SlicePolicy p, const std::map<std::string, sdbus::Variant>& keys,
                         uint64_t mem_total) {
    if (keys.empty())
        invalid(fmt::format("no keys given (expected {})", policy_key_list()));
    if (keys.size() > kMaxPolicyKeys)
        invalid(fmt::format("too many keys ({}; at most {})", keys.size(), kMaxPolicyKeys));
    for (const auto& [key, value] : keys) {
        const PolicyKey* known = find_policy_key(key);
        if (known == nullptr)
            invalid(fmt::format("unknown key \"{}\" (expected {})", excerpt(key), policy_key_list()));
        std::visit(ApplyVariant{known->name, value, p}, known->field);
    }
    // The rules a policy file is held to (lib/core/config.h).
    if (std::optional<std::string> problem = policy_problem(p, mem_total))
        invalid(*problem);
    return p;
}

SlicePolicy slice_policy_args(const std::string& unit, SlicePolicy base,
                              const std::map<std::string, sdbus::Variant>& keys, uint64_t mem_total) {
    check_slice_name(unit);
    return merge_policy(std::move(base), keys, mem_total);
}

}  // namespace memprotd::bus_args
