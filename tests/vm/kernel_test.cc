// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The project's readers against the REAL kernel files of the test guest
// (tools/vm/run-scenario, scenarios kernel-facts and mglru-off). Runs only
// when MEMPROTD_VM_GUEST=1 (set by the guest's scenario runner); anywhere
// else every test skips and says why.
//
// MEMPROTD_EXPECT_MGLRU=0 means the guest was booted with MGLRU switched off.

#include <sys/vfs.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "model.h"
#include "probe.h"
#include "sampler.h"

namespace memprotd {
namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

bool env_is(const char* name, std::string_view value) {
    const char* v = std::getenv(name);
    return v != nullptr && value == v;
}

// Empty when this is the guest; otherwise why the tests skip.
std::string why_not_guest() {
    if (env_is("MEMPROTD_VM_GUEST", "1")) {
        return {};
    }
    std::string host = "unknown cgroup layout";
    struct statfs fs {};
    if (statfs("/sys/fs/cgroup", &fs) == 0) {
        host = static_cast<long>(fs.f_type) == kCgroup2Magic
                   ? "cgroup2 host"
                   : "/sys/fs/cgroup is not cgroup2 (v1 or hybrid host)";
    }
    return "not the memprotd test guest (MEMPROTD_VM_GUEST=1 unset; " + host +
           "); run through tools/vm/run-scenario";
}

bool expect_mglru_on() { return !env_is("MEMPROTD_EXPECT_MGLRU", "0"); }

#define SKIP_UNLESS_GUEST()                              \
    do {                                                 \
        const std::string why = why_not_guest();         \
        if (!why.empty()) GTEST_SKIP() << why;           \
    } while (0)

TEST(VmKernel, ProbeReportsEverything) {
    SKIP_UNLESS_GUEST();
    const KernelFeatures f = probe_features();
    std::cout << "kernel_release=" << f.kernel_release << " cgroup2=" << f.cgroup2
              << " memory_controller=" << f.memory_controller
              << " memory_recursiveprot=" << f.memory_recursiveprot << " psi=" << f.psi
              << " mglru_present=" << f.mglru_present << " mglru_enabled=" << f.mglru_enabled
              << " mglru_flags=0x" << std::hex << f.mglru_flags << std::dec
              << " lru_gen_debugfs=" << f.lru_gen_debugfs
              << " memory_reclaim=" << f.memory_reclaim << " page_size=" << f.page_size
              << " unusable_reason='" << f.unusable_reason << "'\n";
    EXPECT_TRUE(f.cgroup2);
    EXPECT_TRUE(f.memory_controller);
    EXPECT_TRUE(f.memory_recursiveprot);
    EXPECT_TRUE(f.psi);
    EXPECT_TRUE(f.mglru_present);
    if (expect_mglru_on()) {
        EXPECT_TRUE(f.mglru_enabled);
        EXPECT_EQ(f.mglru_flags, 0x7u);
    } else {
        EXPECT_FALSE(f.mglru_enabled) << "booted with memprotd.mglru=off";
        EXPECT_EQ(f.mglru_flags, 0x0u);
    }
    EXPECT_TRUE(f.lru_gen_debugfs);
    EXPECT_TRUE(f.memory_reclaim);
    EXPECT_FALSE(f.kernel_release.empty());
    EXPECT_EQ(f.page_size, 4096u);
    EXPECT_EQ(f.unusable_reason, "");
}

class VmSampler : public ::testing::Test {
protected:
    void SetUp() override {
        SKIP_UNLESS_GUEST();
        Sampler sampler{SamplerOptions{}};
        sampler.sample(snap_, monotonic_us());
    }
    Snapshot snap_;
};

TEST_F(VmSampler, NoErrors) {
    for (const Error& e : snap_.errors) {
        ADD_FAILURE() << "sampler error: " << e.to_string();
    }
    EXPECT_TRUE(snap_.errors.empty());
    EXPECT_FALSE(snap_.cgroups.empty());
    EXPECT_GT(snap_.timestamp_us, 0);
}

TEST_F(VmSampler, SystemSlice) {
    const int i = snap_.find_unit("system.slice");
    ASSERT_GE(i, 0) << "system.slice not sampled";
    const CgroupSample& s = snap_.cgroups[static_cast<size_t>(i)];
    EXPECT_EQ(s.path, "/system.slice");
    EXPECT_EQ(s.parent, -1);
    EXPECT_EQ(s.depth, 0);
    EXPECT_GT(s.current, 0u);
    EXPECT_EQ(s.max, kUnlimited);
    for (const char* key : {"anon", "file", "inactive_file", "workingset_refault_file", "pgsteal"}) {
        EXPECT_TRUE(s.stat.find(key).has_value()) << "memory.stat of system.slice lacks " << key;
    }
    EXPECT_GT(s.stat.get("file"), 0u);
    EXPECT_TRUE(s.pressure.has_value()) << "memory.pressure of system.slice";
}

TEST_F(VmSampler, HostPressureAndMeminfo) {
    ASSERT_TRUE(snap_.host_pressure.has_value());
    EXPECT_TRUE(snap_.host_pressure->full.has_value());
    EXPECT_GT(snap_.meminfo.mem_total, 512ull << 20);
    EXPECT_LE(snap_.meminfo.mem_available, snap_.meminfo.mem_total);
}

TEST_F(VmSampler, LruGen) {
    if (!expect_mglru_on()) {
        // Read or not, nothing to require with MGLRU off; report what came back.
        std::cout << "MGLRU off: lru_gen " << (snap_.lru_gen ? "parsed" : "absent") << "\n";
        return;
    }
    ASSERT_TRUE(snap_.lru_gen.has_value()) << "debugfs lru_gen not read";
    ASSERT_GE(snap_.lru_gen->memcgs.size(), 1u);
    bool found = false;
    for (const LruGenMemcg& m : snap_.lru_gen->memcgs) {
        if (m.path == "/system.slice") {
            found = true;
            ASSERT_FALSE(m.nodes.empty());
            EXPECT_GE(m.nodes[0].generations.size(), 2u);
            EXPECT_LE(m.nodes[0].generations.size(), 4u);
        }
    }
    EXPECT_TRUE(found) << "no lru_gen memcg with path /system.slice";
}

}  // namespace
}  // namespace memprotd
