// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Working-set aging: which memcgs to age through debugfs lru_gen so that
// their generations keep saying how recently their pages were used.
//
// MGLRU ages a memcg only when it reclaims from it. A slice memprotd protects
// is not reclaimed, so its generations stop being born and its whole usage
// looks as young as it was when protection began: memory a workload stopped
// touching never left its working set, and the protection never came back to
// the rest of the host (docs/engine.md, step 2, has the measurement).
// The kernel's documented answer (Documentation/admin-guide/mm/
// multigen_lru.rst, "Working set estimation") is a user-space agent that
// writes `+ memcg_id node_id max_gen_nr` every interval: the walk moves pages
// used since the last aging into the youngest generation, leaves the rest
// behind, and then makes a new, empty one (checked in the guest by
// VmKernel.AgingSeparatesTouchedFromUntouchedPages). Nothing is evicted.
// With the interval at half the slice's window (WorkingSetWindow=, its
// policy's or [Daemon]'s), generations younger than the window hold what was
// used within the last half to whole window, and the four the kernel keeps
// cover about one and a half windows. A cache's longer window is then aged
// less often: the walk of a large memcg is most of the daemon's cost.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model.h"
#include "plan.h"

namespace memprotd {

struct AgingRequest {
    uint64_t memcg_id = 0;
    int node = 0;
    uint64_t max_seq = 0;  // the youngest generation as read; the kernel makes max_seq + 1
    std::string path;      // for messages
    // The command for debugfs lru_gen: "+ memcg_id node_id max_seq".
    [[nodiscard]] std::string command() const;
};

// A managed slice (cgroup path relative to the cgroup2 root) and how often
// its memcgs are aged: half its working-set window.
struct AgedSlice {
    std::string_view cgroup;
    uint64_t interval_ms = 0;
};

// Where memory.low only defers reclaim (Plan::low_defers, MGLRU since 6.3),
// aging is itself a cost: it leaves the pages a slice did not touch within
// the interval in old generations, and MGLRU reclaim takes a memcg's old
// generations first while its memory.low defers it only once, so an aged
// protected slice loses its untouched tail where an unaged one would not
// (pilot-zipf-aging-6.12: memcached lost 27-17,582 pages a run to swap with
// aging, none without). A stale estimate costs only when the budget is
// contended: then a slice's overstated demand takes protection from
// another. So there a slice is left unaged (Explanation::aging_held) while
// it is within its protection (usage ≤ next MemoryLow) and no slice is
// contended (none is bound by its share of the budget or by scaled
// reserves: Bound::None, Bound::Budget). Elsewhere every slice is aged.
// Engine::tick calls this once the next values are known, when aging is on.
void hold_aging(Plan& plan);

// The plan's managed slices that are aged (not aging_held), each at half its
// working-set window (PlanEntry::working_set_window_us): the rule this
// file's head explains. The slices' cgroup strings stay the plan's; the
// plan must outlive them.
[[nodiscard]] std::vector<AgedSlice> aged_slices(const Plan& plan);

// One request per memcg and node whose youngest generation is at least its
// slice's `interval_ms` old and which holds pages, for memcgs that belong to
// one of the `managed` slices: the
// slice itself and the services and scopes in it, but not a slice below it
// that is not in `managed` (Manage=no, or a sibling of a policy's slice that
// only carries protection down) nor anything in such a slice. Dying memcgs
// (printed with ID 0) are never aged.
[[nodiscard]] std::vector<AgingRequest> plan_aging(const LruGen& lg, const std::vector<AgedSlice>& managed);

// The slice a memcg belongs to: its path up to and including the last
// component that ends in ".slice" ("/a.slice/b.slice/c.service" →
// "/a.slice/b.slice"); empty when there is none ("/init.scope", "/").
[[nodiscard]] std::string_view enclosing_slice(std::string_view path);

}  // namespace memprotd
