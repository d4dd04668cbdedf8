// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What the kernel offers memprotd, probed from files under injectable roots.
#pragma once

#include <string>

#include "model.h"

namespace memprotd {

struct ProbeRoots {
    std::string cgroup_root = "/sys/fs/cgroup";
    std::string proc_root = "/proc";
    std::string sys_root = "/sys";                   // kernel/mm/lru_gen/enabled
    std::string debugfs_root = "/sys/kernel/debug";  // lru_gen
    // The mount table to look the cgroup root up in. When the root is not a
    // mount point in it (a fake tree), cgroup2 is decided from the tree itself
    // (cgroup.controllers present) and mount options are taken as unknown.
    std::string mounts_file = "/proc/self/mounts";
    // The path the cgroup root has in mounts_file; empty: cgroup_root. Set
    // when cgroup_root is a copy of a tree that mounts_file describes (a
    // captured host), so that nothing is read from the live tree.
    std::string cgroup_mount_point;
};

// Never fails: every probe that cannot tell leaves its feature false.
// Sets unusable_reason when the tree cannot be managed (cgroup v1 or hybrid
// host, no memory controller, root missing) in one line a user can act on.
KernelFeatures probe_features(const ProbeRoots& roots = {});

}  // namespace memprotd
