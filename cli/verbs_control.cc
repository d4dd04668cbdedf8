// SPDX-License-Identifier: LGPL-2.1-or-later
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstdlib>

#include "config.h"
#include "offline_verbs.h"
#include "verbs.h"

namespace memprotd::ctl {

int reload(ManagerProxy& p) {
    p.Reload();
    fmt::print("Configuration reloaded.\n");
    return kExitOk;
}

int set_mode(ManagerProxy& p, const std::string& mode) {
    p.SetMode(mode);
    return kExitOk;
}

std::map<std::string, sdbus::Variant> parse_assignments(const std::vector<std::string>& assignments) {
    std::map<std::string, sdbus::Variant> out;
    for (const std::string& a : assignments) {
        const auto eq = a.find('=');
        if (eq == std::string::npos || eq == 0)
            throw CLI::ValidationError("set", fmt::format("expected KEY=VALUE, got \"{}\"", a));
        const std::string key = a.substr(0, eq), value = a.substr(eq + 1);
        if (key == "Weight" && !value.empty()) {
            char* end = nullptr;
            const unsigned long w = std::strtoul(value.c_str(), &end, 10);
            if (*end != '\0' || value.front() == '-' || w > UINT32_MAX)
                throw CLI::ValidationError("set",
                                           fmt::format("Weight: expected an integer, got \"{}\"", value));
            out[key] = sdbus::Variant(static_cast<uint32_t>(w));
        } else if (key == "Manage" && !value.empty()) {
            Result<bool> b = parse_boolean(value);
            if (!b)
                throw CLI::ValidationError("set",
                                           fmt::format("Manage: expected yes or no, got \"{}\"", value));
            out[key] = sdbus::Variant(*b);
        } else {
            out[key] = sdbus::Variant(value);
        }
    }
    return out;
}

int set_policy(ManagerProxy& p, const std::string& unit, const std::vector<std::string>& assignments) {
    p.SetSlicePolicy(unit, parse_assignments(assignments));
    return kExitOk;
}

int reset_policy(ManagerProxy& p, const std::string& unit) {
    p.ResetSlicePolicy(unit);
    return kExitOk;
}

}  // namespace memprotd::ctl
