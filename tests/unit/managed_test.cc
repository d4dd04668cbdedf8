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

TEST(SelectManaged, KubeletOwnsKubepodsSliceAndTheSlicesBelowIt) {
    for (const char* unit : {"kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort-pod1.slice"})
        EXPECT_TRUE(kubelet_owns(unit)) << unit;
    for (const char* unit : {"kubepods", "kubepods-burstable.scope", "system.slice", "my-kubepods.slice"})
        EXPECT_FALSE(kubelet_owns(unit)) << unit;
}

// kubepods.slice ─ kubepods-burstable.slice ─ kubepods-burstable-pod1.slice, system.slice
std::vector<CgroupSample> kube_tree() {
    return {cgroup("kubepods.slice", -1), cgroup("kubepods-burstable.slice", 0),
            cgroup("kubepods-burstable-pod1.slice", 1), cgroup("system.slice", -1)};
}

EffectivePolicy named() {
    EffectivePolicy p = matched();
    p.named = true;
    return p;
}

TEST(SelectManaged, KubeletsTreeIsNotManagedByDefaultNorByAGlob) {
    const auto cgroups = kube_tree();
    const EffectivePolicy none, glob = matched();
    for (const EffectivePolicy* p : {&none, &glob}) {
        const std::vector<const EffectivePolicy*> policy{p, p, p, p};
        const auto sel = select_managed(cgroups, policy, true);
        EXPECT_EQ(sel.managed, (std::vector<bool>{false, false, false, true}));
        EXPECT_EQ(sel.kubelet, (std::vector<size_t>{0, 1, 2}));
        EXPECT_TRUE(sel.blocked.empty());
    }
}

TEST(SelectManaged, APolicyNamingAKubeletSliceMakesItAndItsAncestorsManaged) {
    const auto cgroups = kube_tree();
    const EffectivePolicy none, name = named();
    const auto top = select_managed(cgroups, {&name, &none, &none, &none}, true);
    EXPECT_EQ(top.managed, (std::vector<bool>{true, false, false, true}));
    EXPECT_EQ(top.kubelet, (std::vector<size_t>{1, 2}));

    const auto mid = select_managed(cgroups, {&none, &name, &none, &none}, false);
    EXPECT_EQ(mid.managed, (std::vector<bool>{true, true, false, false}));
    EXPECT_EQ(mid.kubelet, (std::vector<size_t>{2}));
}

TEST(SelectManaged, ManageNoOnAKubeletSliceIsNotReportedAsKubelets) {
    const auto cgroups = kube_tree();
    const EffectivePolicy none, no = matched(false);
    const auto sel = select_managed(cgroups, {&no, &none, &none, &none}, true);
    EXPECT_EQ(sel.managed, (std::vector<bool>{false, false, false, true}));
    EXPECT_EQ(sel.kubelet, (std::vector<size_t>{1, 2}));
}

}  // namespace
}  // namespace memprotd
