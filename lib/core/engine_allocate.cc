// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Steps 4-5 of a tick: nested floors, then the budget split top-down over
// each sibling group by water-filling.
#include <algorithm>
#include <span>
#include <vector>

#include "engine_steps.h"
#include "saturating.h"

namespace memprotd {

namespace {

struct Member {
    size_t entry;       // index into plan.slices
    uint64_t demand;
    uint64_t reserve;   // floor and MinProtection, within demand
    uint64_t floor;     // the part of the reserve that is hard (≤ reserve)
    long double weight;
    uint64_t keep = 0;  // keep_demand: what room left after every demand may add (≥ demand)
};

// What fill_levels gives one member: left at its reserve (no level was
// reached: nothing to share), capped at its demand, or at the level.
enum class Filled { Reserve, Demand, Level };
struct Fill {
    uint64_t bytes = 0;
    Filled how = Filled::Reserve;
};

// Above the reserves, each member gets reserve + λ·weight·demand, capped at
// its demand, for the one level λ at which `rem` is spent. A member caps at
// λ ≥ (demand − reserve) / (weight·demand); each that caps takes less than
// its share, so λ only rises as members cap, and one sweep in the order of
// that threshold finds the level: O(n log n). The one rule for sharing by
// weight and need: the budget split and the escalation cap both use it.
std::vector<Fill> fill_levels(const std::vector<Member>& members, long double rem) {
    const auto level = [&](size_t i) {
        const Member& m = members[i];
        return static_cast<long double>(m.demand - m.reserve) / (m.weight * static_cast<long double>(m.demand));
    };
    std::vector<Fill> out(members.size());
    std::vector<size_t> order;
    order.reserve(members.size());
    long double s = 0;
    for (size_t i = 0; i < members.size(); ++i) {
        out[i].bytes = std::min(members[i].demand, members[i].reserve);
        if (members[i].demand > members[i].reserve) {
            order.push_back(i);
            s += members[i].weight * static_cast<long double>(members[i].demand);
        }
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const long double la = level(a), lb = level(b);
        return la < lb || (la == lb && a < b);
    });
    size_t capped = 0;
    for (; capped < order.size() && s > 0 && rem > 0; ++capped) {
        const Member& m = members[order[capped]];
        if (m.reserve + rem * m.weight * m.demand / s < m.demand)
            break;
        rem -= m.demand - m.reserve;
        s -= m.weight * static_cast<long double>(m.demand);
        out[order[capped]] = {m.demand, Filled::Demand};
    }
    if (s <= 0 || rem <= 0)
        return out;
    for (size_t j = capped; j < order.size(); ++j) {
        const Member& m = members[order[j]];
        const long double alloc = m.reserve + rem * m.weight * m.demand / s;
        out[order[j]] = {std::min(m.demand, to_u64(static_cast<double>(alloc))), Filled::Level};
    }
    return out;
}

// fill_levels into the members' target_low; a member capped at its demand
// is bound by it (unless bound already), one at the level by nothing.
void fill_above_reserves(const std::vector<Member>& members, long double rem, std::vector<PlanEntry>& sl) {
    const std::vector<Fill> fill = fill_levels(members, rem);
    for (size_t i = 0; i < members.size(); ++i) {
        auto& x = sl[members[i].entry].x;
        x.target_low = fill[i].bytes;
        if (fill[i].how == Filled::Demand)
            x.bound = x.bound == Bound::None ? Bound::Demand : x.bound;
        else if (fill[i].how == Filled::Level)
            x.bound = Bound::None;
    }
}

// The room every demand leaves is lent to cold anon (engine_estimate.cc,
// keep_demand): each member gets demand + λ·weight·keep, capped at its
// keep, for the one λ at which the spare room is spent. Reclaim then takes
// cheap cache and unprotected memory before it swaps out a table's rarely
// read tail. Lent, not owed: when a demand grows, the split gives it the
// room first, and step 6 (damp_group) takes the lent part back at once. A
// member that gets room is bound by KeptAnon; the others keep their bound.
// Test: Engine.ColdAnonIsKeptWhileTheBudgetHasRoom.
void lend_spare_room(const std::vector<Member>& members, long double spare, std::vector<PlanEntry>& sl) {
    std::vector<Member> lend;
    std::vector<Bound> bounds;
    for (const Member& m : members)
        if (m.keep > m.demand) {
            lend.push_back({m.entry, m.keep, m.demand, 0, m.weight, m.keep});
            bounds.push_back(sl[m.entry].x.bound);
        }
    if (lend.empty() || spare <= 0)
        return;
    fill_above_reserves(lend, spare, sl);
    for (size_t i = 0; i < lend.size(); ++i) {
        auto& x = sl[lend[i].entry].x;
        x.bound = x.target_low > lend[i].reserve ? Bound::KeptAnon : bounds[i];
    }
}

// Everyone gets their demand if the sum fits, and the room left is lent to
// cold anon. Otherwise reserves first (when even they do not fit: floors
// whole, MinProtection shares the rest), then the rest in proportion to
// weight × demand, capping members at their demand and handing what they
// leave to the others. Sets target_low and bound.
// Tests: Engine.HigherWeightNeverGetsLess, Engine.KeepsSiblingsWithinBudgetWhenOvercommitted,
// Engine.MinProtectionIsReservedBeforeTheSplit.
void water_fill(const std::vector<Member>& members, uint64_t budget, std::vector<PlanEntry>& sl) {
    long double demand_sum = 0, reserve_sum = 0;
    for (const auto& m : members) {
        demand_sum += m.demand;
        reserve_sum += m.reserve;
    }
    if (demand_sum <= budget) {
        for (const auto& m : members) {
            auto& x = sl[m.entry].x;
            x.target_low = m.demand;
            if (x.bound == Bound::None)
                x.bound = Bound::Demand;
        }
        lend_spare_room(members, static_cast<long double>(budget) - demand_sum, sl);
        return;
    }
    if (reserve_sum > budget) {
        long double floor_sum = 0;
        for (const auto& m : members)
            floor_sum += m.floor;
        const long double soft_sum = reserve_sum - floor_sum;
        const long double soft_room = budget > floor_sum ? budget - floor_sum : 0;
        for (const auto& m : members) {
            auto& x = sl[m.entry].x;
            const long double soft = soft_sum > 0 ? (m.reserve - m.floor) * soft_room / soft_sum : 0;
            x.target_low = std::min(m.reserve, m.floor + to_u64(static_cast<double>(soft)));
            x.bound = Bound::Budget;
        }
        return;
    }
    fill_above_reserves(members, static_cast<long double>(budget) - reserve_sum, sl);
}

// Floors are hard and nest: a parent's floor covers its children's, and no
// demand is below its floor. An escalated MemoryMin= is a floor too.
// Returns the nested floors.
// Test: Engine.FloorBecomesMemoryMinAndIsReserved.
std::vector<uint64_t> nest_floors(std::vector<PlanEntry>& sl) {
    std::vector<uint64_t> floor_eff(sl.size());
    for (size_t k = sl.size(); k-- > 0;) {
        floor_eff[k] = std::max(floor_eff[k], std::max(sl[k].x.floor, sl[k].x.escalated_min));
        if (const auto p = sl[k].parent)
            floor_eff[*p] += floor_eff[k];
    }
    for (size_t k = 0; k < sl.size(); ++k) {
        sl[k].x.floor = floor_eff[k];
        sl[k].x.demand = std::max(sl[k].x.demand, floor_eff[k]);
        sl[k].x.keep_demand = std::max(sl[k].x.keep_demand, sl[k].x.demand);
    }
    return floor_eff;
}

// One sibling group shares `group_budget`: floors first (scaled when they
// do not fit), then water-filling; targets rounded down but never below
// the floor.
void split_group(std::span<const size_t> group, uint64_t group_budget, const std::vector<uint64_t>& floor_eff,
                 uint64_t round_bytes, std::vector<PlanEntry>& sl) {
    std::vector<Member> members;
    members.reserve(group.size());
    ByteSum floor_sum = 0;
    for (size_t k : group)
        floor_sum += floor_eff[k];
    for (size_t k : group) {
        auto& x = sl[k].x;
        x.group_budget = group_budget;
        x.target_min = floor_sum > group_budget ? share_of(group_budget, floor_eff[k], floor_sum) : floor_eff[k];
        const uint64_t reserve = std::min(x.demand, std::max(x.target_min, x.min_protection));
        members.push_back({k, x.demand, reserve, std::min(reserve, x.target_min), static_cast<long double>(x.weight),
                           x.keep_demand});
    }
    water_fill(members, group_budget, sl);
    for (size_t k : group) {
        auto& x = sl[k].x;
        x.target_low = std::max(round_down(x.target_low, round_bytes), x.target_min);
    }
}

// Nested floors, then the budget split top-down: siblings share their
// parent's target (the top level shares the budget), so a parent always
// covers its managed children.
// Test: Engine.ParentCoversItsManagedChildren.
void split_all(std::vector<PlanEntry>& sl, const SiblingGroups& groups, uint64_t budget, uint64_t round_bytes) {
    const std::vector<uint64_t> floor_eff = nest_floors(sl);
    split_group(groups.back(), budget, floor_eff, round_bytes, sl);
    for (size_t k = 0; k < sl.size(); ++k)
        if (!groups[k].empty())
            split_group(groups[k], sl[k].x.target_low, floor_eff, round_bytes, sl);
}

// Escalated MemoryMin= (engine_estimate.cc, escalate) is bounded twice.
// Each by what MemoryLow= alone would give its slice: the split with no
// escalation, run first on the same entries and then undone, so that a hard
// floor never takes what its siblings' weights and demands give them. All
// of them together by `share` of the budget, so that reclaim keeps somewhere
// to go: beyond it they share it as the budget is shared (fill_levels, by
// weight × escalation, each capped at its own), rounded down; a slice
// inside an escalated one keeps its part of that one's. A floor held ahead
// (escalation_ahead) holds its slice's whole working set or nothing: where
// MemoryLow= alone gives the slice less than that, it keeps MemoryLow= alone
// (escalation_partial), since part of a working set under MemoryMin= keeps
// no workload whole and only shrinks what reclaim can take from. Only ticks
// with an escalation pay for the first split.
// Tests: Engine.EscalationTakesNoMoreThanMemoryLowWouldGive,
// Engine.AFloorHeldAheadHoldsTheWholeWorkingSetOrNothing,
// Engine.AFloorHeldAheadStepsDownWithinWhatMemoryLowGives,
// Engine.EscalationsStayWithinTheirShareOfTheBudget,
// Engine.EscalationsShareTheirCapByWeight.
void cap_escalations(std::vector<PlanEntry>& sl, const SiblingGroups& groups, uint64_t budget, double share,
                     uint64_t round_bytes) {
    struct Kept {
        uint64_t escalated_min, floor, demand;
        Bound bound;
    };
    if (std::none_of(sl.begin(), sl.end(), [](const PlanEntry& e) { return e.x.escalated_min > 0; }))
        return;
    std::vector<Kept> kept;
    kept.reserve(sl.size());
    for (PlanEntry& e : sl) {
        kept.push_back({e.x.escalated_min, e.x.floor, e.x.demand, e.x.bound});
        e.x.escalated_min = 0;
    }
    split_all(sl, groups, budget, round_bytes);
    // A slice below an escalated one is inside that one's working set:
    // counted once, with its outermost escalated ancestor (outer[k]).
    std::vector<size_t> outer(sl.size());
    std::vector<Member> members;
    ByteSum sum = 0;
    for (size_t k = 0; k < sl.size(); ++k) {
        auto& x = sl[k].x;
        const uint64_t given = round_down(x.target_low, round_bytes);
        // The whole working set, not a floor above it that is still stepping down.
        const uint64_t whole = std::min(kept[k].escalated_min, round_down(x.working_set, round_bytes));
        x.escalation_partial = x.escalation_ahead && whole > given;
        x.escalated_min = x.escalation_partial ? 0 : std::min(kept[k].escalated_min, given);
        x.floor = kept[k].floor;
        x.demand = kept[k].demand;
        x.bound = kept[k].bound;
        outer[k] = k;
        if (const auto p = sl[k].parent; p && (outer[*p] != *p || sl[*p].x.escalated_min > 0))
            outer[k] = outer[*p];
        if (outer[k] == k && x.escalated_min > 0) {
            sum += x.escalated_min;
            members.push_back({k, x.escalated_min, 0, 0, static_cast<long double>(x.weight)});
        }
    }
    const uint64_t cap = to_u64(static_cast<double>(budget) * share);
    if (sum <= cap)
        return;
    std::vector<uint64_t> before(sl.size());
    for (size_t k = 0; k < sl.size(); ++k)
        before[k] = sl[k].x.escalated_min;
    const std::vector<Fill> fill = fill_levels(members, static_cast<long double>(cap));
    for (size_t i = 0; i < members.size(); ++i)
        sl[members[i].entry].x.escalated_min = round_down(fill[i].bytes, round_bytes);
    for (size_t k = 0; k < sl.size(); ++k) {
        const size_t o = outer[k];
        if (o != k && before[k] > 0)
            sl[k].x.escalated_min =
                round_down(share_of(sl[o].x.escalated_min, std::min(before[k], before[o]), before[o]), round_bytes);
    }
}

}  // namespace

SiblingGroups::SiblingGroups(const std::vector<PlanEntry>& sl) : start_(sl.size() + 2), members_(sl.size()) {
    // Counted, then placed in plan order: a stable counting sort by parent.
    const auto group_of = [&](size_t k) { return sl[k].parent.value_or(sl.size()); };
    for (size_t k = 0; k < sl.size(); ++k) ++start_[group_of(k) + 1];
    for (size_t g = 1; g < start_.size(); ++g) start_[g] += start_[g - 1];
    std::vector<size_t> next(start_.begin(), start_.end() - 1);
    for (size_t k = 0; k < sl.size(); ++k) members_[next[group_of(k)]++] = k;
}

void Engine::allocate(Plan& plan, const SiblingGroups& groups) const {
    auto& sl = plan.slices;
    cap_escalations(sl, groups, plan.budget, tun_.escalate_budget_share, tun_.round_bytes);
    split_all(sl, groups, plan.budget, tun_.round_bytes);
    for (size_t k : groups.back()) {
        plan.floors += sl[k].x.target_min;
        plan.demand_total = sat_add(plan.demand_total, sl[k].x.demand);
        plan.protected_total += sl[k].x.target_low;
    }
}

}  // namespace memprotd
