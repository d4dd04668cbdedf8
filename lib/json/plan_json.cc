// SPDX-License-Identifier: LGPL-2.1-or-later
#include "plan_json.h"

#include <string>

namespace memprotd {

using nlohmann::json;

json slice_to_json(const Plan& plan, const PlanEntry& e) {
    const Explanation& x = e.x;
    json j = {
        {"unit", e.unit},
        {"cgroup", e.cgroup},
        {"parent", e.parent ? json(plan.slices[*e.parent].unit) : json(nullptr)},
        {"current", x.current},
        {"anon", x.anon},
        {"file", x.file},
        {"cheap_cache", x.cheap_cache},
        {"cheap_cache_raw", x.cheap_cache_raw},
        {"cheap_from_all_file", x.cheap_from_all_file},
        {"refault_ratio", x.refault_ratio},
        {"refault_file_rate", x.refault_file_rate},
        {"activate_file_rate", x.activate_file_rate},
        {"restore_file_rate", x.restore_file_rate},
        {"comes_back_rate", x.comes_back_rate},
        {"pgsteal_rate", x.pgsteal_rate},
        {"working_set", x.working_set},
        {"working_set_source", std::string(working_set_source_name(x.working_set_source))},
        {"thrash_correction", x.thrash_correction},
        {"refault_anon_rate", x.refault_anon_rate},
        {"swap_current", x.swap_current},
        {"warm_footprint", x.warm_footprint},
        {"psi_some", x.psi_some},
        {"demand", x.demand},
        {"prompt_demand", x.prompt_demand},
        {"cold_anon", x.cold_anon},
        {"keep_demand", x.keep_demand},
        {"low_events", x.low_events},
        {"escalated_min", x.escalated_min},
        {"escalation_quiet_s", x.escalation_quiet_s},
        {"escalation_ahead", x.escalation_ahead},
        {"escalation_held", x.escalation_held},
        {"escalation_partial", x.escalation_partial},
        {"burst", x.burst},
        {"trimmable", x.trimmable},
        {"trim", x.trim},
        {"trim_hold_s", x.trim_hold_s},
        {"aging_held", x.aging_held},
        {"weight", x.weight},
        {"floor", x.floor},
        {"min_protection", x.min_protection},
        {"max_protection", x.max_protection},
        {"group_budget", x.group_budget},
        {"bound", std::string(bound_name(x.bound))},
        {"memory_low", x.target_low},
        {"memory_min", x.target_min},
        {"current_memory_low", x.prior.memory_low},
        {"current_memory_min", x.prior.memory_min},
        {"next_memory_low", x.next.memory_low},
        {"next_memory_min", x.next.memory_min},
        {"write", e.write()},
        {"damping", damping_text(x.damping)},
        {"policy_sources", e.sources()},
    };
    return j;
}

json plan_to_json(const Plan& plan) {
    json slices = json::array();
    for (const auto& e : plan.slices)
        slices.push_back(slice_to_json(plan, e));
    json writes = json::array();
    for (const auto& w : plan.writes)
        writes.push_back({{"unit", w.unit},
                          {"memory_low", w.values.memory_low},
                          {"memory_min", w.values.memory_min},
                          {"phase", w.decrease ? "decrease" : "increase"}});
    json trims = json::array();
    for (const auto& t : plan.trims)
        trims.push_back({{"unit", t.unit}, {"bytes", t.bytes}});
    return {
        {"timestamp_us", plan.timestamp_us},
        {"memory_total", plan.memory_total},
        {"swap", plan.swap},
        {"budget", plan.budget},
        {"budget_configured", plan.budget_configured},
        {"budget_factor", plan.budget_factor},
        {"memory_low_defers", plan.low_defers},
        {"floors", plan.floors},
        {"demand_total", plan.demand_total},
        {"protected_total", plan.protected_total},
        {"slices", slices},
        {"writes", writes},
        {"trim_mechanism", std::string(trim_mechanism_name(plan.trim_mechanism))},
        {"mem_free", plan.mem_free ? json(*plan.mem_free) : json(nullptr)},
        {"trim_headroom", plan.trim_headroom},
        {"trims", trims},
        {"notes", plan.notes},
    };
}

json features_to_json(const KernelFeatures& f) {
    return {
        {"cgroup2", f.cgroup2},
        {"memory_controller", f.memory_controller},
        {"memory_recursiveprot", f.memory_recursiveprot},
        {"psi", f.psi},
        {"mglru_present", f.mglru_present},
        {"mglru_enabled", f.mglru_enabled},
        {"mglru_flags", f.mglru_flags},
        {"lru_gen_debugfs", f.lru_gen_debugfs},
        {"memory_reclaim", f.memory_reclaim},
        {"kernel_release", f.kernel_release},
        {"page_size", f.page_size},
        {"unusable_reason", f.unusable_reason},
    };
}

json config_to_json(const Config& c) {
    const DaemonConfig& d = c.daemon;
    json policies = json::array();
    for (const auto& r : c.policies) {
        json p = {{"file", r.file}, {"slices", r.globs}};
        if (r.protection.weight)
            p["weight"] = *r.protection.weight;
        if (r.protection.min_protection.set())
            p["min_protection"] = r.protection.min_protection.to_string();
        if (r.protection.max_protection.set())
            p["max_protection"] = r.protection.max_protection.to_string();
        if (r.protection.floor.set())
            p["floor"] = r.protection.floor.to_string();
        if (r.protection.manage)
            p["manage"] = *r.protection.manage;
        policies.push_back(p);
    }
    return {
        {"files", c.files},
        {"daemon",
         {{"mode", std::string(mode_name(d.mode))},
          {"interval_us", d.interval_us},
          {"budget", d.budget.to_string()},
          {"working_set_window_us", d.working_set_window_us},
          {"headroom", d.headroom},
          {"restore_on_exit", d.restore_on_exit},
          {"manage_top_level_slices", d.manage_top_level_slices},
          {"pressure_threshold_us", d.pressure_threshold_us},
          {"pressure_window_us", d.pressure_window_us},
          {"working_set_aging", d.working_set_aging},
          {"escalate_ahead", d.escalate_ahead},
          {"trim_cheap_cache", std::string(trim_setting_name(d.trim_cheap_cache))},
          {"record", d.record},
          {"record_max_size", d.record_max_bytes}}},
        {"policies", policies},
    };
}

}  // namespace memprotd
