// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Which of a plan's writes may still be made after some were not. The plan
// orders its writes (decreases deepest first, then increases shallowest
// first) so that no parent is below the sum of its children and no group
// above its room between two calls; a write that is not made (it failed, or
// was deferred) blocks exactly the later writes whose safety depended on it:
//  - a decrease not made blocks its ancestors' decreases and every increase
//    (the room they assumed is not free);
//  - an increase not made blocks the increases of its descendants;
//  - a write for a unit that is not in the plan blocks every later write
//    of a unit that is.
// Pure: the caller makes the writes and reports which were not made.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan.h"

namespace memprotd {

class WriteGate {
public:
    // `plan` must outlive the gate.
    explicit WriteGate(const Plan& plan);

    // The plan entry of `unit`, or null when the plan has none.
    [[nodiscard]] const PlanEntry* entry(std::string_view unit) const;
    // Whether `w` may be made, given the writes not made so far.
    [[nodiscard]] bool allows(const PlannedWrite& w) const;
    // Records that `w` was not made.
    void not_made(const PlannedWrite& w);

private:
    [[nodiscard]] std::optional<size_t> index(std::string_view unit) const;

    const Plan& plan_;
    std::map<std::string, size_t, std::less<>> index_;
    std::vector<bool> no_decrease_;
    std::vector<bool> no_increase_;  // on the entry itself; applies to its subtree
    bool increases_blocked_ = false;
};

}  // namespace memprotd
