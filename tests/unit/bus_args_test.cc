// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Argument decoding of org.memprotd1's mutating methods, without a bus
// (sdbus::Variant works on its own). The D-Bus suite covers the same paths
// end to end; these pin the edge cases.
#include "bus_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

namespace memprotd::bus_args {
namespace {

using ::testing::HasSubstr;
using Keys = std::map<std::string, sdbus::Variant>;

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const sdbus::Error& e) {
        EXPECT_EQ(e.getName(), kInvalidArgs);
        return e.getMessage();
    }
    return "";
}

TEST(BusArgs, SliceNames) {
    EXPECT_EQ(error_of([] { check_slice_name("workload.slice"); }), "");
    EXPECT_EQ(error_of([] { check_slice_name("a-b\\x2dc@1.slice"); }), "");
    EXPECT_EQ(error_of([] { check_slice_name(""); }), "empty unit name");
    EXPECT_THAT(error_of([] { check_slice_name(".slice"); }), HasSubstr("not a valid unit name"));
    EXPECT_THAT(error_of([] { check_slice_name("../etc.slice"); }), HasSubstr("not a valid unit name"));
    EXPECT_THAT(error_of([] { check_slice_name("sshd.service"); }), HasSubstr("not a slice unit"));
    EXPECT_THAT(error_of([] { check_slice_name(std::string(300, 'a') + ".slice"); }),
                HasSubstr("longer than 256"));
}

TEST(BusArgs, Mode) {
    EXPECT_EQ(mode_arg("dry-run"), Mode::DryRun);
    EXPECT_EQ(error_of([] { (void)mode_arg("Enforce"); }),
              "unknown mode \"Enforce\": expected enforce, dry-run or paused");
}

TEST(BusArgs, ExcerptKeepsUtf8AndBoundsLength) {
    // 63 ASCII bytes then a 3-byte character across the 64-byte limit.
    const std::string s = std::string(63, 'x') + "€tail";
    const std::string e = excerpt(s);
    EXPECT_EQ(e, std::string(63, 'x') + "…");
    EXPECT_EQ(excerpt("a\nb\x01"), "a?b?");
    EXPECT_EQ(excerpt("short"), "short");
}

TEST(BusArgs, MergeAppliesKeysOverTheBase) {
    SlicePolicy base;
    base.weight = 300;
    base.floor = SizeSpec::of_bytes(1 << 20);
    const SlicePolicy p = merge_policy(base,
                                       Keys{{"MinProtection", sdbus::Variant(std::string("512M"))},
                                            {"MaxProtection", sdbus::Variant(uint64_t{1} << 30)},
                                            {"Manage", sdbus::Variant(std::string("yes"))}},
                                       8ull << 30);
    EXPECT_EQ(p.weight, 300u);
    EXPECT_EQ(p.floor.bytes, 1u << 20);
    EXPECT_EQ(p.min_protection.bytes, 512u << 20);
    EXPECT_EQ(p.max_protection.bytes, 1u << 30);
    EXPECT_EQ(p.manage, true);
    // "" unsets.
    const SlicePolicy q = merge_policy(
        p, Keys{{"Weight", sdbus::Variant(std::string())}, {"Floor", sdbus::Variant(std::string())}},
        8ull << 30);
    EXPECT_FALSE(q.weight.has_value());
    EXPECT_FALSE(q.floor.set());
}

TEST(BusArgs, WorkingSetWindowTakesMicrosecondsOrATimeSpan) {
    const uint64_t total = 8ull << 30;
    SlicePolicy p = merge_policy({}, Keys{{"WorkingSetWindow", sdbus::Variant(std::string("10min"))}}, total);
    EXPECT_EQ(p.working_set_window_us, 600'000'000U);
    p = merge_policy(p, Keys{{"WorkingSetWindow", sdbus::Variant(uint64_t{90'000'000})}}, total);
    EXPECT_EQ(p.working_set_window_us, 90'000'000U);
    p = merge_policy(p, Keys{{"WorkingSetWindow", sdbus::Variant(std::string())}}, total);
    EXPECT_FALSE(p.working_set_window_us.has_value());
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"WorkingSetWindow", sdbus::Variant(uint64_t{500'000})}}, total);
                }),
                HasSubstr("WorkingSetWindow: expected a time span of at least 1s, got \"500000us\""));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"WorkingSetWindow", sdbus::Variant(std::string("soon"))}}, total);
                }),
                HasSubstr("WorkingSetWindow: "));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"WorkingSetWindow", sdbus::Variant(true)}}, total);
                }),
                HasSubstr("WorkingSetWindow: expected t (microseconds) or s"));
}

TEST(BusArgs, SlicePolicyArgsCheckTheNameBeforeTheKeys) {
    const Keys bad_weight{{"Weight", sdbus::Variant(uint32_t{0})}};
    EXPECT_THAT(error_of([&] { slice_policy_args("sshd.service", {}, bad_weight, 0); }),
                HasSubstr("not a slice unit"));
    EXPECT_THAT(error_of([&] { slice_policy_args("batch.slice", {}, bad_weight, 0); }),
                HasSubstr("Weight: 0 is out of range"));
    const SlicePolicy p =
        slice_policy_args("batch.slice", {}, Keys{{"Weight", sdbus::Variant(uint32_t{50})}}, 0);
    EXPECT_EQ(p.weight, 50u);
}

TEST(BusArgs, MergeRejectsBadValuesWithTheKeyNamed) {
    const uint64_t total = 8ull << 30;
    EXPECT_EQ(error_of([&] { merge_policy({}, Keys{}, total); }).find("no keys given"), 0u);
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Weight", sdbus::Variant(uint32_t{0})}}, total);
                }),
                HasSubstr("Weight: 0 is out of range"));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Weight", sdbus::Variant(3.5)}}, total);
                }),
                HasSubstr("Weight: expected u, got type d"));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Floor", sdbus::Variant(std::string("150%"))}}, total);
                }),
                HasSubstr("Floor: expected a percentage 0..100%, got \"150%\""));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Floor", sdbus::Variant(std::string(65, '1'))}}, total);
                }),
                HasSubstr("Floor: value too long"));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Manage", sdbus::Variant(std::string("perhaps"))}}, total);
                }),
                HasSubstr("Manage: \"perhaps\" is not a boolean"));
    EXPECT_THAT(error_of([&] {
                    merge_policy({}, Keys{{"Colour", sdbus::Variant(true)}}, total);
                }),
                HasSubstr("unknown key \"Colour\""));
    EXPECT_THAT(error_of([&] {
                    merge_policy({},
                                 Keys{{"MinProtection", sdbus::Variant(std::string("2G"))},
                                      {"MaxProtection", sdbus::Variant(std::string("10%"))}},
                                 total);
                }),
                HasSubstr("MinProtection=2G is more than MaxProtection=10%"));
    Keys many;
    for (int i = 0; i < 17; ++i) many.emplace("k" + std::to_string(i), sdbus::Variant(true));
    EXPECT_THAT(error_of([&] { merge_policy({}, many, total); }),
                HasSubstr("too many keys (17; at most 16)"));
}

}  // namespace
}  // namespace memprotd::bus_args
