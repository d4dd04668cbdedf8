// SPDX-License-Identifier: LGPL-2.1-or-later
#include "probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <string>

#include "fake_tree.h"

namespace memprotd {
namespace {

using ::testing::HasSubstr;

TEST(Probe, FindsAFakeUnifiedTreeWithMemoryUsable) {
    FakeTree tree;
    tree.add_cgroup("system.slice");

    KernelFeatures f = probe_features(tree.probe_roots());

    EXPECT_EQ(f.unusable_reason, "");
    EXPECT_TRUE(f.cgroup2);
    EXPECT_TRUE(f.memory_controller);
    EXPECT_TRUE(f.memory_recursiveprot);
    EXPECT_TRUE(f.psi);
    EXPECT_TRUE(f.mglru_present);
    EXPECT_TRUE(f.mglru_enabled);
    EXPECT_EQ(f.mglru_flags, 0x0007U);
    EXPECT_FALSE(f.lru_gen_debugfs);
    EXPECT_TRUE(f.memory_reclaim);
    EXPECT_EQ(f.kernel_release, "6.1.0-18-amd64");
    EXPECT_EQ(f.page_size, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
}

TEST(Probe, TakesATreeWithControllersButNoMountAsCgroup2) {
    FakeTree tree;
    tree.cgroup2_mount(std::nullopt);

    KernelFeatures f = probe_features(tree.probe_roots());

    EXPECT_EQ(f.unusable_reason, "");
    EXPECT_TRUE(f.cgroup2);
    // Not a mount point: the options are unknown.
    EXPECT_FALSE(f.memory_recursiveprot);
}

TEST(Probe, RefusesATreeThatIsNeitherMountedNorHasControllers) {
    FakeTree tree;
    tree.cgroup2_mount(std::nullopt).remove_path("cgroup/cgroup.controllers");

    KernelFeatures f = probe_features(tree.probe_roots());

    EXPECT_FALSE(f.cgroup2);
    EXPECT_FALSE(f.memory_controller);
    EXPECT_THAT(f.unusable_reason, HasSubstr("cgroup v2 is not mounted at " + tree.cgroup_root()));
    EXPECT_THAT(f.unusable_reason, HasSubstr("systemd.unified_cgroup_hierarchy=1"));
}

TEST(Probe, RefusesATreeWithoutTheMemoryController) {
    FakeTree tree;
    tree.controllers("cpuset cpu io pids\n");

    KernelFeatures f = probe_features(tree.probe_roots());

    EXPECT_TRUE(f.cgroup2);
    EXPECT_FALSE(f.memory_controller);
    EXPECT_THAT(f.unusable_reason, HasSubstr("memory controller"));
    EXPECT_THAT(f.unusable_reason, HasSubstr(tree.cgroup_root() + "/cgroup.controllers"));
}

TEST(Probe, RefusesAMissingCgroupRoot) {
    FakeTree tree;
    ProbeRoots roots = tree.probe_roots();
    roots.cgroup_root = tree.base() + "/nowhere";

    KernelFeatures f = probe_features(roots);

    EXPECT_FALSE(f.cgroup2);
    EXPECT_EQ(f.unusable_reason, "the cgroup root " + roots.cgroup_root + " does not exist");
}

TEST(Probe, ReadsRecursiveprotFromTheMountOptions) {
    FakeTree tree;
    tree.cgroup2_mount("rw,nosuid,nodev,noexec,relatime,nsdelegate");
    EXPECT_FALSE(probe_features(tree.probe_roots()).memory_recursiveprot);

    tree.cgroup2_mount("rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot");
    EXPECT_TRUE(probe_features(tree.probe_roots()).memory_recursiveprot);

    tree.cgroup2_mount("rw,memory_recursiveprot_not,relatime");
    EXPECT_FALSE(probe_features(tree.probe_roots()).memory_recursiveprot);
}

TEST(Probe, ReadsMglruEnabledAndDisabled) {
    FakeTree tree;
    tree.mglru(0x0007);
    KernelFeatures on = probe_features(tree.probe_roots());
    EXPECT_TRUE(on.mglru_present);
    EXPECT_TRUE(on.mglru_enabled);
    EXPECT_EQ(on.mglru_flags, 0x0007U);

    tree.mglru(0x0000);
    KernelFeatures off = probe_features(tree.probe_roots());
    EXPECT_TRUE(off.mglru_present);
    EXPECT_FALSE(off.mglru_enabled);
    EXPECT_EQ(off.mglru_flags, 0U);

    tree.mglru(std::nullopt);
    KernelFeatures none = probe_features(tree.probe_roots());
    EXPECT_FALSE(none.mglru_present);
    EXPECT_FALSE(none.mglru_enabled);
}

TEST(Probe, SeesLruGenDebugfsWhenReadable) {
    FakeTree tree;
    tree.lru_gen("memcg     1 /\n node     0\n          1      10000          1           2 \n");
    EXPECT_TRUE(probe_features(tree.probe_roots()).lru_gen_debugfs);
}

TEST(Probe, SeesMemoryReclaimOnlyInAChildCgroup) {
    FakeTree tree;
    EXPECT_FALSE(probe_features(tree.probe_roots()).memory_reclaim);

    tree.add_cgroup("system.slice").remove_path("cgroup/system.slice/memory.reclaim");
    EXPECT_FALSE(probe_features(tree.probe_roots()).memory_reclaim);

    tree.add_cgroup("user.slice");
    EXPECT_TRUE(probe_features(tree.probe_roots()).memory_reclaim);
}

TEST(Probe, ReportsPsiOnlyWhenTheHostFileParses) {
    FakeTree tree;
    tree.host_pressure(std::nullopt);
    EXPECT_FALSE(probe_features(tree.probe_roots()).psi);

    tree.host_pressure("some avg10=0.00\n");
    EXPECT_FALSE(probe_features(tree.probe_roots()).psi);
}

TEST(Probe, TakesTheKernelReleaseFromUnameForTheRealProc) {
    // Only proc_root is the real one; uname(2) answers, not a file.
    FakeTree tree;
    ProbeRoots roots = tree.probe_roots();
    roots.proc_root = "/proc";
    utsname u{};
    ASSERT_EQ(::uname(&u), 0);
    EXPECT_EQ(probe_features(roots).kernel_release, u.release);
}

// The mount table of a Debian 12 host booted with the hybrid layout (the
// machine CI runs on): v1 hierarchies under a tmpfs, cgroup2 only at unified/.
constexpr const char* kHybridMounts =
    "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
    "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0\n"
    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

TEST(Probe, RefusesAHybridHostNamingTheMountPoint) {
    FakeTree tree;
    tree.remove_path("cgroup/cgroup.controllers").write("proc/self/mounts", kHybridMounts);
    tree.write("cgroup/unified/cgroup.controllers", "");
    ProbeRoots roots = tree.probe_roots();
    roots.cgroup_mount_point = "/sys/fs/cgroup";

    KernelFeatures f = probe_features(roots);

    EXPECT_FALSE(f.cgroup2);
    EXPECT_FALSE(f.memory_controller);
    EXPECT_EQ(f.unusable_reason,
              "cgroup v2 is not mounted at /sys/fs/cgroup (this host uses cgroup v1 or a hybrid "
              "layout; memprotd needs the unified hierarchy: boot with "
              "systemd.unified_cgroup_hierarchy=1)");
    EXPECT_FALSE(f.kernel_release.empty());
}

TEST(Probe, LooksTheMountPointUpInsteadOfTheRootWhenGiven) {
    FakeTree tree;
    tree.write("proc/self/mounts",
               "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate,memory_recursiveprot 0 0\n");
    ProbeRoots roots = tree.probe_roots();
    EXPECT_FALSE(probe_features(roots).memory_recursiveprot);

    roots.cgroup_mount_point = "/sys/fs/cgroup/";
    KernelFeatures f = probe_features(roots);
    EXPECT_TRUE(f.cgroup2);
    EXPECT_TRUE(f.memory_recursiveprot);
}

}  // namespace
}  // namespace memprotd
