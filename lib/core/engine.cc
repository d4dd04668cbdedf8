// SPDX-License-Identifier: LGPL-2.1-or-later
#include "engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "engine_steps.h"
#include "saturating.h"

namespace memprotd {

namespace {

std::string mib(uint64_t b) {
    return std::to_string(b >> 20) + " MiB";
}

}  // namespace

void Engine::Ewma::update(double sample, double alpha) {
    if (!init) {
        value = sample;
        init = true;
    } else {
        value += alpha * (sample - value);
    }
}

Engine::Engine(Config config, EngineTunables tunables) : config_(std::move(config)), tun_(tunables) {}

void Engine::set_config(Config config) {
    config_ = std::move(config);
    policy_cache_.clear();
}

Plan Engine::tick(const Snapshot& snap, const KernelFeatures& features, const CurrentProtections& current,
                  uint64_t memory_total_override) {
    Plan plan;
    plan.timestamp_us = snap.timestamp_us;
    plan.memory_total = memory_total_override ? memory_total_override : snap.meminfo.mem_total;
    plan.swap = snap.meminfo.swap_total > 0 && snap.meminfo.swap_free > 0;
    TickContext ctx{.snap = snap, .dc = config_.daemon};
    ctx.page = features.page_size ? features.page_size : tun_.page_size;

    start_tick(ctx, plan);
    select_slices(ctx, plan);
    estimate(ctx, plan);
    budget_feedback(ctx, plan);
    const double dt_s = ctx.dt_s;
    const double interval_s = ctx.interval_s;
    const bool have_dt = ctx.have_dt;
    const auto& state_of = ctx.state_of;
    const auto& cgroup_of = ctx.cgroup_of;
    auto& sl = plan.slices;
    const SiblingGroups children = sibling_groups(sl);
    allocate(plan, children);

    // Step 6: damping, per sibling group, with the group's room being what
    // the parent will have after this tick.
    for (size_t k = 0; k < sl.size(); ++k) {
        const auto it = current.find(sl[k].unit);
        const auto& cg = snap.cgroups[cgroup_of[k]];
        sl[k].x.prior = it != current.end() ? it->second : UnitProtection{cg.low, cg.min};
    }
    // Per slice: how far it may move now, from the time since it last moved
    // (capped, so a long quiet spell does not allow a jump).
    std::vector<uint64_t> grow_limit(sl.size()), shrink_limit(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
        const double since =
            static_cast<double>(snap.timestamp_us - state_of[k]->last_change_us) / 1e6;
        // The cap never stops a minimum step from coming due: on a small
        // host 1% of the budget is less than min_step_bytes.
        const double grow_rate = tun_.grow_fraction_per_10s * static_cast<double>(plan.budget) / 10.0;
        const double shrink_rate = tun_.shrink_fraction_per_min * static_cast<double>(plan.budget) / 60.0;
        const double min_step_d = static_cast<double>(tun_.min_step_bytes);
        grow_limit[k] = to_u64(std::min(grow_rate * std::max(since, dt_s),
                                        std::max(grow_rate * std::max(dt_s, 10.0), min_step_d)));
        shrink_limit[k] = to_u64(std::min(shrink_rate * std::max(since, dt_s),
                                          std::max(shrink_rate * std::max(dt_s, 60.0), min_step_d)));
    }
    const uint64_t min_step = tun_.min_step_bytes;
    // 64 MiB is noise on a big host and 7% of a 1 GiB one.
    const uint64_t small_host_band = std::min(
        tun_.deadband_bytes, to_u64(static_cast<double>(plan.memory_total) * tun_.deadband_memory_fraction));

    auto damp = [&](const std::vector<size_t>& group, uint64_t room, uint64_t min_room) {
        // MemoryMin follows its target at once (floors are the user's hard
        // guarantees) but never beyond what the parent holds.
        long double min_sum = 0;
        for (size_t k : group)
            min_sum += sl[static_cast<size_t>(k)].x.target_min;
        for (size_t k : group) {
            auto& x = sl[static_cast<size_t>(k)].x;
            x.next.memory_min = min_sum > min_room
                                    ? to_u64(static_cast<double>(x.target_min * static_cast<long double>(min_room) / min_sum))
                                    : x.target_min;
        }
        uint64_t prior_sum = 0;
        for (size_t k : group)
            prior_sum = sat_add(prior_sum, sl[static_cast<size_t>(k)].x.prior.memory_low);
        const bool over = prior_sum > room;

        // Decreases (and holds) first.
        uint64_t committed = 0;
        uint64_t want_sum = 0;
        for (size_t k : group) {
            auto& x = sl[static_cast<size_t>(k)].x;
            const uint64_t c = x.prior.memory_low;
            const uint64_t t = x.target_low;
            const uint64_t band = std::max(small_host_band, to_u64(static_cast<double>(t) * tun_.deadband_fraction));
            // Decreases the user or the budget demand go at once; those that
            // follow the estimates wait until the wish has lasted, and then
            // go no lower than the largest target of the last hold period, so
            // a dip of a tick or two is not written. The wish lasts in
            // sampled time: a gap in the samples longer than two intervals
            // (memprotd or the whole machine stopped) does not count at all,
            // because what the estimates say just after one is the least
            // reliable (seen in the guest: after a 23 s stop every
            // generation of a busy table looked older than the window, and
            // its working set read 5 MiB of 386 for a tick; while gaps still
            // counted two intervals, a collapse to 287 MiB of 386 was
            // written 5 s after a 14 s stop and a D-Bus call that timed out).
            auto& st = *state_of[static_cast<size_t>(k)];
            const bool urgent = over || t < x.target_min || c > x.max_protection;
            const bool wants_shrink = t <= c && (c - t > band || urgent);
            if (!wants_shrink) {
                st.shrink_wanted_s = -1;
                st.shrink_targets.clear();
            } else {
                if (st.shrink_wanted_s < 0) {
                    st.shrink_wanted_s = 0;  // the targets were cleared when the last wish ended
                } else if (have_dt && dt_s <= std::max(2 * interval_s, 1.0)) {
                    // Longer than two intervals (and a second: ticks that take
                    // longer than a very short Interval= are not gaps) is a
                    // gap, and the wish's clock stands still over it; the
                    // targets before it stay in the window.
                    st.shrink_wanted_s += dt_s;
                }
                // The largest target over the hold, kept as a decreasing
                // sequence (a sliding-window maximum): a target no larger
                // than a newer one can never be the maximum again.
                auto& q = st.shrink_targets;
                while (!q.empty() && q.back().second <= t)
                    q.pop_back();
                q.emplace_back(st.shrink_wanted_s, t);
                while (st.shrink_wanted_s - q.front().first > tun_.shrink_hold_s)
                    q.erase(q.begin());
            }
            const double wished_s = std::max(0.0, st.shrink_wanted_s);
            uint64_t held = t;  // the target a decrease may go to now
            if (wants_shrink && !urgent)
                held = std::min(c, std::max(t, st.shrink_targets.front().second));
            if (wants_shrink && !urgent && wished_s < tun_.shrink_hold_s) {
                x.next.memory_low = c;
                x.damping = "holding: a decrease is written once it has been wanted for " +
                            std::to_string(static_cast<int>(tun_.shrink_hold_s)) + " s (" +
                            std::to_string(static_cast<int>(wished_s)) + " s so far)";
                committed = sat_add(committed, c);
            } else if (t <= c) {
                if (held > t && c - held <= band && !over) {
                    x.next.memory_low = c;
                    x.damping = "holding: the largest target of the last " +
                                std::to_string(static_cast<int>(tun_.shrink_hold_s)) + " s was " + mib(held);
                } else if (c - t <= band && !over && t >= x.target_min) {
                    x.next.memory_low = c;
                    if (c != t)
                        x.damping = "within the deadband (" + mib(c - t) + " ≤ " + mib(band) + ")";
                } else if (held > t && c - held <= shrink_limit[static_cast<size_t>(k)]) {
                    x.next.memory_low = round_down(held, tun_.round_bytes);
                    x.damping = "shrinking to the largest target of the last " +
                                std::to_string(static_cast<int>(tun_.shrink_hold_s)) + " s";
                } else if (over || c - t <= shrink_limit[static_cast<size_t>(k)] || t < x.target_min ||
                           c > x.max_protection) {
                    // The rate limit damps the estimates' noise; a value above
                    // the slice's MaxProtection= is the administrator's
                    // decision and goes at once.
                    x.next.memory_low = t;
                    if (over)
                        x.damping = "current values exceed the budget: shrinking without rate limit";
                    else if (c > x.max_protection)
                        x.damping = "above MaxProtection=: shrinking without rate limit";
                } else if (shrink_limit[static_cast<size_t>(k)] < min_step) {
                    x.next.memory_low = c;
                    x.damping = "shrinking slowly: waiting until a step of " + mib(min_step) + " is due";
                } else {
                    x.next.memory_low = c - round_down(shrink_limit[static_cast<size_t>(k)], tun_.round_bytes);
                    x.damping = "shrink limited to " + mib(c - x.next.memory_low) + " this tick";
                }
                committed = sat_add(committed, x.next.memory_low);
            } else {
                committed = sat_add(committed, c);
                if (t - c <= band) {
                    x.next.memory_low = c;
                    x.damping = "within the deadband (" + mib(t - c) + " ≤ " + mib(band) + ")";
                } else {
                    want_sum += std::min(t - c, grow_limit[static_cast<size_t>(k)]);
                }
            }
        }
        // Values already above the room (set by someone else, or a parent
        // that is still growing towards its target) shrink to fit it now.
        if (committed > room) {
            const long double scale = static_cast<long double>(room) / committed;
            committed = 0;
            for (size_t k : group) {
                auto& x = sl[static_cast<size_t>(k)].x;
                if (x.target_low > x.prior.memory_low)
                    continue;
                x.next.memory_low = round_down(
                    to_u64(static_cast<double>(static_cast<long double>(x.next.memory_low) * scale)), tun_.round_bytes);
                x.damping = "scaled down to fit the room of " + mib(room) + " its group has now";
                committed = sat_add(committed, x.next.memory_low);
            }
        }
        // Then increases, within the rate limit and the room left.
        const uint64_t avail = sat_sub(room, committed);
        for (size_t k : group) {
            auto& x = sl[static_cast<size_t>(k)].x;
            const uint64_t c = x.prior.memory_low;
            const uint64_t t = x.target_low;
            if (t <= c || !x.damping.empty())
                continue;
            uint64_t step = std::min(t - c, grow_limit[static_cast<size_t>(k)]);
            if (want_sum > avail) {
                step = to_u64(static_cast<double>(step) * static_cast<double>(avail) / static_cast<double>(want_sum));
                x.damping = "held to the budget's free room (" + mib(avail) + " for " + mib(want_sum) + " asked)";
            } else if (step < t - c) {
                x.damping = "grow limited to " + mib(step) + " this tick";
            }
            if (step < t - c)
                step = round_down(step, tun_.round_bytes);
            if (step < std::min(t - c, min_step)) {
                step = 0;
                x.damping = want_sum > avail ? x.damping : "growing slowly: waiting until a step of " + mib(min_step) + " is due";
            }
            x.next.memory_low = c + step;
        }
        // MemoryLow below MemoryMin would only confuse readers of the unit;
        // raising it may take room an increase above was given, so take that
        // back first and scale everything only as the last resort.
        uint64_t total = 0;
        for (size_t k : group) {
            auto& x = sl[static_cast<size_t>(k)].x;
            x.next.memory_low = std::max(x.next.memory_low, x.next.memory_min);
            total = sat_add(total, x.next.memory_low);
        }
        for (size_t k : group) {
            if (total <= room)
                break;
            auto& x = sl[static_cast<size_t>(k)].x;
            const uint64_t base = std::max(x.prior.memory_low, x.next.memory_min);
            if (x.next.memory_low > base) {
                const uint64_t take = std::min(total - room, x.next.memory_low - base);
                x.next.memory_low -= take;
                total -= take;
            }
        }
        if (total > room) {
            const long double scale = static_cast<long double>(room) / total;
            for (size_t k : group) {
                auto& x = sl[static_cast<size_t>(k)].x;
                x.next.memory_low = to_u64(static_cast<double>(x.next.memory_low * scale));
                x.next.memory_min = std::min(x.next.memory_min, x.next.memory_low);
                x.damping = "scaled down to fit the room of " + mib(room) + " its group has now";
            }
        }
    };
    damp(children[sl.size()], plan.budget, plan.budget);
    for (size_t k = 0; k < sl.size(); ++k)
        if (!children[k].empty())
            damp(children[k], sl[k].x.next.memory_low, std::min(sl[k].x.next.memory_low, sl[k].x.next.memory_min));

    for (size_t k = 0; k < sl.size(); ++k)
        if (sl[k].write())
            state_of[k]->last_change_us = snap.timestamp_us;

    // Writes: every decrease, deepest first, then every increase, shallowest
    // first, so no parent is ever below the sum of its children and no group
    // is ever above its budget between two calls.
    std::vector<size_t> order(sl.size());
    for (size_t k = 0; k < sl.size(); ++k)
        order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sl[a].depth > sl[b].depth; });
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

    finish_tick(ctx);
    return plan;
}

void Engine::start_tick(TickContext& ctx, Plan& plan) {
    const Snapshot& snap = ctx.snap;
    // Elapsed time drives rates (only with a previous sample) and the damping
    // rate limits (a first tick counts as one interval).
    ctx.interval_s = static_cast<double>(ctx.dc.interval_us) / 1e6;
    ctx.dt_s = ctx.interval_s;
    if (have_tick_ && snap.timestamp_us > last_tick_us_) {
        ctx.dt_s = static_cast<double>(snap.timestamp_us - last_tick_us_) / 1e6;
        ctx.have_dt = true;
    }
    ctx.alpha = 1.0 - std::exp(-ctx.dt_s / tun_.rate_time_constant_s);

    // Budget feedback is AIMD: regrow here, maybe cut in budget_feedback().
    if (snap.host_pressure) {
        const uint64_t total = snap.host_pressure->some.total_us;
        if (host_psi_have_prev_ && ctx.have_dt && total >= host_psi_prev_us_)
            ctx.host_psi = static_cast<double>(total - host_psi_prev_us_) / (ctx.dt_s * 1e6);
        host_psi_prev_us_ = total;
        host_psi_have_prev_ = true;
    }
    if (ctx.have_dt)
        budget_factor_ = std::min(1.0, budget_factor_ + tun_.feedback_regrow_per_min * ctx.dt_s / 60.0);

    // An unset Budget= (a config built by hand) falls back to the shipped default.
    plan.budget_configured =
        ctx.dc.budget.resolve(plan.memory_total, DaemonConfig{}.budget.resolve(plan.memory_total));
    plan.budget_configured = std::min(plan.budget_configured, plan.memory_total);
}

void Engine::select_slices(TickContext& ctx, Plan& plan) {
    const Snapshot& snap = ctx.snap;
    // Managed slices: matched by a policy, or top level when so configured;
    // ancestors of a managed slice are managed too, because the kernel caps
    // protection by every ancestor's.
    const size_t n = snap.cgroups.size();
    std::vector<const EffectivePolicy*> policy(n, nullptr);
    std::vector<const std::shared_ptr<const std::vector<std::string>>*> sources(n, nullptr);
    std::vector<bool> managed(n, false);
    for (size_t i = 0; i < n; ++i) {
        const auto& cg = snap.cgroups[i];
        if (!is_slice_unit(cg.unit))
            continue;
        auto cached = policy_cache_.find(cg.unit);
        if (cached == policy_cache_.end()) {
            EffectivePolicy p = config_.policy_for(cg.unit);
            auto shared = std::make_shared<const std::vector<std::string>>(p.sources);
            cached = policy_cache_.emplace(cg.unit, CachedPolicy{std::move(p), std::move(shared)}).first;
        }
        policy[i] = &cached->second.policy;
        sources[i] = &cached->second.sources;
        managed[i] = policy[i]->manage &&
                     (policy[i]->matched || (cg.parent < 0 && ctx.dc.manage_top_level_slices));
    }
    for (size_t i = n; i-- > 0;) {
        if (!managed[i])
            continue;
        bool blocked = false;
        for (int p = snap.cgroups[i].parent; p >= 0; p = snap.cgroups[static_cast<size_t>(p)].parent)
            if (!policy[static_cast<size_t>(p)] || !policy[static_cast<size_t>(p)]->manage)
                blocked = true;
        if (blocked) {
            managed[i] = false;
            plan.notes.push_back(snap.cgroups[i].unit + " is not managed: an ancestor has Manage=no");
            continue;
        }
        for (int p = snap.cgroups[i].parent; p >= 0; p = snap.cgroups[static_cast<size_t>(p)].parent)
            managed[static_cast<size_t>(p)] = true;
    }

    plan.slices.reserve(n);
    std::vector<int> entry_of(n, -1);
    for (size_t i = 0; i < n; ++i) {
        if (!managed[i])
            continue;
        const auto& cg = snap.cgroups[i];
        PlanEntry e;
        e.unit = cg.unit;
        e.cgroup = cg.path;
        e.depth = cg.depth;
        e.parent = cg.parent >= 0 ? entry_of[static_cast<size_t>(cg.parent)] : -1;
        e.policy_sources = *sources[i];
        entry_of[i] = static_cast<int>(plan.slices.size());
        ctx.cgroup_of.push_back(i);
        ctx.policy_of.push_back(policy[i]);
        auto [it, fresh] = state_.try_emplace(cg.unit);
        if (fresh)  // as if written one interval ago: a first step is allowed at once
            it->second.last_change_us = snap.timestamp_us - static_cast<int64_t>(ctx.dc.interval_us);
        ctx.state_of.push_back(&it->second);
        plan.slices.push_back(std::move(e));
    }
}

void Engine::budget_feedback(TickContext& ctx, Plan& plan) {
    // Low events on several slices while the host stalls means reclaim had
    // nowhere cheap to go; protect less for a while.
    const int64_t now = ctx.snap.timestamp_us;
    if (ctx.low_event_slices >= tun_.feedback_min_slices && ctx.host_psi > tun_.feedback_psi &&
        (!have_cut_ || static_cast<double>(now - last_cut_us_) / 1e6 >= tun_.feedback_cooldown_s)) {
        budget_factor_ = std::max(tun_.feedback_min_factor, budget_factor_ * (1.0 - tun_.feedback_cut));
        last_cut_us_ = now;
        have_cut_ = true;
        plan.notes.push_back("budget cut: " + std::to_string(ctx.low_event_slices) +
                             " slices were reclaimed below MemoryLow while host memory pressure was " +
                             std::to_string(static_cast<int>(ctx.host_psi * 1000) / 10.0).substr(0, 4) + "%");
    }
    plan.budget_factor = budget_factor_;
    plan.budget = to_u64(static_cast<double>(plan.budget_configured) * budget_factor_);
}

void Engine::finish_tick(const TickContext& ctx) {
    if (policy_cache_.size() > 2 * ctx.snap.cgroups.size() + 64)
        policy_cache_.clear();
    // Forget slices that are gone, so a recreated one starts fresh.
    for (auto it = state_.begin(); it != state_.end();)
        it = it->second.last_seen_us != ctx.snap.timestamp_us ? state_.erase(it) : std::next(it);
    last_tick_us_ = ctx.snap.timestamp_us;
    have_tick_ = true;
}

}  // namespace memprotd
