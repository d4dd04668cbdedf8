// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Applies plans through systemd: reads the present MemoryLow/MemoryMin of the
// managed slices, records each unit's prior values before its first write,
// makes a plan's writes in the plan's order through the WriteGate, backs off
// a failing unit exponentially, and restores slices that are no longer
// managed. It knows nothing of the engine or the configuration's policies:
// which slices are managed is select_managed's answer, given by the caller.
//
// Threading: the loop thread only, like the Manager that owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "actuator.h"
#include "model.h"
#include "plan.h"
#include "result.h"
#include "state_store.h"

namespace memprotd {

// What one tick's writes did.
struct TickResult {
    size_t applied = 0;   // successful writes
    size_t failed = 0;    // writes systemd refused (the tick's writes stop at the first)
    size_t deferred = 0;  // writes not attempted: after a failure or while a unit backs off
    size_t restored = 0;  // units no longer managed that got their prior values back
    size_t yielded = 0;   // writes not made to units another writer owns now (Applier::check_writers)
    std::vector<Error> errors;
};

// A unit whose memory.low or memory.min another writer changed after
// memprotd wrote it: what memprotd wrote and what the cgroup had instead.
struct YieldedUnit {
    UnitProtection wrote;
    UnitProtection seen;
};

class Applier {
public:
    // `actuator` and `state` must outlive the applier. `now_us` is
    // CLOCK_MONOTONIC in µs (tests step it through backoff).
    Applier(Actuator& actuator, StateStore& state, std::function<int64_t()> now_us);

    // Whether systemd's values of every slice unit in `cgroups` are known,
    // or the slice is known to be unmanaged: then refresh() has nothing to ask.
    [[nodiscard]] bool knows_all(const std::vector<CgroupSample>& cgroups) const;
    // Asks systemd for the values of the managed slices (`managed[i]` for
    // `cgroups[i]`, select_managed's answer) it does not know yet, and
    // remembers the rest as unmanaged. Stops at a transport error.
    // `interval_us` (Interval=) is backoff's unit, here and in apply().
    void refresh(const std::vector<CgroupSample>& cgroups, const std::vector<bool>& managed, uint64_t interval_us,
                 TickResult& result);
    // Restores the slices recorded before that `plan` no longer manages,
    // then makes the plan's writes; returns those made.
    std::vector<PlannedWrite> apply(const Plan& plan, uint64_t interval_us, TickResult& result);
    // Drops what it knows of units that are not `present` (this sample's).
    void forget_gone(const std::set<std::string_view>& present);
    // After a sample: each unit's memory.low and memory.min in the cgroup
    // against what was last written to it (by this process, or, for a unit
    // recorded by an earlier one, systemd's values at start; to the page: the kernel keeps
    // whole pages). A difference on two samples in a row is another
    // writer's (kubelet, `systemctl set-property`, a script): memprotd
    // yields the unit — says so once, drops its record of prior values
    // (they are no longer memprotd's to restore) and writes it no more until
    // take_back(). A yielded unit's skipped writes block no other write.
    void check_writers(const std::vector<CgroupSample>& cgroups, uint64_t page_size);
    // Writes `unit` again (memprotctl reset), from the values the other
    // writer left, which become its prior values; false when it was not
    // yielded.
    bool take_back(std::string_view unit);
    // Writes every yielded unit again (a reload).
    void take_back_all();
    [[nodiscard]] const std::map<std::string, YieldedUnit, std::less<>>& yielded() const { return yielded_; }

    // After a reload: ask systemd again (someone may have changed units
    // behind our back), and judge every slice again.
    void forget_current() { current_.clear(); }
    // After any change of the configuration: judge every slice again.
    void forget_unmanaged() { unmanaged_.clear(); }

    // systemd's values, per managed unit, as last read or written.
    [[nodiscard]] const CurrentProtections& current() const { return current_; }
    [[nodiscard]] uint64_t total_writes() const { return total_writes_; }

private:
    struct Backoff {
        int failures = 0;
        int64_t next_us = 0;
    };

    [[nodiscard]] bool due(const std::string& unit, int64_t now_us) const;
    void note_failure(const std::string& unit, int64_t now_us, uint64_t interval_us);
    Status write(const PlannedWrite& w, const PlanEntry* entry);
    void restore_unmanaged(const Plan& plan, uint64_t interval_us, TickResult& result);
    void resume(const std::string& unit, const YieldedUnit& y);

    Actuator& actuator_;
    StateStore& state_;
    std::function<int64_t()> now_us_;
    CurrentProtections current_;
    // Slices the configuration in force does not manage, as the last
    // refresh() found them: not judged again every tick.
    std::set<std::string, std::less<>> unmanaged_;
    std::map<std::string, Backoff, std::less<>> backoff_;
    std::map<std::string, UnitProtection, std::less<>> written_;  // the last values written, per unit
    std::map<std::string, int, std::less<>> differs_;             // samples in a row that differed from them
    std::map<std::string, YieldedUnit, std::less<>> yielded_;
    uint64_t total_writes_ = 0;
};

}  // namespace memprotd
