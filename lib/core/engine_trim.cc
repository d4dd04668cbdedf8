// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Step 7 of a tick: trimming cheap cache (TrimCheapCache=). A protected
// slice that bursts (a request spike allocating memory) gets its memory
// from what is free at once, or else waits for reclaim; reclaim of a page
// cache that is single-use costs its owner nothing, but done during the
// burst it is the burst's stall. So memprotd keeps free, ahead of time, what
// the protected slices' recent bursts needed, by trimming cheap cache above
// demand, and stops where the trimmed cache comes back.
// Tests: Engine.TrimsCheapCacheWhenFreeMemoryIsShortOfTheBursts,
// Engine.NeverTrimsBelowDemandOrMoreThanAStep, Engine.StopsTrimmingASliceWhoseCacheComesBack,
// Engine.TrimsNothingWithoutAMechanismOrMemFree, Engine.OnlyTrimsMadeAreWatched,
// Engine.CacheRefillingIsNoBurst.
#include <fmt/format.h>

#include <algorithm>

#include "engine_steps.h"
#include "format.h"
#include "saturating.h"

namespace memprotd {

namespace {

// Plan indices of the slices that have no managed child: a trim of a
// parent would reach into its children, whose cheap cache is theirs.
std::vector<bool> leaves(const Plan& plan) {
    std::vector<bool> leaf(plan.slices.size(), true);
    for (const PlanEntry& e : plan.slices)
        if (e.parent)
            leaf[*e.parent] = false;
    return leaf;
}

}  // namespace

// The largest rise from one tick to the next of usage that is not page cache
// (cache refilling after a trim is no burst, nor is a change of the
// cheap-cache estimate), over the last half to whole trim_burst_window_s:
// the larger of this bucket's and the last one's largest, a bucket being
// half the window.
void Engine::track_burst(SliceState& s, const TickContext& ctx, Explanation& x) const {
    const int64_t now = ctx.snap.timestamp_us;
    const uint64_t held = sat_sub(x.current, x.file);
    const uint64_t rise = s.have_held ? sat_sub(held, s.last_held) : 0;
    const auto half = static_cast<int64_t>(tun_.trim_burst_window_s * 1e6 / 2);
    if (s.burst_bucket_us < 0 || now - s.burst_bucket_us >= half) {
        s.burst_prev = s.burst_bucket_us >= 0 && now - s.burst_bucket_us < 2 * half ? s.burst_cur : 0;
        s.burst_cur = 0;
        s.burst_bucket_us = now;
    }
    s.burst_cur = std::max(s.burst_cur, rise);
    s.last_held = held;
    s.have_held = true;
    x.burst = std::max(s.burst_cur, s.burst_prev);
}

void Engine::track_child(SliceState& parent, const CgroupSample& cg, const TickContext& ctx) {
    const uint64_t count = cg.stat.known(StatKey::WorkingsetRefaultFile);
    auto [it, added] = parent.children.try_emplace(cg.unit);
    SliceState::ChildRefaults& c = it->second;
    if (!added && ctx.have_dt && c.seen_us >= 0)
        c.rate.update(counter_rate(count, c.count, ctx.dt_s), ctx.alpha);
    c.count = count;
    c.seen_us = ctx.snap.timestamp_us;
}

void Engine::trims_made(const std::vector<PlannedTrim>& made, int64_t at_us) {
    for (const PlannedTrim& t : made) {
        const auto it = state_.find(t.unit);
        if (it == state_.end())
            continue;
        SliceState& s = it->second;
        if (s.trim_watch_us < 0) {
            s.trim_watch_activate = s.activate_file;
            s.trim_watch_restore = s.restore_file;
            s.trim_watch_bytes = 0;
            s.trim_watch_start_us = at_us;
            // Each child (those of this tick's sample: step 7 forgot the
            // others) is watched against its own rate before the trim.
            for (auto& [child, c] : s.children) {
                c.watched = true;
                c.watch_from = c.count;
                c.watch_rate = c.rate.init ? c.rate.value : 0;
            }
        }
        s.trim_watch_us = at_us;
        s.trim_watch_bytes = sat_add(s.trim_watch_bytes, t.bytes);
    }
}

// After a trim, cache that comes back of at least trim_refault_fraction of
// the bytes trimmed says it was not cheap: the slice is left alone for
// trim_hold_s. "Comes back" as step 1 counts it: file refaults the kernel
// activates, with MGLRU only those that are also restores. Every refault
// would not do: a streamer refaults whatever it is, at the rate it reads.
// The watch ends trim_watch_s after the last trim.
// The pages that came back to the slice's children since the watch began:
// per watched child seen this tick, its file refaults beyond its rate before
// the trim (with trim_child_rate_slack of it again). On 6.12 refaults after
// a trim are not "recent" (the trim advanced min_seq), so the kernel neither
// activates nor restores them: only the child's own count tells a hot
// reader (no refaults before) from a streamer (a steady rate).
uint64_t Engine::child_refaults_back(const SliceState& s, int64_t now) const {
    const double elapsed_s = static_cast<double>(now - s.trim_watch_start_us) / 1e6;
    double back = 0;
    for (const auto& [child, c] : s.children) {
        if (!c.watched || c.seen_us != now)
            continue;
        const double expected = c.watch_rate * elapsed_s * (1 + tun_.trim_child_rate_slack);
        back += std::max(0.0, static_cast<double>(sat_sub(c.count, c.watch_from)) - expected);
    }
    return to_u64(back);
}

void Engine::watch_trims(SliceState& s, const TickContext& ctx, bool mglru, const std::string& unit,
                         Explanation& x, std::vector<std::string>& notes) const {
    const int64_t now = ctx.snap.timestamp_us;
    // A child not in this sample is gone (or services are not sampled):
    // forgotten, so the map holds only the slice's present children.
    std::erase_if(s.children, [&](const auto& kv) { return kv.second.seen_us != now; });
    if (s.trim_watch_us >= 0) {
        const uint64_t activated = sat_sub(s.activate_file, s.trim_watch_activate);
        const uint64_t restored = sat_sub(s.restore_file, s.trim_watch_restore);
        const uint64_t kernel_back = mglru ? std::min(activated, restored) : activated;
        const uint64_t children_back = child_refaults_back(s, now);
        const uint64_t back = std::max(kernel_back, children_back) * ctx.page;
        if (static_cast<double>(back) >= tun_.trim_refault_fraction * static_cast<double>(s.trim_watch_bytes)) {
            s.trim_hold_until_us = now + seconds_us(tun_.trim_hold_s);
            notes.push_back(fmt::format("{}: {} of the {} of cache trimmed came back ({}): not cheap, "
                                        "not trimmed for {} s",
                                        unit, format_bytes(back), format_bytes(s.trim_watch_bytes),
                                        children_back > kernel_back ? "refaults in its services beyond their rate before"
                                                                    : "activated refaults",
                                        static_cast<int>(tun_.trim_hold_s)));
            s.trim_watch_us = -1;
        } else if (now - s.trim_watch_us > seconds_us(tun_.trim_watch_s)) {
            s.trim_watch_us = -1;
        }
    }
    if (s.trim_hold_until_us > now)
        x.trim_hold_s = static_cast<double>(s.trim_hold_until_us - now) / 1e6;
}

void Engine::trim(TickContext& ctx, Plan& plan) const {
    const std::vector<bool> leaf = leaves(plan);
    for (size_t k = 0; k < plan.slices.size(); ++k) {
        PlanEntry& e = plan.slices[k];
        Explanation& x = e.x;
        SliceState& s = *ctx.state_of[k];
        track_burst(s, ctx, x);
        watch_trims(s, ctx, plan.mglru, e.unit, x, ctx.notes);
        x.trimmable = x.current > x.demand ? std::min(x.cheap_cache, x.current - x.demand) : 0;
        if (!e.parent && (x.target_low > 0 || x.target_min > 0))
            plan.trim_headroom = sat_add(plan.trim_headroom, x.burst);
    }
    plan.mem_free = ctx.snap.meminfo.mem_free;
    if (plan.trim_mechanism == TrimMechanism::None || !ctx.have_dt || !plan.mem_free ||
        *plan.mem_free >= plan.trim_headroom)
        return;
    uint64_t need = plan.trim_headroom - *plan.mem_free;
    if (need < tun_.trim_min_bytes)
        return;
    std::vector<size_t> order;
    for (size_t k = 0; k < plan.slices.size(); ++k) {
        const Explanation& x = plan.slices[k].x;
        if (leaf[k] && x.trim_hold_s <= 0 && x.trimmable >= tun_.trim_min_bytes)
            order.push_back(k);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return plan.slices[a].x.trimmable > plan.slices[b].x.trimmable; });
    uint64_t total = 0;
    for (const size_t k : order) {
        if (need < tun_.trim_min_bytes)
            break;
        PlanEntry& e = plan.slices[k];
        const auto part = to_u64(static_cast<double>(e.x.trimmable) * tun_.trim_step_fraction);
        const uint64_t step = round_down(
            std::min({e.x.trimmable, std::max(tun_.trim_min_bytes, part), tun_.trim_step_max_bytes, need}), ctx.page);
        if (step < tun_.trim_min_bytes)
            continue;
        e.x.trim = step;
        plan.trims.push_back({e.unit, e.cgroup, step});
        need -= step;
        total += step;
    }
    // The same words every tick it lasts: a note is a journal line when it
    // is new. The amounts are in the plan and explain.
    if (total > 0)
        ctx.notes.push_back(fmt::format("trimming cheap cache ({}): MemFree is below what the protected "
                                        "slices' bursts need",
                                        trim_mechanism_name(plan.trim_mechanism)));
}

}  // namespace memprotd
