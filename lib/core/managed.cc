// SPDX-License-Identifier: LGPL-2.1-or-later
#include "managed.h"

#include <optional>

namespace memprotd {

namespace {

std::optional<size_t> parent_of(const std::vector<CgroupSample>& cgroups, size_t i) {
    const int p = cgroups[i].parent;
    return p >= 0 ? std::optional<size_t>(static_cast<size_t>(p)) : std::nullopt;
}

}  // namespace

bool kubelet_owns(std::string_view unit) {
    return unit == "kubepods.slice" || (unit.starts_with("kubepods-") && unit.ends_with(".slice"));
}

ManagedSelection select_managed(const std::vector<CgroupSample>& cgroups,
                                const std::vector<const EffectivePolicy*>& policy, bool manage_top_level_slices) {
    const size_t n = cgroups.size();
    ManagedSelection sel;
    sel.managed.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
        const EffectivePolicy* p = policy[i];
        if (!p || !p->manage)
            continue;
        const bool by_default = !parent_of(cgroups, i) && manage_top_level_slices;
        sel.managed[i] = kubelet_owns(cgroups[i].unit) ? p->named : p->matched || by_default;
    }
    // Children before parents, so a parent marked managed by one child is
    // still checked for its own ancestors.
    // Tests: Engine.ManagesAncestorsOfMatchedSlices, Engine.LeavesSlicesWithManageNoAlone.
    for (size_t i = n; i-- > 0;) {
        if (!sel.managed[i])
            continue;
        bool blocked = false;
        for (auto p = parent_of(cgroups, i); p; p = parent_of(cgroups, *p))
            if (!policy[*p] || !policy[*p]->manage)
                blocked = true;
        if (blocked) {
            sel.managed[i] = false;
            sel.blocked.push_back(i);
            continue;
        }
        for (auto p = parent_of(cgroups, i); p; p = parent_of(cgroups, *p))
            sel.managed[*p] = true;
    }
    for (size_t i = 0; i < n; ++i)
        if (!sel.managed[i] && policy[i] && policy[i]->manage && !policy[i]->named && kubelet_owns(cgroups[i].unit))
            sel.kubelet.push_back(i);
    return sel;
}

}  // namespace memprotd
