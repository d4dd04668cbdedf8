// SPDX-License-Identifier: LGPL-2.1-or-later
#include "trim.h"

#include <gtest/gtest.h>

#include <fcntl.h>

#include <string>

#include "fake_tree.h"
#include "file_io.h"
#include "trim_runner.h"

namespace memprotd {
namespace {

KernelFeatures kernel(std::string release, bool mglru, bool debugfs, bool reclaim = true) {
    KernelFeatures f;
    f.kernel_release = std::move(release);
    f.mglru_enabled = mglru;
    f.lru_gen_debugfs = debugfs;
    f.memory_reclaim = reclaim;
    return f;
}

TEST(Trim, ReadsKernelReleases) {
    EXPECT_TRUE(kernel_at_least("6.12.57+deb13-amd64", 6, 11));
    EXPECT_TRUE(kernel_at_least("6.11.0", 6, 11));
    EXPECT_TRUE(kernel_at_least("7.0.1", 6, 11));
    EXPECT_FALSE(kernel_at_least("6.1.0-18-amd64", 6, 11));
    EXPECT_FALSE(kernel_at_least("6.10.3", 6, 11));
    EXPECT_FALSE(kernel_at_least("", 6, 11));
    EXPECT_FALSE(kernel_at_least("linux-6.12", 6, 11));
    EXPECT_FALSE(kernel_at_least("6", 6, 0));
}

// auto: lru-gen where MGLRU and its debugfs file are there, else
// memory.reclaim swappiness= from 6.11, else nothing, with the reason.
TEST(Trim, ChoosesTheFirstMechanismTheKernelHas) {
    EXPECT_EQ(choose_trim(TrimSetting::Auto, kernel("6.1.0", true, true)).mechanism, TrimMechanism::LruGen);
    EXPECT_EQ(choose_trim(TrimSetting::Auto, kernel("6.12.5", true, false)).mechanism, TrimMechanism::Reclaim);
    const TrimChoice none = choose_trim(TrimSetting::Auto, kernel("6.1.0", true, false));
    EXPECT_EQ(none.mechanism, TrimMechanism::None);
    EXPECT_NE(none.why.find("debugfs lru_gen is not readable"), std::string::npos) << none.why;
    EXPECT_NE(none.why.find("kernel 6.1.0 has no memory.reclaim swappiness= (6.11+)"), std::string::npos)
        << none.why;
    const TrimChoice no = choose_trim(TrimSetting::No, kernel("6.12.5", true, true));
    EXPECT_EQ(no.mechanism, TrimMechanism::None);
    EXPECT_EQ(no.why, "TrimCheapCache=no");
    EXPECT_EQ(choose_trim(TrimSetting::Reclaim, kernel("6.12.5", true, true)).mechanism, TrimMechanism::Reclaim);
    const TrimChoice off = choose_trim(TrimSetting::LruGen, kernel("6.12.5", false, true));
    EXPECT_EQ(off.mechanism, TrimMechanism::None);
    EXPECT_EQ(off.why, "TrimCheapCache=lru-gen, but MGLRU is off");
}

TEST(Trim, WritesItsCommands) {
    EXPECT_EQ(reclaim_command(256ULL << 20), "268435456 swappiness=0");
    EXPECT_EQ((EvictRequest{7, 0, 12, 4096, "/batch.slice"}.command()), "- 7 0 12 0 4096");
}

// Generations oldest first: seq, age ms, anon pages, file pages.
LruGenNode gens(int node, std::vector<LruGeneration> g) { return {node, std::move(g)}; }

// Never the two youngest generations, and the pages shared by the file
// pages each memcg holds in the others.
TEST(Trim, EvictsFromAllButTheTwoYoungestGenerations) {
    LruGen lg;
    lg.memcgs = {
        {3, "/batch.slice", {gens(0, {{10, 300'000, 0, 1000}, {11, 90'000, 0, 3000}, {12, 20'000, 5, 500},
                                      {13, 1'000, 5, 500}})}},
        {4, "/batch.slice/job.service", {gens(0, {{20, 200'000, 0, 1000}, {21, 100, 0, 10}, {22, 50, 0, 10}})}},
        {0, "/batch.slice/gone.service", {gens(0, {{1, 900'000, 0, 9000}, {2, 1, 0, 0}, {3, 0, 0, 0}})}},
        {5, "/batch.slice-x", {gens(0, {{1, 900'000, 0, 9000}, {2, 1, 0, 0}, {3, 0, 0, 0}})}},
        {6, "/workload.slice", {gens(0, {{1, 900'000, 0, 9000}, {2, 1, 0, 0}, {3, 0, 0, 0}})}},
    };
    const auto r = plan_evictions(lg, "/batch.slice", 2500);
    ASSERT_EQ(r.size(), 2U);
    EXPECT_EQ(r[0].memcg_id, 3U);
    EXPECT_EQ(r[0].min_gen, 11U) << "max_seq 13 - 2";
    EXPECT_EQ(r[0].pages, 2000U) << "4000 of the 5000 old file pages are here: 4/5 of 2500";
    EXPECT_EQ(r[1].memcg_id, 4U);
    EXPECT_EQ(r[1].min_gen, 20U);
    EXPECT_EQ(r[1].pages, 500U);
    EXPECT_EQ(r[1].path, "/batch.slice/job.service");

    // Never the two youngest, however old they are.
    LruGen quiet;
    quiet.memcgs = {{3, "/batch.slice", {gens(0, {{10, 900'000, 0, 100}, {11, 800'000, 0, 100}})}}};
    EXPECT_TRUE(plan_evictions(quiet, "/batch.slice", 100).empty());
    // Never more than the older generations hold.
    const auto all = plan_evictions(lg, "/batch.slice", 1'000'000);
    ASSERT_EQ(all.size(), 2U);
    EXPECT_EQ(all[0].pages + all[1].pages, 5000U);
}

TEST(TrimRunner, WritesMemoryReclaimOfEachTrimmedSlice) {
    FakeTree tree;
    tree.add_cgroup("batch.slice");  // with an empty memory.reclaim
    Plan plan;
    plan.trim_mechanism = TrimMechanism::Reclaim;
    plan.trims = {{"batch.slice", "/batch.slice", 64ULL << 20}};
    TrimRunner runner(tree.cgroup_root(), tree.debugfs_root() + "/lru_gen");
    EXPECT_EQ(runner.run(plan, nullptr, 4096).size(), 1U);
    std::string s;
    ASSERT_EQ(read_at(AT_FDCWD, (tree.cgroup_dir("batch.slice") + "/memory.reclaim").c_str(), s), 0);
    EXPECT_EQ(s, "67108864 swappiness=0");
    EXPECT_EQ(runner.stats().trims, 1U);
    EXPECT_EQ(runner.stats().bytes, 64ULL << 20);
    EXPECT_EQ(runner.stats().failed, 0U);

    // A slice gone before the write is counted, not an error.
    plan.trims = {{"gone.slice", "/gone.slice", 64ULL << 20}};
    runner.run(plan, nullptr, 4096);
    EXPECT_EQ(runner.stats().vanished, 1U);
    EXPECT_EQ(runner.stats().failed, 0U);
    EXPECT_TRUE(runner.stats().last_error.empty());
}

// A kernel that rejects the command (EINVAL from memory.reclaim) refuses:
// counted as a failure and said, not taken for a vanished slice. A
// directory in the file's place gives EISDIR, a refusal too.
TEST(TrimRunner, ARefusalIsAFailureAndStopsTheTick) {
    FakeTree tree;
    tree.add_cgroup("a.slice").add_cgroup("b.slice");
    tree.remove_path("cgroup/a.slice/memory.reclaim");
    tree.write("cgroup/a.slice/memory.reclaim/x", "");  // memory.reclaim is a directory: EISDIR
    Plan plan;
    plan.trim_mechanism = TrimMechanism::Reclaim;
    plan.trims = {{"a.slice", "/a.slice", 16ULL << 20}, {"b.slice", "/b.slice", 16ULL << 20}};
    TrimRunner runner(tree.cgroup_root(), tree.debugfs_root() + "/lru_gen");
    const auto made = runner.run(plan, nullptr, 4096);
    EXPECT_TRUE(made.empty()) << "refused: not made";
    EXPECT_EQ(runner.stats().trims, 1U) << "asked, though refused";
    EXPECT_EQ(runner.stats().failed, 1U);
    EXPECT_NE(runner.stats().last_error.find("a.slice/memory.reclaim"), std::string::npos) << runner.stats().last_error;
    std::string s;
    ASSERT_EQ(read_at(AT_FDCWD, (tree.cgroup_dir("b.slice") + "/memory.reclaim").c_str(), s), 0);
    EXPECT_EQ(s, "") << "the refusal stops the tick";
}

TEST(TrimRunner, EinvalMeansGoneOnlyFromLruGen) {
    EXPECT_TRUE(TrimRunner::is_gone(ENOENT, false));
    EXPECT_TRUE(TrimRunner::is_gone(ENODEV, false));
    EXPECT_TRUE(TrimRunner::is_gone(EINVAL, true)) << "lru_gen: the memcg or its generations moved on";
    EXPECT_FALSE(TrimRunner::is_gone(EINVAL, false)) << "memory.reclaim: a kernel that rejects swappiness=";
    EXPECT_FALSE(TrimRunner::is_gone(EACCES, true));
}

TEST(TrimRunner, NothingToEvictIsSkippedNotAsked) {
    FakeTree tree;
    tree.lru_gen("");
    Plan plan;
    plan.trim_mechanism = TrimMechanism::LruGen;
    plan.trims = {{"batch.slice", "/batch.slice", 8ULL << 20}};
    TrimRunner runner(tree.cgroup_root(), tree.debugfs_root() + "/lru_gen");
    EXPECT_TRUE(runner.run(plan, nullptr, 4096).empty()) << "no lru_gen sample";
    EXPECT_EQ(runner.stats().trims, 0U);
    EXPECT_EQ(runner.stats().skipped, 1U);
}

TEST(TrimRunner, EvictsThroughLruGen) {
    FakeTree tree;
    tree.lru_gen("");
    LruGen lg;
    lg.memcgs = {{3, "/batch.slice", {gens(0, {{10, 300'000, 0, 4096}, {11, 1'000, 0, 0}, {12, 0, 0, 0}})}}};
    Plan plan;
    plan.trim_mechanism = TrimMechanism::LruGen;
    plan.trims = {{"batch.slice", "/batch.slice", 8ULL << 20}};
    TrimRunner runner(tree.cgroup_root(), tree.debugfs_root() + "/lru_gen");
    runner.run(plan, &lg, 4096);
    std::string s;
    ASSERT_EQ(read_at(AT_FDCWD, (tree.debugfs_root() + "/lru_gen").c_str(), s), 0);
    EXPECT_EQ(s, "- 3 0 10 0 2048");
    EXPECT_EQ(runner.stats().trims, 1U);
}

}  // namespace
}  // namespace memprotd
