// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Reads the slice tree under a cgroup2 root into a Snapshot. The roots are
// constructor arguments so tests and `--root` point it at a fake tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model.h"
#include "result.h"

namespace memprotd {

struct SamplerOptions {
    std::string cgroup_root = "/sys/fs/cgroup";
    std::string proc_root = "/proc";                 // meminfo, pressure/memory
    std::string debugfs_root = "/sys/kernel/debug";  // lru_gen
    bool include_services = false;                   // also *.service / *.scope below slices
    bool read_lru_gen = true;
    int max_depth = 16;
    // Fds kept open between samples: a directory per cgroup and, with
    // file_fds, its nine files. Beyond this many, the rest are opened and
    // closed each sample. 0 = half the
    // RLIMIT_NOFILE soft limit at construction; the daemon should raise its
    // soft limit to the hard limit when it manages thousands of cgroups.
    size_t max_open_dirs = 0;
    // Whether each cgroup's files stay open between samples too (within the
    // same budget). Auto: only on a real cgroup2 mount, where a file of a
    // removed cgroup fails with ENODEV; on a plain filesystem (tests,
    // --root) an open file of a removed directory would still read.
    enum class FileFds { Auto, Keep, Reopen };
    FileFds file_fds = FileFds::Auto;
};

class Sampler {
public:
    explicit Sampler(SamplerOptions options);
    ~Sampler();
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;

    // Walks the tree and fills `out`, reusing its storage (pass the same
    // Snapshot every time). Never throws: unreadable or malformed files become
    // entries in out.errors (file = full path) and the rest of the snapshot
    // stands. Skipped silently, with their subtrees: a cgroup that vanished
    // mid-walk, and one whose memory.current..memory.events are missing (also
    // what a cgroup without the memory controller looks like). Absent and not
    // errors: memory.swap.current (→ 0), memory.pressure, /proc/pressure/memory
    // and an unreadable lru_gen (→ nullopt). Keeps one directory fd per cgroup
    // between samples, and on cgroup2 its files' fds too (see max_open_dirs
    // and file_fds). Not thread-safe.
    void sample(Snapshot& out, int64_t timestamp_us);

    // `<proc_root>/meminfo` alone, for start-up (MemTotal for the
    // configuration's percentages): a whole sample of a big tree costs more.
    [[nodiscard]] Result<Meminfo> meminfo() const;

    [[nodiscard]] const SamplerOptions& options() const;
    // Whether services and scopes below slices are sampled, from the next
    // sample on (the trim watch counts their refaults; SamplerOptions'
    // include_services at construction).
    void set_include_services(bool on);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// CLOCK_MONOTONIC in µs, for callers that sample a live tree.
int64_t monotonic_us();
// The calling thread's CPU time (user + system) in µs.
int64_t thread_cpu_us();
// The whole process's CPU time (user + system, every thread) in µs.
int64_t process_cpu_us();
// The whole process's page faults since start: major (a page read back from
// disk or swap: its own memory was reclaimed) and minor.
struct PageFaults {
    uint64_t major = 0;
    uint64_t minor = 0;
};
PageFaults process_page_faults();

}  // namespace memprotd
