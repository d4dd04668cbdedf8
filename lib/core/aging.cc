// SPDX-License-Identifier: LGPL-2.1-or-later
#include "aging.h"

#include <fmt/format.h>

#include <algorithm>

namespace memprotd {

std::string AgingRequest::command() const { return fmt::format("+ {} {} {}", memcg_id, node, max_seq); }

namespace {

bool at_or_below(std::string_view p, std::string_view root) {
    if (root == "/")
        return true;
    return p == root || (p.size() > root.size() && p.substr(0, root.size()) == root && p[root.size()] == '/');
}

}  // namespace

std::vector<AgingRequest> plan_aging(const LruGen& lg, const std::vector<std::string>& roots, uint64_t interval_ms) {
    std::vector<AgingRequest> out;
    for (const LruGenMemcg& m : lg.memcgs) {
        // A removed cgroup whose memcg still holds pages is printed with ID
        // 0 (its ID is freed when it goes offline); the kernel cannot find
        // it by ID, so it cannot be aged.
        if (m.id == 0)
            continue;
        if (!std::any_of(roots.begin(), roots.end(), [&](const std::string& r) { return at_or_below(m.path, r); }))
            continue;
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
