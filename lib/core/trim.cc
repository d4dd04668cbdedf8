// SPDX-License-Identifier: LGPL-2.1-or-later
#include "trim.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "saturating.h"

namespace memprotd {

namespace {

bool at_or_below(std::string_view p, std::string_view path) {
    return p == path || (p.size() > path.size() && p.substr(0, path.size()) == path && p[path.size()] == '/');
}

struct Candidate {
    const LruGenMemcg* memcg = nullptr;
    int node = 0;
    uint64_t min_gen = 0;
    uint64_t old_file_pages = 0;
};

// The generations of `n` the kernel may evict (all but the two youngest:
// seq <= max_seq - 2) and their file pages; none if they hold none.
std::optional<Candidate> old_generations(const LruGenMemcg& m, const LruGenNode& n) {
    uint64_t max_seq = 0;
    for (const LruGeneration& g : n.generations)
        max_seq = std::max(max_seq, g.seq);
    if (max_seq < 2)
        return std::nullopt;
    Candidate c{&m, n.node, max_seq - 2, 0};
    for (const LruGeneration& g : n.generations)
        if (g.seq <= c.min_gen)
            c.old_file_pages = sat_add(c.old_file_pages, g.file_pages);
    if (c.old_file_pages == 0)
        return std::nullopt;
    return c;
}

bool have_lru_gen(const KernelFeatures& f) { return f.mglru_enabled && f.lru_gen_debugfs; }
bool have_reclaim(const KernelFeatures& f) { return f.memory_reclaim && kernel_at_least(f.kernel_release, 6, 11); }

}  // namespace

TrimMechanism trim_mechanism(TrimSetting setting, const KernelFeatures& f) {
    const bool lru = have_lru_gen(f), reclaim = have_reclaim(f);
    switch (setting) {
        case TrimSetting::LruGen:
            return lru ? TrimMechanism::LruGen : TrimMechanism::None;
        case TrimSetting::Reclaim:
            return reclaim ? TrimMechanism::Reclaim : TrimMechanism::None;
        case TrimSetting::No:
            return TrimMechanism::None;
        case TrimSetting::Auto:
            break;
    }
    return lru ? TrimMechanism::LruGen : reclaim ? TrimMechanism::Reclaim : TrimMechanism::None;
}

TrimChoice choose_trim(TrimSetting setting, const KernelFeatures& f) {
    if (setting == TrimSetting::No)
        return {TrimMechanism::None, "TrimCheapCache=no"};
    const bool lru = have_lru_gen(f);
    const bool reclaim = have_reclaim(f);
    const std::string lru_why = !f.mglru_enabled ? "MGLRU is off" : "debugfs lru_gen is not readable";
    const std::string reclaim_why =
        !f.memory_reclaim ? "no memory.reclaim"
                          : fmt::format("kernel {} has no memory.reclaim swappiness= (6.11+)", f.kernel_release);
    const TrimChoice by_lru{TrimMechanism::LruGen, "lru-gen: debugfs lru_gen evicts file pages, oldest first"};
    const TrimChoice by_reclaim{TrimMechanism::Reclaim, "reclaim: memory.reclaim swappiness=0"};
    switch (setting) {
        case TrimSetting::LruGen:
            return lru ? by_lru : TrimChoice{TrimMechanism::None, "TrimCheapCache=lru-gen, but " + lru_why};
        case TrimSetting::Reclaim:
            return reclaim ? by_reclaim : TrimChoice{TrimMechanism::None, "TrimCheapCache=reclaim, but " + reclaim_why};
        case TrimSetting::Auto:
        case TrimSetting::No:
            break;
    }
    if (lru)
        return by_lru;
    if (reclaim)
        return by_reclaim;
    return {TrimMechanism::None, fmt::format("no mechanism: {}; {}", lru_why, reclaim_why)};
}

std::string reclaim_command(uint64_t bytes) { return fmt::format("{} swappiness=0", bytes); }

std::string EvictRequest::command() const { return fmt::format("- {} {} {} 0 {}", memcg_id, node, min_gen, pages); }

std::vector<EvictRequest> plan_evictions(const LruGen& lg, std::string_view cgroup, uint64_t pages) {
    std::vector<Candidate> cands;
    uint64_t total = 0;
    for (const LruGenMemcg& m : lg.memcgs) {
        if (m.id == 0 || !at_or_below(m.path, cgroup))
            continue;
        for (const LruGenNode& n : m.nodes)
            if (auto c = old_generations(m, n)) {
                total = sat_add(total, c->old_file_pages);
                cands.push_back(*c);
            }
    }
    std::vector<EvictRequest> out;
    uint64_t left = pages;
    for (const Candidate& c : cands) {
        if (left == 0)
            break;
        // Its share, rounded up so that the shares cover `pages`.
        const auto share = static_cast<uint64_t>(
            std::ceil(static_cast<double>(pages) * static_cast<double>(c.old_file_pages) / static_cast<double>(total)));
        const uint64_t n = std::min({share, c.old_file_pages, left});
        if (n == 0)
            continue;
        out.push_back({c.memcg->id, c.node, c.min_gen, n, c.memcg->path});
        left -= n;
    }
    return out;
}

}  // namespace memprotd
