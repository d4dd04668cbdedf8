// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The policy engine: snapshots in, a Plan out. Pure: no I/O, no clock (time
// is the snapshot's timestamp). It keeps state between ticks only for rates
// (deltas of counters, smoothed), damping (when it last moved a value) and
// the budget feedback. Every term it computes is kept in the plan entry's
// Explanation (plan.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "config.h"
#include "model.h"
#include "plan.h"

namespace memprotd {

class SiblingGroups;  // engine_steps.h

// Tunables not in the config file.
struct EngineTunables {
    double rate_time_constant_s = 60;     // EWMA τ for rates and stall fractions
    double rho_max = 0.2;                 // refault ratio at which cheap cache counts as none
    double thrash_psi = 0.005;            // PSI some above which the thrash correction applies
    double thrash_horizon_s = 30;         // H
    uint64_t deadband_bytes = 64ull << 20;   // at most this, and at most 1% of MemTotal
    double deadband_memory_fraction = 0.01;
    double deadband_fraction = 0.02;
    uint64_t round_bytes = 2ull << 20;
    // Growth beyond a slice's prompt demand (its anon working set and warm
    // footprint), per 10 s, of the budget. The prompt part grows at once when
    // it fits in the budget's unused room: it takes nothing from anyone, and
    // anon pages, unlike young page cache, are not single-use.
    double grow_fraction_per_10s = 0.05;
    // A slice whose anon pages refault keeps its footprint (memory.current +
    // memory.swap.current) warm; without refaults that figure decays toward
    // the working set with a half-life of this many WorkingSetWindow=s.
    double warm_half_life_windows = 10;
    // Smoothed anon refaults below this (pages/s) are noise, not evidence.
    double warm_min_refault_rate = 0.1;
    // Reclaim that takes at least this fraction of a slice's page cache per
    // WorkingSetWindow= turns its cache over: then all of its unmapped clean
    // page cache that does not come back is cheap, not only what memory.stat
    // calls inactive (MGLRU calls the two youngest generations active, and
    // a new cgroup's streamer pages sit there until aging catches up).
    double reclaim_turnover = 0.25;
    // Only stops noise: the working-set window already keeps a page for a
    // minute after its last touch and shrink_hold_s absorbs dips, so memory a
    // workload stopped using must reach other slices within minutes
    // (measured by bench/effect).
    double shrink_fraction_per_min = 0.25;
    // A decrease is written only once the target has stayed below the value
    // for this long: estimates dip for a tick or two when reclaim starts
    // (the first MGLRU aging after a quiet spell finds few young pages), and
    // a dip written at once is memory the kernel reclaims at once.
    double shrink_hold_s = 30;
    // Rate limits accumulate since a slice's last write; a limited step is
    // written only once it reaches this much, so a slow shrink is a write
    // every few minutes, not one every tick.
    uint64_t min_step_bytes = 16ull << 20;
    // MemoryMin= escalation. From 6.3, MGLRU's global reclaim only defers a
    // memcg below memory.low (it goes to the memcg LRU's tail once and is
    // reclaimed on the next visit, counting a low event), so there
    // MemoryLow= is a deferral, not a shield. Low events on two ticks at
    // most escalate_window_s apart while a slice's usage is within its
    // MemoryLow= put its working set under MemoryMin=; escalate_quiet_s
    // without such events return it to MemoryLow= alone.
    double escalate_window_s = 30;
    double escalate_quiet_s = 300;
    // Each escalated MemoryMin= stays within what MemoryLow= alone would
    // give its slice, and all of them together within this share of the
    // budget: hard floors without headroom leave reclaim nowhere to go, and
    // the kernel then kills (Kubernetes' Memory QoS saw OOM kills). At the
    // default Budget= (70%) at least 47% of MemTotal stays outside them.
    double escalate_budget_share = 0.75;
    // An escalated MemoryMin= follows a smaller working set only once it is
    // this fraction lower (each change is a write), and only once that has
    // lasted shrink_hold_s with no reclaim from the slice.
    double escalate_shrink_fraction = 0.125;
    // ... and then comes down one step of this fraction of itself (at least
    // min_step_bytes) per such shrink_hold_s, down to that working set once
    // it has started (the fraction above only starts it): a lowered floor exposes memory
    // at once, and the working set read within the window can be less than
    // the slice needs (a table read slowly and evenly: 250 of 430 MiB on
    // 6.12), which only refaults after the step show. A step costs at most
    // itself; the refaults raise the estimate (the warm footprint) and the
    // floor with it, and reclaim restarts the hold.
    double escalate_step_fraction = 1.0 / 32;
    // Trimming cheap cache (step 7, TrimCheapCache=). The headroom is the
    // sum of the protected top-level slices' bursts: each one's largest rise
    // in one tick of its usage that is not page cache (so that cache
    // refilling after a trim is no burst), over the last half to whole
    // trim_burst_window_s (two buckets of half of it). While MemFree is below
    // it, cheap cache above demand is trimmed from the slices that have it,
    // most first, each by at most trim_step_fraction of what it has above
    // demand and trim_step_max_bytes a tick, never less than trim_min_bytes.
    // Trimmed cache that comes back (file refaults the kernel takes back into
    // the working set, as step 1 counts them) of at least
    // trim_refault_fraction of what was trimmed, counted until trim_watch_s
    // after a slice's last trim, says its cache was not cheap: it is left
    // alone for trim_hold_s.
    double trim_burst_window_s = 600;
    double trim_step_fraction = 0.25;
    uint64_t trim_step_max_bytes = 256ull << 20;
    uint64_t trim_min_bytes = 8ull << 20;
    double trim_refault_fraction = 0.1;
    // A child's refaults after a trim beyond its rate before it, with this
    // much of that rate again as slack (a streamer's rate varies), count as
    // cache that came back.
    double trim_child_rate_slack = 0.5;
    double trim_watch_s = 60;
    double trim_hold_s = 600;
    // Budget feedback (AIMD): low events on feedback_min_slices slices in a
    // tick while the host's PSI some is above feedback_psi cut the budget by
    // feedback_cut (at most once per feedback_cooldown_s, never below
    // feedback_min_factor); it regrows by feedback_regrow_per_min. Only
    // where memory.low shields (Plan::low_defers false): there a low event
    // says reclaim found nothing unprotected. From 6.3 with MGLRU every
    // reclaim pass that defers a protected memcg counts one, so they say
    // nothing of the budget's size, and escalation answers them instead.
    double feedback_psi = 0.02;
    int feedback_min_slices = 2;
    double feedback_cut = 0.10;
    double feedback_regrow_per_min = 0.01;
    double feedback_min_factor = 0.5;
    double feedback_cooldown_s = 30;
    uint64_t page_size = 4096;
};

class Engine {
public:
    explicit Engine(Config config, EngineTunables tunables = {});

    // Replaces the configuration; rate and damping state is kept.
    void set_config(Config config);
    [[nodiscard]] const Config& config() const { return config_; }

    // One tick. `current` holds the units' present MemoryLow/MemoryMin as
    // systemd reports them; units missing from it are taken from the
    // snapshot's memory.low/memory.min. `memory_total_override` (0 = none)
    // replaces the snapshot's MemTotal.
    Plan tick(const Snapshot& snapshot, const KernelFeatures& features, const CurrentProtections& current,
              uint64_t memory_total_override = 0);

    // The trims of the last tick()'s plan that the kernel was asked for
    // (step 7), at the plan's time: each starts or extends its slice's watch
    // for trimmed cache that comes back. Trims not made (dry-run, paused, a
    // refused write) are watched for nothing.
    void trims_made(const std::vector<PlannedTrim>& made, int64_t at_us);

    // Which of the snapshot's cgroups the next tick() of it manages, indexed
    // as snapshot.cgroups (select_managed with this configuration's
    // policies): the daemon asks systemd for exactly these before the tick.
    [[nodiscard]] std::vector<bool> managed(const Snapshot& snapshot);

private:
    // What the steps of one tick share (engine_steps.h).
    struct TickContext;
    struct Ewma {
        double value = 0;
        bool init = false;
        void update(double sample, double alpha);
    };
    struct SliceState {
        int64_t last_seen_us = 0;
        // counters from the previous sample
        uint64_t refault_file = 0, refault_anon = 0, pgsteal = 0, activate_restore = 0, activate_file = 0,
                 restore_file = 0, low_events = 0, psi_some_us = 0;
        bool have_prev = false;
        int64_t last_change_us = 0;  // last tick that wrote this slice, or first seen
        uint64_t lent = 0;           // of MemoryLow= after the last tick, the part lent to cold anon (step 5)
        // The present wish to shrink: how long it has lasted in sampled time
        // (-1: none), and the targets it saw over the last shrink_hold_s of
        // it, as a decreasing sequence whose front is their maximum.
        double shrink_wanted_s = -1;
        std::vector<std::pair<double, uint64_t>> shrink_targets;  // (shrink_wanted_s then, target_low)
        Ewma refault_file_rate, activate_file_rate, restore_file_rate, refault_rate, refault_anon_rate,
            pgsteal_rate, activate_restore_rate, psi_some;
        int64_t breach_us = -1;        // the last tick with low events while within MemoryLow= (-1: none)
        int64_t escalated_us = -1;     // since when MemoryMin= holds the working set (-1: not escalated)
        uint64_t escalated_min = 0;    // what it holds
        int64_t reclaimed_us = -1;     // the last tick at which reclaim took pages from it (pgsteal rose; -1: none)
        int64_t lower_since_us = -1;   // since when its working set is lower than what it holds (-1: it is not)
        uint64_t lower_max = 0;        // the largest of those lower working sets
        bool descending = false;       // stepping down toward a lower working set (follow_working_set)
        bool anon_refaulted = false;  // anon refaults since the previous sample
        double warm = 0;              // the footprint at the last refault evidence, bytes (0: none)
        int64_t warm_since_us = 0;    // when that evidence was last seen
        // Step 7: usage less page cache at the last tick; the largest rise of
        // it in this bucket and the last (the bucket's start; -1: none); the
        // watch after trims made (since when, the activate/restore counters
        // then, bytes trimmed since; -1: none) and the hold it may end in.
        uint64_t last_held = 0;
        bool have_held = false;
        uint64_t burst_cur = 0, burst_prev = 0;
        int64_t burst_bucket_us = -1;
        int64_t trim_watch_us = -1;
        int64_t trim_watch_start_us = -1;
        uint64_t trim_watch_activate = 0, trim_watch_restore = 0;
        uint64_t trim_watch_bytes = 0;
        int64_t trim_hold_until_us = -1;
        // The file refaults of each service or scope directly below the
        // slice (in the snapshot when the sampler reads services), and, when
        // a watch starts, its count and smoothed rate then. By unit; only
        // those in the current sample are kept (step 7 forgets the others).
        struct ChildRefaults {
            uint64_t count = 0;
            int64_t seen_us = -1;
            Ewma rate;
            bool watched = false;
            uint64_t watch_from = 0;
            double watch_rate = 0;
        };
        std::map<std::string, ChildRefaults, std::less<>> children;
        // Starts, extends (in sampled time) or ends the wish to shrink to `target`.
        void track_shrink(bool wanted, uint64_t target, const TickContext& ctx, double hold_s);
    };

    // The steps of tick(), in order; each fills its part of the plan. Then
    // order_writes() (engine_steps.h) and finish_tick().
    void start_tick(TickContext& ctx, Plan& plan);       // elapsed time, host pressure, budget regrowth
    // Each cgroup's policy, null for a cgroup that is not a slice unit.
    std::vector<const EffectivePolicy*> policies(const Snapshot& snap);
    // Managed slices → plan entries, each with its state, prior values and estimate.
    void select_slices(TickContext& ctx, Plan& plan);
    // Cheap cache, working set and demand of the entry `e` of the snapshot's cgroup `index` (engine_estimate.cc).
    void estimate(TickContext& ctx, const Plan& plan, size_t index, const EffectivePolicy& pol,
                  SliceState& state, PlanEntry& e);
    void budget_feedback(TickContext& ctx, Plan& plan);  // the AIMD cut of the budget
    // Nested floors, then the budget split top-down (engine_allocate.cc).
    void allocate(Plan& plan, const SiblingGroups& groups) const;
    // Damping, per sibling group top-down (engine_damp.cc).
    struct RateLimits {
        std::vector<uint64_t> grow, shrink;  // per plan entry, this tick
        uint64_t small_host_band = 0;        // the deadband's absolute part
    };
    void damp(const TickContext& ctx, const SiblingGroups& groups, Plan& plan);
    RateLimits rate_limits(const TickContext& ctx, const Plan& plan) const;
    void damp_group(const TickContext& ctx, const RateLimits& lim, std::span<const size_t> group,
                    uint64_t room, uint64_t min_room, Plan& plan);
    // Step 7: trims of cheap cache when MemFree is short of the bursts' headroom (engine_trim.cc).
    void trim(TickContext& ctx, Plan& plan) const;
    // Pages that came back to the slice's services since its trim watch began (engine_trim.cc).
    uint64_t child_refaults_back(const SliceState& s, int64_t now) const;
    // The file refaults of a service or scope `cg` below the slice whose state is `parent`.
    static void track_child(SliceState& parent, const CgroupSample& cg, const TickContext& ctx);
    // Its parts per slice: the burst, and the watch after its trims.
    void track_burst(SliceState& s, const TickContext& ctx, Explanation& x) const;
    void watch_trims(SliceState& s, const TickContext& ctx, bool mglru, const std::string& unit, Explanation& x,
                     std::vector<std::string>& notes) const;
    void finish_tick(const TickContext& ctx);  // forget gone slices, keep the time
    // Counter deltas → smoothed rates; true when the slice had low events.
    bool update_rates(SliceState& s, const CgroupSample& cg, const TickContext& ctx, Explanation& x) const;
    // MemoryMin= escalation when MemoryLow= does not hold (EngineTunables::escalate_*),
    // or ahead of it where `ahead` (EscalateAhead= and memory.low only defers);
    // `notes` gets a line when it starts or ends.
    void escalate(SliceState& s, const TickContext& ctx, bool ahead, const std::string& unit, Explanation& x,
                  std::vector<std::string>& notes) const;
    // An escalated floor following the working set (escalate's last part).
    void follow_working_set(SliceState& s, int64_t now, Explanation& x) const;
    // The warm footprint: raised by anon refaults, decaying slowly; raises the anon working set.
    void update_warm(SliceState& s, const TickContext& ctx, double window_s, uint64_t anon_part,
                     Explanation& x) const;

    Config config_;
    EngineTunables tun_;
    std::unordered_map<std::string, SliceState> state_;
    // policy_for() matches globs; the answer only changes with the config.
    struct CachedPolicy {
        EffectivePolicy policy;
        std::shared_ptr<const std::vector<std::string>> sources;
    };
    std::unordered_map<std::string, CachedPolicy> policy_cache_;
    // Per index into the last snapshot: its unit's policy_cache_ entry and,
    // when it was managed, its state_ entry, so a tree whose order did not
    // change is matched by position instead of by two hash lookups per
    // slice. Emptied with policy_cache_; `state` is null for a slice that
    // was not managed in the last tick, so it never outlives its node.
    struct Slot {
        std::string unit;
        CachedPolicy* policy = nullptr;
        SliceState* state = nullptr;
    };
    std::vector<Slot> slots_;
    // The slot of `unit` at `index` in the snapshot: by position when the
    // unit there is unchanged, else found in (or added to) policy_cache_.
    Slot& slot_for(size_t index, const std::string& unit);
    int64_t last_tick_us_ = 0;
    bool have_tick_ = false;
    uint64_t host_psi_prev_us_ = 0;
    bool host_psi_have_prev_ = false;
    double budget_factor_ = 1.0;
    int64_t last_cut_us_ = 0;
    bool have_cut_ = false;
};

}  // namespace memprotd
