// SPDX-License-Identifier: LGPL-2.1-or-later
#include "aging.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace memprotd {

std::string AgingRequest::command() const { return fmt::format("+ {} {} {}", memcg_id, node, max_seq); }

std::string_view enclosing_slice(std::string_view path) {
    constexpr std::string_view kSuffix = ".slice";
    size_t end = 0;  // one past the last ".slice" component
    size_t pos = 0;
    while (pos < path.size()) {
        size_t next = path.find('/', pos + 1);
        if (next == std::string_view::npos)
            next = path.size();
        const std::string_view comp = path.substr(pos + 1, next - pos - 1);
        if (comp.size() > kSuffix.size() && comp.substr(comp.size() - kSuffix.size()) == kSuffix)
            end = next;
        pos = next;
    }
    return path.substr(0, end);
}

void hold_aging(Plan& plan) {
    const bool contended = std::any_of(plan.slices.begin(), plan.slices.end(), [](const PlanEntry& e) {
        return e.x.bound == Bound::None || e.x.bound == Bound::Budget;
    });
    for (PlanEntry& e : plan.slices)
        e.x.aging_held = plan.low_defers && !contended && e.x.current <= e.x.next.memory_low;
}

std::vector<AgedSlice> aged_slices(const Plan& plan) {
    std::vector<AgedSlice> out;
    out.reserve(plan.slices.size());
    for (const PlanEntry& e : plan.slices)
        if (!e.x.aging_held)
            out.push_back({e.cgroup, e.working_set_window_us / 2000});  // half the window, in ms
    return out;
}

std::vector<AgingRequest> plan_aging(const LruGen& lg, const std::vector<AgedSlice>& managed) {
    // Every memcg is looked up: a linear search would be slices × memcgs
    // compares a tick on a host with a thousand of each.
    std::unordered_map<std::string_view, uint64_t> interval_of;
    for (const AgedSlice& s : managed)
        interval_of.emplace(s.cgroup, s.interval_ms);
    std::vector<AgingRequest> out;
    for (const LruGenMemcg& m : lg.memcgs) {
        // A removed cgroup whose memcg still holds pages is printed with ID
        // 0 (its ID is freed when it goes offline); the kernel cannot find
        // it by ID, so it cannot be aged.
        if (m.id == 0)
            continue;
        const auto slice = interval_of.find(enclosing_slice(m.path));
        if (slice == interval_of.end())
            continue;
        const uint64_t interval_ms = slice->second;
        for (const LruGenNode& n : m.nodes) {
            if (n.generations.empty())
                continue;
            uint64_t pages = 0;
            uint64_t max_seq = 0;
            uint64_t youngest_ms = UINT64_MAX;
            for (const LruGeneration& g : n.generations) {
                pages += g.anon_pages + g.file_pages;
                max_seq = std::max(max_seq, g.seq);
                youngest_ms = std::min(youngest_ms, g.age_ms);
            }
            if (pages == 0 || youngest_ms < interval_ms)
                continue;
            out.push_back({m.id, n.node, max_seq, m.path});
        }
    }
    return out;
}

}  // namespace memprotd
