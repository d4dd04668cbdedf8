// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl record (the engine's inputs from a cgroup tree into a trace,
// docs/trace.md) and simulate --replay (the engine over a trace).
#pragma once

#include <cstdint>
#include <string>

namespace memprotd {

inline constexpr uint64_t kDefaultRecordIntervalUs = 5'000'000;  // Interval='s default

struct RecordOptions {
    std::string root = "/sys/fs/cgroup";
    std::string proc_root = "/proc";
    std::string debugfs_root;   // empty: /sys/kernel/debug for the live tree, none for --root
    std::string output;
    uint64_t memory_total = 0;  // 0: from meminfo
    int samples = 1;
    uint64_t interval_us = 0;   // 0: the trace's with append, else kDefaultRecordIntervalUs
    bool no_wait = false;       // sample at once, stamp samples interval_us apart
    bool append = false;        // continue `output`, times after its last sample
};
int run_record(const RecordOptions& o);

struct ReplayOptions {
    std::string trace;
    std::string config_dir;     // empty: the search path
    bool explain = false;       // explain the last plan's slices in words
    std::string explain_unit;   // with explain: only this slice, and each of its changes
    bool json = false;
};
int run_replay(const ReplayOptions& o);

}  // namespace memprotd
