// SPDX-License-Identifier: LGPL-2.1-or-later
#include "write_gate.h"

#include <algorithm>

namespace memprotd {

WriteGate::WriteGate(const Plan& plan)
    : plan_(plan), no_decrease_(plan.slices.size(), false), no_increase_(plan.slices.size(), false) {
    for (size_t i = 0; i < plan.slices.size(); ++i)
        index_.emplace(plan.slices[i].unit, i);
}

std::optional<size_t> WriteGate::index(std::string_view unit) const {
    const auto it = index_.find(unit);
    return it == index_.end() ? std::nullopt : std::optional<size_t>(it->second);
}

const PlanEntry* WriteGate::entry(std::string_view unit) const {
    const auto i = index(unit);
    return i ? &plan_.slices[*i] : nullptr;
}

bool WriteGate::allows(const PlannedWrite& w) const {
    const auto i = index(w.unit);
    if (w.decrease)
        return !(i && no_decrease_[*i]);
    if (increases_blocked_)
        return false;
    for (auto k = i; k; k = plan_.slices[*k].parent)
        if (no_increase_[*k])
            return false;
    return true;
}

void WriteGate::not_made(const PlannedWrite& w) {
    const auto i = index(w.unit);
    if (!i) {
        increases_blocked_ = true;
        std::fill(no_decrease_.begin(), no_decrease_.end(), true);
    } else if (w.decrease) {
        increases_blocked_ = true;
        for (auto p = plan_.slices[*i].parent; p; p = plan_.slices[*p].parent)
            no_decrease_[*p] = true;
    } else {
        no_increase_[*i] = true;
    }
}

}  // namespace memprotd
