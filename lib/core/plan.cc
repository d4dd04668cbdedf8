// SPDX-License-Identifier: LGPL-2.1-or-later
#include "plan.h"

namespace memprotd {

std::string_view bound_name(Bound b) {
    switch (b) {
        case Bound::None: return "share";
        case Bound::Demand: return "demand";
        case Bound::MinProtection: return "MinProtection";
        case Bound::MaxProtection: return "MaxProtection";
        case Bound::Floor: return "Floor";
        case Bound::Budget: return "budget";
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
