// SPDX-License-Identifier: LGPL-2.1-or-later
//
// JSON renderings of plans, features and configs, shared by memprotctl and
// the daemon's Dump(). Field names are a stable interface (docs/api.md § JSON output):
// sizes are integer bytes, rates per second, fractions 0..1.
#pragma once

#include <nlohmann/json.hpp>

#include "config.h"
#include "plan.h"
#include "model.h"

namespace memprotd {

nlohmann::json slice_to_json(const Plan& plan, const PlanEntry& entry);
nlohmann::json plan_to_json(const Plan& plan);
nlohmann::json features_to_json(const KernelFeatures& f);
nlohmann::json config_to_json(const Config& c);

}  // namespace memprotd
