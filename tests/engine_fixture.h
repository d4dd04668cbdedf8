// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Builds engine inputs in code: snapshots of slices with the memory.stat
// keys the engine reads, without touching the filesystem.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "plan.h"
#include "model.h"

namespace memprotd::testing {

inline constexpr uint64_t MiB = 1ull << 20;
inline constexpr uint64_t GiB = 1ull << 30;

struct SliceSpec {
    std::string unit;
    std::string parent;  // unit name of the parent slice, empty at top level
    uint64_t anon = 0;
    std::optional<uint64_t> inactive_anon;  // a quarter of anon unless given
    uint64_t active_file = 0;
    uint64_t inactive_file = 0;  // clean, unmapped unless said otherwise
    uint64_t file_mapped = 0;
    uint64_t file_dirty = 0;
    uint64_t slab_reclaimable = 0;
    uint64_t refault_file = 0;   // cumulative counters, pages
    uint64_t refault_anon = 0;
    uint64_t pgsteal = 0;
    uint64_t activate_file = 0;
    uint64_t restore_file = 0;
    uint64_t psi_some_us = 0;
    uint64_t low_events = 0;
    uint64_t low = 0;            // memory.low in the tree
    uint64_t min = 0;
    uint64_t swap_current = 0;   // memory.swap.current
};

inline CgroupSample make_cgroup(const SliceSpec& s) {
    CgroupSample cg;
    cg.unit = s.unit;
    const uint64_t file = s.active_file + s.inactive_file;
    cg.current = s.anon + file + s.slab_reclaimable;
    cg.low = s.low;
    cg.min = s.min;
    cg.stat.append(stat_key_name(StatKey::Anon), s.anon);
    cg.stat.append(stat_key_name(StatKey::File), file);
    cg.stat.append(stat_key_name(StatKey::FileMapped), s.file_mapped);
    cg.stat.append(stat_key_name(StatKey::FileDirty), s.file_dirty);
    cg.stat.append(stat_key_name(StatKey::FileWriteback), 0);
    const uint64_t inactive_anon = s.inactive_anon.value_or(s.anon / 4);
    cg.stat.append(stat_key_name(StatKey::InactiveAnon), inactive_anon);
    cg.stat.append("active_anon", s.anon - inactive_anon);
    cg.stat.append(stat_key_name(StatKey::InactiveFile), s.inactive_file);
    cg.stat.append("active_file", s.active_file);
    cg.stat.append(stat_key_name(StatKey::SlabReclaimable), s.slab_reclaimable);
    cg.stat.append(stat_key_name(StatKey::WorkingsetRefaultAnon), s.refault_anon);
    cg.stat.append(stat_key_name(StatKey::WorkingsetRefaultFile), s.refault_file);
    cg.stat.append(stat_key_name(StatKey::WorkingsetActivateAnon), 0);
    cg.stat.append(stat_key_name(StatKey::WorkingsetActivateFile), s.activate_file);
    cg.stat.append(stat_key_name(StatKey::WorkingsetRestoreAnon), 0);
    cg.stat.append(stat_key_name(StatKey::WorkingsetRestoreFile), s.restore_file);
    cg.stat.append(stat_key_name(StatKey::Pgsteal), s.pgsteal);
    cg.events.low = s.low_events;
    cg.swap_current = s.swap_current;
    cg.pressure = Psi{PsiLine{0, 0, 0, s.psi_some_us}, PsiLine{}};
    return cg;
}

// Slices are listed parents first. Paths follow the parent chain.
inline Snapshot make_snapshot(const std::vector<SliceSpec>& slices, uint64_t mem_total, int64_t t_us,
                              uint64_t swap_total = 0) {
    Snapshot snap;
    snap.timestamp_us = t_us;
    snap.meminfo = {mem_total, mem_total / 2, swap_total, swap_total, std::nullopt};
    snap.host_pressure = Psi{};
    std::map<std::string, int, std::less<>> index;
    for (const auto& s : slices) {
        CgroupSample cg = make_cgroup(s);
        index[s.unit] = static_cast<int>(snap.cgroups.size());
        if (!s.parent.empty()) {
            cg.parent = index.at(s.parent);
            cg.depth = snap.cgroups[static_cast<size_t>(cg.parent)].depth + 1;
            cg.path = snap.cgroups[static_cast<size_t>(cg.parent)].path + "/" + s.unit;
        } else {
            cg.path = "/" + s.unit;
        }
        snap.cgroups.push_back(std::move(cg));
    }
    return snap;
}

inline PolicyRule rule(std::string glob, SlicePolicy p) {
    PolicyRule r;
    r.file = "/test/policy.d/" + glob + ".conf";
    r.globs = {std::move(glob)};
    r.protection = p;
    return r;
}

inline SlicePolicy weight(uint32_t w) {
    SlicePolicy p;
    p.weight = w;
    return p;
}

// Applies a plan's writes to `current`, as systemd would.
inline void apply_writes(const Plan& plan, CurrentProtections& current) {
    for (const auto& w : plan.writes)
        current[w.unit] = w.values;
}

inline uint64_t sum_low(const Plan& plan, int parent, bool target) {
    uint64_t s = 0;
    for (const auto& e : plan.slices)
        if (parent < 0 ? !e.parent : e.parent == static_cast<size_t>(parent))
            s += target ? e.x.target_low : e.x.next.memory_low;
    return s;
}

}  // namespace memprotd::testing
