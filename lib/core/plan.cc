// SPDX-License-Identifier: LGPL-2.1-or-later
#include "plan.h"

#include <fmt/format.h>

#include "saturating.h"

namespace memprotd {

uint64_t lent_to_cold_anon(const Explanation& x) {
    return x.bound == Bound::KeptAnon ? sat_sub(x.target_low, x.demand) : 0;
}

std::string_view bound_name(Bound b) {
    switch (b) {
        case Bound::None: return "share";
        case Bound::Demand: return "demand";
        case Bound::MinProtection: return "MinProtection";
        case Bound::MaxProtection: return "MaxProtection";
        case Bound::Floor: return "Floor";
        case Bound::Budget: return "budget";
        case Bound::KeptAnon: return "kept-anon";
    }
    return "?";
}

std::string damping_text(const Damping& d) {
    switch (d.kind) {
        case DampingKind::None: return {};
        case DampingKind::HoldingLargestTarget:
            return fmt::format("holding: the largest target of the last {} s was {} MiB", d.a, d.b);
        case DampingKind::Deadband: return fmt::format("within the deadband ({} MiB ≤ {} MiB)", d.a, d.b);
        case DampingKind::ShrinkingToLargestTarget:
            return fmt::format("shrinking to the largest target of the last {} s", d.a);
        case DampingKind::OverBudget: return "current values exceed the budget: shrinking without rate limit";
        case DampingKind::AboveMaxProtection: return "above MaxProtection=: shrinking without rate limit";
        case DampingKind::ShrinkingSlowly:
            return fmt::format("shrinking slowly: waiting until a step of {} MiB is due", d.a);
        case DampingKind::ShrinkLimited: return fmt::format("shrink limited to {} MiB this tick", d.a);
        case DampingKind::HoldingDecrease:
            return fmt::format("holding: a decrease is written once it has been wanted for {} s ({} s so far)", d.a,
                               d.b);
        case DampingKind::ScaledToRoom:
            return fmt::format("scaled down to fit the room of {} MiB its group has now", d.a);
        case DampingKind::HeldToFreeRoom:
            return fmt::format("held to the budget's free room ({} MiB for {} MiB asked)", d.a, d.b);
        case DampingKind::GrownAtOnce:
            return "grown at once to its anon working set and warm footprint; the rest at the rate limit";
        case DampingKind::GrowLimited: return fmt::format("grow limited to {} MiB this tick", d.a);
        case DampingKind::GrowingSlowly:
            return fmt::format("growing slowly: waiting until a step of {} MiB is due", d.a);
    }
    return "?";
}

std::string_view trim_mechanism_name(TrimMechanism m) {
    switch (m) {
        case TrimMechanism::None:
            return "none";
        case TrimMechanism::LruGen:
            return "lru-gen";
        case TrimMechanism::Reclaim:
            return "reclaim";
    }
    return "none";
}

std::string_view working_set_source_name(WorkingSetSource s) {
    return s == WorkingSetSource::LruGen ? "lru_gen" : "memory.stat";
}

const PlanEntry* Plan::find(std::string_view unit) const {
    for (const auto& e : slices)
        if (e.unit == unit)
            return &e;
    return nullptr;
}

const UnmanagedSlice* Plan::find_unmanaged(std::string_view unit) const {
    for (const auto& u : unmanaged)
        if (u.unit == unit)
            return &u;
    return nullptr;
}

const std::vector<std::string>& PlanEntry::sources() const {
    static const std::vector<std::string> kNone;
    return policy_sources ? *policy_sources : kNone;
}

}  // namespace memprotd
