// SPDX-License-Identifier: LGPL-2.1-or-later
#include <fmt/format.h>

#include <functional>

#include "offline_verbs.h"
#include "verbs.h"

namespace memprotd::ctl {

using nlohmann::json;

namespace {

// Label values in the exposition format escape \, " and newlines.
std::string label(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"')
            out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

}  // namespace

int metrics(ManagerProxy& p) {
    const auto props = sdbus_compat::to_string_map(p.GetAll(kInterface));
    const std::vector<SliceRow> rows = list_slices(p);
    std::string out;
    auto family = [&](const std::string& name, const char* type, const char* help) {
        out += fmt::format("# TYPE {} {}\n# HELP {} {}\n", name, type, name, help);
    };
    // node_exporter's textfile collector reads the Prometheus text format,
    // which has no "info" type: a gauge of 1 carries the labels.
    family("memprotd_info", "gauge", "Version and mode of the running memprotd.");
    out += fmt::format("memprotd_info{{version=\"{}\",mode=\"{}\"}} 1\n",
                       label(prop<std::string>(props, "Version")), label(prop<std::string>(props, "Mode")));
    struct HostMetric {
        const char* property;
        const char* metric;
        const char* help;
    };
    const HostMetric host[] = {
        {"MemoryTotal", "memory_total", "RAM the plan is made for."},
        {"Budget", "budget", "What may be protected in sum now, after floors and pressure feedback."},
        {"BudgetConfigured", "budget_configured", "MemTotal times Budget=."},
        {"DemandTotal", "demand", "Sum of the top-level slices' demand."},
        {"ProtectedTotal", "protected", "Sum of the top-level slices' target MemoryLow."},
    };
    for (const HostMetric& m : host) {
        const std::string name = fmt::format("memprotd_{}_bytes", m.metric);
        family(name, "gauge", m.help);
        out += fmt::format("{} {}\n", name, prop<uint64_t>(props, m.property));
    }
    family("memprotd_managed_slices", "gauge", "Slices in the last plan.");
    out += fmt::format("memprotd_managed_slices {}\n", prop<uint32_t>(props, "ManagedSlices"));
    family("memprotd_writes", "counter", "MemoryLow/MemoryMin writes since the daemon started.");
    out += fmt::format("memprotd_writes_total {}\n", prop<uint64_t>(props, "TotalWrites"));
    family("memprotd_last_plan_timestamp_seconds", "gauge", "When the last plan was made (Unix time).");
    out += fmt::format("memprotd_last_plan_timestamp_seconds {:.6f}\n",
                       static_cast<double>(prop<uint64_t>(props, "LastPlanTimestamp")) / 1e6);

    struct Column {
        const char* name;
        const char* help;
        std::function<std::string(const SliceRow&)> value;
    };
    auto u = [](uint64_t v) { return std::to_string(v); };
    const Column columns[] = {
        {"memprotd_slice_memory_current_bytes", "memory.current of the slice.",
         [&](const SliceRow& r) { return u(r.current); }},
        {"memprotd_slice_working_set_bytes", "Estimated working set.",
         [&](const SliceRow& r) { return u(r.working_set); }},
        {"memprotd_slice_cheap_cache_bytes", "Clean, unmapped, rarely refaulting page cache.",
         [&](const SliceRow& r) { return u(r.cheap_cache); }},
        {"memprotd_slice_demand_bytes", "Protection the slice needs.",
         [&](const SliceRow& r) { return u(r.demand); }},
        {"memprotd_slice_memory_low_bytes", "MemoryLow= as systemd had it when the plan was made.",
         [&](const SliceRow& r) { return u(r.memory_low); }},
        {"memprotd_slice_memory_min_bytes", "MemoryMin= as systemd had it when the plan was made.",
         [&](const SliceRow& r) { return u(r.memory_min); }},
        {"memprotd_slice_target_memory_low_bytes", "MemoryLow= the engine aims for.",
         [&](const SliceRow& r) { return u(r.target_memory_low); }},
        {"memprotd_slice_target_memory_min_bytes", "MemoryMin= the engine aims for.",
         [&](const SliceRow& r) { return u(r.target_memory_min); }},
        {"memprotd_slice_pressure_some_ratio", "Smoothed memory PSI some stall fraction.",
         [&](const SliceRow& r) { return fmt::format("{}", r.psi_some); }},
    };
    for (const Column& c : columns) {
        family(c.name, "gauge", c.help);
        for (const SliceRow& r : rows)
            out += fmt::format("{}{{unit=\"{}\"}} {}\n", c.name, label(r.unit), c.value(r));
    }
    out += "# EOF\n";
    fmt::print("{}", out);
    return kExitOk;
}

}  // namespace memprotd::ctl
