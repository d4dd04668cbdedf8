// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The daemon's logging: spdlog's default logger, writing to the journal when
// systemd started us (JOURNAL_STREAM or INVOCATION_ID set) and to stderr
// otherwise. Protection changes additionally carry structured journal fields
// so `journalctl UNIT=workload.slice` (and `journalctl -u`, through
// OBJECT_SYSTEMD_UNIT=) finds them.
#pragma once

#include <string>

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

}  // namespace memprotd::logging
