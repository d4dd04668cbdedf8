// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Trimming cheap cache (TrimCheapCache=): the mechanisms and their commands.
// The engine decides how much to trim from which slice (step 7,
// engine_trim.cc; docs/engine.md); this file says how the daemon asks the
// kernel for it. Pure: the daemon's TrimRunner writes the commands.
//
// Two mechanisms, both file pages only:
// - lru-gen: MGLRU's debugfs command "- MEMCG NODE MIN_GEN 0 NR" evicts up to
//   NR file pages (swappiness 0), oldest generation first, from the
//   generations up to MIN_GEN. MIN_GEN is max_seq - 2, the most the kernel
//   allows: the two youngest generations (what was used since the last two
//   agings) are never touched. Not "older than the window": a streamer's
//   single-use pages never get that old, and the engine already bounds how
//   much goes. Any kernel with MGLRU and debugfs (6.1 included).
// - reclaim: memory.reclaim "BYTES swappiness=0" (6.11+) reclaims file pages
//   only, the kernel's oldest first, but it cannot tell single-use pages from
//   hot ones, mapped or dirty ones included.
// auto takes lru-gen where it works, else reclaim, else none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "model.h"
#include "plan.h"

namespace memprotd {

// The mechanism TrimCheapCache= gives on a kernel, and in words why (for
// memprotctl status): "lru-gen (debugfs lru_gen, MGLRU on)", or why there
// is none ("TrimCheapCache=no", "kernel 6.1.0 has no memory.reclaim
// swappiness= (6.11+)" ...).
struct TrimChoice {
    TrimMechanism mechanism = TrimMechanism::None;
    std::string why;
};
[[nodiscard]] TrimChoice choose_trim(TrimSetting setting, const KernelFeatures& features);
// choose_trim's mechanism alone, without the words (every tick asks).
[[nodiscard]] TrimMechanism trim_mechanism(TrimSetting setting, const KernelFeatures& features);

// memory.reclaim's text for `bytes`: "BYTES swappiness=0".
[[nodiscard]] std::string reclaim_command(uint64_t bytes);

struct EvictRequest {
    uint64_t memcg_id = 0;
    int node = 0;
    uint64_t min_gen = 0;  // evict generations with seq <= min_gen
    uint64_t pages = 0;    // at most this many
    std::string path;      // for messages
    // The command for debugfs lru_gen: "- memcg_id node min_gen 0 pages".
    [[nodiscard]] std::string command() const;
};

// Evictions that take up to `pages` file pages from the memcgs at or below
// `cgroup` (a path as in LruGenMemcg::path), never from a memcg-node's two
// youngest generations, shared among the memcg-nodes in proportion to the
// file pages they hold in the older ones. Dying memcgs (ID 0) are skipped.
// Empty when no memcg-node has file pages outside its two youngest.
[[nodiscard]] std::vector<EvictRequest> plan_evictions(const LruGen& lg, std::string_view cgroup, uint64_t pages);

}  // namespace memprotd
