// SPDX-License-Identifier: LGPL-2.1-or-later
#include <fmt/format.h>


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
    auto family = [&](std::string_view name, const char* type, std::string_view help) {
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

    for_each_slice_row_field([&](const auto& field) {
        if (field.metric.empty())
            return;
        family(field.metric, "gauge", field.help);
        for (const SliceRow& r : rows)
            out += fmt::format("{}{{unit=\"{}\"}} {}\n", field.metric, label(r.unit), r.*field.member);
    });
    out += "# EOF\n";
    fmt::print("{}", out);
    return kExitOk;
}

}  // namespace memprotd::ctl
