// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl verbs that work without the daemon and without root: they read
// a cgroup tree and the configuration themselves and print what the engine
// would do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model.h"
#include "plan.h"
#include "result.h"
#include "sampler.h"

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
    std::string explain_unit;   // with explain: only this slice (empty: every slice)
    bool include_services = false;
    bool no_wait = false;       // advance a simulated clock instead of sleeping
};
int run_simulate(const SimulateOptions& o);

// Shared by the offline verbs (simulate, record, simulate --replay).
// The configuration directories: `config_dir`, or the search path when empty.
std::vector<std::string> config_dirs(const std::string& config_dir);
// Each error on its own line on stderr.
void print_errors(const std::vector<Error>& errors);
void sleep_us(uint64_t us);
// The plan as simulate prints it: one row per slice.
std::string plan_table(const Plan& plan, bool color);
// What plan_table's columns mean, a few lines ending in a newline.
std::string plan_legend();
// After a plan's table: with `explain`, the engine's reasoning for each slice
// (only `unit` when it is not empty, or why `unit` is not managed when a
// rule keeps it so), then the plan's notes.
void print_explanations(const Plan& plan, bool explain, const std::string& unit);
// The features of the tree at `root`, with the mount table of `proc_root`
// (self/mounts): the live /sys/fs/cgroup is probed as it is; any other tree
// is judged by its files alone (no host MGLRU).
KernelFeatures probe_tree(const std::string& root, const std::string& proc_root);
// A sampler for `root`; lru_gen is read from `debugfs_root`, by default
// /sys/kernel/debug for the live tree and nowhere for another.
SamplerOptions tree_sampler_options(const std::string& root, const std::string& proc_root,
                                    const std::string& debugfs_root, bool include_services);

struct CheckConfigOptions {
    std::string config_dir;
    bool json = false;
};
int run_check_config(const CheckConfigOptions& o);

}  // namespace memprotd
