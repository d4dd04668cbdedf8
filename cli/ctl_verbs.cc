// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ctl_verbs.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "bus_names.h"
#include "config.h"
#include "format.h"
#include "offline_verbs.h"
#include "sdbus_compat.h"
#include "slice_row.h"
#include "table.h"

// Generated from dbus/org.memprotd1.Manager.xml at build time.
#include "org.memprotd1.Manager.proxy.h"

namespace memprotd {

namespace {

using nlohmann::json;

// Thrown when the daemon cannot be reached; becomes kExitNoDaemon.
struct NoDaemon {
    std::string detail;
};

std::string bus_description() {
    const char* address = std::getenv(kBusAddressEnv);
    return address && *address ? fmt::format("the bus at {}", address) : "the system bus";
}

class ManagerProxy final
    : public sdbus::ProxyInterfaces<org::memprotd1::Manager_proxy, sdbus::Properties_proxy> {
public:
    // With `subscribe` the signal matches are installed (monitor only).
    ManagerProxy(sdbus::IConnection& conn, bool subscribe)
        : ProxyInterfaces(conn, sdbus_compat::service_name(kBusName), sdbus_compat::object_path(kObjectPath)) {
        if (subscribe)
            registerProxy();
    }
    ~ManagerProxy() { unregisterProxy(); }
    ManagerProxy(const ManagerProxy&) = delete;
    ManagerProxy& operator=(const ManagerProxy&) = delete;

    std::function<void(uint64_t, uint32_t)> plan_applied;
    std::function<void(const std::string&, double)> pressure_changed;
    std::function<void(bool, const std::vector<std::string>&)> config_reloaded;
    std::function<void(const std::map<std::string, sdbus::Variant>&)> properties_changed;

private:
    void onPlanApplied(const uint64_t& timestamp, const uint32_t& writes) override {
        if (plan_applied)
            plan_applied(timestamp, writes);
    }
    void onPressureChanged(const std::string& unit, const double& some_avg10) override {
        if (pressure_changed)
            pressure_changed(unit, some_avg10);
    }
    void onConfigReloaded(const bool& ok, const std::vector<std::string>& errors) override {
        if (config_reloaded)
            config_reloaded(ok, errors);
    }
    void onPropertiesChanged(const sdbus_compat::InterfaceName& interface,
                             const std::map<sdbus_compat::PropertyName, sdbus::Variant>& changed,
                             const std::vector<sdbus_compat::PropertyName>& /*invalidated*/) override {
        if (interface == kInterface && properties_changed)
            properties_changed(sdbus_compat::to_string_map(changed));
    }
};

std::unique_ptr<sdbus::IConnection> connect() {
    try {
        const char* address = std::getenv(kBusAddressEnv);
        if (address && *address)
            return sdbus::createSessionBusConnectionWithAddress(address);
        return sdbus::createSystemBusConnection();
    } catch (const sdbus::Error& e) {
        throw NoDaemon{fmt::format("cannot connect to {}: {}", bus_description(), e.getMessage())};
    }
}

bool is_not_running(const sdbus::Error& e) {
    const std::string& n = e.getName();
    return n == "org.freedesktop.DBus.Error.ServiceUnknown" ||
           n == "org.freedesktop.DBus.Error.NameHasNoOwner" || n == "org.freedesktop.DBus.Error.NoReply" ||
           n == "org.freedesktop.DBus.Error.Disconnected";
}

// --- value helpers ---

json variant_to_json(const sdbus::Variant& v) {
    const std::string t = v.peekValueType();
    if (t == "t")
        return v.get<uint64_t>();
    if (t == "x")
        return v.get<int64_t>();
    if (t == "u")
        return v.get<uint32_t>();
    if (t == "i")
        return v.get<int32_t>();
    if (t == "d")
        return v.get<double>();
    if (t == "b")
        return v.get<bool>();
    if (t == "s")
        return v.get<std::string>();
    if (t == "as")
        return v.get<std::vector<std::string>>();
    return nullptr;
}

json variants_to_json(const std::map<std::string, sdbus::Variant>& m) {
    json j = json::object();
    for (const auto& [k, v] : m) j[k] = variant_to_json(v);
    return j;
}

std::string yes_no(bool b) {
    return b ? "yes" : "no";
}

std::string format_realtime(uint64_t us) {
    if (us == 0)
        return "never";
    const auto secs = static_cast<time_t>(us / 1'000'000);
    struct tm tm {};
    localtime_r(&secs, &tm);
    char buf[64];
    if (std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        return std::to_string(us);
    return buf;
}

json slice_row_json(const SliceRow& r) {
    return {
        {"unit", r.unit},
        {"cgroup", r.cgroup},
        {"current", r.current},
        {"working_set", r.working_set},
        {"cheap_cache", r.cheap_cache},
        {"demand", r.demand},
        {"memory_low", r.memory_low},
        {"memory_min", r.memory_min},
        {"target_memory_low", r.target_memory_low},
        {"target_memory_min", r.target_memory_min},
        {"psi_some", r.psi_some},
    };
}

// ListSlices with named fields.
std::vector<SliceRow> list_slices(ManagerProxy& p) {
    std::vector<SliceRow> rows;
    for (const SliceRow::Wire& w : p.ListSlices()) rows.push_back(SliceRow::from_wire(w));
    return rows;
}

// "workload.slice" under "/a.slice/workload.slice" is shown indented once.
std::string indented(const std::string& unit, const std::string& cgroup) {
    const auto depth = std::count(cgroup.begin(), cgroup.end(), '/');
    return std::string(static_cast<size_t>(std::max<std::ptrdiff_t>(0, depth - 1)) * 2, ' ') + unit;
}

std::string slices_table(const std::vector<SliceRow>& rows, bool full) {
    std::vector<std::string> cols = {"UNIT", ">CURRENT", ">WORKING SET", ">CHEAP CACHE"};
    if (full)
        cols.emplace_back(">DEMAND");
    cols.insert(cols.end(), {">MEMORYLOW", ">TARGET", ">MEMORYMIN"});
    if (full)
        cols.emplace_back(">PSI");
    Table t(cols);
    for (const SliceRow& r : rows) {
        std::vector<std::string> cells = {indented(r.unit, r.cgroup), format_bytes(r.current),
                                          format_bytes(r.working_set), format_bytes(r.cheap_cache)};
        if (full)
            cells.push_back(format_bytes(r.demand));
        cells.push_back(format_bytes(r.memory_low));
        cells.push_back(format_bytes(r.target_memory_low));
        cells.push_back(format_bytes(r.memory_min));
        if (full)
            cells.push_back(format_percent(r.psi_some));
        t.add_row(std::move(cells));
    }
    return t.render(use_color(stdout));
}

template <typename T>
T prop(const std::map<std::string, sdbus::Variant>& props, const std::string& name, T fallback = {}) {
    const auto it = props.find(name);
    if (it == props.end() || !it->second.containsValueOfType<T>())
        return fallback;
    return it->second.get<T>();
}

// --- verbs ---

// Dump as JSON; an empty object when Dump fails (an older bus policy):
// status still answers without what only Dump has.
json dump_of(ManagerProxy& p) {
    std::string text;
    try {
        text = p.Dump();
    } catch (const sdbus::Error&) {
        return json::object();
    }
    json d = json::parse(text, nullptr, /*allow_exceptions=*/false);
    return d.is_discarded() || !d.is_object() ? json::object() : d;
}

// How often the daemon ticked since start and what its ticks cost.
std::string ticks_line(const json& t) {
    if (!t.is_object())
        return "not reported by this daemon";
    const auto num = [&](const char* k) { return t.value(k, uint64_t{0}); };
    return fmt::format("{} since start ({} early, after a PSI trigger, reload or policy change); "
                       "CPU {:.2f} s, of it sampling {:.2f} s",
                       num("total"), num("early"), static_cast<double>(num("cpu_us")) / 1e6,
                       static_cast<double>(num("sample_cpu_us")) / 1e6);
}

// What working-set aging did since start, or why it does nothing.
std::string aging_line(const json& a, const std::string& mode, bool lru_gen_debugfs) {
    if (!a.is_object())
        return "not reported by this daemon";
    const auto num = [&](const char* k) { return a.value(k, uint64_t{0}); };
    if (!a.value("enabled", true))
        return "off (WorkingSetAging=no)";
    std::string line = fmt::format("{} memcg(s) aged since start", num("aged"));
    if (a.contains("max_write_us"))
        line += fmt::format(", slowest write {:.1f} ms, all writes {:.1f} ms",
                            static_cast<double>(num("max_write_us")) / 1e3,
                            static_cast<double>(num("total_write_us")) / 1e3);
    line += fmt::format("; {} gone before their write, {} tick(s) failed", num("vanished"), num("failed"));
    if (!lru_gen_debugfs)
        line += " (nothing to age through: no lru_gen debugfs)";
    else if (mode != "enforce")
        line += fmt::format(" (ages only in enforce mode; mode is {})", mode);
    const std::string err = a.value("last_error", std::string());
    if (!err.empty())
        line += "; last error: " + err;
    return line;
}

int status(ManagerProxy& p, bool as_json) {
    const auto props = sdbus_compat::to_string_map(p.GetAll(kInterface));
    const std::vector<SliceRow> rows = list_slices(p);
    const auto features = prop<std::map<std::string, sdbus::Variant>>(props, "KernelFeatures");
    const json dump = dump_of(p);
    const json aging = dump.value("working_set_aging", json(nullptr));
    const json ticks = dump.value("ticks", json(nullptr));
    if (as_json) {
        json slices = json::array();
        for (const auto& r : rows) slices.push_back(slice_row_json(r));
        json j = {
            {"version", prop<std::string>(props, "Version")},
            {"mode", prop<std::string>(props, "Mode")},
            {"kernel_features", variants_to_json(features)},
            {"memory_total", prop<uint64_t>(props, "MemoryTotal")},
            {"budget", prop<uint64_t>(props, "Budget")},
            {"budget_configured", prop<uint64_t>(props, "BudgetConfigured")},
            {"demand_total", prop<uint64_t>(props, "DemandTotal")},
            {"protected_total", prop<uint64_t>(props, "ProtectedTotal")},
            {"managed_slices", prop<uint32_t>(props, "ManagedSlices")},
            {"last_plan_timestamp", prop<uint64_t>(props, "LastPlanTimestamp")},
            {"interval_us", prop<uint64_t>(props, "Interval")},
            {"total_writes", prop<uint64_t>(props, "TotalWrites")},
            {"config_files", prop<std::vector<std::string>>(props, "ConfigFiles")},
            {"working_set_aging", aging},
            {"ticks", ticks},
            {"slices", slices},
        };
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    auto fb = [&](const char* key) { return prop<bool>(features, key); };
    std::string release = prop<std::string>(features, "kernel_release");
    if (release.empty())
        release = "unknown kernel";
    fmt::print("memprotd {}, mode {}\n", prop<std::string>(props, "Version"),
               prop<std::string>(props, "Mode"));
    fmt::print(
        "Kernel:   {}; cgroup2 {}, memory controller {}, memory_recursiveprot {}, PSI {}, "
        "MGLRU {} (0x{:04x}), lru_gen debugfs {}, memory.reclaim {}\n",
        release, yes_no(fb("cgroup2")), yes_no(fb("memory_controller")), yes_no(fb("memory_recursiveprot")),
        yes_no(fb("psi")), fb("mglru_enabled") ? "enabled" : (fb("mglru_present") ? "disabled" : "absent"),
        prop<uint32_t>(features, "mglru_flags"), yes_no(fb("lru_gen_debugfs")), yes_no(fb("memory_reclaim")));
    fmt::print("Memory:   {} total, budget {} (configured {}), demand {}, protected {}\n",
               format_bytes(prop<uint64_t>(props, "MemoryTotal")),
               format_bytes(prop<uint64_t>(props, "Budget")),
               format_bytes(prop<uint64_t>(props, "BudgetConfigured")),
               format_bytes(prop<uint64_t>(props, "DemandTotal")),
               format_bytes(prop<uint64_t>(props, "ProtectedTotal")));
    fmt::print(
        "Plan:     {} slice(s), last at {}, every {} s; {} write(s) since start\n",
        prop<uint32_t>(props, "ManagedSlices"), format_realtime(prop<uint64_t>(props, "LastPlanTimestamp")),
        static_cast<double>(prop<uint64_t>(props, "Interval")) / 1e6, prop<uint64_t>(props, "TotalWrites"));
    fmt::print("Aging:    {}\n", aging_line(aging, prop<std::string>(props, "Mode"), fb("lru_gen_debugfs")));
    fmt::print("Ticks:    {}\n", ticks_line(ticks));
    if (rows.empty()) {
        fmt::print("\nNo managed slices.\n");
        return kExitOk;
    }
    fmt::print("\n{}", slices_table(rows, /*full=*/true));
    return kExitOk;
}

int list(ManagerProxy& p, bool as_json) {
    const std::vector<SliceRow> rows = list_slices(p);
    if (as_json) {
        json j = json::array();
        for (const auto& r : rows) j.push_back(slice_row_json(r));
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    if (rows.empty())
        fmt::print("No managed slices.\n");
    else
        fmt::print("{}", slices_table(rows, /*full=*/false));
    return kExitOk;
}

int show(ManagerProxy& p, const std::string& unit, bool as_json) {
    const auto props = p.GetSlice(unit);
    if (as_json) {
        fmt::print("{}\n", variants_to_json(props).dump(2));
        return kExitOk;
    }
    static const std::set<std::string> not_bytes = {"weight"};
    Table t({"KEY", "VALUE"});
    for (const auto& [key, v] : props) {
        const json j = variant_to_json(v);
        std::string value;
        if (j.is_number_unsigned() && !not_bytes.contains(key))
            value = fmt::format("{} ({})", format_bytes(j.get<uint64_t>()), j.get<uint64_t>());
        else if (j.is_boolean())
            value = yes_no(j.get<bool>());
        else if (j.is_string())
            value = j.get<std::string>();
        else if (j.is_array()) {
            for (const auto& e : j) value += (value.empty() ? "" : " ") + e.get<std::string>();
        } else
            value = j.dump();
        t.add_row({key, value});
    }
    fmt::print("{}", t.render(use_color(stdout)));
    return kExitOk;
}

int explain(ManagerProxy& p, const std::string& unit, bool as_json) {
    const std::string text = p.Explain(unit);
    if (as_json)
        fmt::print("{}\n", json{{"unit", unit}, {"explanation", text}}.dump(2));
    else
        fmt::print("{}{}", text, text.ends_with('\n') ? "" : "\n");
    return kExitOk;
}

int plan(ManagerProxy& p, bool as_json) {
    const auto writes = p.GetPlan();
    if (as_json) {
        json j = json::array();
        for (const auto& w : writes)
            j.push_back({{"unit", std::get<0>(w)},
                         {"memory_low", std::get<1>(w)},
                         {"memory_min", std::get<2>(w)},
                         {"phase", std::get<3>(w) ? "decrease" : "increase"}});
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    if (writes.empty()) {
        fmt::print("No changes pending.\n");
        return kExitOk;
    }
    Table t({"UNIT", ">MEMORYLOW", ">MEMORYMIN", "PHASE"});
    for (const auto& w : writes)
        t.add_row({std::get<0>(w), format_bytes(std::get<1>(w)), format_bytes(std::get<2>(w)),
                   std::get<3>(w) ? "decrease" : "increase"});
    fmt::print("{}", t.render(use_color(stdout)));
    return kExitOk;
}

int dump(ManagerProxy& p) {
    const std::string text = p.Dump();
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    fmt::print("{}\n", j.is_discarded() ? text : j.dump(2));
    return kExitOk;
}

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

int reload(ManagerProxy& p) {
    p.Reload();
    fmt::print("Configuration reloaded.\n");
    return kExitOk;
}

int set_mode(ManagerProxy& p, const std::string& mode) {
    p.SetMode(mode);
    return kExitOk;
}

// "Weight=200" → u, "Manage=no" → b, everything else as the string given
// (the daemon parses sizes and reports unknown keys).
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

int monitor(sdbus::IConnection& conn, ManagerProxy& p, bool as_json, int count) {
    int seen = 0;
    auto emit = [&](const json& j, const std::string& text) {
        if (as_json)
            fmt::print("{}\n", j.dump());
        else
            fmt::print(
                "{} {}\n",
                format_realtime(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count())),
                text);
        std::fflush(stdout);
        ++seen;
    };
    p.plan_applied = [&](uint64_t ts, uint32_t writes) {
        emit({{"signal", "PlanApplied"}, {"timestamp", ts}, {"writes", writes}},
             fmt::format("plan applied: {} write(s)", writes));
    };
    p.pressure_changed = [&](const std::string& unit, double avg10) {
        emit({{"signal", "PressureChanged"}, {"unit", unit}, {"some_avg10", avg10}},
             fmt::format("pressure: {} some avg10 {:.2f}%", unit, avg10));
    };
    p.config_reloaded = [&](bool ok, const std::vector<std::string>& errors) {
        std::string text = ok ? "configuration reloaded" : "configuration reload failed:";
        for (const auto& e : errors) text += "\n    " + e;
        emit({{"signal", "ConfigReloaded"}, {"ok", ok}, {"errors", errors}}, text);
    };
    p.properties_changed = [&](const std::map<std::string, sdbus::Variant>& changed) {
        std::string text;
        for (const auto& [k, v] : changed) {
            const json j = variant_to_json(v);
            std::string shown = j.is_string() ? j.get<std::string>() : j.dump();
            if (k == "Budget" && j.is_number_unsigned())
                shown = format_bytes(j.get<uint64_t>());
            else if (k == "LastPlanTimestamp")
                continue;  // PlanApplied says it
            text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", k, shown);
        }
        if (!text.empty())
            emit({{"signal", "PropertiesChanged"}, {"changed", variants_to_json(changed)}}, text);
    };

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        fmt::print(stderr, "memprotctl: signalfd: {}\n", std::strerror(errno));
        return kExitFailure;
    }
    // Tests and scripts wait for this line before they make things happen.
    fmt::print(stderr, "Monitoring {} on {}; press Ctrl-C to stop.\n", kBusName, bus_description());
    std::fflush(stderr);
    int rc = kExitOk;
    while (count <= 0 || seen < count) {
        while (sdbus_compat::process_pending(conn) && (count <= 0 || seen < count)) {
        }
        if (count > 0 && seen >= count)
            break;
        const sdbus_compat::PollData pd = sdbus_compat::poll_data(conn);
        // fds[2] is sdbus-c++ 2's event fd; poll(2) skips a negative fd.
        struct pollfd fds[3] = {{pd.fd, pd.events, 0}, {sfd, POLLIN, 0}, {pd.event_fd, POLLIN, 0}};
        const int r = ::poll(fds, 3, pd.poll_timeout_ms);
        if (r < 0 && errno != EINTR) {
            rc = kExitFailure;
            break;
        }
        if (fds[1].revents & POLLIN)
            break;
        if (fds[0].revents & (POLLHUP | POLLERR)) {
            fmt::print(stderr, "memprotctl: the bus connection closed\n");
            rc = kExitFailure;
            break;
        }
    }
    ::close(sfd);
    return rc;
}

}  // namespace

BusVerbs::BusVerbs(CLI::App& app) {
    auto add = [&](const char* name, const char* help) {
        CLI::App* cmd = app.add_subcommand(name, help);
        verbs_.push_back({cmd, name});
        return cmd;
    };
    auto json_flag = [&](CLI::App* cmd) {
        cmd->add_flag("--json", json_, "print JSON (see README § JSON output)");
    };

    json_flag(add("status", "Show kernel features, mode, budget and every managed slice"));
    json_flag(add("list", "List the managed slices with their protection"));
    auto* show = add("show", "Show everything the engine knows about one slice");
    show->add_option("UNIT", unit_, "slice unit, e.g. workload.slice")->required();
    json_flag(show);
    auto* expl = add("explain", "Explain in words why a slice gets the protection it gets");
    expl->add_option("UNIT", unit_, "slice unit, e.g. workload.slice")->required();
    json_flag(expl);
    json_flag(add("plan", "List the writes of the last plan"));
    auto* mon = add("monitor", "Follow plans, pressure events, reloads and mode changes until interrupted");
    mon->add_option("--count", count_, "exit after N events")->check(CLI::NonNegativeNumber);
    json_flag(mon);
    add("reload", "Reload the configuration (like SIGHUP); prints the errors if it is invalid");
    auto* mode = add("mode", "Switch the mode until the next restart");
    mode->add_option("MODE", mode_, "enforce, dry-run or paused")
        ->required()
        ->check(CLI::IsMember({"enforce", "dry-run", "paused"}));
    auto* set = add("set", "Set a runtime policy for a slice (lost on restart)");
    set->add_option("UNIT", unit_, "slice unit, e.g. workload.slice")->required();
    set->add_option("ASSIGNMENT", assignments_,
                    "Weight=N, MinProtection=SIZE, MaxProtection=SIZE, Floor=SIZE, Manage=yes|no; "
                    "an empty value unsets the key")
        ->required();
    set->footer("SIZE as in the configuration: 512M, 2G, 75%, infinity.");
    auto* reset = add("reset", "Drop a slice's runtime policy");
    reset->add_option("UNIT", unit_, "slice unit, e.g. workload.slice")->required();
    add("metrics", "Print OpenMetrics text for node_exporter's textfile collector");
    add("dump", "Print the daemon's whole state as JSON");
}

std::optional<int> BusVerbs::run() const {
    const Verb* verb = nullptr;
    for (const Verb& v : verbs_)
        if (v.cmd->parsed())
            verb = &v;
    if (!verb)
        return std::nullopt;
    const std::string& name = verb->name;
    try {
        auto conn = connect();
        ManagerProxy p(*conn, /*subscribe=*/name == "monitor");
        if (name == "status")
            return status(p, json_);
        if (name == "list")
            return list(p, json_);
        if (name == "show")
            return show(p, unit_, json_);
        if (name == "explain")
            return explain(p, unit_, json_);
        if (name == "plan")
            return plan(p, json_);
        if (name == "monitor") {
            (void)p.Version();  // fails now when the daemon is not there
            return monitor(*conn, p, json_, count_);
        }
        if (name == "reload")
            return reload(p);
        if (name == "mode")
            return set_mode(p, mode_);
        if (name == "set")
            return set_policy(p, unit_, assignments_);
        if (name == "reset")
            return reset_policy(p, unit_);
        if (name == "metrics")
            return metrics(p);
        if (name == "dump")
            return dump(p);
        return kExitUsage;
    } catch (const NoDaemon& e) {
        fmt::print(stderr, "memprotd is not running ({}): start it with systemctl start memprotd\n",
                   e.detail);
        return kExitNoDaemon;
    } catch (const CLI::ValidationError& e) {
        fmt::print(stderr, "memprotctl {}: {}\n", name, e.what());
        return kExitUsage;
    } catch (const sdbus::Error& e) {
        if (is_not_running(e)) {
            fmt::print(stderr,
                       "memprotd is not running ({} not on {}): start it with systemctl start memprotd\n",
                       kBusName, bus_description());
            return kExitNoDaemon;
        }
        if (e.getName() == "org.freedesktop.DBus.Error.AccessDenied")
            fmt::print(stderr, "memprotctl {}: permission denied: {}\n", name, e.getMessage());
        else if (e.getName() == kErrorConfigInvalid)
            fmt::print(stderr,
                       "memprotctl {}: the configuration is invalid; keeping the last good one:\n{}\n", name,
                       e.getMessage());
        else
            fmt::print(stderr, "memprotctl {}: {}\n", name, e.getMessage());
        return kExitFailure;
    } catch (const std::exception& e) {
        fmt::print(stderr, "memprotctl {}: {}\n", name, e.what());
        return kExitFailure;
    }
}

}  // namespace memprotd
