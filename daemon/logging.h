// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The daemon's logging: spdlog's default logger, writing to the journal when
// systemd started us (JOURNAL_STREAM or INVOCATION_ID set) and to stderr
// otherwise. Protection changes additionally carry structured journal fields
// so `journalctl UNIT=workload.slice` (and `journalctl -u`, through
// OBJECT_SYSTEMD_UNIT=) finds them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "plan.h"

namespace memprotd::logging {

enum class Target { Auto, Stderr, Journal };

// Installs the default logger. `level` as spdlog names it ("info",
// "debug", ...); false when the name is unknown (the level is then info).
bool setup(const std::string& level, Target target = Target::Auto);

[[nodiscard]] bool to_journal();

// One protection change, applied or (dry_run) only planned.
void change(const std::string& unit, const UnitProtection& from, const UnitProtection& to,
            const std::string& reason, bool dry_run);

// What each tick's plan is worth a line for.
class PlanLog {
public:
    // Each of the plan's notes that the last plan did not have (a budget
    // cut, a MemoryMin= escalation starting or ending, slices left
    // unmanaged), then one change line per unit the plan changed: in enforce mode for the
    // writes made (`applied`; a unit with two writes gets one line, for what
    // it ended with), in a dry run for what would be written, once until the
    // plan for that unit changes (the tree never changes under a dry run, so
    // the same plan comes back every tick).
    void changes(const Plan& plan, const std::vector<PlannedWrite>& applied, bool dry_run);
    // At debug level: one line for tick number `tick` and one per slice with
    // the inputs and targets behind the plan, and the time since the last tick.
    static void inputs(const Plan& plan, uint64_t tick, int64_t since_last_us);
    // Drops the dry-run memory of units that are not `present` (this sample's).
    void forget_gone(const std::set<std::string_view>& present);

private:
    std::map<std::string, UnitProtection, std::less<>> last_logged_;
    std::vector<std::string> last_notes_;
};

}  // namespace memprotd::logging
