// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Steps 1-3 of a tick, per slice: cheap cache, working set, demand.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "engine_steps.h"
#include "saturating.h"

namespace memprotd {

namespace {

// The nearest of `index_of`'s paths at or above `path` ("/a.slice/b.service"
// → "/a.slice" when only that is listed), by one lookup per component.
std::optional<size_t> nearest_at_or_above(std::string_view path,
                                          const std::unordered_map<std::string_view, size_t>& index_of) {
    while (!path.empty()) {
        if (const auto it = index_of.find(path); it != index_of.end())
            return it->second;
        const size_t slash = path.rfind('/');
        if (slash == std::string_view::npos)
            break;
        path = path.substr(0, slash);
    }
    return std::nullopt;
}

}  // namespace

std::vector<LruGenSum> lru_gen_sums(const LruGen& lg, const std::vector<CgroupSample>& cgroups,
                                    const std::vector<uint64_t>& window_ms) {
    const size_t n = cgroups.size();
    // The distinct windows (few: [Daemon]'s and a policy's or two), and
    // each slice's among them.
    std::vector<uint64_t> windows;
    std::vector<size_t> slot(n, 0);
    std::unordered_map<std::string_view, size_t> index_of;
    index_of.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        if (window_ms[i] == 0)
            continue;
        auto w = std::find(windows.begin(), windows.end(), window_ms[i]);
        if (w == windows.end())
            w = windows.insert(windows.end(), window_ms[i]);
        slot[i] = static_cast<size_t>(w - windows.begin());
        index_of.emplace(cgroups[i].path, i);
    }
    const size_t nw = windows.size();
    std::vector<LruGenSum> sum(n);
    std::vector<uint64_t> young(n * nw * 2, 0);  // per slice and window: anon pages, file pages
    for (const LruGenMemcg& m : lg.memcgs) {
        const auto i = nearest_at_or_above(m.path, index_of);
        if (!i)
            continue;
        sum[*i].found = true;
        uint64_t* y = &young[*i * nw * 2];
        for (const auto& node : m.nodes)
            for (const auto& g : node.generations) {
                sum[*i].youngest_age_ms = std::min(sum[*i].youngest_age_ms, g.age_ms);
                for (size_t w = 0; w < nw; ++w)
                    if (g.age_ms < windows[w]) {
                        y[2 * w] = sat_add(y[2 * w], g.anon_pages);
                        y[2 * w + 1] = sat_add(y[2 * w + 1], g.file_pages);
                    }
            }
    }
    // Children come after their parents in the snapshot: add each slice's
    // sums to its parent's, deepest first.
    for (size_t i = n; i-- > 0;) {
        const int p = cgroups[i].parent;
        if (window_ms[i] == 0 || p < 0 || window_ms[static_cast<size_t>(p)] == 0)
            continue;
        const auto pi = static_cast<size_t>(p);
        sum[pi].found = sum[pi].found || sum[i].found;
        sum[pi].youngest_age_ms = std::min(sum[pi].youngest_age_ms, sum[i].youngest_age_ms);
        for (size_t k = 0; k < nw * 2; ++k)
            young[pi * nw * 2 + k] = sat_add(young[pi * nw * 2 + k], young[i * nw * 2 + k]);
    }
    for (size_t i = 0; i < n; ++i)
        if (window_ms[i] != 0) {
            sum[i].young_anon_pages = young[(i * nw + slot[i]) * 2];
            sum[i].young_file_pages = young[(i * nw + slot[i]) * 2 + 1];
        }
    return sum;
}

namespace {

void read_inputs(const CgroupSample& cg, Explanation& x) {
    using K = StatKey;
    const MemoryStat& st = cg.stat;
    x.current = cg.current;
    x.anon = st.known(K::Anon);
    x.file = st.known(K::File);
    x.inactive_anon = st.known(K::InactiveAnon);
    x.inactive_file = st.known(K::InactiveFile);
    x.file_mapped = st.known(K::FileMapped);
    x.file_dirty = sat_add(st.known(K::FileDirty), st.known(K::FileWriteback));
    x.slab_reclaimable = st.known(K::SlabReclaimable);
}

// 1. What MGLRU would take first (inactive, unmapped, clean file pages),
// less what comes back. "Comes back" is workingset_activate_file, not
// workingset_refault_file: a streamer refaults at the rate it is reclaimed,
// but only pages the kernel judges part of the working set are activated.
// With MGLRU an activation only says the page was evicted from the oldest
// generation that still exists, and while a cache's pages enter that
// generation and never leave it, that is every refault (a random reader over
// 4 GiB on 6.12: activations 0.6 of pgsteal); so with MGLRU a refault comes
// back only if it is also a restore (workingset_restore_file: the page was
// used repeatedly, or through page tables, before it was reclaimed).
// While reclaim turns the slice's cache over (takes a quarter of it per
// window), every unmapped clean file page counts, active or not: what
// reclaim takes and never needs again is single-use whatever its generation.
// Tests: Engine.StreamerRefaultsWithoutActivationStayCheap,
// Engine.RefaultingCacheCountsAsWorkingSet, Engine.MappedAndDirtyCacheIsNotCheap,
// Engine.ReclaimedCacheIsCheapWhileMemoryStatCallsItActive,
// Engine.WithMglruActivatedRefaultsOfPagesReadOnceStayCheap.
void estimate_cheap_cache(Explanation& x, bool mglru, double window_s, uint64_t page, const EngineTunables& tun) {
    const double taken_per_window = x.pgsteal_rate * window_s * static_cast<double>(page);
    x.cheap_from_all_file = x.file > 0 && taken_per_window >= tun.reclaim_turnover * static_cast<double>(x.file);
    const uint64_t candidates = x.cheap_from_all_file ? x.file : x.inactive_file;
    x.cheap_cache_raw = sat_sub(sat_sub(candidates, x.file_mapped), x.file_dirty);
    x.comes_back_rate = mglru ? std::min(x.activate_file_rate, x.restore_file_rate) : x.activate_file_rate;
    x.refault_ratio = x.comes_back_rate / std::max(1.0, x.pgsteal_rate);
    const double keep = 1.0 - std::min(1.0, x.refault_ratio / tun.rho_max);
    x.cheap_cache = to_u64(static_cast<double>(x.cheap_cache_raw) * keep);
}

// 2. The working set, from lru_gen when it covers the window, else from
// memory.stat; plus the thrash correction. Returns its anon part (for the
// usage cap of the demand).
uint64_t estimate_working_set(Explanation& x, const LruGenSum& lg, bool swap, uint64_t window_ms, uint64_t page,
                              const EngineTunables& tun) {
    uint64_t w_stat = sat_sub(sat_sub(x.current, x.cheap_cache), x.slab_reclaimable);
    if (swap)
        w_stat = sat_sub(w_stat, x.inactive_anon);
    else
        w_stat = std::max(w_stat, x.anon);
    const uint64_t active_anon = sat_sub(x.anon, x.inactive_anon);
    uint64_t anon_part = 0;
    if (lg.found && lg.youngest_age_ms <= window_ms) {
        // Per type, the better bound. Anon: a page in a generation born
        // within the window was touched within it, and so is one the kernel
        // still calls active (aging after a quiet spell may not have reached
        // it yet); memory.stat with swap calls everything outside the two
        // youngest generations inactive. File: both sources overstate, the
        // smaller wins. Memory on neither LRU comes from memory.stat.
        // Tests: Engine.WarmAnonTouchedWithinTheWindowCountsWithSwap,
        // Engine.AnonTheKernelCallsActiveCountsWhileLruGenCatchesUp,
        // Engine.LruGenOfANewCgroupDoesNotCountSingleUseCache.
        x.working_set_source = WorkingSetSource::LruGen;
        const auto bytes = [&](uint64_t pages) {
            return to_u64(static_cast<double>(pages) * static_cast<double>(page));
        };
        const uint64_t anon_ws =
            swap ? std::max(std::min(bytes(lg.young_anon_pages), x.anon), active_anon) : x.anon;
        const uint64_t file_ws = std::min(bytes(lg.young_file_pages), sat_sub(x.file, x.cheap_cache));
        const uint64_t other = sat_sub(sat_sub(sat_sub(x.current, x.anon), x.file), x.slab_reclaimable);
        x.working_set_base = sat_add(sat_add(anon_ws, file_ws), other);
        anon_part = anon_ws;
    } else {
        x.working_set_source = WorkingSetSource::MemoryStat;
        x.working_set_base = w_stat;
        anon_part = swap ? std::min(w_stat, active_anon) : x.anon;
    }
    if (x.psi_some > tun.thrash_psi)
        x.thrash_correction = to_u64(tun.thrash_horizon_s * x.activate_restore_rate * static_cast<double>(page));
    x.working_set = sat_add(x.working_set_base, x.thrash_correction);
    return anon_part;
}

// 3. Demand: the working set plus headroom, within the policy's bounds.
// The usage cap only stops the headroom from asking for memory the slice
// does not use: on page cache it stops at usage (protected cache grows into
// its protection), on anon it may go above (MGLRU before 6.17 treats a
// cgroup even a page above memory.low as unprotected).
// Test: Engine.DemandOnPageCacheStopsAtUsage.
//
// A warm footprint (refaulting anon pages) lifts the usage cap by its part
// in swap: that comes back once protected.
// The prompt part (protected at once when the budget has room unused): the
// anon working set or the warm footprint, with the headroom on anon.
// The keep demand: the demand had the slice's cold anon (resident anon
// outside its working set and warm footprint; only with swap) been working
// set too. Step 5 lends it the room every demand leaves (KeptAnon).
// Tests: Engine.AnonRefaultsRaiseDemandToTheFootprint, Engine.AnonGrowsAtOnceWithinTheUnusedBudget,
// Engine.ColdAnonIsKeptWhileTheBudgetHasRoom.
void estimate_demand(Explanation& x, const EffectivePolicy& pol, uint64_t memory_total, const DaemonConfig& dc,
                     uint64_t anon_part, uint64_t page, const EngineTunables& tun) {
    x.weight = pol.weight;
    x.floor = pol.floor.resolve(memory_total, 0);
    x.min_protection = pol.min_protection.resolve(memory_total, 0);
    x.max_protection = pol.max_protection.resolve(memory_total, kUnlimited);
    x.refault_allowance = to_u64(tun.thrash_horizon_s * x.refault_rate * static_cast<double>(page));
    const uint64_t want = to_u64(static_cast<double>(x.working_set) * (1.0 + dc.headroom));
    const uint64_t anon_headroom = to_u64(static_cast<double>(anon_part) * dc.headroom);
    const uint64_t cap = sat_add(sat_add(x.current, std::max(x.refault_allowance, sat_sub(x.warm_footprint, x.anon))),
                                 anon_headroom);
    uint64_t d = std::min(want, cap);
    x.cold_anon = sat_sub(x.anon, std::max(anon_part, x.warm_footprint));
    const auto cold_headroom = to_u64(static_cast<double>(x.cold_anon) * dc.headroom);
    const uint64_t keep = std::min(sat_add(want, sat_add(x.cold_anon, cold_headroom)), sat_add(cap, cold_headroom));
    x.bound = Bound::None;
    if (x.min_protection > d) {
        d = x.min_protection;
        x.bound = Bound::MinProtection;
    }
    if (x.max_protection < d) {
        d = x.max_protection;
        x.bound = Bound::MaxProtection;
    }
    if (x.floor > d) {
        d = x.floor;
        x.bound = Bound::Floor;
    }
    x.demand = d;
    x.keep_demand = std::max(d, std::min(keep, x.max_protection));
    x.prompt_demand = std::min(d, sat_add(std::max(anon_part, x.warm_footprint), anon_headroom));
}

}  // namespace

bool Engine::update_rates(SliceState& s, const CgroupSample& cg, const TickContext& ctx, Explanation& x) const {
    using K = StatKey;
    const MemoryStat& st = cg.stat;
    const double dt_s = ctx.dt_s;
    const double alpha = ctx.alpha;
    const uint64_t refault_file = st.known(K::WorkingsetRefaultFile);
    const uint64_t refault_anon = st.known(K::WorkingsetRefaultAnon);
    const uint64_t pgsteal = st.known(K::Pgsteal);
    const uint64_t activate_file = st.known(K::WorkingsetActivateFile);
    const uint64_t restore_file = st.known(K::WorkingsetRestoreFile);
    const uint64_t act_res = sat_add(sat_add(st.known(K::WorkingsetActivateAnon), activate_file),
                                     sat_add(st.known(K::WorkingsetRestoreAnon), restore_file));
    const uint64_t psi_us = cg.pressure ? cg.pressure->some.total_us : 0;
    bool low_event = false;
    if (s.have_prev && ctx.have_dt) {
        s.refault_file_rate.update(counter_rate(refault_file, s.refault_file, dt_s), alpha);
        s.activate_file_rate.update(counter_rate(activate_file, s.activate_file, dt_s), alpha);
        s.restore_file_rate.update(counter_rate(restore_file, s.restore_file, dt_s), alpha);
        const double anon_rate = counter_rate(refault_anon, s.refault_anon, dt_s);
        s.refault_rate.update(counter_rate(refault_file, s.refault_file, dt_s) + anon_rate, alpha);
        s.refault_anon_rate.update(anon_rate, alpha);
        s.anon_refaulted = refault_anon > s.refault_anon;
        s.pgsteal_rate.update(counter_rate(pgsteal, s.pgsteal, dt_s), alpha);
        s.activate_restore_rate.update(counter_rate(act_res, s.activate_restore, dt_s), alpha);
        s.psi_some.update(counter_rate(psi_us, s.psi_some_us, dt_s) / 1e6, alpha);
        if (pgsteal > s.pgsteal)
            s.reclaimed_us = ctx.snap.timestamp_us;
        if (cg.events.low > s.low_events) {
            x.low_events = cg.events.low - s.low_events;
            low_event = true;
        }
    }
    s.refault_file = refault_file;
    s.activate_file = activate_file;
    s.restore_file = restore_file;
    s.refault_anon = refault_anon;
    s.pgsteal = pgsteal;
    s.activate_restore = act_res;
    s.low_events = cg.events.low;
    s.psi_some_us = psi_us;
    s.have_prev = true;
    s.last_seen_us = ctx.snap.timestamp_us;

    x.refault_file_rate = s.refault_file_rate.value;
    x.activate_file_rate = s.activate_file_rate.value;
    x.restore_file_rate = s.restore_file_rate.value;
    x.refault_rate = s.refault_rate.value;
    x.refault_anon_rate = s.refault_anon_rate.value;
    x.swap_current = cg.swap_current;
    x.pgsteal_rate = s.pgsteal_rate.value;
    x.activate_restore_rate = s.activate_restore_rate.value;
    x.psi_some = std::clamp(s.psi_some.value, 0.0, 1.0);
    return low_event;
}

// Anon refaults are pages reclaim swapped out and the slice then needed:
// whatever PSI says, the slice was under-protected, and the anon memory it
// keeps warm is its anon footprint (resident and swapped): the anon part of
// its working set is raised to it. Page cache is not: a batch job's few
// swapped-in anon pages say nothing of its single-use cache. File refaults
// do not count here: a reader cycling over a file larger than memory has its
// refaults activated on 6.12 (a streamer protected at 490 MiB for minutes);
// they act through the refault ratio of step 1, which follows them.
// Without refaults the excess decays slowly: a cache's cold tail is still
// worth keeping, and protection that stops refaults would otherwise lower
// itself.
// Tests: Engine.AnonRefaultsRaiseDemandToTheFootprint, Engine.TheWarmFootprintDecaysSlowly,
// Engine.AFewAnonRefaultsDoNotMakePageCacheWarm.
void Engine::update_warm(SliceState& s, const TickContext& ctx, double window_s, uint64_t anon_part,
                         Explanation& x) const {
    const double base = static_cast<double>(anon_part);
    const double footprint = static_cast<double>(sat_add(x.anon, x.swap_current));
    const int64_t now = ctx.snap.timestamp_us;
    if (s.anon_refaulted && x.refault_anon_rate >= tun_.warm_min_refault_rate) {
        s.warm = std::max(s.warm, footprint);
        s.warm_since_us = now;
    }
    s.warm = std::min(s.warm, footprint);  // memory the slice freed is not warm
    // The excess over today's estimate decays with the time since the
    // evidence, so the footprint outlasts a later fall of the estimate too.
    const double age_s = static_cast<double>(std::max<int64_t>(0, now - s.warm_since_us)) / 1e6;
    const double decay = std::exp2(-age_s / (tun_.warm_half_life_windows * window_s));
    if (decay < 1.0 / 64)
        s.warm = 0;  // forgotten
    const double warm = base + std::max(0.0, s.warm - base) * decay;
    x.warm_footprint = warm >= base + static_cast<double>(tun_.round_bytes) ? to_u64(warm) : 0;
    if (x.warm_footprint)
        x.working_set = sat_add(x.working_set, x.warm_footprint - anon_part);
}

// 3b. MemoryLow= holds when the kernel does not reclaim a slice within it:
// a low event (memory.events, hierarchical: the pages are in the slice's
// services, whose events count in their ancestors' file, while the slice's
// own memory.events.local stays 0) while the slice's usage is within its
// MemoryLow= says it did not. On 6.1 that happens only when reclaim finds
// nothing else; on 6.3 and later MGLRU reclaims such a memcg on its second
// visit. Twice within escalate_window_s, and MemoryMin= takes over the
// slice's working set (as it follows it: follow_working_set), until
// escalate_quiet_s pass without such an event. `ahead` (EscalateAhead=yes
// where memory.low only defers) escalates every slice that holds MemoryLow=
// at once and keeps it so: reclaim takes its share within seconds of a
// batch job's start, before a tick can see the low events. How the floor
// follows the working set: follow_working_set. The budget share of all
// escalations is allocate()'s (cap_escalations).
// Tests: Engine.EscalatesToMemoryMinWhenMemoryLowDoesNotHold,
// Engine.ReturnsToMemoryLowAfterAQuietPeriod, Engine.LowEventsAboveMemoryLowDoNotEscalate,
// Engine.EscalationsStayWithinTheirShareOfTheBudget, Engine.LowEventsInLentRoomDoNotEscalate,
// Engine.EscalatesAheadWhereMemoryLowDefers, Engine.EscalateAheadLeavesAShieldingKernelAlone.
void Engine::escalate(SliceState& s, const TickContext& ctx, bool ahead, const std::string& unit, Explanation& x,
                      std::vector<std::string>& notes) const {
    const int64_t now = ctx.snap.timestamp_us;
    // Within its demand too: room lent to cold anon (step 5) raises
    // MemoryLow= above what the slice needs, and reclaim of that is no breach.
    const bool breach = x.low_events > 0 && x.prior.memory_low > 0 &&
                        x.current <= std::min(x.prior.memory_low, round_up(x.demand, tun_.round_bytes));
    ahead = ahead && x.prior.memory_low > 0;
    if (ahead && s.escalated_us < 0) {
        s.escalated_us = now;
        notes.push_back(fmt::format("{}: MemoryMin= holds its working set ahead of reclaim wherever MemoryLow= "
                                    "alone would give it all of it: memory.low only defers reclaim on this kernel "
                                    "(EscalateAhead=yes)",
                                    unit));
    }
    if (breach) {
        const bool again = s.breach_us >= 0 && now - s.breach_us <= seconds_us(tun_.escalate_window_s);
        if (again && s.escalated_us < 0) {
            s.escalated_us = now;
            notes.push_back(fmt::format("{}: MemoryLow= did not hold ({} low events while within it): "
                                        "MemoryMin= now protects its working set",
                                        unit, x.low_events));
        }
        s.breach_us = now;
    }
    const bool quiet = s.breach_us < 0 || now - s.breach_us > seconds_us(tun_.escalate_quiet_s);
    if (s.escalated_us >= 0 && !ahead && quiet) {
        s.escalated_us = -1;
        s.escalated_min = 0;
        s.lower_since_us = -1;
        s.descending = false;
        notes.push_back(s.breach_us < 0
                            ? fmt::format("{}: not held ahead any more (EscalateAhead=no, or no MemoryLow= to "
                                          "hold): back to MemoryLow= alone",
                                          unit)
                            : fmt::format("{}: no low event within MemoryLow= for {} s: back to MemoryLow= alone",
                                          unit, static_cast<int>(tun_.escalate_quiet_s)));
    }
    if (s.escalated_us < 0)
        return;
    follow_working_set(s, now, x);
    x.escalation_quiet_s = s.breach_us < 0 ? 0 : static_cast<double>(now - s.breach_us) / 1e6;
    x.escalation_ahead = ahead;
}

// How an escalated floor follows the working set: up at once; down only to
// a working set lower by more than escalate_shrink_fraction that has stayed
// so for shrink_hold_s while reclaim took nothing from the slice, and then
// one step (escalate_step_fraction of the floor, at least min_step_bytes)
// toward the largest seen meanwhile; the next hold starts with the step,
// and once descending the floor steps on to the working set read (the
// fraction only starts a descent). A step that exposed needed memory is
// reclaimed and refaulted, and the refaults raise the estimate
// (update_warm) and the floor with it. A lower estimate is no smaller need while
// reclaim takes from the slice (within escalate_window_s of the last tick it
// did: the estimate falls because the floor yields), nor for a tick or two
// after a quiet spell, when the first MGLRU aging finds few young pages (a
// 430 MiB table read as 57 MiB on 6.12). Whenever the floor is above the
// working set read now (a lower reading not yet followed, or one within
// escalate_shrink_fraction), the floor, and the demand with it, keep what the
// floor holds (escalation_held).
// Tests: Engine.AnEscalatedFloorHoldsWhileReclaimTakesFromItsSlice,
// Engine.AnEscalatedFloorOutlastsADipOfItsEstimate, Engine.AnEscalatedFloorComesDownInStepsAndBackOnRefaults,
// Engine.AnEscalatedFloorStepsAllTheWayToTheWorkingSet,
// Engine.AnEscalatedFloorStepsDownFromWhatMaxProtectionLetsBeWritten.
void Engine::follow_working_set(SliceState& s, int64_t now, Explanation& x) const {
    const uint64_t want = round_down(std::min(x.working_set, x.demand), tun_.round_bytes);
    s.escalated_min = std::min(s.escalated_min, x.max_protection);  // steps start from what is written
    const bool reclaimed = s.reclaimed_us >= 0 && now - s.reclaimed_us <= seconds_us(tun_.escalate_window_s);
    const auto shrink_step = to_u64(static_cast<double>(s.escalated_min) * tun_.escalate_shrink_fraction);
    const bool below = s.escalated_min > want;
    if (!below)
        s.descending = false;
    const bool lower = below && (s.descending || s.escalated_min - want > shrink_step);
    if (!lower || reclaimed) {
        s.lower_since_us = -1;
    } else if (s.lower_since_us < 0) {
        s.lower_since_us = now;
        s.lower_max = want;
    }
    s.lower_max = std::max(s.lower_max, want);
    if (want > s.escalated_min) {
        s.escalated_min = want;
    } else if (s.lower_since_us >= 0 && now - s.lower_since_us >= seconds_us(tun_.shrink_hold_s)) {
        const uint64_t step = std::max(
            tun_.min_step_bytes,
            round_down(to_u64(static_cast<double>(s.escalated_min) * tun_.escalate_step_fraction), tun_.round_bytes));
        s.escalated_min = std::max(s.lower_max, s.escalated_min > step ? s.escalated_min - step : 0);
        s.descending = s.escalated_min > want;
        s.lower_since_us = now;
        s.lower_max = want;
    }
    x.escalation_held = s.escalated_min > want;
    x.escalated_min = std::min(s.escalated_min, x.max_protection);
    x.demand = std::max(x.demand, x.escalated_min);
    x.keep_demand = std::max(x.keep_demand, x.demand);
}

uint64_t working_set_window_us(const EffectivePolicy& pol, const DaemonConfig& dc) {
    return pol.working_set_window_us.value_or(dc.working_set_window_us);
}

void Engine::estimate(TickContext& ctx, const Plan& plan, size_t index, const EffectivePolicy& pol,
                      SliceState& state, PlanEntry& e) {
    const CgroupSample& cg = ctx.snap.cgroups[index];
    const uint64_t window_us = working_set_window_us(pol, ctx.dc);
    const uint64_t window_ms = window_us / 1000;
    e.working_set_window_us = window_us;
    Explanation& x = e.x;
    read_inputs(cg, x);
    if (update_rates(state, cg, ctx, x))
        ++ctx.low_event_slices;
    estimate_cheap_cache(x, plan.mglru, static_cast<double>(window_us) / 1e6, ctx.page, tun_);
    const LruGenSum lg = ctx.lru_sums.empty() ? LruGenSum{} : ctx.lru_sums[index];
    const uint64_t anon_part = estimate_working_set(x, lg, plan.swap, window_ms, ctx.page, tun_);
    update_warm(state, ctx, static_cast<double>(window_us) / 1e6, anon_part, x);
    estimate_demand(x, pol, plan.memory_total, ctx.dc, anon_part, ctx.page, tun_);
    escalate(state, ctx, plan.low_defers && ctx.dc.escalate_ahead, e.unit, x, ctx.notes);
}

}  // namespace memprotd
