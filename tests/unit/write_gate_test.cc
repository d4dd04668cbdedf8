// SPDX-License-Identifier: LGPL-2.1-or-later
#include "write_gate.h"

#include <gtest/gtest.h>

#include <string>

namespace memprotd {
namespace {

// a.slice
// ├── a-x.slice
// │   └── a-x-deep.slice
// └── a-y.slice
// b.slice
Plan tree() {
    Plan plan;
    auto add = [&](std::string unit, int parent) {
        PlanEntry e;
        e.unit = std::move(unit);
        if (parent >= 0)
            e.parent = static_cast<size_t>(parent);
        e.depth = parent < 0 ? 0 : plan.slices[static_cast<size_t>(parent)].depth + 1;
        plan.slices.push_back(std::move(e));
    };
    add("a.slice", -1);       // 0
    add("a-x.slice", 0);      // 1
    add("a-x-deep.slice", 1); // 2
    add("a-y.slice", 0);      // 3
    add("b.slice", -1);       // 4
    return plan;
}

PlannedWrite decrease(std::string unit) { return {std::move(unit), {}, true}; }
PlannedWrite increase(std::string unit) { return {std::move(unit), {}, false}; }

TEST(WriteGate, AllowsEverythingWhileAllWritesAreMade) {
    const Plan plan = tree();
    const WriteGate gate(plan);
    for (const auto& s : plan.slices) {
        EXPECT_TRUE(gate.allows(decrease(s.unit)));
        EXPECT_TRUE(gate.allows(increase(s.unit)));
    }
    EXPECT_TRUE(gate.allows(decrease("other.slice")));
    EXPECT_TRUE(gate.allows(increase("other.slice")));
}

TEST(WriteGate, ADecreaseNotMadeBlocksItsAncestorsDecreasesAndEveryIncrease) {
    const Plan plan = tree();
    WriteGate gate(plan);
    gate.not_made(decrease("a-x-deep.slice"));
    EXPECT_FALSE(gate.allows(decrease("a-x.slice")));
    EXPECT_FALSE(gate.allows(decrease("a.slice")));
    EXPECT_TRUE(gate.allows(decrease("a-y.slice")));
    EXPECT_TRUE(gate.allows(decrease("b.slice")));
    EXPECT_TRUE(gate.allows(decrease("a-x-deep.slice")));
    for (const auto& s : plan.slices)
        EXPECT_FALSE(gate.allows(increase(s.unit))) << s.unit;
    EXPECT_FALSE(gate.allows(increase("other.slice")));
}

TEST(WriteGate, AnIncreaseNotMadeBlocksOnlyTheIncreasesBelowIt) {
    const Plan plan = tree();
    WriteGate gate(plan);
    gate.not_made(increase("a-x.slice"));
    EXPECT_FALSE(gate.allows(increase("a-x.slice")));
    EXPECT_FALSE(gate.allows(increase("a-x-deep.slice")));
    EXPECT_TRUE(gate.allows(increase("a.slice")));
    EXPECT_TRUE(gate.allows(increase("a-y.slice")));
    EXPECT_TRUE(gate.allows(increase("b.slice")));
    EXPECT_TRUE(gate.allows(increase("other.slice")));
    for (const auto& s : plan.slices)
        EXPECT_TRUE(gate.allows(decrease(s.unit))) << s.unit;
}

TEST(WriteGate, AWriteOutsideThePlanNotMadeBlocksEveryLaterWriteOfThePlansSlices) {
    const Plan plan = tree();
    WriteGate gate(plan);
    gate.not_made(decrease("other.slice"));
    for (const auto& s : plan.slices) {
        EXPECT_FALSE(gate.allows(decrease(s.unit))) << s.unit;
        EXPECT_FALSE(gate.allows(increase(s.unit))) << s.unit;
    }
    EXPECT_TRUE(gate.allows(decrease("other.slice")));
    EXPECT_FALSE(gate.allows(increase("other.slice")));
}

TEST(WriteGate, ATopLevelDecreaseNotMadeLeavesOtherDecreasesAlone) {
    const Plan plan = tree();
    WriteGate gate(plan);
    gate.not_made(decrease("b.slice"));
    for (const auto& s : plan.slices)
        EXPECT_TRUE(gate.allows(decrease(s.unit))) << s.unit;
    EXPECT_FALSE(gate.allows(increase("a.slice")));
}

TEST(WriteGate, FindsThePlanEntryOfAUnit) {
    const Plan plan = tree();
    const WriteGate gate(plan);
    ASSERT_NE(gate.entry("a-y.slice"), nullptr);
    EXPECT_EQ(gate.entry("a-y.slice"), &plan.slices[3]);
    EXPECT_EQ(gate.entry("other.slice"), nullptr);
}

}  // namespace
}  // namespace memprotd
