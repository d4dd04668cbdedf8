// SPDX-License-Identifier: LGPL-2.1-or-later
#include "runtime_config.h"

#include <optional>
#include <utility>

#include "config_loader.h"

namespace memprotd {

std::vector<Error> RuntimeConfig::load(uint64_t mem_total) {
    ConfigParse parsed = load_config(dirs_, mem_total);
    if (!parsed.ok())
        return std::move(parsed.errors);
    files_ = std::move(parsed.config);
    rebuild();
    return {};
}

Status RuntimeConfig::set_policy(const std::string& unit, const SlicePolicy& policy, uint64_t mem_total) {
    if (std::optional<std::string> problem = slice_name_problem(unit))
        return Error{unit, 0, "", *problem};
    if (std::optional<std::string> problem = policy_problem(policy, mem_total))
        return Error{unit, 0, "", *problem};
    overrides_.insert_or_assign(unit, policy);
    rebuild();
    return Ok{};
}

Status RuntimeConfig::reset_policy(const std::string& unit) {
    if (overrides_.erase(unit) == 0)
        return Error{unit, 0, "", "no runtime policy to reset"};
    rebuild();
    return Ok{};
}

void RuntimeConfig::rebuild() {
    effective_ = files_;
    for (const auto& [unit, policy] : overrides_)
        effective_.policies.push_back(PolicyRule{"runtime:" + unit, {unit}, policy});
}

}  // namespace memprotd
