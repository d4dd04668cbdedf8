// SPDX-License-Identifier: LGPL-2.1-or-later
#include "applier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "format.h"
#include "model.h"
#include "write_gate.h"

namespace memprotd {

namespace {

constexpr int64_t kMaxBackoffUs = 5 * 60 * 1'000'000LL;

}  // namespace

Applier::Applier(Actuator& actuator, StateStore& state, std::function<int64_t()> now_us)
    : actuator_(actuator), state_(state), now_us_(std::move(now_us)) {}

bool Applier::due(const std::string& unit, int64_t now_us) const {
    const auto it = backoff_.find(unit);
    return it == backoff_.end() || now_us >= it->second.next_us;
}

void Applier::note_failure(const std::string& unit, int64_t now_us, uint64_t interval_us) {
    Backoff& b = backoff_[unit];
    b.failures = std::min(b.failures + 1, 30);
    const auto interval = static_cast<int64_t>(interval_us);
    const int64_t delay = std::min(kMaxBackoffUs, interval << std::min(b.failures - 1, 20));
    // Half an interval early, so "the next tick" is due despite timer jitter.
    b.next_us = now_us + delay - interval / 2;
}

bool Applier::knows_all(const std::vector<CgroupSample>& cgroups) const {
    return std::all_of(cgroups.begin(), cgroups.end(), [&](const CgroupSample& cg) {
        return !is_slice_unit(cg.unit) || current_.contains(cg.unit) || unmanaged_.contains(cg.unit);
    });
}

void Applier::refresh(const std::vector<CgroupSample>& cgroups, const std::vector<bool>& managed,
                      uint64_t interval_us, TickResult& result) {
    const int64_t t = now_us_();
    for (size_t i = 0; i < managed.size() && i < cgroups.size(); ++i) {
        const std::string& unit = cgroups[i].unit;
        if (!managed[i] && is_slice_unit(unit))
            unmanaged_.insert(unit);
        if (!managed[i] || current_.contains(unit) || !due(unit, t))
            continue;
        Result<UnitProtection> v = actuator_.get(unit);
        if (!v) {
            note_failure(unit, t, interval_us);
            spdlog::warn("{}: cannot read MemoryLow/MemoryMin from systemd: {}", unit, v.error().to_string());
            result.errors.push_back(v.error());
            // With the bus or systemd gone every call would wait for its
            // timeout; the watchdog must not be starved by hundreds of them.
            if (is_transport_error(v.error()))
                break;
            continue;
        }
        current_.insert_or_assign(unit, *v);
        // A unit recorded before holds what memprotd wrote (before a restart
        // too): what the cgroup must show unless another writer changed it.
        if (state_.has(unit))
            written_.try_emplace(unit, *v);
    }
}

Status Applier::write(const PlannedWrite& w, const PlanEntry* entry) {
    if (!state_.has(w.unit)) {
        Result<UnitProtection> prior = actuator_.get(w.unit);
        if (!prior)
            return prior.error();
        if (Status s = state_.record(w.unit, *prior); !s)
            return s;
        if (entry && *prior != entry->x.prior) {
            // The plan assumed other values than systemd has: write nothing
            // now and plan again from the truth.
            current_.insert_or_assign(w.unit, *prior);
            return Error{w.unit, 0, "", "systemd's values differ from the tree's; planning again"};
        }
    }
    if (Status s = actuator_.set(w.unit, w.values); !s)
        return s;
    current_.insert_or_assign(w.unit, w.values);
    written_.insert_or_assign(w.unit, w.values);
    differs_.erase(w.unit);
    return Ok{};
}

namespace {

// What the kernel keeps of a value written as memory.low or memory.min.
uint64_t as_kept(uint64_t v, uint64_t page_size) {
    return v == kUnlimited || page_size == 0 ? v : v - v % page_size;
}

}  // namespace

void Applier::check_writers(const std::vector<CgroupSample>& cgroups, uint64_t page_size) {
    if (written_.empty())
        return;
    for (const CgroupSample& cg : cgroups) {
        const auto w = written_.find(cg.unit);
        if (w == written_.end() || yielded_.contains(cg.unit))
            continue;
        const UnitProtection& wrote = w->second;
        const UnitProtection seen{cg.low, cg.min};
        if (seen.memory_low == as_kept(wrote.memory_low, page_size) &&
            seen.memory_min == as_kept(wrote.memory_min, page_size)) {
            differs_.erase(cg.unit);
            continue;
        }
        // One sample may precede systemd's write of what it was just told.
        if (++differs_[cg.unit] < 2)
            continue;
        spdlog::warn("{}: memory.low {} and memory.min {} in the cgroup, not the {} and {} memprotd wrote: another "
                     "writer changed them (kubelet, systemctl set-property, a script); memprotd leaves {} alone "
                     "until `systemctl reload memprotd` or `memprotctl reset {}`",
                     cg.unit, format_bytes(seen.memory_low), format_bytes(seen.memory_min),
                     format_bytes(wrote.memory_low), format_bytes(wrote.memory_min), cg.unit, cg.unit);
        if (Status s = state_.forget(cg.unit); !s)
            spdlog::warn("{}: cannot drop its record of prior values: {}", cg.unit, s.error().to_string());
        yielded_.insert_or_assign(cg.unit, YieldedUnit{wrote, seen});
        // The plan starts from what the slice has now, so its siblings'
        // room counts the other writer's values, not memprotd's old ones.
        current_.insert_or_assign(cg.unit, seen);
        written_.erase(w);
        differs_.erase(cg.unit);
    }
}

bool Applier::take_back(std::string_view unit) {
    const auto it = yielded_.find(unit);
    if (it == yielded_.end())
        return false;
    resume(it->first, it->second);
    yielded_.erase(it);
    return true;
}

void Applier::take_back_all() {
    for (const auto& [unit, y] : yielded_)
        resume(unit, y);
    yielded_.clear();
}

void Applier::resume(const std::string& unit, const YieldedUnit& y) {
    // What the other writer left is now the slice's prior value, and what
    // the plan starts from: systemd may still hold memprotd's old value, so
    // starting from systemd's would plan no write while the cgroup keeps
    // the other writer's.
    if (Status s = state_.record(unit, y.seen); !s)
        spdlog::warn("{}: cannot record its prior values: {}", unit, s.error().to_string());
    current_.insert_or_assign(unit, y.seen);
}

void Applier::restore_unmanaged(const Plan& plan, uint64_t interval_us, TickResult& result) {
    if (state_.entries().empty())
        return;
    std::set<std::string, std::less<>> managed;
    for (const PlanEntry& e : plan.slices)
        managed.insert(e.unit);
    const int64_t t = now_us_();
    std::vector<std::string> candidates;
    for (const auto& e : state_.entries())
        if (!managed.contains(e.unit) && due(e.unit, t) && !yielded_.contains(e.unit))
            candidates.push_back(e.unit);
    if (candidates.empty())
        return;
    const auto before = state_.entries().size();
    std::vector<Error> errors = state_.restore(actuator_, [&](const std::string& unit) {
        return std::find(candidates.begin(), candidates.end(), unit) != candidates.end();
    });
    for (const Error& e : errors) {
        note_failure(e.file, t, interval_us);
        spdlog::warn("cannot restore prior values: {}", e.to_string());
        result.errors.push_back(e);
    }
    for (const std::string& unit : candidates) {
        if (!state_.has(unit)) {
            spdlog::info("{}: no longer managed; prior MemoryLow/MemoryMin restored", unit);
            current_.erase(unit);
            backoff_.erase(unit);
            written_.erase(unit);
        }
    }
    result.restored += before - state_.entries().size();
}

std::vector<PlannedWrite> Applier::apply(const Plan& plan, uint64_t interval_us, TickResult& result) {
    std::vector<PlannedWrite> applied;
    restore_unmanaged(plan, interval_us, result);
    const int64_t t = now_us_();
    // Which writes a failed or deferred one blocks is WriteGate's rule (write_gate_test.cc);
    // tests: ManagerTest.StopsTheTicksIncreasesWhenADecreaseFails,
    // ManagerTest.RetriesAFailingUnitWithExponentialBackoffWithoutBlockingOthers.
    WriteGate gate(plan);
    for (const PlannedWrite& w : plan.writes) {
        if (yielded_.contains(w.unit)) {
            ++result.yielded;  // another writer's now: not made, and not a reason to stop others
            continue;
        }
        if (!gate.allows(w) || !due(w.unit, t)) {
            ++result.deferred;
        } else if (Status s = write(w, gate.entry(w.unit)); s) {
            ++result.applied;
            ++total_writes_;
            backoff_.erase(w.unit);
            applied.push_back(w);
            continue;
        } else {
            ++result.failed;
            note_failure(w.unit, t, interval_us);
            const int64_t next_in_us = backoff_.at(w.unit).next_us - t + static_cast<int64_t>(interval_us) / 2;
            spdlog::warn("{}: cannot set MemoryLow={} MemoryMin={}: {}; next attempt in {} s", w.unit,
                         w.values.memory_low, w.values.memory_min, s.error().to_string(), next_in_us / 1'000'000);
            result.errors.push_back(s.error());
        }
        gate.not_made(w);
    }
    return applied;
}

void Applier::forget_gone(const std::set<std::string_view>& present) {
    const auto gone = [&](const auto& entry) { return !present.contains(entry.first); };
    std::erase_if(current_, gone);
    std::erase_if(backoff_, [&](const auto& b) { return gone(b) && !state_.has(b.first); });
    std::erase_if(unmanaged_, [&](const std::string& unit) { return !present.contains(unit); });
    std::erase_if(written_, gone);
    std::erase_if(differs_, gone);
    std::erase_if(yielded_, gone);
}

}  // namespace memprotd
