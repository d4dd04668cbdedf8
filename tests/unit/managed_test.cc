// SPDX-License-Identifier: LGPL-2.1-or-later
#include "managed.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace memprotd {
namespace {

CgroupSample cgroup(std::string unit, int parent) {
    CgroupSample cg;
    cg.unit = std::move(unit);
    cg.parent = parent;
    return cg;
}

EffectivePolicy matched(bool manage = true) {
    EffectivePolicy p;
    p.matched = true;
    p.manage = manage;
    return p;
}

// a.slice ─ a-x.slice ─ a-x-y.slice, b.slice ─ b-z.slice, init.scope
std::vector<CgroupSample> tree() {
    return {cgroup("a.slice", -1), cgroup("a-x.slice", 0), cgroup("a-x-y.slice", 1),
            cgroup("b.slice", -1), cgroup("b-z.slice", 3), cgroup("init.scope", -1)};
}

TEST(SelectManaged, TopLevelSlicesWhenConfiguredAndMatchedOnesWithTheirAncestors) {
    const auto cgroups = tree();
    const EffectivePolicy none, hit = matched();
    const std::vector<const EffectivePolicy*> policy{&none, &none, &hit, &none, &none, nullptr};
    const auto top = select_managed(cgroups, policy, true);
    EXPECT_EQ(top.managed, (std::vector<bool>{true, true, true, true, false, false}));
    EXPECT_TRUE(top.blocked.empty());
    const auto matched_only = select_managed(cgroups, policy, false);
    EXPECT_EQ(matched_only.managed, (std::vector<bool>{true, true, true, false, false, false}));
}

TEST(SelectManaged, AnAncestorWithManageNoBlocksItsSubtree) {
    const auto cgroups = tree();
    const EffectivePolicy none, hit = matched(), no = matched(false);
    const std::vector<const EffectivePolicy*> policy{&none, &no, &hit, &none, &hit, nullptr};
    const auto sel = select_managed(cgroups, policy, false);
    EXPECT_EQ(sel.managed, (std::vector<bool>{false, false, false, true, true, false}));
    EXPECT_EQ(sel.blocked, (std::vector<size_t>{2}));
}

}  // namespace
}  // namespace memprotd
