// SPDX-License-Identifier: LGPL-2.1-or-later
#include "sampler.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fake_tree.h"
#include "file_io.h"

namespace memprotd {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kMiB = 1ULL << 20;

std::vector<std::string> paths(const Snapshot& snap) {
    std::vector<std::string> out;
    for (const auto& c : snap.cgroups) out.push_back(c.path);
    return out;
}

std::string all_errors(const Snapshot& snap) {
    std::string out;
    for (const auto& e : snap.errors) out += e.to_string() + "\n";
    return out;
}

Snapshot sample_once(SamplerOptions opt) {
    Sampler sampler(std::move(opt));
    Snapshot snap;
    sampler.sample(snap, 42);
    return snap;
}

Snapshot sample_once(const FakeTree& tree) {
    return sample_once(tree.sampler_options());
}

TEST(Sampler, ListsSlicesParentsFirstAndSortedByName) {
    FakeTree tree;
    tree.add_cgroup("b.slice")
        .add_cgroup("a.slice/a-y.slice")
        .add_cgroup("a.slice/a-x.slice")
        .add_cgroup("init.scope")  // not a slice: never at top level
        .write("cgroup/file.slice", "a regular file is not a cgroup\n");

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(paths(snap),
              (std::vector<std::string>{"/a.slice", "/a.slice/a-x.slice", "/a.slice/a-y.slice", "/b.slice"}));
    EXPECT_EQ(snap.timestamp_us, 42);
    EXPECT_EQ(snap.cgroups[0].unit, "a.slice");
    EXPECT_EQ(snap.cgroups[0].parent, -1);
    EXPECT_EQ(snap.cgroups[0].depth, 0);
    EXPECT_EQ(snap.cgroups[1].unit, "a-x.slice");
    EXPECT_EQ(snap.cgroups[1].parent, 0);
    EXPECT_EQ(snap.cgroups[1].depth, 1);
    EXPECT_EQ(snap.cgroups[2].parent, 0);
    EXPECT_EQ(snap.cgroups[3].parent, -1);
    EXPECT_EQ(snap.find_unit("b.slice"), 3);
}

TEST(Sampler, ReadsLimitsAndTakesMaxAsUnlimited) {
    FakeTree tree;
    FakeCgroupSpec spec;
    spec.current = 3 * kGiB;
    spec.min = 256 * kMiB;
    spec.low = kGiB;
    spec.high = 6 * kGiB;
    spec.max = kUnlimited;
    spec.swap_current = 12 * kMiB;
    spec.events.low = 3;
    spec.events.oom_kill = 1;
    spec.stat = {{"anon", kGiB}, {"inactive_file", 512 * kMiB}, {"a_future_key", 7}};
    spec.pressure_text =
        "some avg10=1.50 avg60=0.75 avg300=0.10 total=123456\n"
        "full avg10=0.50 avg60=0.25 avg300=0.00 total=6543\n";
    tree.add_cgroup("workload.slice", spec);

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(snap.cgroups.size(), 1U);
    const CgroupSample& c = snap.cgroups[0];
    EXPECT_EQ(c.current, 3 * kGiB);
    EXPECT_EQ(c.min, 256 * kMiB);
    EXPECT_EQ(c.low, kGiB);
    EXPECT_EQ(c.high, 6 * kGiB);
    EXPECT_EQ(c.max, kUnlimited);
    EXPECT_EQ(c.swap_current, 12 * kMiB);
    EXPECT_EQ(c.events.low, 3U);
    EXPECT_EQ(c.events.oom_kill, 1U);
    EXPECT_EQ(c.stat.size(), memory_stat_keys_6_1().size() + 1);
    EXPECT_EQ(c.stat.get("anon"), kGiB);
    EXPECT_EQ(c.stat.get("inactive_file"), 512 * kMiB);
    EXPECT_EQ(c.stat.get("a_future_key"), 7U);
    ASSERT_TRUE(c.pressure.has_value());
    EXPECT_EQ(c.pressure->some.total_us, 123456U);
    ASSERT_TRUE(c.pressure->full.has_value());
    EXPECT_EQ(c.pressure->full->total_us, 6543U);
}

TEST(Sampler, ReadsHostMeminfoAndPressure) {
    FakeTree tree;
    tree.meminfo(32 * kGiB, 20 * kGiB, 4 * kGiB, 3 * kGiB)
        .host_pressure(
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=777\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=88\n");

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_EQ(snap.meminfo.mem_total, 32 * kGiB);
    EXPECT_EQ(snap.meminfo.mem_available, 20 * kGiB);
    EXPECT_EQ(snap.meminfo.swap_total, 4 * kGiB);
    EXPECT_EQ(snap.meminfo.swap_free, 3 * kGiB);
    // The fake tree's MemFree: half of what is available (the rest cached).
    ASSERT_TRUE(snap.meminfo.mem_free.has_value());
    EXPECT_EQ(*snap.meminfo.mem_free, 10 * kGiB);
    ASSERT_TRUE(snap.host_pressure.has_value());
    EXPECT_EQ(snap.host_pressure->some.total_us, 777U);
}

TEST(Sampler, ToleratesHostWithoutPsi) {
    FakeTree tree;
    tree.host_pressure(std::nullopt).add_cgroup("a.slice");

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_FALSE(snap.host_pressure.has_value());
    EXPECT_EQ(snap.cgroups.size(), 1U);
}

TEST(Sampler, ReadsNestedSlicesAtEveryDepth) {
    FakeTree tree;
    tree.add_cgroup("workload.slice/workload-web.slice/workload-web-a.slice", {.current = 100})
        .add_cgroup("workload.slice/workload-batch.slice", {.current = 200});

    Snapshot snap = sample_once(tree);

    ASSERT_EQ(paths(snap), (std::vector<std::string>{
                               "/workload.slice",
                               "/workload.slice/workload-batch.slice",
                               "/workload.slice/workload-web.slice",
                               "/workload.slice/workload-web.slice/workload-web-a.slice",
                           }));
    EXPECT_EQ(snap.cgroups[3].depth, 2);
    EXPECT_EQ(snap.cgroups[3].parent, 2);
    EXPECT_EQ(snap.cgroups[3].unit, "workload-web-a.slice");
    EXPECT_EQ(snap.cgroups[3].current, 100U);
    EXPECT_EQ(snap.cgroups[1].current, 200U);
}

TEST(Sampler, StopsDescendingAtMaxDepth) {
    FakeTree tree;
    tree.add_cgroup("a.slice/a-b.slice/a-b-c.slice");
    SamplerOptions opt = tree.sampler_options();
    opt.max_depth = 2;

    Snapshot snap = sample_once(opt);

    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/a.slice", "/a.slice/a-b.slice"}));
}

TEST(Sampler, IncludesServicesAndScopesOnlyWhenAsked) {
    FakeTree tree;
    tree.add_cgroup("system.slice/sshd.service", {.current = 5 * kMiB})
        .add_cgroup("user.slice/user-1000.slice/session-2.scope")
        .add_cgroup("init.scope");
    // A service's own sub-cgroups are not units.
    tree.add_cgroup("system.slice/sshd.service/inner.slice");

    EXPECT_EQ(paths(sample_once(tree)),
              (std::vector<std::string>{"/system.slice", "/user.slice", "/user.slice/user-1000.slice"}));

    SamplerOptions opt = tree.sampler_options();
    opt.include_services = true;
    Snapshot snap = sample_once(opt);
    EXPECT_EQ(paths(snap), (std::vector<std::string>{
                               "/system.slice",
                               "/system.slice/sshd.service",
                               "/user.slice",
                               "/user.slice/user-1000.slice",
                               "/user.slice/user-1000.slice/session-2.scope",
                           }));
    EXPECT_EQ(snap.cgroups[1].unit, "sshd.service");
    EXPECT_EQ(snap.cgroups[1].current, 5 * kMiB);
    EXPECT_EQ(snap.cgroups[1].parent, 0);
}

// The daemon samples services only while trimming is on: the switch takes
// effect at the next sample, both ways, with the same sampler.
TEST(Sampler, SwitchesServicesOnAndOffBetweenSamples) {
    FakeTree tree;
    tree.add_cgroup("batch.slice/hot.service", {.current = 5 * kMiB});
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/batch.slice"}));
    sampler.set_include_services(true);
    sampler.sample(snap, 2);
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/batch.slice", "/batch.slice/hot.service"}));
    EXPECT_EQ(snap.cgroups[1].current, 5 * kMiB);
    sampler.set_include_services(false);
    sampler.sample(snap, 3);
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/batch.slice"}));
}

TEST(Sampler, ReportsMalformedMemoryStatByFileAndLineAndKeepsOtherSlices) {
    FakeTree tree;
    tree.add_cgroup("bad.slice", anon_heavy_spec(kGiB))
        .add_cgroup("good.slice", cache_heavy_spec(2 * kGiB))
        .set("bad.slice", "memory.stat", "anon 4096\nfile 8192\nkernel lots\n");

    Snapshot snap = sample_once(tree);

    ASSERT_EQ(snap.errors.size(), 1U) << all_errors(snap);
    const Error& e = snap.errors[0];
    EXPECT_EQ(e.file, tree.cgroup_dir("bad.slice") + "/memory.stat");
    EXPECT_EQ(e.line, 3);
    ASSERT_EQ(paths(snap), (std::vector<std::string>{"/bad.slice", "/good.slice"}));
    EXPECT_EQ(snap.cgroups[0].current, kGiB);  // the rest of the slice stands
    EXPECT_EQ(snap.cgroups[1].current, 2 * kGiB);
    EXPECT_EQ(snap.cgroups[1].stat.get("file"), cache_heavy_spec(2 * kGiB).stat[1].second);
}

TEST(Sampler, ReportsMalformedLimitAndKeepsItsDefault) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 10, .high = 5 * kGiB}).set("a.slice", "memory.high", "lots\n");

    Snapshot snap = sample_once(tree);

    ASSERT_EQ(snap.errors.size(), 1U) << all_errors(snap);
    EXPECT_EQ(snap.errors[0].file, tree.cgroup_dir("a.slice") + "/memory.high");
    ASSERT_EQ(snap.cgroups.size(), 1U);
    EXPECT_EQ(snap.cgroups[0].high, kUnlimited);
    EXPECT_EQ(snap.cgroups[0].current, 10U);
}

TEST(Sampler, AcceptsMissingMemoryPressure) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 1, .pressure_text = std::nullopt});

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(snap.cgroups.size(), 1U);
    EXPECT_FALSE(snap.cgroups[0].pressure.has_value());
}

TEST(Sampler, TakesMissingSwapFileAsZero) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 1}).remove_path("cgroup/a.slice/memory.swap.current");

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(snap.cgroups.size(), 1U);
    EXPECT_EQ(snap.cgroups[0].swap_current, 0U);
}

TEST(Sampler, SkipsCgroupRemovedBetweenSamples) {
    FakeTree tree;
    tree.add_cgroup("a.slice/a-x.slice").add_cgroup("b.slice").add_cgroup("c.slice");
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);
    ASSERT_EQ(snap.cgroups.size(), 4U);

    tree.remove("a.slice");
    sampler.sample(snap, 2);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/b.slice", "/c.slice"}));
    EXPECT_EQ(snap.cgroups[1].parent, -1);
}

TEST(Sampler, SkipsCgroupWhoseFilesVanishedMidWalk) {
    FakeTree tree;
    tree.add_cgroup("a.slice").add_cgroup("b.slice/b-x.slice").add_cgroup("c.slice");
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);

    // What a reader sees when rmdir races with it: the directory is still
    // listed, its files are already gone.
    tree.remove_path("cgroup/b.slice/memory.stat");
    sampler.sample(snap, 2);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/a.slice", "/c.slice"}));
}

TEST(Sampler, ReadsCgroupRecreatedUnderTheSameName) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 1}).add_cgroup("b.slice", {.current = 2});
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);

    // The sampler keeps a directory fd for a.slice; it must not keep reading
    // the removed directory behind it.
    tree.remove("a.slice").add_cgroup("a.slice", {.current = 11});
    sampler.sample(snap, 2);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(paths(snap), (std::vector<std::string>{"/a.slice", "/b.slice"}));
    EXPECT_EQ(snap.cgroups[0].current, 11U);
}

TEST(Sampler, PicksUpCgroupsCreatedBetweenSamples) {
    FakeTree tree;
    tree.add_cgroup("b.slice");
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);

    tree.add_cgroup("a.slice").add_cgroup("b.slice/b-x.slice").add_cgroup("c.slice");
    sampler.sample(snap, 2);

    EXPECT_EQ(paths(snap),
              (std::vector<std::string>{"/a.slice", "/b.slice", "/b.slice/b-x.slice", "/c.slice"}));
    EXPECT_EQ(snap.cgroups[2].parent, 1);
}

TEST(Sampler, ReusesSnapshotStorageAndSeesUpdatedValues) {
    FakeTree tree;
    tree.add_cgroup("a.slice", anon_heavy_spec(kGiB)).add_cgroup("b.slice", cache_heavy_spec(kGiB));
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);
    ASSERT_EQ(snap.cgroups.size(), 2U);
    const CgroupSample* first = snap.cgroups.data();
    const MemoryStat::Entry* first_stat = snap.cgroups[0].stat.entries().data();
    const char* first_path = snap.cgroups[0].path.data();

    FakeCgroupSpec grown = anon_heavy_spec(2 * kGiB);
    grown.events.low = 9;
    tree.add_cgroup("a.slice", grown).set("b.slice", "memory.low", 64 * kMiB);
    sampler.sample(snap, 2);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_EQ(snap.timestamp_us, 2);
    ASSERT_EQ(snap.cgroups.size(), 2U);
    EXPECT_EQ(snap.cgroups.data(), first);
    EXPECT_EQ(snap.cgroups[0].stat.entries().data(), first_stat);
    EXPECT_EQ(snap.cgroups[0].path.data(), first_path);
    EXPECT_EQ(snap.cgroups[0].current, 2 * kGiB);
    EXPECT_EQ(snap.cgroups[0].stat.get("anon"), grown.stat[0].second);
    EXPECT_EQ(snap.cgroups[0].events.low, 9U);
    EXPECT_EQ(snap.cgroups[1].low, 64 * kMiB);
}

TEST(Sampler, ReadsLruGenWhenDebugfsHasIt) {
    FakeTree tree;
    tree.add_cgroup("a.slice");
    LruGen lru;
    lru.memcgs.push_back({1, "/", {{0, {{10, 90000, 100, 200}, {11, 30000, 300, 400}}}}});
    lru.memcgs.push_back({7, "/a.slice", {{0, {{4, 120000, 5, 6}, {5, 1000, 7, 8}}}}});
    tree.lru_gen(lru_gen_text(lru));

    Snapshot snap = sample_once(tree);

    EXPECT_EQ(all_errors(snap), "");
    ASSERT_TRUE(snap.lru_gen.has_value());
    ASSERT_EQ(snap.lru_gen->memcgs.size(), 2U);
    const LruGenMemcg& a = snap.lru_gen->memcgs[1];
    EXPECT_EQ(a.id, 7U);
    EXPECT_EQ(a.path, "/a.slice");
    ASSERT_EQ(a.nodes.size(), 1U);
    ASSERT_EQ(a.nodes[0].generations.size(), 2U);
    EXPECT_EQ(a.nodes[0].generations[1].age_ms, 1000U);
    EXPECT_EQ(a.nodes[0].generations[1].file_pages, 8U);
}

TEST(Sampler, LeavesLruGenEmptyWithoutErrorWhenAbsentOrNotWanted) {
    FakeTree tree;
    tree.add_cgroup("a.slice");

    Snapshot snap = sample_once(tree);
    EXPECT_EQ(all_errors(snap), "");
    EXPECT_FALSE(snap.lru_gen.has_value());

    tree.lru_gen("memcg     1 /\n node     0\n          1      10000          1           2 \n");
    SamplerOptions opt = tree.sampler_options();
    opt.read_lru_gen = false;
    snap = sample_once(opt);
    EXPECT_EQ(all_errors(snap), "");
    EXPECT_FALSE(snap.lru_gen.has_value());
}

TEST(Sampler, DropsLruGenThatDisappearsBetweenSamples) {
    FakeTree tree;
    tree.lru_gen("memcg     1 /\n node     0\n          1      10000          1           2 \n");
    Sampler sampler(tree.sampler_options());
    Snapshot snap;
    sampler.sample(snap, 1);
    ASSERT_TRUE(snap.lru_gen.has_value());

    tree.lru_gen(std::nullopt);
    sampler.sample(snap, 2);
    EXPECT_FALSE(snap.lru_gen.has_value());
    EXPECT_EQ(all_errors(snap), "");
}

TEST(Sampler, ReportsMissingCgroupRootAsError) {
    FakeTree tree;
    SamplerOptions opt = tree.sampler_options();
    opt.cgroup_root = tree.base() + "/nonexistent";

    Snapshot snap = sample_once(opt);

    ASSERT_EQ(snap.errors.size(), 1U);
    EXPECT_EQ(snap.errors[0].file, opt.cgroup_root);
    EXPECT_TRUE(snap.cgroups.empty());
    EXPECT_GT(snap.meminfo.mem_total, 0U);  // the host part still stands
}

TEST(Sampler, WorksBeyondItsOpenDirectoryBudget) {
    FakeTree tree;
    tree.add_cgroup("a.slice/a-x.slice", {.current = 1})
        .add_cgroup("b.slice/b-x.slice/b-x-y.slice", {.current = 2})
        .add_cgroup("c.slice", {.current = 3});
    SamplerOptions opt = tree.sampler_options();
    opt.max_open_dirs = 1;
    Sampler sampler(opt);
    Snapshot snap;
    sampler.sample(snap, 1);
    tree.remove("a.slice").set("c.slice", "memory.current", 30);
    sampler.sample(snap, 2);

    EXPECT_EQ(all_errors(snap), "");
    EXPECT_EQ(paths(snap), (std::vector<std::string>{"/b.slice", "/b.slice/b-x.slice",
                                                     "/b.slice/b-x.slice/b-x-y.slice", "/c.slice"}));
    EXPECT_EQ(snap.cgroups[2].current, 2U);
    EXPECT_EQ(snap.cgroups[3].current, 30U);
}

size_t open_fds() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

// What the daemon does on a real cgroup2 mount (FileFds::Auto there): every
// file stays open and is read again with pread at offset 0.
TEST(Sampler, KeepsFileFdsOpenAndSeesValuesRewrittenInPlace) {
    FakeTree tree;
    tree.add_cgroup("a.slice", anon_heavy_spec(kGiB)).add_cgroup("b.slice", cache_heavy_spec(kGiB));
    SamplerOptions opt = tree.sampler_options();
    opt.file_fds = SamplerOptions::FileFds::Keep;
    Sampler sampler(opt);
    Snapshot snap;
    const size_t before = open_fds();
    sampler.sample(snap, 1);
    const size_t kept = open_fds() - before;
    // The cgroup root and /proc, then two cgroup directories and their nine
    // files each (the fake tree has them all).
    EXPECT_EQ(kept, 2U + 2U * 10U);

    FakeCgroupSpec grown = anon_heavy_spec(2 * kGiB);
    grown.events.low = 9;
    tree.add_cgroup("a.slice", grown).set("b.slice", "memory.low", 64 * kMiB);
    sampler.sample(snap, 2);
    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(snap.cgroups.size(), 2U);
    EXPECT_EQ(snap.cgroups[0].current, 2 * kGiB);
    EXPECT_EQ(snap.cgroups[0].stat.get("anon"), grown.stat[0].second);
    EXPECT_EQ(snap.cgroups[0].stat.known(StatKey::Anon), grown.stat[0].second);
    EXPECT_EQ(snap.cgroups[0].events.low, 9U);
    EXPECT_EQ(snap.cgroups[1].low, 64 * kMiB);
    EXPECT_EQ(open_fds() - before, kept) << "a second sample opened more";

    tree.remove("a.slice");
    sampler.sample(snap, 3);
    ASSERT_EQ(snap.cgroups.size(), 1U);
    EXPECT_EQ(open_fds() - before, 2U + 10U) << "the removed cgroup's fds were not closed";
}

TEST(Sampler, KeepsNoMoreFdsThanItsBudget) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 1}).add_cgroup("b.slice", {.current = 2}).add_cgroup("c.slice", {.current = 3});
    SamplerOptions opt = tree.sampler_options();
    opt.file_fds = SamplerOptions::FileFds::Keep;
    opt.max_open_dirs = 12;
    Sampler sampler(opt);
    Snapshot snap;
    const size_t before = open_fds();
    sampler.sample(snap, 1);
    tree.set("c.slice", "memory.current", 30);
    sampler.sample(snap, 2);
    EXPECT_LE(open_fds() - before, 2U + 12U);  // the root and /proc are outside the budget
    EXPECT_EQ(all_errors(snap), "");
    ASSERT_EQ(snap.cgroups.size(), 3U);
    EXPECT_EQ(snap.cgroups[0].current, 1U);
    EXPECT_EQ(snap.cgroups[2].current, 30U);
}

TEST(Sampler, MonotonicClockMovesForward) {
    const int64_t a = monotonic_us();
    ::usleep(1000);
    const int64_t b = monotonic_us();
    EXPECT_GT(a, 0);
    EXPECT_GE(b - a, 1000);
}

TEST(FileIo, ReadsFilesLargerThanTheBufferWhole) {
    FakeTree tree;
    std::string big(100'000, 'x');
    big.back() = '\n';
    tree.write("big", big);
    std::string buf;
    ASSERT_EQ(read_file(tree.base() + "/big", buf), 0);
    EXPECT_EQ(buf, big);
    ASSERT_EQ(read_file(tree.base() + "/big", buf, ReadMode::kSingleRecord), 0);
    EXPECT_EQ(buf, big);
    tree.write("small", "12\n");
    ASSERT_EQ(read_file(tree.base() + "/small", buf), 0);
    EXPECT_EQ(buf, "12\n");
}

TEST(FileIo, ReusesOneReadBufferForLargeAndSmallFiles) {
    FakeTree tree;
    std::string big(50'000, 'y');
    tree.write("big", big).write("small", "max\n");
    ReadBuffer buf;
    ASSERT_EQ(read_file(tree.base() + "/big", buf), 0);
    EXPECT_EQ(buf.view(), big);
    const size_t grown = buf.capacity();
    ASSERT_EQ(read_file(tree.base() + "/small", buf, ReadMode::kSingleRecord), 0);
    EXPECT_EQ(buf.view(), "max\n");
    EXPECT_EQ(buf.capacity(), grown);
    EXPECT_EQ(read_file(tree.base() + "/missing", buf), ENOENT);
    EXPECT_TRUE(buf.view().empty());
}

TEST(FileIo, TellsAVanishedFileApartFromOtherErrors) {
    FakeTree tree;
    std::string buf = "stale";
    const int missing = read_file(tree.base() + "/missing", buf);
    EXPECT_EQ(missing, ENOENT);
    EXPECT_TRUE(is_vanished(missing));
    EXPECT_TRUE(buf.empty());
    const int dir = read_file(tree.base(), buf);  // reading a directory: EISDIR
    EXPECT_NE(dir, 0);
    EXPECT_FALSE(is_vanished(dir));
}

TEST(FileIo, ReadsRelativeToADirectoryFd) {
    FakeTree tree;
    tree.add_cgroup("a.slice", {.current = 77});
    int err = 0;
    UniqueFd dir = open_dir_at(AT_FDCWD, tree.cgroup_dir("a.slice").c_str(), err);
    ASSERT_TRUE(dir) << err;
    std::string buf;
    ASSERT_EQ(read_at(dir.get(), "memory.current", buf), 0);
    EXPECT_EQ(buf, "77\n");
    UniqueFd none = open_dir_at(dir.get(), "nope", err);
    EXPECT_FALSE(none);
    EXPECT_EQ(err, ENOENT);
}

TEST(FakeTree, WritesEveryKeyOfA61MemoryStat) {
    const FakeCgroupSpec anon = anon_heavy_spec(4 * kGiB);
    const FakeCgroupSpec cache = cache_heavy_spec(4 * kGiB);
    MemoryStat a;
    MemoryStat c;
    for (const auto& [k, v] : anon.stat) a.append(k, v);
    for (const auto& [k, v] : cache.stat) c.append(k, v);
    EXPECT_GT(a.get("anon"), 3 * a.get("file"));
    EXPECT_GT(c.get("file"), 3 * c.get("anon"));
    EXPECT_GT(c.get("inactive_file"), c.get("active_file"));
    EXPECT_LE(a.get("anon") + a.get("file") + a.get("kernel"), 4 * kGiB);

    const std::string text = memory_stat_text({{"anon", 1}});
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 51);
    EXPECT_EQ(text.substr(0, 14), "anon 1\nfile 0\n");
    EXPECT_NE(text.find("\nthp_collapse_alloc 0\n"), std::string::npos);
}

TEST(FakeTree, RemovesEverythingWhenDestroyed) {
    std::string base;
    {
        FakeTree tree;
        tree.add_cgroup("a.slice/b.slice");
        base = tree.base();
        EXPECT_EQ(::access((tree.cgroup_dir("a.slice/b.slice") + "/memory.stat").c_str(), R_OK), 0);
        EXPECT_EQ(::access((tree.cgroup_root() + "/cgroup.controllers").c_str(), R_OK), 0);
        EXPECT_EQ(::access((tree.proc_root() + "/meminfo").c_str(), R_OK), 0);
    }
    EXPECT_NE(::access(base.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace memprotd
