// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Internal to the engine (lib/core/engine*.cc): what the steps of one
// Engine::tick share. Indices k are into Plan::slices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine.h"
#include "plan.h"

namespace memprotd {

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
    // The snapshot's lru_gen memcgs by path (indices into LruGen::memcgs),
    // so the memcgs at or below a slice are one range: see lru_gen_below().
    std::vector<uint32_t> lru_by_path{};
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
// The memcgs of `lg` at or below `path` ("/a.slice" and "/a.slice/...",
// never "/a.slice-x"), in path order, given `by_path` (lru_gen_by_path).
// O(log memcgs) plus the answer, so a tick is not slices × memcgs.
std::vector<uint32_t> lru_gen_by_path(const LruGen& lg);
std::span<const uint32_t> lru_gen_below(const LruGen& lg, const std::vector<uint32_t>& by_path, std::string_view path);

// Plan::writes from the entries' prior and next values (engine_damp.cc).
void order_writes(Plan& plan);

}  // namespace memprotd
