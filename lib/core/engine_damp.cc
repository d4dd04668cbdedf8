// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Step 6 of a tick: from targets to the values written now (deadband, hold,
// rate limits, the room of each sibling group), and the order of the writes.
#include <algorithm>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "engine_steps.h"
#include "saturating.h"

namespace memprotd {

namespace {

// Whole MiB, as the damping messages show sizes.
constexpr uint64_t mib(uint64_t b) {
    return b >> 20;
}

// What the first pass knows about one slice of a group.
struct SliceView {
    uint64_t c = 0;          // prior MemoryLow
    uint64_t t = 0;          // target MemoryLow
    uint64_t band = 0;       // deadband
    uint64_t held = 0;       // the lowest a decrease may go now
    uint64_t grow_limit = 0;
    uint64_t shrink_limit = 0;
    double wished_s = 0;     // how long the shrink has been wanted
    bool over = false;       // the group's prior values exceed its room
    bool urgent = false;     // a decrease the budget, a floor or MaxProtection= demands
    bool wants_shrink = false;
};

struct DampRules {
    uint64_t min_step = 0;
    uint64_t round_bytes = 0;
    double shrink_hold_s = 0;
};

// How far one slice's MemoryLow may grow this tick: the rate limit, or at
// once up to its prompt demand (engine_estimate.cc). Either is shared out
// when the group asks for more than its free room.
uint64_t grow_allowance(const Explanation& x, uint64_t rate_limit) {
    const uint64_t prompt = std::min(x.prompt_demand, x.target_low);
    return std::max(rate_limit, sat_sub(prompt, x.prior.memory_low));
}

// MemoryMin follows its target at once (floors are the user's hard
// guarantees) but never beyond what the parent holds.
void damp_min(std::span<const size_t> group, uint64_t min_room, std::vector<PlanEntry>& sl) {
    ByteSum min_sum = 0;
    for (size_t k : group)
        min_sum += sl[k].x.target_min;
    for (size_t k : group) {
        auto& x = sl[k].x;
        x.next.memory_min = min_sum > min_room ? share_of(min_room, x.target_min, min_sum) : x.target_min;
    }
}

// A decrease (or a hold) of one slice's MemoryLow. Decreases the user or the
// budget demand go at once; those that follow the estimates wait until the
// wish has lasted shrink_hold_s, go no lower than the largest target of that
// period, and then within the shrink rate limit, in steps of at least
// min_step. Returns the value this slice commits.
// Tests: Engine.ADecreaseIsWrittenOnlyOnceItHasLasted, Engine.ADecreaseGoesNoLowerThanTheHoldPeriodsLargestTarget,
// Engine.ShrinksSlowlyInFewWrites, Engine.ShrinksAtOnceWhenCurrentValuesExceedBudget,
// Engine.MaxProtectionLoweredBelowTheValueAppliesAtOnce, Engine.DeadbandShrinksOnSmallHosts.
uint64_t damp_decrease(Explanation& x, const SliceView& v, const DampRules& r) {
    const uint64_t c = v.c, t = v.t;
    const auto hold_s = static_cast<uint64_t>(r.shrink_hold_s);
    if (v.held > t && c - v.held <= v.band && !v.over) {
        x.next.memory_low = c;
        x.damping = {DampingKind::HoldingLargestTarget, hold_s, mib(v.held)};
    } else if (c - t <= v.band && !v.over && t >= x.target_min) {
        x.next.memory_low = c;
        if (c != t)
            x.damping = {DampingKind::Deadband, mib(c - t), mib(v.band)};
    } else if (v.held > t && c - v.held <= v.shrink_limit) {
        x.next.memory_low = round_down(v.held, r.round_bytes);
        x.damping = {DampingKind::ShrinkingToLargestTarget, hold_s};
    } else if (v.over || c - t <= v.shrink_limit || t < x.target_min || c > x.max_protection) {
        // The rate limit damps the estimates' noise; a value above
        // MaxProtection= is the administrator's decision and goes at once.
        x.next.memory_low = t;
        if (v.over)
            x.damping = {DampingKind::OverBudget};
        else if (c > x.max_protection)
            x.damping = {DampingKind::AboveMaxProtection};
    } else if (v.shrink_limit < r.min_step) {
        x.next.memory_low = c;
        x.damping = {DampingKind::ShrinkingSlowly, mib(r.min_step)};
    } else {
        x.next.memory_low = c - round_down(v.shrink_limit, r.round_bytes);
        x.damping = {DampingKind::ShrinkLimited, mib(c - x.next.memory_low)};
    }
    return x.next.memory_low;
}

// The first pass over one slice: holds and decreases are decided and
// commit their value; an increase commits the prior value and adds what it
// wants to `want_sum`.
uint64_t damp_first_pass(Explanation& x, const SliceView& v, const DampRules& r, uint64_t& want_sum) {
    const uint64_t c = v.c, t = v.t;
    if (v.wants_shrink && !v.urgent && v.wished_s < r.shrink_hold_s) {
        x.next.memory_low = c;
        x.damping = {DampingKind::HoldingDecrease, static_cast<uint64_t>(r.shrink_hold_s),
                     static_cast<uint64_t>(v.wished_s)};
        return c;
    }
    if (t <= c)
        return damp_decrease(x, v, r);
    if (t - c <= v.band) {
        x.next.memory_low = c;
        x.damping = {DampingKind::Deadband, mib(t - c), mib(v.band)};
    } else {
        want_sum += std::min(t - c, v.grow_limit);
    }
    return c;
}

// Values already above the room (set by someone else, or a parent that is
// still growing towards its target) shrink to fit it now. Returns what the
// group commits after that.
uint64_t fit_to_room(std::span<const size_t> group, uint64_t room, uint64_t committed, uint64_t round_bytes,
                     std::vector<PlanEntry>& sl) {
    if (committed <= room)
        return committed;
    const uint64_t over = committed;
    committed = 0;
    for (size_t k : group) {
        auto& x = sl[k].x;
        if (x.target_low > x.prior.memory_low)
            continue;
        x.next.memory_low = round_down(share_of(room, x.next.memory_low, over), round_bytes);
        x.damping = {DampingKind::ScaledToRoom, mib(room)};
        committed = sat_add(committed, x.next.memory_low);
    }
    return committed;
}

// Increases, within the grow allowance and shared in proportion when they
// ask for more than `avail`; a step below min_step waits.
// Tests: Engine.LimitsGrowthPerTick, Engine.HoldsIncreasesToTheRoomDecreasesLeave,
// Engine.AnonGrowsAtOnceWithinTheUnusedBudget.
void damp_increases(std::span<const size_t> group, uint64_t avail, uint64_t want_sum,
                    const std::vector<uint64_t>& grow_limit, const DampRules& r, std::vector<PlanEntry>& sl) {
    for (size_t k : group) {
        auto& x = sl[k].x;
        const uint64_t c = x.prior.memory_low;
        const uint64_t t = x.target_low;
        if (t <= c || x.damping)
            continue;
        uint64_t step = std::min(t - c, grow_allowance(x, grow_limit[k]));
        if (want_sum > avail) {
            step = to_u64(static_cast<double>(step) * static_cast<double>(avail) / static_cast<double>(want_sum));
            x.damping = {DampingKind::HeldToFreeRoom, mib(avail), mib(want_sum)};
        } else if (step < t - c && step > grow_limit[k]) {
            x.damping = {DampingKind::GrownAtOnce};
        } else if (step < t - c) {
            x.damping = {DampingKind::GrowLimited, mib(step)};
        }
        if (step < t - c)
            step = round_down(step, r.round_bytes);
        if (step < std::min(t - c, r.min_step)) {
            step = 0;
            if (want_sum <= avail)
                x.damping = {DampingKind::GrowingSlowly, mib(r.min_step)};
        }
        x.next.memory_low = c + step;
    }
}

// MemoryLow is never below MemoryMin. Raising it may take room an increase
// was given, so that is taken back first, and everything is scaled only as
// the last resort.
void keep_low_above_min(std::span<const size_t> group, uint64_t room, std::vector<PlanEntry>& sl) {
    uint64_t total = 0;
    for (size_t k : group) {
        auto& x = sl[k].x;
        x.next.memory_low = std::max(x.next.memory_low, x.next.memory_min);
        total = sat_add(total, x.next.memory_low);
    }
    for (size_t k : group) {
        if (total <= room)
            break;
        auto& x = sl[k].x;
        const uint64_t base = std::max(x.prior.memory_low, x.next.memory_min);
        if (x.next.memory_low > base) {
            const uint64_t take = std::min(total - room, x.next.memory_low - base);
            x.next.memory_low -= take;
            total -= take;
        }
    }
    if (total > room) {
        // Exact shares, rounded down: scaled values never sum above the room.
        ByteSum sum = 0;
        for (size_t k : group)
            sum += sl[k].x.next.memory_low;
        for (size_t k : group) {
            auto& x = sl[k].x;
            x.next.memory_low = share_of(room, x.next.memory_low, sum);
            x.next.memory_min = std::min(x.next.memory_min, x.next.memory_low);
            x.damping = {DampingKind::ScaledToRoom, mib(room)};
        }
    }
}

// Plan indices by depth, deepest first, in plan order within a depth.
std::vector<size_t> deepest_first(const std::vector<PlanEntry>& sl) {
    std::vector<size_t> order(sl.size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (sl.empty())
        return order;
    std::vector<int> depth(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) depth[k] = sl[k].depth;
    const auto [lo, hi] = std::minmax_element(depth.begin(), depth.end());
    const auto buckets = static_cast<size_t>(static_cast<int64_t>(*hi) - *lo) + 1;
    if (buckets > sl.size()) {
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return depth[a] > depth[b]; });
        return order;
    }
    // A counting sort (depths are few): bucket 0 holds the deepest.
    const int top = *hi;
    const auto bucket = [&](size_t k) { return static_cast<size_t>(top - depth[k]); };
    std::vector<size_t> next(buckets + 1);
    for (size_t k = 0; k < sl.size(); ++k) ++next[bucket(k) + 1];
    for (size_t b = 1; b < next.size(); ++b) next[b] += next[b - 1];
    for (size_t k = 0; k < sl.size(); ++k) order[next[bucket(k)]++] = k;
    return order;
}

}  // namespace

void Engine::SliceState::track_shrink(bool wanted, uint64_t target, const TickContext& ctx, double hold_s) {
    if (!wanted) {
        shrink_wanted_s = -1;
        shrink_targets.clear();
        return;
    }
    if (shrink_wanted_s < 0) {
        shrink_wanted_s = 0;  // the targets were cleared when the last wish ended
    } else if (ctx.have_dt && ctx.dt_s <= std::max(2 * ctx.interval_s, 1.0)) {
        // A gap in the samples (longer than two intervals and a second) does
        // not count: the estimates just after one are the least reliable.
        // The targets before it stay in the window.
        // Tests: Engine.AGapInTheSamplesDoesNotServeTheHold,
        // Engine.ACollapseAfterGapsIsBoundedByTheTargetsBeforeThem.
        shrink_wanted_s += ctx.dt_s;
    }
    // The largest target over the hold, kept as a decreasing sequence (a
    // sliding-window maximum): a target no larger than a newer one can never
    // be the maximum again.
    auto& q = shrink_targets;
    while (!q.empty() && q.back().second <= target)
        q.pop_back();
    q.emplace_back(shrink_wanted_s, target);
    while (shrink_wanted_s - q.front().first > hold_s)
        q.erase(q.begin());
}

Engine::RateLimits Engine::rate_limits(const TickContext& ctx, const Plan& plan) const {
    // How far each slice may move now, from the time since it last moved,
    // capped so a long quiet spell does not allow a jump; the cap never stops
    // a minimum step from coming due (on a small host 1% of the budget is
    // less than min_step_bytes).
    RateLimits lim;
    const size_t n = plan.slices.size();
    lim.grow.resize(n);
    lim.shrink.resize(n);
    const double dt_s = ctx.dt_s;
    for (size_t k = 0; k < n; ++k) {
        const double since = static_cast<double>(ctx.snap.timestamp_us - ctx.state_of[k]->last_change_us) / 1e6;
        const double grow_rate = tun_.grow_fraction_per_10s * static_cast<double>(plan.budget) / 10.0;
        const double shrink_rate = tun_.shrink_fraction_per_min * static_cast<double>(plan.budget) / 60.0;
        const double min_step_d = static_cast<double>(tun_.min_step_bytes);
        lim.grow[k] = to_u64(std::min(grow_rate * std::max(since, dt_s),
                                      std::max(grow_rate * std::max(dt_s, 10.0), min_step_d)));
        lim.shrink[k] = to_u64(std::min(shrink_rate * std::max(since, dt_s),
                                        std::max(shrink_rate * std::max(dt_s, 60.0), min_step_d)));
    }
    // 64 MiB is noise on a big host and 7% of a 1 GiB one.
    lim.small_host_band = std::min(
        tun_.deadband_bytes, to_u64(static_cast<double>(plan.memory_total) * tun_.deadband_memory_fraction));
    return lim;
}

void Engine::damp_group(const TickContext& ctx, const RateLimits& lim, std::span<const size_t> group,
                        uint64_t room, uint64_t min_room, Plan& plan) {
    auto& sl = plan.slices;
    const DampRules rules{tun_.min_step_bytes, tun_.round_bytes, tun_.shrink_hold_s};
    damp_min(group, min_room, sl);
    uint64_t prior_sum = 0;
    for (size_t k : group)
        prior_sum = sat_add(prior_sum, sl[k].x.prior.memory_low);

    // Decreases and holds first, then increases within what they left.
    uint64_t committed = 0;
    uint64_t want_sum = 0;
    for (size_t k : group) {
        auto& x = sl[k].x;
        SliceView v;
        v.c = x.prior.memory_low;
        v.t = x.target_low;
        v.band = std::max(lim.small_host_band, to_u64(static_cast<double>(v.t) * tun_.deadband_fraction));
        // Room lent to cold anon (step 5) comes back at once: a demand that
        // grew is waiting for it. The rest of a decrease is held and rate
        // limited as usual.
        // Test: Engine.LentRoomComesBackAtOnce.
        SliceState& st = *ctx.state_of[k];
        const uint64_t own = std::max(v.t, sat_sub(v.c, st.lent));
        if (v.c > own && v.c - v.t > v.band)
            v.c = own;
        v.over = prior_sum > room;
        v.urgent = v.over || v.t < x.target_min || v.c > x.max_protection;
        v.wants_shrink = v.t <= v.c && (v.c - v.t > v.band || v.urgent);
        st.track_shrink(v.wants_shrink, v.t, ctx, tun_.shrink_hold_s);
        v.wished_s = std::max(0.0, st.shrink_wanted_s);
        v.held = v.t;
        if (v.wants_shrink && !v.urgent)
            v.held = std::min(v.c, std::max(v.t, st.shrink_targets.front().second));
        v.grow_limit = grow_allowance(x, lim.grow[k]);
        v.shrink_limit = lim.shrink[k];
        committed = sat_add(committed, damp_first_pass(x, v, rules, want_sum));
    }
    committed = fit_to_room(group, room, committed, tun_.round_bytes, sl);
    damp_increases(group, sat_sub(room, committed), want_sum, lim.grow, rules, sl);
    keep_low_above_min(group, room, sl);
}

void Engine::damp(const TickContext& ctx, const SiblingGroups& groups, Plan& plan) {
    auto& sl = plan.slices;
    // The prior values are in the entries (select_slices). Per sibling group, top-down: a group's room is
    // what its parent will have after this tick.
    const RateLimits lim = rate_limits(ctx, plan);
    damp_group(ctx, lim, groups.back(), plan.budget, plan.budget, plan);
    for (size_t k = 0; k < sl.size(); ++k)
        if (!groups[k].empty())
            damp_group(ctx, lim, groups[k], sl[k].x.next.memory_low,
                       std::min(sl[k].x.next.memory_low, sl[k].x.next.memory_min), plan);

    for (size_t k = 0; k < sl.size(); ++k) {
        const Explanation& x = sl[k].x;
        SliceState& st = *ctx.state_of[k];
        // Giving lent room back is no move of the slice's own protection:
        // it leaves the clock of its rate limits alone.
        const bool lent_back = x.next.memory_low < x.prior.memory_low &&
                               x.prior.memory_low - x.next.memory_low <= st.lent &&
                               x.next.memory_min == x.prior.memory_min;
        if (sl[k].write() && !lent_back)
            st.last_change_us = ctx.snap.timestamp_us;
        st.lent = x.bound == Bound::KeptAnon
                      ? sat_sub(std::min(x.next.memory_low, x.target_low), round_up(x.demand, tun_.round_bytes))
                      : 0;
    }
}

void order_writes(Plan& plan) {
    // Every decrease, deepest first, then every increase, shallowest first,
    // so no parent is ever below the sum of its children and no group is
    // ever above its budget between two calls.
    // Test: Engine.AppliesDecreasesBeforeIncreases.
    const auto& sl = plan.slices;
    const std::vector<size_t> order = deepest_first(sl);
    for (size_t k : order) {
        const auto& x = sl[k].x;
        if (x.next.memory_low < x.prior.memory_low || x.next.memory_min < x.prior.memory_min)
            plan.writes.push_back({sl[k].unit,
                                   {std::min(x.next.memory_low, x.prior.memory_low),
                                    std::min(x.next.memory_min, x.prior.memory_min)},
                                   true});
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const auto& x = sl[*it].x;
        if (x.next.memory_low > x.prior.memory_low || x.next.memory_min > x.prior.memory_min)
            plan.writes.push_back({sl[*it].unit, x.next, false});
    }
}

}  // namespace memprotd
