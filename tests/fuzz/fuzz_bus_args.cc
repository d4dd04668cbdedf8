// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The argument decoding of org.memprotd1's mutating methods (SetMode,
// SetSlicePolicy, ResetSlicePolicy; daemon/bus_args) over arbitrary
// arguments, built as a caller could send them: strings are valid UTF-8
// without NUL (sd-bus rejects anything else before memprotd sees it), variants
// of every basic type the a{sv} could carry.
//
// Each call either returns a value within bounds or throws InvalidArgs with a
// message that sd-bus can send (non-empty, bounded, valid UTF-8). Keys not
// given keep the base policy's values; a second SetSlicePolicy applies over
// the first, as the adaptor does with a unit's runtime policy.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "bus_args.h"
#include "fuzz_check.h"

namespace {

using memprotd::SizeSpec;
using memprotd::SlicePolicy;
namespace bus_args = memprotd::bus_args;

using memprotd::kPolicyKeys;
constexpr const char* kWide[] = {"é", "€", "𝄞", "ß", "\xe2\x80\xa6"};
constexpr const char* kSizes[] = {
    "", "512M", "1G", "1.5G", "4096", "75%", "12.5%", "100%", "infinity", "0", "18446744073709551615", "1T"};

// What a D-Bus string can hold: any non-NUL code point, here ASCII and a
// few multi-byte ones.
std::string bus_string(FuzzedDataProvider& in, size_t max) {
    std::string s;
    const size_t n = in.ConsumeIntegralInRange<size_t>(0, max);
    for (size_t i = 0; i < n && in.remaining_bytes() > 0; ++i) {
        const auto c = in.ConsumeIntegral<uint8_t>();
        if (c >= 0x80)
            s += kWide[c % std::size(kWide)];
        else if (c != 0)
            s += static_cast<char>(c);
    }
    return s;
}

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t len = c < 0x80           ? 1
                           : (c >> 5) == 0x6  ? 2
                           : (c >> 4) == 0xe  ? 3
                           : (c >> 3) == 0x1e ? 4
                                              : 0;
        if (len == 0 || i + len > s.size())
            return false;
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
                return false;
        i += len;
    }
    return true;
}

sdbus::Variant value(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 11)) {
        case 0:
            return sdbus::Variant(in.ConsumeBool());
        case 1:
            return sdbus::Variant(in.ConsumeIntegral<uint8_t>());
        case 2:
            return sdbus::Variant(in.ConsumeIntegral<int16_t>());
        case 3:
            return sdbus::Variant(in.ConsumeIntegral<int32_t>());
        case 4:
            return sdbus::Variant(in.ConsumeIntegral<uint32_t>());
        case 5:
            return sdbus::Variant(in.ConsumeIntegral<int64_t>());
        case 6:
            return sdbus::Variant(in.ConsumeIntegral<uint64_t>());
        case 7:
            return sdbus::Variant(in.ConsumeFloatingPoint<double>());
        case 8:
            return sdbus::Variant(
                std::string(kSizes[in.ConsumeIntegralInRange<size_t>(0, std::size(kSizes) - 1)]));
        case 9:
            return sdbus::Variant(std::vector<std::string>{bus_string(in, 8)});
        default:
            return sdbus::Variant(bus_string(in, 80));
    }
}

std::map<std::string, sdbus::Variant> keys(FuzzedDataProvider& in) {
    std::map<std::string, sdbus::Variant> out;
    const int n = in.ConsumeIntegralInRange(0, 20);
    for (int i = 0; i < n; ++i) {
        std::string key =
            in.ConsumeBool()
                ? std::string(
                      kPolicyKeys[in.ConsumeIntegralInRange<size_t>(0, std::size(kPolicyKeys) - 1)].name)
                : bus_string(in, 80);
        out.insert_or_assign(std::move(key), value(in));
    }
    return out;
}

void check_error(const sdbus::Error& e) {
    FUZZ_CHECK(e.getName() == bus_args::kInvalidArgs);
    const std::string& m = e.getMessage();
    FUZZ_CHECK(!m.empty());
    FUZZ_CHECK(m.size() <= 1024);
    FUZZ_CHECK(valid_utf8(m));
    FUZZ_CHECK(m.find('\0') == std::string::npos);
}

bool same(const SizeSpec& a, const SizeSpec& b) {
    return a.kind == b.kind && a.bytes == b.bytes &&
           (a.percent == b.percent || (a.percent != a.percent && b.percent != b.percent));
}

void check_size(const SizeSpec& s) {
    if (s.kind == SizeSpec::Kind::Percent)
        FUZZ_CHECK(s.percent >= 0 && s.percent <= 100);
}

void check_merge(const SlicePolicy& base, const std::map<std::string, sdbus::Variant>& given,
                 const SlicePolicy& p, uint64_t mem_total) {
    FUZZ_CHECK(!given.empty() && given.size() <= bus_args::kMaxPolicyKeys);
    for (const auto& [key, v] : given) {
        FUZZ_CHECK(memprotd::find_policy_key(key) != nullptr);
    }
    if (p.weight)
        FUZZ_CHECK(*p.weight >= 1 && *p.weight <= 10000);
    check_size(p.min_protection);
    check_size(p.max_protection);
    check_size(p.floor);
    if (!given.contains("Weight"))
        FUZZ_CHECK(p.weight == base.weight);
    if (!given.contains("Manage"))
        FUZZ_CHECK(p.manage == base.manage);
    if (!given.contains("MinProtection"))
        FUZZ_CHECK(same(p.min_protection, base.min_protection));
    if (!given.contains("MaxProtection"))
        FUZZ_CHECK(same(p.max_protection, base.max_protection));
    if (!given.contains("Floor"))
        FUZZ_CHECK(same(p.floor, base.floor));
    if (mem_total && p.min_protection.set() && p.max_protection.set())
        FUZZ_CHECK(p.min_protection.resolve(mem_total) <=
                   p.max_protection.resolve(mem_total, memprotd::kUnlimited));
}

void check_unit(const std::string& unit) {
    try {
        bus_args::check_slice_name(unit);
        FUZZ_CHECK(unit.size() > 6 && unit.size() <= bus_args::kMaxUnitName);
        FUZZ_CHECK(unit.ends_with(".slice"));
        FUZZ_CHECK(unit.find('/') == std::string::npos && unit.front() != '.');
        FUZZ_CHECK(valid_utf8(unit));
        for (char c : unit) FUZZ_CHECK(static_cast<unsigned char>(c) < 0x80 && c > 0x20);
    } catch (const sdbus::Error& e) {
        check_error(e);
    }
    try {
        bus_args::check_length(unit);
        FUZZ_CHECK(unit.size() <= bus_args::kMaxUnitName);
    } catch (const sdbus::Error& e) {
        check_error(e);
        FUZZ_CHECK(unit.size() > bus_args::kMaxUnitName);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);

    const std::string mode = bus_string(in, 80);
    try {
        const memprotd::Mode m = bus_args::mode_arg(mode);
        FUZZ_CHECK(memprotd::mode_name(m) == mode);
    } catch (const sdbus::Error& e) {
        check_error(e);
    }

    check_unit(bus_string(in, 300));

    const uint64_t mem_total = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint64_t>();
    SlicePolicy base;
    for (int call = 0; call < 2; ++call) {
        const auto given = keys(in);
        try {
            const SlicePolicy p = bus_args::merge_policy(base, given, mem_total);
            check_merge(base, given, p, mem_total);
            base = p;
        } catch (const sdbus::Error& e) {
            check_error(e);
        }
    }
    return 0;
}
