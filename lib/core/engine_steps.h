// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Internal to the engine (lib/core/engine*.cc): what the steps of one
// Engine::tick share. Indices k are into Plan::slices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine.h"
#include "plan.h"

namespace memprotd {

// Pages younger than a slice's window in every memcg at or below it, the
// youngest generation's age over those memcgs, and whether any matched.
struct LruGenSum {
    bool found = false;
    uint64_t young_anon_pages = 0;
    uint64_t young_file_pages = 0;
    uint64_t youngest_age_ms = std::numeric_limits<uint64_t>::max();
};

struct Engine::TickContext {
    const Snapshot& snap;
    const DaemonConfig& dc;
    const CurrentProtections& current;  // systemd's values, tick()'s argument
    uint64_t page = 0;         // bytes per page
    double interval_s = 0;     // Interval=
    double dt_s = 0;           // since the last tick; one interval on the first
    bool have_dt = false;      // a previous tick exists, so rates can be taken
    double alpha = 0;          // EWMA weight of this sample
    double host_psi = 0;       // host PSI some over dt
    int low_event_slices = 0;  // slices reclaimed below MemoryLow this tick
    size_t states_seen = 0;    // nodes of state_ whose last_seen_us this tick set
    std::vector<SliceState*> state_of{};            // k → its node in state_ (stable until finish_tick)
    std::vector<std::string> notes{};               // the steps' plan notes, appended to Plan::notes
    // Per snapshot index, the lru_gen sums of the managed slices
    // (lru_gen_sums); empty without lru_gen.
    std::vector<LruGenSum> lru_sums{};
};

// groups[k]: the managed children of slice k; groups.back(): the top level;
// each in plan order. Two arrays, however many groups there are.
class SiblingGroups {
public:
    explicit SiblingGroups(const std::vector<PlanEntry>& slices);
    std::span<const size_t> operator[](size_t k) const {
        return {members_.data() + start_[k], start_[k + 1] - start_[k]};
    }
    std::span<const size_t> back() const { return (*this)[start_.size() - 2]; }

private:
    std::vector<size_t> start_;    // group g is members_[start_[g], start_[g + 1])
    std::vector<size_t> members_;  // plan indices, grouped by parent
};
// Per snapshot index, for the slices with a window (`window_ms[i]` > 0; 0
// for those not planned): the LruGenSum of the memcgs at or below it
// ("/a.slice" and "/a.slice/...", never "/a.slice-x"), a memcg counted as
// young by each slice's own window. Linear in memcgs and slices: each memcg
// goes to its nearest slice at or above it (a hash lookup per path
// component), then each slice's sums are added to its parent's, children
// first, per distinct window (few in practice).
std::vector<LruGenSum> lru_gen_sums(const LruGen& lg, const std::vector<CgroupSample>& cgroups,
                                    const std::vector<uint64_t>& window_ms);

// A slice's working-set window: its policy's WorkingSetWindow=, else [Daemon]'s.
uint64_t working_set_window_us(const EffectivePolicy& pol, const DaemonConfig& dc);

// Plan::writes from the entries' prior and next values (engine_damp.cc).
void order_writes(Plan& plan);

}  // namespace memprotd
