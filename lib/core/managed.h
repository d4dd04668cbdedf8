// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Which slices the engine manages. The engine plans for exactly these, and
// the daemon asks systemd for their present values before a tick; both call
// select_managed() so they cannot disagree.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "config.h"
#include "model.h"

namespace memprotd {

struct ManagedSelection {
    std::vector<bool> managed;   // per index into the cgroups
    // Slices that would be managed but have an ancestor with Manage=no, by
    // descending index.
    std::vector<size_t> blocked;
    // Slices in kubelet's tree (kubelet_owns) that no policy names and that
    // are not managed as an ancestor, by ascending index.
    std::vector<size_t> kubelet;
};

// kubepods.slice and every slice below it (systemd names them
// kubepods-*.slice): with Kubernetes Memory QoS, kubelet sets and
// reconciles memory.min/memory.low there.
bool kubelet_owns(std::string_view unit);

// Why kubelet_owns() slices are left alone, for notes and explanations.
inline constexpr std::string_view kKubeletOwnsWhy =
    "kubelet owns memory.min and memory.low in kubepods.slice and the slices below it "
    "(Kubernetes Memory QoS) and sets them back when another writer changes them";

// A slice is managed when its policy says Manage=yes and it matched a policy
// or is at top level with `manage_top_level_slices` — in kubelet's tree only
// when a policy names it exactly, a glob is not enough — unless an ancestor
// is not a slice unit or has Manage=no; every ancestor of a managed slice is
// managed too, because the kernel caps protection by every ancestor's.
// `policy[i]` is the policy of `cgroups[i]`, null when it is not a slice
// unit. `cgroups` lists parents before children, as Snapshot::cgroups does.
// Pure.
ManagedSelection select_managed(const std::vector<CgroupSample>& cgroups,
                                const std::vector<const EffectivePolicy*>& policy, bool manage_top_level_slices);

}  // namespace memprotd
