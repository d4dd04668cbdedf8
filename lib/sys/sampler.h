// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Reads the slice tree under a cgroup2 root into a Snapshot. The roots are
// constructor arguments so tests and `--root` point it at a fake tree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model.h"

namespace memprotd {

struct SamplerOptions {
    std::string cgroup_root = "/sys/fs/cgroup";
    std::string proc_root = "/proc";                 // meminfo, pressure/memory
    std::string debugfs_root = "/sys/kernel/debug";  // lru_gen
    bool include_services = false;  // also *.service / *.scope below slices
    bool read_lru_gen = true;
    int max_depth = 16;
};

class Sampler {
public:
    explicit Sampler(SamplerOptions options);
    ~Sampler();
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;

    // Walks the tree and fills `out`, reusing its storage. Never throws:
    // unreadable or malformed files become entries in out.errors and the rest
    // of the snapshot stands; a cgroup that vanished mid-walk is skipped.
    void sample(Snapshot& out, int64_t timestamp_us);

    [[nodiscard]] const SamplerOptions& options() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// CLOCK_MONOTONIC in µs, for callers that sample a live tree.
int64_t monotonic_us();

}  // namespace memprotd
