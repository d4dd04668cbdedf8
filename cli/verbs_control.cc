// SPDX-License-Identifier: LGPL-2.1-or-later
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <variant>

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

namespace {

// KEY=VALUE as SetSlicePolicy takes it: a weight as u, a boolean as b (by the
// key's field in kPolicyKeys), everything else, "" and unknown keys as s for
// the daemon to check.
sdbus::Variant assignment_value(const std::string& key, const std::string& value) {
    const PolicyKey* known = find_policy_key(key);
    if (known == nullptr || value.empty())
        return sdbus::Variant(value);
    if (std::holds_alternative<std::optional<uint32_t> SlicePolicy::*>(known->field)) {
        char* end = nullptr;
        const unsigned long w = std::strtoul(value.c_str(), &end, 10);
        if (*end != '\0' || value.front() == '-' || w > UINT32_MAX)
            throw CLI::ValidationError("set", fmt::format("{}: expected an integer, got \"{}\"", key, value));
        return sdbus::Variant(static_cast<uint32_t>(w));
    }
    if (std::holds_alternative<std::optional<bool> SlicePolicy::*>(known->field)) {
        Result<bool> b = parse_boolean(value);
        if (!b)
            throw CLI::ValidationError("set", fmt::format("{}: expected yes or no, got \"{}\"", key, value));
        return sdbus::Variant(*b);
    }
    return sdbus::Variant(value);
}

}  // namespace

std::map<std::string, sdbus::Variant> parse_assignments(const std::vector<std::string>& assignments) {
    std::map<std::string, sdbus::Variant> out;
    for (const std::string& a : assignments) {
        const auto eq = a.find('=');
        if (eq == std::string::npos || eq == 0)
            throw CLI::ValidationError("set", fmt::format("expected KEY=VALUE, got \"{}\"", a));
        const std::string key = a.substr(0, eq);
        out[key] = assignment_value(key, a.substr(eq + 1));
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
