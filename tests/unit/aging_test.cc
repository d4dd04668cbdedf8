// SPDX-License-Identifier: LGPL-2.1-or-later
#include "aging.h"

#include <gtest/gtest.h>

#include <fcntl.h>

#include <cerrno>

#include "fake_tree.h"
#include "file_io.h"
#include "lru_gen_ager.h"

namespace memprotd {
namespace {

LruGenMemcg memcg(uint64_t id, std::string path, std::vector<LruGenNode> nodes) {
    return {id, std::move(path), std::move(nodes)};
}
// Two generations: an old one and one `youngest_ms` old holding `young` pages.
LruGenNode node(int n, uint64_t max_seq, uint64_t youngest_ms, uint64_t young = 100) {
    return {n, {{max_seq - 1, youngest_ms + 40'000, 50, 50}, {max_seq, youngest_ms, young, 0}}};
}

// Each managed slice is aged at half its own window (the engine's
// freshness test holds between two agings).
TEST(Aging, AgesEachPlannedSliceAtHalfItsWindow) {
    Plan plan;
    PlanEntry cache;
    cache.cgroup = "/workload.slice";
    cache.working_set_window_us = 30ULL * 60 * 1'000'000;
    PlanEntry batch;
    batch.cgroup = "/batch.slice";
    batch.working_set_window_us = 60'000'000;
    plan.slices = {cache, batch};
    const std::vector<AgedSlice> aged = aged_slices(plan);
    ASSERT_EQ(aged.size(), 2U);
    EXPECT_EQ(aged[0].cgroup, "/workload.slice");
    EXPECT_EQ(aged[0].interval_ms, 15ULL * 60 * 1000);
    EXPECT_EQ(aged[1].cgroup, "/batch.slice");
    EXPECT_EQ(aged[1].interval_ms, 30'000U);
}

// Where memory.low only defers (6.12), aging a slice within its protection
// hands its untouched tail to reclaim; it is left unaged until some slice
// is short of its demand. A slice above its protection, and every slice
// where memory.low holds (6.1), is aged.
TEST(Aging, WhereLowDefersASliceWithinItsProtectionIsAgedOnlyUnderContention) {
    auto entry = [](std::string cgroup, uint64_t current, uint64_t low, Bound bound) {
        PlanEntry e;
        e.cgroup = std::move(cgroup);
        e.working_set_window_us = 60'000'000;
        e.x.current = current;
        e.x.next.memory_low = low;
        e.x.bound = bound;
        return e;
    };
    Plan plan;
    plan.low_defers = true;
    plan.slices = {entry("/workload.slice", 450 << 20, 480 << 20, Bound::KeptAnon),
                   entry("/batch.slice", 600 << 20, 100 << 20, Bound::Demand)};
    hold_aging(plan);
    EXPECT_TRUE(plan.slices[0].x.aging_held);
    EXPECT_FALSE(plan.slices[1].x.aging_held);
    std::vector<AgedSlice> aged = aged_slices(plan);
    ASSERT_EQ(aged.size(), 1U);
    EXPECT_EQ(aged[0].cgroup, "/batch.slice");

    for (Bound contended : {Bound::None, Bound::Budget}) {
        plan.slices[1].x.bound = contended;
        hold_aging(plan);
        EXPECT_FALSE(plan.slices[0].x.aging_held) << bound_name(contended);
        EXPECT_EQ(aged_slices(plan).size(), 2U) << bound_name(contended);
    }

    plan.slices[1].x.bound = Bound::Demand;
    plan.low_defers = false;
    hold_aging(plan);
    EXPECT_FALSE(plan.slices[0].x.aging_held);
    EXPECT_EQ(aged_slices(plan).size(), 2U);
}

TEST(Aging, AgesStaleMemcgsOfManagedSlicesOncePerNode) {
    LruGen lg;
    lg.memcgs = {
        memcg(1, "/", {node(0, 9, 90'000)}),
        memcg(5, "/workload.slice", {node(0, 4, 45'000)}),
        memcg(7, "/workload.slice/kv.service", {node(0, 12, 31'000), node(1, 3, 60'000)}),
        memcg(8, "/workload.slicex/a.service", {node(0, 6, 90'000)}),   // a prefix, not below
        memcg(9, "/batch.slice/reader.service", {node(0, 6, 29'000)}),  // young enough
        memcg(10, "/init.scope", {node(0, 6, 90'000)}),                 // in no slice
        memcg(0, "/workload.slice/old.service", {node(0, 6, 90'000)}),  // removed, still holding pages
        memcg(11, "/workload.slice/mine.slice", {node(0, 6, 90'000)}),  // Manage=no
        memcg(12, "/workload.slice/mine.slice/x.service", {node(0, 6, 90'000)}),
    };
    const auto r = plan_aging(lg, {{"/workload.slice", 30'000}, {"/batch.slice", 30'000}});
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].command(), "+ 5 0 4");
    EXPECT_EQ(r[1].command(), "+ 7 0 12");
    EXPECT_EQ(r[1].path, "/workload.slice/kv.service");
    EXPECT_EQ(r[2].command(), "+ 7 1 3");
}

// A cache's slice with a ten-minute window is aged every five minutes,
// beside a slice aged every thirty seconds.
TEST(Aging, EachSliceIsAgedAtHalfItsOwnWindow) {
    LruGen lg;
    lg.memcgs = {memcg(5, "/workload.slice/mc.service", {node(0, 4, 120'000)}),
                 memcg(6, "/batch.slice/fio.service", {node(0, 7, 120'000)})};
    const auto r = plan_aging(lg, {{"/workload.slice", 300'000}, {"/batch.slice", 30'000}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].path, "/batch.slice/fio.service");
    lg.memcgs[0] = memcg(5, "/workload.slice/mc.service", {node(0, 4, 300'000)});
    EXPECT_EQ(plan_aging(lg, {{"/workload.slice", 300'000}, {"/batch.slice", 30'000}}).size(), 2u);
}

TEST(Aging, LeavesMemcgsWithoutPagesAndNodesWithoutGenerationsAlone) {
    LruGen lg;
    LruGenNode empty = node(0, 4, 90'000, 0);
    empty.generations[0].anon_pages = empty.generations[0].file_pages = 0;
    lg.memcgs = {memcg(5, "/a.slice", {empty}), memcg(6, "/a.slice/b.service", {LruGenNode{0, {}}})};
    EXPECT_TRUE(plan_aging(lg, {{"/a.slice", 30'000}}).empty());
}

TEST(Aging, AManagedChildSliceIsAgedWhereverItsParentStands) {
    LruGen lg;
    lg.memcgs = {memcg(2, "/x.slice", {node(0, 3, 90'000)}), memcg(3, "/x.slice/y.slice/z.scope", {node(0, 5, 90'000)})};
    const auto r = plan_aging(lg, {{"/x.slice/y.slice", 30'000}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].path, "/x.slice/y.slice/z.scope");
    EXPECT_TRUE(plan_aging(lg, {}).empty());
}

TEST(Aging, EnclosingSliceIsTheLastSliceComponent) {
    EXPECT_EQ(enclosing_slice("/a.slice/b.slice/c.service"), "/a.slice/b.slice");
    EXPECT_EQ(enclosing_slice("/a.slice/c.service/sub.slice"), "/a.slice/c.service/sub.slice");
    EXPECT_EQ(enclosing_slice("/a.slice"), "/a.slice");
    EXPECT_EQ(enclosing_slice("/init.scope"), "");
    EXPECT_EQ(enclosing_slice("/"), "");
    EXPECT_EQ(enclosing_slice("/.slice/x.service"), "");
}

TEST(LruGenAger, WritesOneCommandAndNamesFileCommandAndMemcgWhenItCannot) {
    FakeTree tree;
    tree.lru_gen("memcg 5 /a.slice\n");
    const LruGenAger ager(tree.debugfs_root() + "/lru_gen");
    const AgingRequest r{5, 0, 12, "/a.slice"};
    ASSERT_EQ(ager.age(r), 0);
    std::string s;
    ASSERT_EQ(read_at(AT_FDCWD, ager.path().c_str(), s), 0);
    // Written over the start: nothing appended, nothing truncated.
    EXPECT_EQ(s, "+ 5 0 12/a.slice\n");

    const LruGenAger missing(tree.debugfs_root() + "/nowhere/lru_gen");
    const int err = missing.age(r);
    EXPECT_EQ(err, ENOENT);
    const std::string msg = missing.error(r, err).to_string();
    EXPECT_NE(msg.find(tree.debugfs_root() + "/nowhere/lru_gen"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"+ 5 0 12\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("/a.slice"), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

}  // namespace
}  // namespace memprotd
