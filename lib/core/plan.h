// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The plan: what one engine tick decided, and every term behind it. Plain
// data, shared by the engine (which fills it), the actuator and state store
// (which apply and record it), logging and the JSON/table output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model.h"

namespace memprotd {

// What systemd (or, without systemd, the tree) currently has for a unit.
struct UnitProtection {
    uint64_t memory_low = 0;
    uint64_t memory_min = 0;
    friend bool operator==(const UnitProtection&, const UnitProtection&) = default;
};
// Hashes std::string and std::string_view alike (heterogeneous lookup).
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
// By unit name. Looked up once per slice per tick: a hash, not a tree, so
// the lookups stay linear in the slices.
using CurrentProtections = std::unordered_map<std::string, UnitProtection, StringHash, std::equal_to<>>;

// Which limit decided a slice's target.
enum class Bound {
    None,           // the share of the budget, below demand
    Demand,         // capped at its demand (undercommitted or water-filled)
    MinProtection,  // raised to MinProtection=
    MaxProtection,  // capped at MaxProtection=
    Floor,          // held at Floor=
    Budget,         // reserves alone exceeded the budget and were scaled
    KeptAnon,       // above demand: room every demand left, lent to cold anon
};
std::string_view bound_name(Bound b);

enum class WorkingSetSource { MemoryStat, LruGen };

// Why a slice's next MemoryLow differs from its target (engine step 6,
// engine_damp.cc). The engine decides it for every slice every tick, so it
// is kept as a kind and the figures its words show, and worded only when
// shown (damping_text).
enum class DampingKind : uint8_t {
    None,
    HoldingLargestTarget,      // a: hold s, b: MiB
    Deadband,                  // a: MiB apart, b: deadband MiB
    ShrinkingToLargestTarget,  // a: hold s
    OverBudget,
    AboveMaxProtection,
    ShrinkingSlowly,           // a: step MiB
    ShrinkLimited,             // a: MiB
    HoldingDecrease,           // a: hold s, b: s so far
    ScaledToRoom,              // a: room MiB
    HeldToFreeRoom,            // a: free MiB, b: MiB asked
    GrownAtOnce,
    GrowLimited,               // a: MiB
    GrowingSlowly,             // a: step MiB
};

struct Damping {
    DampingKind kind = DampingKind::None;
    uint64_t a = 0;
    uint64_t b = 0;
    explicit operator bool() const { return kind != DampingKind::None; }
};

// Its words ("within the deadband (12 MiB ≤ 64 MiB)"), or "" for None.
[[nodiscard]] std::string damping_text(const Damping& d);

// How cheap cache is trimmed on this host (lib/core/trim.h: choose_trim).
enum class TrimMechanism { None, LruGen, Reclaim };
std::string_view trim_mechanism_name(TrimMechanism m);  // "none", "lru-gen", "reclaim"
std::string_view working_set_source_name(WorkingSetSource s);

// Every input and term behind one slice's target, in the order the engine
// computes them. Sizes in bytes, rates per second, fractions 0..1.
struct Explanation {
    // inputs
    uint64_t current = 0;
    uint64_t anon = 0;
    uint64_t file = 0;
    uint64_t inactive_anon = 0;
    uint64_t inactive_file = 0;
    uint64_t file_mapped = 0;
    uint64_t file_dirty = 0;  // file_dirty + file_writeback
    uint64_t slab_reclaimable = 0;
    double psi_some = 0;            // smoothed stall fraction of the slice
    double refault_file_rate = 0;   // pages/s, smoothed (every refault with a shadow entry)
    double activate_file_rate = 0;  // pages/s, smoothed (refaults the kernel put back in the working set)
    double restore_file_rate = 0;   // pages/s, smoothed (refaults of pages in use repeatedly before reclaim)
    double comes_back_rate = 0;     // what ρ counts: activations; with MGLRU (Plan::mglru) the smaller of them and restores
    double pgsteal_rate = 0;        // pages/s, smoothed
    double activate_restore_rate = 0;  // pages/s, smoothed
    double refault_rate = 0;        // anon+file refaults, pages/s, smoothed
    double refault_anon_rate = 0;   // anon refaults (swap-ins of evicted pages), pages/s, smoothed
    uint64_t swap_current = 0;      // memory.swap.current
    uint64_t low_events = 0;        // memory.events low, delta since last tick

    // 1. cheap cache
    bool cheap_from_all_file = false;  // reclaim takes from the slice: all file pages are candidates
    uint64_t cheap_cache_raw = 0;   // (inactive_)file − mapped − dirty − writeback
    double refault_ratio = 0;       // ρ = comes_back_rate / pgsteal_rate
    uint64_t cheap_cache = 0;       // after the refault discount
    // 2. working set
    WorkingSetSource working_set_source = WorkingSetSource::MemoryStat;
    uint64_t working_set_base = 0;
    uint64_t thrash_correction = 0;
    uint64_t warm_footprint = 0;    // the anon memory refaults showed the slice keeps warm (decays slowly)
    uint64_t working_set = 0;       // base + thrash correction, its anon part raised to the warm footprint
    // 3. demand
    uint64_t refault_allowance = 0;
    uint64_t demand = 0;            // after floor, bounds and the usage cap
    uint64_t prompt_demand = 0;     // the part of demand that may be protected at once (≤ demand)
    uint64_t cold_anon = 0;         // resident anon outside the working set and warm footprint (with swap)
    uint64_t keep_demand = 0;       // demand with the cold anon counted too (≥ demand): step 5 lends room to it
    // 3b. MemoryMin= escalation: low events while within MemoryLow= (it did
    // not hold) put the working set under MemoryMin= until a quiet period;
    // with EscalateAhead=yes, where memory.low only defers reclaim, it is
    // there from the start and stays. It falls only to a smaller working
    // set that lasted 30 s with no reclaim from the slice.
    uint64_t escalated_min = 0;     // 0: not escalated
    double escalation_quiet_s = 0;  // while escalated: seconds since the last such low event (0: none yet)
    bool escalation_ahead = false;  // escalated ahead of any low event (EscalateAhead=)
    bool escalation_held = false;   // floor and demand kept above a lower working-set reading (follow_working_set)
    bool escalation_partial = false;  // held ahead, but MemoryLow= alone gives less than the working set: no floor
    // 4-5. policy and split
    uint32_t weight = 100;
    uint64_t floor = 0;
    uint64_t min_protection = 0;
    uint64_t max_protection = kUnlimited;
    uint64_t group_budget = 0;      // what this slice's sibling group shared
    Bound bound = Bound::None;
    // 7. trimming cheap cache (TrimCheapCache=, docs/engine.md step 7)
    uint64_t burst = 0;             // its largest rise of usage in one tick, lately
    uint64_t trimmable = 0;         // cheap cache above demand: min(cheap cache, usage - demand)
    uint64_t trim = 0;              // what this tick trims from it (0: nothing)
    double trim_hold_s = 0;         // > 0: left alone this many more seconds (trimmed cache came back)
    // working-set aging (lib/core/aging.h: hold_aging)
    bool aging_held = false;        // not aged this tick: within its protection where memory.low defers, uncontended
    // targets and what the next write does
    uint64_t target_low = 0;
    uint64_t target_min = 0;
    UnitProtection prior;           // current values before this tick
    UnitProtection next;            // what this tick writes (== prior if nothing)
    Damping damping;                // why next differs from target (damping_text), or None
};

// The part of target_low above demand: room every demand left, lent to
// cold anon (engine step 5, bound KeptAnon); 0 for any other bound.
uint64_t lent_to_cold_anon(const Explanation& x);

struct PlanEntry {
    std::string unit;
    std::string cgroup;
    std::optional<size_t> parent;  // its parent's index into Plan::slices; none at top level
    int depth = 0;
    uint64_t working_set_window_us = 0;  // its policy's WorkingSetWindow=, else [Daemon]'s
    // The policy files that matched, shared with the engine's policy cache
    // (the same list every tick: no copy per slice per tick).
    std::shared_ptr<const std::vector<std::string>> policy_sources;
    Explanation x;
    [[nodiscard]] bool write() const { return x.next != x.prior; }
    [[nodiscard]] const std::vector<std::string>& sources() const;
};

// One SetUnitProperties call, in the order they must be made.
struct PlannedWrite {
    std::string unit;
    UnitProtection values;
    bool decrease = false;  // part of the decrease phase
};

// Cheap cache to trim from one slice (step 7): the daemon's TrimRunner asks
// the kernel for it with the plan's mechanism.
struct PlannedTrim {
    std::string unit;
    std::string cgroup;
    uint64_t bytes = 0;
};

// Why a slice that would otherwise be managed is not (select_managed).
enum class Unmanaged {
    AncestorManageNo,  // an ancestor has Manage=no
    Kubelet,           // in kubelet's tree and no policy names it
};

struct UnmanagedSlice {
    std::string unit;
    Unmanaged why = Unmanaged::AncestorManageNo;
};

struct Plan {
    int64_t timestamp_us = 0;
    uint64_t memory_total = 0;
    bool swap = false;
    bool mglru = false;              // MGLRU enabled: what an activated file refault means (estimate_cheap_cache)
    uint64_t budget_configured = 0;  // MemTotal × Budget=
    double budget_factor = 1.0;      // AIMD feedback, 0.5..1
    bool low_defers = false;         // memory.low only defers reclaim (memory_low_defers): no feedback cut
    uint64_t budget = 0;             // what may be protected in sum now
    uint64_t floors = 0;             // Σ MemoryMin targets at top level
    uint64_t demand_total = 0;       // Σ demand at top level
    uint64_t protected_total = 0;    // Σ target MemoryLow at top level
    std::vector<PlanEntry> slices;   // parents before children
    std::vector<PlannedWrite> writes;  // decreases (deepest first), then increases (shallowest first)
    TrimMechanism trim_mechanism = TrimMechanism::None;
    std::optional<uint64_t> mem_free;  // MemFree this tick, when known
    uint64_t trim_headroom = 0;        // Σ bursts of the protected top-level slices
    std::vector<PlannedTrim> trims;    // cheap cache to trim this tick
    std::vector<std::string> notes;  // budget feedback and other plan-wide remarks
    std::vector<UnmanagedSlice> unmanaged;  // slices a rule keeps unmanaged, parents before children

    [[nodiscard]] const PlanEntry* find(std::string_view unit) const;
    [[nodiscard]] const UnmanagedSlice* find_unmanaged(std::string_view unit) const;
};

}  // namespace memprotd
