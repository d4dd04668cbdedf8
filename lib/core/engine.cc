// SPDX-License-Identifier: LGPL-2.1-or-later
#include "engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "aging.h"
#include "engine_steps.h"
#include "managed.h"
#include "saturating.h"
#include "trim.h"

namespace memprotd {

namespace {

// Plan::unmanaged from a selection, and the notes that say so: one per slice
// below a Manage=no, one for all of kubelet's tree.
void record_unmanaged(const std::vector<CgroupSample>& cgroups, const ManagedSelection& sel, Plan& plan) {
    std::vector<std::pair<size_t, Unmanaged>> left;
    for (size_t i : sel.blocked) {
        plan.notes.push_back(cgroups[i].unit + " is not managed: an ancestor has Manage=no");
        left.emplace_back(i, Unmanaged::AncestorManageNo);
    }
    for (size_t i : sel.kubelet)
        left.emplace_back(i, Unmanaged::Kubelet);
    std::sort(left.begin(), left.end());
    for (const auto& [i, why] : left)
        plan.unmanaged.push_back(UnmanagedSlice{cgroups[i].unit, why});
    if (sel.kubelet.empty())
        return;
    const size_t more = sel.kubelet.size() - 1;
    plan.notes.push_back(fmt::format("{}{} not managed: {}; a policy whose [Match] Slice= names one of them "
                                     "exactly makes it managed",
                                     cgroups[sel.kubelet.front()].unit,
                                     more ? fmt::format(" and {} more slice(s) are", more) : " is",
                                     kKubeletOwnsWhy));
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
    slots_.clear();
}

Plan Engine::tick(const Snapshot& snap, const KernelFeatures& features, const CurrentProtections& current,
                  uint64_t memory_total_override) {
    Plan plan;
    plan.timestamp_us = snap.timestamp_us;
    plan.memory_total = memory_total_override ? memory_total_override : snap.meminfo.mem_total;
    plan.swap = snap.meminfo.swap_total > 0 && snap.meminfo.swap_free > 0;
    plan.mglru = features.mglru_enabled;
    plan.low_defers = memory_low_defers(features);
    TickContext ctx{.snap = snap, .dc = config_.daemon, .current = current};
    ctx.page = features.page_size ? features.page_size : tun_.page_size;

    start_tick(ctx, plan);
    select_slices(ctx, plan);
    budget_feedback(ctx, plan);
    const SiblingGroups groups(plan.slices);
    allocate(plan, groups);
    damp(ctx, groups, plan);
    order_writes(plan);
    if (config_.daemon.working_set_aging)
        hold_aging(plan);
    plan.trim_mechanism = trim_mechanism(config_.daemon.trim_cheap_cache, features);
    trim(ctx, plan);
    finish_tick(ctx);
    for (std::string& note : ctx.notes)
        plan.notes.push_back(std::move(note));
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

Engine::Slot& Engine::slot_for(size_t index, const std::string& unit) {
    Slot& slot = slots_[index];
    if (slot.policy && slot.unit == unit)
        return slot;
    auto cached = policy_cache_.find(unit);
    if (cached == policy_cache_.end()) {
        EffectivePolicy p = config_.policy_for(unit);
        auto shared = std::make_shared<const std::vector<std::string>>(p.sources);
        cached = policy_cache_.emplace(unit, CachedPolicy{std::move(p), std::move(shared)}).first;
    }
    slot.unit = unit;
    slot.policy = &cached->second;
    slot.state = nullptr;
    return slot;
}

std::vector<const EffectivePolicy*> Engine::policies(const Snapshot& snap) {
    const size_t n = snap.cgroups.size();
    slots_.resize(n);
    std::vector<const EffectivePolicy*> policy(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
        const auto& cg = snap.cgroups[i];
        if (is_slice_unit(cg.unit))
            policy[i] = &slot_for(i, cg.unit).policy->policy;
    }
    return policy;
}

std::vector<bool> Engine::managed(const Snapshot& snap) {
    return select_managed(snap.cgroups, policies(snap), config_.daemon.manage_top_level_slices).managed;
}

void Engine::select_slices(TickContext& ctx, Plan& plan) {
    const Snapshot& snap = ctx.snap;
    const size_t n = snap.cgroups.size();
    const std::vector<const EffectivePolicy*> policy = policies(snap);
    const ManagedSelection sel = select_managed(snap.cgroups, policy, ctx.dc.manage_top_level_slices);
    record_unmanaged(snap.cgroups, sel, plan);
    if (snap.lru_gen) {
        std::vector<uint64_t> window_ms(n, 0);
        for (size_t i = 0; i < n; ++i)
            if (sel.managed[i])
                window_ms[i] = working_set_window_us(*policy[i], ctx.dc) / 1000;
        ctx.lru_sums = lru_gen_sums(*snap.lru_gen, snap.cgroups, window_ms);
    }

    plan.slices.reserve(n);
    ctx.state_of.reserve(n);
    std::vector<std::optional<size_t>> entry_of(n);  // snapshot index → plan index, none when not managed
    for (size_t i = 0; i < n; ++i) {
        Slot& slot = slots_[i];
        const auto& cg = snap.cgroups[i];
        if (!sel.managed[i]) {
            slot.state = nullptr;  // its node may go in finish_tick
            if (const auto parent = cg.parent >= 0 ? entry_of[static_cast<size_t>(cg.parent)] : std::nullopt;
                parent && !is_slice_unit(cg.unit))
                track_child(*ctx.state_of[*parent], cg, ctx);
            continue;
        }
        PlanEntry e;
        e.unit = cg.unit;
        e.cgroup = cg.path;
        e.depth = cg.depth;
        // A managed slice's parent is managed, and came first.
        if (cg.parent >= 0)
            e.parent = entry_of[static_cast<size_t>(cg.parent)];
        e.policy_sources = slot.policy->sources;
        entry_of[i] = plan.slices.size();
        if (!slot.state) {
            auto [it, fresh] = state_.try_emplace(cg.unit);
            if (fresh)  // as if written one interval ago: a first step is allowed at once
                it->second.last_change_us = snap.timestamp_us - static_cast<int64_t>(ctx.dc.interval_us);
            slot.state = &it->second;
        }
        if (slot.state->last_seen_us != snap.timestamp_us) {
            slot.state->last_seen_us = snap.timestamp_us;
            ++ctx.states_seen;
        }
        ctx.state_of.push_back(slot.state);
        // The steps that need only the slice itself run here, while its
        // entry is still in cache.
        const auto it = ctx.current.find(cg.unit);
        e.x.prior = it != ctx.current.end() ? it->second : UnitProtection{cg.low, cg.min};
        estimate(ctx, plan, i, *policy[i], *slot.state, e);
        plan.slices.push_back(std::move(e));
    }
}

void Engine::budget_feedback(TickContext& ctx, Plan& plan) {
    // Low events on several slices while the host stalls means reclaim had
    // nowhere cheap to go; protect less for a while (EngineTunables::feedback_*).
    const int64_t now = ctx.snap.timestamp_us;
    if (!plan.low_defers && ctx.low_event_slices >= tun_.feedback_min_slices && ctx.host_psi > tun_.feedback_psi &&
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
    if (policy_cache_.size() > 2 * ctx.snap.cgroups.size() + 64) {
        policy_cache_.clear();
        slots_.clear();
    }
    // Forget slices that are gone, so a recreated one starts fresh. When
    // every node was seen this tick there is nothing to look for.
    if (ctx.states_seen != state_.size())
        for (auto it = state_.begin(); it != state_.end();)
            it = it->second.last_seen_us != ctx.snap.timestamp_us ? state_.erase(it) : std::next(it);
    last_tick_us_ = ctx.snap.timestamp_us;
    have_tick_ = true;
}

}  // namespace memprotd
