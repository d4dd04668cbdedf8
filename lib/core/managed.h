// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Which slices the engine manages. The engine plans for exactly these, and
// the daemon asks systemd for their present values before a tick; both call
// select_managed() so they cannot disagree.
#pragma once

#include <cstddef>
#include <vector>

#include "config.h"
#include "model.h"

namespace memprotd {

struct ManagedSelection {
    std::vector<bool> managed;   // per index into the cgroups
    // Slices that would be managed but have an ancestor with Manage=no, by
    // descending index.
    std::vector<size_t> blocked;
};

// A slice is managed when its policy says Manage=yes and it matched a policy
// or is at top level with `manage_top_level_slices`, unless an ancestor is
// not a slice unit or has Manage=no; every ancestor of a managed slice is
// managed too, because the kernel caps protection by every ancestor's.
// `policy[i]` is the policy of `cgroups[i]`, null when it is not a slice
// unit. `cgroups` lists parents before children, as Snapshot::cgroups does.
// Pure.
ManagedSelection select_managed(const std::vector<CgroupSample>& cgroups,
                                const std::vector<const EffectivePolicy*>& policy, bool manage_top_level_slices);

}  // namespace memprotd
