// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The plain data that flows from the readers to the engine: one Snapshot per
// sample. No behaviour here beyond lookups; parsers fill these structs
// (parse.h), readers in lib/sys gather them from the filesystem.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace memprotd {

// cgroupfs writes "max" for "no limit"; we keep it as the largest u64, which
// is also what systemd uses for "infinity" on the bus.
inline constexpr uint64_t kUnlimited = UINT64_MAX;

// systemd slice units: "NAME.slice" with a non-empty NAME. The one test of
// "is this unit a slice" in the tree.
inline constexpr std::string_view kSliceSuffix = ".slice";
[[nodiscard]] constexpr bool is_slice_unit(std::string_view unit) {
    return unit.size() > kSliceSuffix.size() && unit.ends_with(kSliceSuffix);
}

// memory.stat: every key kept by name, in file order. Values are bytes or
// event counts (the kernel decides which; Documentation/admin-guide/cgroup-v2.rst). Unknown
// keys are normal: kernels add keys over time.
// The memory.stat keys the engine reads, kept by the parser in a fixed
// table as it goes (MemoryStat::known), so that reading them costs nothing
// however many keys a kernel prints.
enum class StatKey : uint8_t {
    Anon,
    File,
    InactiveAnon,
    InactiveFile,
    FileMapped,
    FileDirty,
    FileWriteback,
    SlabReclaimable,
    WorkingsetRefaultAnon,
    WorkingsetRefaultFile,
    WorkingsetActivateAnon,
    WorkingsetActivateFile,
    WorkingsetRestoreAnon,
    WorkingsetRestoreFile,
    Pgsteal,
    Count
};
// The name of each StatKey as the kernel prints it, in StatKey's order: the
// one list of these names (parser, trace, fake trees). A new key is an
// enumerator above and its name here.
inline constexpr std::array<std::string_view, static_cast<size_t>(StatKey::Count)> kStatKeyNames = {
    "anon",
    "file",
    "inactive_anon",
    "inactive_file",
    "file_mapped",
    "file_dirty",
    "file_writeback",
    "slab_reclaimable",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "pgsteal",
};
static_assert(
    [] {
        for (std::string_view name : kStatKeyNames)
            if (name.empty())
                return false;
        return true;
    }(),
    "every StatKey needs its name in kStatKeyNames");
[[nodiscard]] constexpr std::string_view stat_key_name(StatKey k) {
    return kStatKeyNames[static_cast<size_t>(k)];
}
// The StatKey of a memory.stat key name, if the engine reads it.
std::optional<StatKey> known_stat_key(std::string_view key);

class MemoryStat {
public:
    struct Entry {
        std::string key;
        uint64_t value = 0;
    };

    // The value of `key`, or nullopt when the kernel did not print it.
    [[nodiscard]] std::optional<uint64_t> find(std::string_view key) const;
    // The value of `key`, or 0 when absent (absent counters count as zero).
    [[nodiscard]] uint64_t get(std::string_view key) const { return find(key).value_or(0); }

    // A key the engine reads, or 0 when absent; O(1). Always get(name).
    [[nodiscard]] uint64_t known(StatKey k) const { return known_[static_cast<size_t>(k)]; }

    [[nodiscard]] std::span<const Entry> entries() const { return {entries_.data(), size_}; }
    [[nodiscard]] bool empty() const { return size_ == 0; }
    [[nodiscard]] size_t size() const { return size_; }

    // For parsers: reuse the storage of earlier entries (no allocation churn
    // when the same file is parsed every sample).
    void clear() {
        size_ = 0;
        known_.fill(0);
        seen_ = 0;
    }
    void append(std::string_view key, uint64_t value);

private:
    std::vector<Entry> entries_;  // first size_ are live; the rest is spare capacity
    size_t size_ = 0;
    std::array<uint64_t, static_cast<size_t>(StatKey::Count)> known_{};
    uint32_t seen_ = 0;  // bit k: known_[k] is set (the first occurrence wins, as in find())
};

// memory.events (hierarchical counts). Keys the kernel adds later are ignored.
struct MemoryEvents {
    uint64_t low = 0;
    uint64_t high = 0;
    uint64_t max = 0;
    uint64_t oom = 0;
    uint64_t oom_kill = 0;
    uint64_t oom_group_kill = 0;
};

// One line of a PSI file.
struct PsiLine {
    double avg10 = 0;
    double avg60 = 0;
    double avg300 = 0;
    uint64_t total_us = 0;  // cumulative stall time, microseconds
};

// memory.pressure or /proc/pressure/memory. `full` is absent in files that
// only have a `some` line (valid for some kernels and resources).
struct Psi {
    PsiLine some;
    std::optional<PsiLine> full;
};

// /proc/meminfo, the fields memprotd uses, in bytes.
struct Meminfo {
    uint64_t mem_total = 0;
    uint64_t mem_available = 0;
    uint64_t swap_total = 0;
    uint64_t swap_free = 0;
    // MemFree: memory no one holds, what a burst allocates without waiting
    // for reclaim. Unknown in traces recorded before it was (no trims there).
    std::optional<uint64_t> mem_free{};
};

// /sys/kernel/debug/lru_gen: per memcg and memory node, the generations with
// their age and page counts. Counts are in pages.
struct LruGeneration {
    uint64_t seq = 0;
    uint64_t age_ms = 0;
    uint64_t anon_pages = 0;
    uint64_t file_pages = 0;
};
struct LruGenNode {
    int node = 0;
    std::vector<LruGeneration> generations;  // oldest first, as printed
};
struct LruGenMemcg {
    uint64_t id = 0;    // the memcg ID as printed (private ID up to ~6.19)
    std::string path;   // cgroup path relative to the cgroup2 root, "/" for the root
    std::vector<LruGenNode> nodes;
};
struct LruGen {
    std::vector<LruGenMemcg> memcgs;
};

// One cgroup as sampled. Unreadable single files leave their field at the
// default and add an Error to the snapshot; the rest of the sample stands.
struct CgroupSample {
    std::string unit;    // systemd unit name: the directory name, "workload.slice"
    std::string path;    // relative to the cgroup2 root, "/workload.slice/web.slice"
    int parent = -1;     // index of the parent in Snapshot::cgroups, -1 at top level
    int depth = 0;       // 0 for children of the root

    uint64_t current = 0;
    uint64_t min = 0;
    uint64_t low = 0;
    uint64_t high = kUnlimited;
    uint64_t max = kUnlimited;
    uint64_t swap_current = 0;
    MemoryStat stat;
    MemoryEvents events;
    std::optional<Psi> pressure;
};

// One sample of the whole managed tree.
struct Snapshot {
    int64_t timestamp_us = 0;  // monotonic clock of the sampler, µs
    Meminfo meminfo;
    std::optional<Psi> host_pressure;   // /proc/pressure/memory
    std::vector<CgroupSample> cgroups;  // parents before children
    std::optional<LruGen> lru_gen;      // when debugfs lru_gen was readable
    std::vector<Error> errors;          // what could not be read or parsed

    // Index of the cgroup with unit name `unit`, or -1.
    [[nodiscard]] int find_unit(std::string_view unit) const;
};

// What the kernel offers. Filled by lib/sys/probe; reported in status.
struct KernelFeatures {
    bool cgroup2 = false;               // cgroup2 mounted at the root we use
    bool memory_controller = false;     // "memory" in the root's cgroup.controllers
    bool memory_recursiveprot = false;  // mount option
    bool psi = false;                   // /proc/pressure/memory readable
    bool mglru_present = false;         // /sys/kernel/mm/lru_gen/enabled exists
    bool mglru_enabled = false;         // its bit 0 is set
    uint32_t mglru_flags = 0;           // the whole value read, 0x0007 etc.
    bool lru_gen_debugfs = false;       // /sys/kernel/debug/lru_gen readable
    bool memory_reclaim = false;        // memory.reclaim exists in a child cgroup
    std::string kernel_release;         // uname -r
    uint64_t page_size = 4096;

    // Why this host cannot be managed (cgroup v1/hybrid, no memory
    // controller), or empty when it can.
    std::string unusable_reason;
};

// Whether a `uname -r` release ("6.12.57+deb13-amd64") is at least
// major.minor; false when it does not start with a version.
[[nodiscard]] bool kernel_at_least(std::string_view release, unsigned major, unsigned minor);

// Whether memory.low only defers reclaim: from 6.3, MGLRU's global reclaim
// walks memcgs through the memcg LRU and reclaims one below memory.low on
// its next visit, counting a low event each time it defers it. Without
// MGLRU, or before 6.3, a memcg below memory.low is skipped unless reclaim
// finds nothing else.
[[nodiscard]] bool memory_low_defers(const KernelFeatures& features);

}  // namespace memprotd
