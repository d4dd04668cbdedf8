// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Read-only questions to systemd (org.freedesktop.systemd1) that memprotctl
// asks beside the daemon: is systemd-oomd running, and what ManagedOOM*=
// does a slice carry. Never throws; a bus without systemd (a private test
// bus) answers with an Error.
#pragma once

#include <string>

#include "result.h"

namespace sdbus {
class IConnection;
}  // namespace sdbus

namespace memprotd {

// The interface that carries a unit's cgroup properties, by its type
// (".service" → org.freedesktop.systemd1.Service; a slice, and anything
// else, → org.freedesktop.systemd1.Slice).
std::string unit_interface(const std::string& unit);

// systemd-oomd.service as systemd sees it.
struct OomdState {
    bool installed = false;   // its LoadState is not "not-found"
    std::string active_state; // "active", "inactive", "failed", ...
};
Result<OomdState> oomd_state(sdbus::IConnection& conn);

// A unit's ManagedOOMSwap= and ManagedOOMMemoryPressure= ("auto" or "kill").
struct ManagedOom {
    std::string swap;
    std::string memory_pressure;
    // Whether either asks systemd-oomd to act ("kill").
    [[nodiscard]] bool set() const { return swap == "kill" || memory_pressure == "kill"; }
};
Result<ManagedOom> managed_oom(sdbus::IConnection& conn, const std::string& unit);

}  // namespace memprotd
