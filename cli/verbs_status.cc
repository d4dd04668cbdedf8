// SPDX-License-Identifier: LGPL-2.1-or-later
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "format.h"
#include "offline_verbs.h"
#include "systemd_query.h"
#include "table.h"
#include "verbs.h"

namespace memprotd::ctl {

using nlohmann::json;

namespace {

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
    return fmt::format("{} since start ({} early, after a PSI trigger, reload or policy change)", num("total"),
                       num("early"));
}

// memprotd's own CPU since start, every part of it: the ticks' parts, the
// D-Bus calls it served, and the rest of the process (start-up, the loop).
std::string cpu_line(const json& t) {
    if (!t.is_object() || !t.contains("process_cpu_us"))
        return "not reported by this daemon";
    const auto s = [&](const char* k) { return static_cast<double>(t.value(k, uint64_t{0})) / 1e6; };
    const double ticks = s("cpu_us"), bus = s("bus_cpu_us"), process = s("process_cpu_us");
    const double other = ticks - s("sample_cpu_us") - s("systemd_cpu_us") - s("aging_cpu_us") - s("trim_cpu_us") -
                         s("signal_cpu_us") - s("engine_cpu_us") - s("log_cpu_us") - s("record_cpu_us");
    const double uptime = s("uptime_us");
    return fmt::format("{:.2f} s ({:.2f}% of one CPU over {:.0f} s): ticks {:.2f} s (sampling {:.2f}, engine {:.2f}, "
                       "systemd calls {:.2f}, aging {:.2f}, trimming {:.2f}, logging {:.2f}, recording {:.2f}, signals {:.2f}, "
                       "other {:.2f}), "
                       "D-Bus calls served {:.2f} s, elsewhere {:.2f} s (start-up included); {} major page faults "
                       "(pages read from disk or swap)",
                       process, uptime > 0 ? 100.0 * process / uptime : 0.0, uptime, ticks, s("sample_cpu_us"),
                       s("engine_cpu_us"), s("systemd_cpu_us"), s("aging_cpu_us"), s("trim_cpu_us"), s("log_cpu_us"),
                       s("record_cpu_us"),
                       s("signal_cpu_us"), std::max(0.0, other), bus, std::max(0.0, process - ticks - bus),
                       t.value("major_faults", uint64_t{0}));
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

// Trimming cheap cache: the mechanism and what it did since start, or why
// it does nothing.
std::string trim_line(const json& t, const std::string& mode) {
    if (!t.is_object())
        return "not reported by this daemon";
    const auto num = [&](const char* k) { return t.value(k, uint64_t{0}); };
    const std::string mech = t.value("mechanism", std::string("none"));
    if (mech == "none")
        return "off (" + t.value("why", std::string()) + ")";
    std::string line = fmt::format("{} (TrimCheapCache={}): {} trim(s), {} asked for since start", mech,
                                   t.value("setting", std::string("auto")), num("trims"), format_bytes(num("bytes")));
    line += fmt::format(", {} with nothing to evict, {} incomplete, {} gone before their write, {} failed",
                        num("skipped"), num("incomplete"), num("vanished"), num("failed"));
    if (mode != "enforce")
        line += fmt::format(" (trims only in enforce mode; mode is {})", mode);
    const std::string err = t.value("last_error", std::string());
    if (!err.empty())
        line += "; last error: " + err;
    return line;
}

// Whether memprotd's own pages are locked in RAM, and why not.
std::string lock_line(const json& l) {
    if (!l.is_object())
        return "not reported by this daemon";
    if (l.value("locked", false))
        return "own memory locked in RAM (mlockall)";
    const std::string why = l.value("reason", std::string());
    return "own memory not locked, reclaim may page memprotd out: " + (why.empty() ? "no reason given" : why);
}

// systemd-oomd as systemd reports it: whether it may kill beside the
// protection memprotd gives.
std::string oomd_line(const Result<OomdState>& s) {
    if (!s)
        return fmt::format("unknown (systemd did not answer on {}: {})", bus_description(), s.error().message);
    if (!s->installed)
        return "not installed";
    if (s->active_state != "active")
        return s->active_state;
    return "active: it kills in slices with ManagedOOMSwap=kill or ManagedOOMMemoryPressure=kill, whatever "
           "their protection (memprotctl explain SLICE shows a slice's)";
}

json oomd_json(const Result<OomdState>& s) {
    if (!s)
        return {{"known", false}, {"error", s.error().to_string()}};
    return {{"known", true}, {"installed", s->installed}, {"active_state", s->active_state}};
}

}  // namespace

int status(sdbus::IConnection& conn, ManagerProxy& p, bool as_json) {
    const auto props = sdbus_compat::to_string_map(p.GetAll(kInterface));
    const std::vector<SliceRow> rows = list_slices(p);
    const auto features = prop<std::map<std::string, sdbus::Variant>>(props, "KernelFeatures");
    const json dump = dump_of(p);
    const json aging = dump.value("working_set_aging", json(nullptr));
    const json trimming = dump.value("trimming", json(nullptr));
    const json ticks = dump.value("ticks", json(nullptr));
    const json yielded = dump.value("yielded", json::array());
    const json memory_lock = dump.value("memory_lock", json(nullptr));
    const Result<OomdState> oomd = oomd_state(conn);
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
            {"trimming", trimming},
            {"ticks", ticks},
            {"memory_lock", memory_lock},
            {"systemd_oomd", oomd_json(oomd)},
            {"yielded", yielded},
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
    fmt::print("Trim:     {}\n", trim_line(trimming, prop<std::string>(props, "Mode")));
    fmt::print("Ticks:    {}\n", ticks_line(ticks));
    fmt::print("CPU:      {}\n", cpu_line(ticks));
    fmt::print("Locked:   {}\n", lock_line(memory_lock));
    fmt::print("OOM:      systemd-oomd {}\n", oomd_line(oomd));
    for (const json& y : yielded)
        fmt::print("Yielded:  {}: another writer set memory.low {} (memprotd wrote {}); not written until "
                   "`memprotctl reset {}` or a reload\n",
                   y.value("unit", std::string()), format_bytes(y.value("memory_low", uint64_t{0})),
                   format_bytes(y.value("wrote_memory_low", uint64_t{0})), y.value("unit", std::string()));
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

int explain(sdbus::IConnection& conn, ManagerProxy& p, const std::string& unit, bool as_json) {
    const std::string text = p.Explain(unit);
    // systemd's answer is shown when it has one: a bus without systemd
    // (or a unit it does not know) leaves the daemon's explanation alone.
    const Result<ManagedOom> oom = managed_oom(conn, unit);
    if (as_json) {
        json j = {{"unit", unit}, {"explanation", text}};
        j["managed_oom"] = oom ? json{{"swap", oom->swap}, {"memory_pressure", oom->memory_pressure}} : json(nullptr);
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    fmt::print("{}{}", text, text.ends_with('\n') ? "" : "\n");
    if (oom && oom->set())
        fmt::print("systemd-oomd: ManagedOOMSwap={} ManagedOOMMemoryPressure={}: systemd-oomd may kill cgroups "
                   "below {} under swap use or memory pressure, whatever their protection (docs/configuration.md, "
                   "\"Beside systemd-oomd\")\n",
                   oom->swap, oom->memory_pressure, unit);
    return kExitOk;
}

int plan(ManagerProxy& p, bool as_json) {
    std::vector<WriteRow> writes;
    for (const auto& wire : p.GetPlan())
        writes.push_back(WriteRow::from_wire(wire));
    if (as_json) {
        json j = json::array();
        for (const WriteRow& w : writes)
            j.push_back({{"unit", w.unit}, {"memory_low", w.memory_low}, {"memory_min", w.memory_min},
                         {"phase", w.phase()}});
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    if (writes.empty()) {
        fmt::print("No changes pending.\n");
        return kExitOk;
    }
    Table t({"UNIT", ">MEMORYLOW", ">MEMORYMIN", "PHASE"});
    for (const WriteRow& w : writes)
        t.add_row({w.unit, format_bytes(w.memory_low), format_bytes(w.memory_min), w.phase()});
    fmt::print("{}", t.render(use_color(stdout)));
    return kExitOk;
}

int dump(ManagerProxy& p) {
    const std::string text = p.Dump();
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    fmt::print("{}\n", j.is_discarded() ? text : j.dump(2));
    return kExitOk;
}

}  // namespace memprotd::ctl
