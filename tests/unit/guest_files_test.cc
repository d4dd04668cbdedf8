// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The readers against the real files of the test guests, captured by
// tests/vm/kernel-facts.sh (MEMPROTD_VM_CAPTURE=1): tests/data/guest-6.1/
// (Debian 12) and tests/data/guest-6.12/ (Debian 13). Parsing is by key,
// never by kernel version, so both must give the same answers where the
// kernels agree, and the keys 6.12 added must be kept, not refused.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "fake_tree.h"
#include "parse.h"
#include "probe.h"

namespace memprotd {
namespace {

struct Guest {
    std::string dir;     // under tests/data
    size_t stat_keys;    // memory.stat lines of system.slice in that capture
    bool khugepaged;     // pgscan_khugepaged (6.2+)
};

std::string data_dir(const Guest& g) { return std::string(MEMPROTD_SOURCE_DIR) + "/tests/data/" + g.dir; }

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "cannot read " << path;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class GuestFiles : public ::testing::TestWithParam<Guest> {
protected:
    std::string file(const std::string& name) const { return read_text(data_dir(GetParam()) + "/" + name); }
};

TEST_P(GuestFiles, MemoryStatParsesEveryKeyAndTheEngineKeysArePresent) {
    MemoryStat st;
    ASSERT_TRUE(parse_memory_stat(file("system.slice.memory.stat"), "memory.stat", st).ok());
    EXPECT_EQ(st.size(), GetParam().stat_keys);
    for (const char* k : {"anon", "file", "inactive_file", "file_mapped", "file_dirty", "file_writeback",
                          "workingset_refault_anon", "workingset_refault_file", "pgsteal"})
        EXPECT_TRUE(st.find(k).has_value()) << k;
    EXPECT_GT(st.get("file"), 0U);
    EXPECT_LE(st.get("inactive_file"), st.get("file"));
    EXPECT_EQ(st.known(StatKey::File), st.get("file"));
    EXPECT_EQ(st.find("pgscan_khugepaged").has_value(), GetParam().khugepaged);
    std::set<std::string> keys;
    for (const auto& e : st.entries())
        EXPECT_TRUE(keys.insert(e.key).second) << "duplicate key " << e.key;
}

TEST_P(GuestFiles, MemoryEventsAndPressureParse) {
    const auto ev = parse_memory_events(file("system.slice.memory.events"), "memory.events");
    ASSERT_TRUE(ev.ok());
    EXPECT_EQ(ev.value().oom_kill, 0U);  // an idle guest
    const auto cg = parse_psi(file("system.slice.memory.pressure"), "memory.pressure");
    ASSERT_TRUE(cg.ok());
    EXPECT_TRUE(cg.value().full.has_value());
    const auto host = parse_psi(file("proc.pressure.memory"), "/proc/pressure/memory");
    ASSERT_TRUE(host.ok());
    EXPECT_TRUE(host.value().full.has_value());
}

TEST_P(GuestFiles, MeminfoGivesTheGuestsMemory) {
    const auto m = parse_meminfo(file("proc.meminfo"), "/proc/meminfo");
    ASSERT_TRUE(m.ok());
    // The guests boot with -m 1024: MemTotal is a little below 1 GiB.
    EXPECT_GT(m.value().mem_total, 700ULL << 20);
    EXPECT_LE(m.value().mem_total, 1ULL << 30);
    EXPECT_LE(m.value().mem_available, m.value().mem_total);
}

TEST_P(GuestFiles, MglruIsOnAndLruGenListsSystemSlice) {
    const auto en = parse_lru_gen_enabled(file("lru_gen.enabled"), "enabled");
    ASSERT_TRUE(en.ok());
    EXPECT_EQ(en.value(), 0x7U);
    const auto lg = parse_lru_gen(file("debugfs.lru_gen"), "lru_gen");
    ASSERT_TRUE(lg.ok());
    bool found = false;
    for (const LruGenMemcg& m : lg.value().memcgs) {
        if (m.path != "/system.slice")
            continue;
        found = true;
        ASSERT_FALSE(m.nodes.empty());
        // MGLRU keeps at least two generations per node (MIN_NR_GENS).
        EXPECT_GE(m.nodes.front().generations.size(), 2U);
    }
    EXPECT_TRUE(found);
    EXPECT_TRUE(controllers_contain(file("root.cgroup.controllers"), "memory"));
}

TEST_P(GuestFiles, ProbeFindsRecursiveprotInTheRealMountTable) {
    // The guest's mount table, looked up for the root it names; the tree
    // beside it is a fake one, so nothing of this host is read.
    FakeTree tree;
    ProbeRoots roots = tree.probe_roots();
    roots.mounts_file = data_dir(GetParam()) + "/proc.self.mounts";
    roots.cgroup_mount_point = "/sys/fs/cgroup";
    const std::string mounts = file("proc.self.mounts");
    EXPECT_NE(mounts.find("cgroup2 /sys/fs/cgroup cgroup2"), std::string::npos);
    EXPECT_NE(mounts.find("memory_recursiveprot"), std::string::npos);
    EXPECT_TRUE(probe_features(roots).memory_recursiveprot);
}

INSTANTIATE_TEST_SUITE_P(Kernels, GuestFiles,
                         ::testing::Values(Guest{"guest-6.1", 51, false}, Guest{"guest-6.12", 65, true}),
                         [](const ::testing::TestParamInfo<Guest>& p) {
                             std::string n = p.param.dir;
                             for (char& c : n)
                                 if (c == '.' || c == '-')
                                     c = '_';
                             return n;
                         });

}  // namespace
}  // namespace memprotd
