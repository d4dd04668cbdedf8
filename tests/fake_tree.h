// SPDX-License-Identifier: LGPL-2.1-or-later
//
// A fake host for tests and benchmarks: a temporary directory holding a
// cgroup2 tree, a proc tree, a sys tree and a debugfs tree, built in code and
// removed in the destructor. Files look like a Debian 12 VM (kernel 6.1,
// systemd 252) prints them, so readers meet realistic input.
//
//   FakeTree t;                                     // root cgroup, meminfo, PSI
//   t.add_cgroup("workload.slice", anon_heavy_spec(4ULL << 30))
//    .add_cgroup("workload.slice/web.service", {.current = 1 << 30});
//   Sampler s(t.sampler_options());
//
// Helpers throw std::exception on filesystem failures (tests only; the
// destructor never throws).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model.h"
#include "probe.h"
#include "sampler.h"

namespace memprotd {

// memory.pressure / /proc/pressure/memory of an idle system.
inline constexpr std::string_view kIdlePsiText =
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

using StatValues = std::vector<std::pair<std::string, uint64_t>>;

// One cgroup's memory files. Byte values; kUnlimited is written as "max".
struct FakeCgroupSpec {
    uint64_t current = 0;
    uint64_t min = 0;
    uint64_t low = 0;
    uint64_t high = kUnlimited;
    uint64_t max = kUnlimited;
    uint64_t swap_current = 0;
    // memory.stat overrides by key. All 6.1 keys are always written (0 where
    // not given), in the kernel's order; keys outside that set are appended.
    StatValues stat;
    MemoryEvents events;
    // memory.pressure contents; nullopt = no such file (kernel without PSI).
    std::optional<std::string> pressure_text = std::string(kIdlePsiText);
};

// A slice of `bytes` (= memory.current) that is mostly anonymous memory
// (a JVM or database buffer pool): anon 78%, file 16%, kernel 6%.
FakeCgroupSpec anon_heavy_spec(uint64_t bytes);
// A slice of `bytes` that is mostly clean, unmapped page cache (a batch job
// streaming files): anon 15%, file 80% of which 70% inactive, kernel 5%.
FakeCgroupSpec cache_heavy_spec(uint64_t bytes);

// The keys of a 6.1 memory.stat, in the kernel's order.
std::span<const std::string_view> memory_stat_keys_6_1();

// The texts the kernel would print for these values.
std::string memory_stat_text(const StatValues& values);
std::string memory_events_text(const MemoryEvents& events);
std::string psi_text(const Psi& psi);
std::string lru_gen_text(const LruGen& lru_gen);  // debugfs lru_gen, 6.1 layout

class FakeTree {
public:
    // Creates $TMPDIR/memprotd-fake-XXXXXX (or /tmp) with:
    //   cgroup/  root: cgroup.controllers ("cpuset cpu io memory hugetlb pids
    //            rdma misc"), cgroup.subtree_control, memory.pressure, ...
    //   proc/    meminfo (16 GiB, 12 GiB available, no swap), pressure/memory
    //            (idle), sys/kernel/osrelease ("6.1.0-18-amd64"),
    //            self/mounts (cgroup2 at cgroup/ with nsdelegate,memory_recursiveprot)
    //   sys/     kernel/mm/lru_gen/enabled ("0x0007")
    //   debug/   empty: no lru_gen until lru_gen() is called
    FakeTree();
    ~FakeTree();
    FakeTree(const FakeTree&) = delete;
    FakeTree& operator=(const FakeTree&) = delete;

    [[nodiscard]] const std::string& base() const { return base_; }
    [[nodiscard]] std::string cgroup_root() const { return base_ + "/cgroup"; }
    [[nodiscard]] std::string proc_root() const { return base_ + "/proc"; }
    [[nodiscard]] std::string sys_root() const { return base_ + "/sys"; }
    [[nodiscard]] std::string debugfs_root() const { return base_ + "/debug"; }
    [[nodiscard]] std::string mounts_file() const { return base_ + "/proc/self/mounts"; }
    // Absolute path of a cgroup directory ("workload.slice/web.service").
    [[nodiscard]] std::string cgroup_dir(std::string_view cgroup_path) const;

    // Creates the cgroup (and any missing ancestors, with an empty spec) or
    // rewrites its memory files. Every cgroup also gets the other files a
    // real one has (cgroup.*, cpu.*, io.pressure, pids.*, memory.reclaim...).
    // `path` is relative to the cgroup root; a leading '/' is ignored.
    FakeTree& add_cgroup(std::string_view path, const FakeCgroupSpec& spec = {});
    // Removes the cgroup directory and everything below it.
    FakeTree& remove(std::string_view cgroup_path);
    // Writes one file of a cgroup: set(path, "memory.current", "123\n").
    FakeTree& set(std::string_view cgroup_path, std::string_view file, std::string_view content);
    // The same for a byte value; kUnlimited is written as "max".
    FakeTree& set(std::string_view cgroup_path, std::string_view file, uint64_t value);

    // What systemd does after SetUnitProperties: memory.low and memory.min
    // of the cgroup named `unit` (found anywhere in the tree) set to these;
    // false when no cgroup has that name. RecordingActuator::after_set
    // calls it in the daemon tests, so the tree shows what was written.
    bool apply_protection(std::string_view unit, uint64_t memory_low, uint64_t memory_min);

    // Any file relative to base() (parents are created): write("proc/vmstat", ...).
    FakeTree& write(std::string_view relpath, std::string_view content);
    // Removes a file or directory tree relative to base(); absent is fine.
    FakeTree& remove_path(std::string_view relpath);

    // proc/meminfo with these byte values (printed in kB like the kernel).
    FakeTree& meminfo(uint64_t mem_total, uint64_t mem_available, uint64_t swap_total = 0,
                      uint64_t swap_free = 0);
    // proc/pressure/memory; nullopt removes it (kernel without PSI).
    FakeTree& host_pressure(std::optional<std::string_view> text);
    // The root's cgroup.controllers.
    FakeTree& controllers(std::string_view text);
    // The cgroup2 line for cgroup/ in proc/self/mounts; nullopt leaves only
    // non-cgroup mounts (then probe decides from cgroup.controllers).
    FakeTree& cgroup2_mount(std::optional<std::string_view> options);
    // sys/kernel/mm/lru_gen/enabled as "0x%04x"; nullopt = no MGLRU.
    FakeTree& mglru(std::optional<uint32_t> flags);
    // debug/lru_gen; nullopt removes it.
    FakeTree& lru_gen(std::optional<std::string_view> text);
    // proc/sys/kernel/osrelease.
    FakeTree& kernel_release(std::string_view release);

    // Roots pointing into this tree. include_services stays false.
    [[nodiscard]] SamplerOptions sampler_options() const;
    [[nodiscard]] ProbeRoots probe_roots() const;

private:
    std::string base_;
};

}  // namespace memprotd
