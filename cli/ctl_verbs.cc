// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ctl_verbs.h"

#include <fmt/format.h>

#include "offline_verbs.h"
#include "verbs.h"

namespace memprotd {

BusVerbs::BusVerbs(CLI::App& app) {
    auto add = [&](const char* name, const char* help) {
        CLI::App* cmd = app.add_subcommand(name, help);
        verbs_.push_back({cmd, name});
        return cmd;
    };
    auto json_flag = [&](CLI::App* cmd) {
        cmd->add_flag("--json", json_, "print JSON (see docs/api.md § JSON output)");
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
                    "Weight=N, MinProtection=SIZE, MaxProtection=SIZE, Floor=SIZE, Manage=yes|no, "
                    "WorkingSetWindow=TIME; "
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
        auto conn = ctl::connect();
        ctl::ManagerProxy p(*conn, /*subscribe=*/name == "monitor");
        if (name == "status")
            return ctl::status(*conn, p, json_);
        if (name == "list")
            return ctl::list(p, json_);
        if (name == "show")
            return ctl::show(p, unit_, json_);
        if (name == "explain")
            return ctl::explain(*conn, p, unit_, json_);
        if (name == "plan")
            return ctl::plan(p, json_);
        if (name == "monitor") {
            (void)p.Version();  // fails now when the daemon is not there
            return ctl::monitor(*conn, p, json_, count_);
        }
        if (name == "reload")
            return ctl::reload(p);
        if (name == "mode")
            return ctl::set_mode(p, mode_);
        if (name == "set")
            return ctl::set_policy(p, unit_, assignments_);
        if (name == "reset")
            return ctl::reset_policy(p, unit_);
        if (name == "metrics")
            return ctl::metrics(p);
        if (name == "dump")
            return ctl::dump(p);
        return kExitUsage;
    } catch (const ctl::NoDaemon& e) {
        fmt::print(stderr, "memprotd is not running ({}): start it with systemctl start memprotd\n",
                   e.detail);
        return kExitNoDaemon;
    } catch (const CLI::ValidationError& e) {
        fmt::print(stderr, "memprotctl {}: {}\n", name, e.what());
        return kExitUsage;
    } catch (const sdbus::Error& e) {
        if (ctl::is_not_running(e)) {
            fmt::print(stderr,
                       "memprotd is not running ({} not on {}): start it with systemctl start memprotd\n",
                       kBusName, ctl::bus_description());
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
