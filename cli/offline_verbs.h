// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl verbs that work without the daemon and without root: they read
// a cgroup tree and the configuration themselves and print what the engine
// would do.
#pragma once

#include <cstdint>
#include <string>

namespace memprotd {

// Exit codes shared by every memprotctl verb.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoDaemon = 3;

struct SimulateOptions {
    std::string root = "/sys/fs/cgroup";
    std::string proc_root = "/proc";
    std::string debugfs_root;   // empty: /sys/kernel/debug for the live tree, none for --root
    std::string config_dir;     // empty: the search path
    uint64_t memory_total = 0;  // 0: from meminfo
    int samples = 1;
    uint64_t interval_us = 0;   // 0: Interval= from the config
    bool json = false;
    bool explain = false;
    bool include_services = false;
    bool no_wait = false;       // advance a simulated clock instead of sleeping
};
int run_simulate(const SimulateOptions& o);

struct CheckConfigOptions {
    std::string config_dir;
    bool json = false;
};
int run_check_config(const CheckConfigOptions& o);

}  // namespace memprotd
