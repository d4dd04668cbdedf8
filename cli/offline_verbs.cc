// SPDX-License-Identifier: LGPL-2.1-or-later
#include "offline_verbs.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config_loader.h"
#include "engine.h"
#include "format.h"
#include "parse.h"
#include "plan_json.h"
#include "probe.h"
#include "sampler.h"
#include "table.h"

namespace memprotd {

std::vector<std::string> config_dirs(const std::string& config_dir) {
    return config_dir.empty() ? default_config_dirs() : std::vector<std::string>{config_dir};
}

void print_errors(const std::vector<Error>& errors) {
    for (const auto& e : errors)
        fmt::print(stderr, "{}\n", e.to_string());
}

void sleep_us(uint64_t us) {
    timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

std::string plan_table(const Plan& plan, bool color) {
    Table t({"UNIT", ">CURRENT", ">CHEAP", ">WSET", ">DEMAND", ">WEIGHT", ">LOW", ">MIN", ">NOW", ">NEXT", "BY"});
    for (const auto& e : plan.slices) {
        const Explanation& x = e.x;
        t.add_row({std::string(static_cast<size_t>(e.depth) * 2, ' ') + e.unit, format_bytes(x.current),
                   format_bytes(x.cheap_cache), format_bytes(x.working_set), format_bytes(x.demand),
                   std::to_string(x.weight), format_bytes(x.target_low), format_bytes(x.target_min),
                   format_bytes(x.prior.memory_low), e.write() ? format_bytes(x.next.memory_low) : "-",
                   std::string(bound_name(x.bound))});
    }
    return t.render(color);
}

std::string plan_legend() {
    return "CHEAP: unmapped, clean page cache reclaim takes first (inactive; active too while reclaim\n"
           "turns the cache over); WSET: working set; LOW/MIN: targets; NOW: MemoryLow before the last\n"
           "tick; NEXT: what the last tick writes (- = nothing).\n";
}

void print_explanations(const Plan& plan, bool explain, const std::string& unit) {
    if (explain)
        for (const auto& e : plan.slices)
            if (unit.empty() || e.unit == unit)
                fmt::print("\n{}", explain_text(plan, e));
    if (explain && !unit.empty())
        if (const UnmanagedSlice* u = plan.find_unmanaged(unit))
            fmt::print("\n{}", explain_unmanaged(*u));
    for (const auto& n : plan.notes)
        fmt::print("note: {}\n", n);
}

KernelFeatures probe_tree(const std::string& root, const std::string& proc_root) {
    const bool live = root == "/sys/fs/cgroup";
    ProbeRoots roots;
    roots.cgroup_root = root;
    roots.proc_root = proc_root;
    roots.mounts_file = proc_root + "/self/mounts";
    if (!live) {
        // A fake tree is not in the mount table; the probe then judges the
        // tree by its files, and the host's MGLRU does not apply to it.
        roots.sys_root = root + "/.none";
        roots.debugfs_root = root + "/.none";
    }
    return probe_features(roots);
}

SamplerOptions tree_sampler_options(const std::string& root, const std::string& proc_root,
                                    const std::string& debugfs_root, bool include_services) {
    const bool live = root == "/sys/fs/cgroup";
    SamplerOptions so;
    so.cgroup_root = root;
    so.proc_root = proc_root;
    so.debugfs_root = !debugfs_root.empty() ? debugfs_root : live ? "/sys/kernel/debug" : "";
    so.read_lru_gen = !so.debugfs_root.empty();
    so.include_services = include_services;
    return so;
}

int run_simulate(const SimulateOptions& o) {
    const KernelFeatures features = probe_tree(o.root, o.proc_root);
    if (!features.unusable_reason.empty()) {
        fmt::print(stderr, "memprotctl: cannot simulate on {}: {}\n", o.root, features.unusable_reason);
        return kExitFailure;
    }
    Sampler sampler(tree_sampler_options(o.root, o.proc_root, o.debugfs_root, o.include_services));

    // With --no-wait the samples are taken back to back and the clock the
    // engine sees advances by the interval, as if that time had passed.
    const int64_t t0 = monotonic_us();
    Snapshot snap;
    sampler.sample(snap, t0);
    const uint64_t mem_total = o.memory_total ? o.memory_total : snap.meminfo.mem_total;
    if (mem_total == 0) {
        fmt::print(stderr, "memprotctl: MemTotal is unknown (no {}/meminfo); pass --memory-total\n", o.proc_root);
        return kExitFailure;
    }

    ConfigParse cp = load_config(config_dirs(o.config_dir), mem_total);
    if (!cp.ok()) {
        print_errors(cp.errors);
        fmt::print(stderr, "memprotctl: the configuration has {} error(s); nothing simulated\n", cp.errors.size());
        return kExitFailure;
    }
    // --interval stands in for Interval=: the engine's rate limits and
    // holds count intervals, so it must see the one the samples use.
    if (o.interval_us)
        cp.config.daemon.interval_us = o.interval_us;
    const uint64_t interval = cp.config.daemon.interval_us;
    Engine engine(std::move(cp.config));

    // Start from what the tree has, and apply each tick's writes to the
    // simulated state, as systemd would, so later ticks see them.
    CurrentProtections current;
    for (const auto& cg : snap.cgroups)
        current[cg.unit] = {cg.low, cg.min};
    Plan plan;
    for (int i = 0; i < o.samples; ++i) {
        if (i > 0) {
            if (!o.no_wait)
                sleep_us(interval);
            sampler.sample(snap, o.no_wait ? t0 + static_cast<int64_t>(interval) * i : monotonic_us());
        }
        plan = engine.tick(snap, features, current, o.memory_total);
        for (const auto& w : plan.writes)
            current[w.unit] = w.values;
        engine.trims_made(plan.trims, plan.timestamp_us);  // as if made, like its writes (nothing is)
    }

    for (const auto& e : snap.errors)
        fmt::print(stderr, "warning: {}\n", e.to_string());

    if (o.json) {
        auto j = plan_to_json(plan);
        j["samples"] = o.samples;
        j["root"] = o.root;
        fmt::print("{}\n", j.dump(2));
        return kExitOk;
    }
    const bool color = use_color(stdout);
    fmt::print("Simulation of {} ({} sample{}{}; nothing is written)\n", o.root, o.samples, o.samples == 1 ? "" : "s",
               o.samples > 1 ? fmt::format(", {} ms apart{}", interval / 1000, o.no_wait ? " in simulated time" : "")
                             : "");
    fmt::print("Memory {}, budget {} ({}), demand {}, protected {}, floors {}{}\n\n",
               format_bytes(plan.memory_total), format_bytes(plan.budget),
               plan.budget_factor < 1.0 ? fmt::format("cut to {:.0f}%", plan.budget_factor * 100) : "full",
               format_bytes(plan.demand_total), format_bytes(plan.protected_total), format_bytes(plan.floors),
               plan.swap ? ", swap on" : ", no swap");
    fmt::print("{}\n{}", plan_table(plan, color), plan_legend());
    print_explanations(plan, o.explain, o.explain_unit);
    return kExitOk;
}

int run_check_config(const CheckConfigOptions& o) {
    ConfigParse cp = load_config(config_dirs(o.config_dir));
    if (o.json) {
        nlohmann::json j = config_to_json(cp.config);
        j["errors"] = nlohmann::json::array();
        for (const auto& e : cp.errors)
            j["errors"].push_back({{"file", e.file}, {"line", e.line}, {"key", e.key}, {"message", e.message}});
        fmt::print("{}\n", j.dump(2));
        return cp.ok() ? kExitOk : kExitFailure;
    }
    if (!cp.ok()) {
        print_errors(cp.errors);
        fmt::print(stderr, "{} error(s) in the configuration\n", cp.errors.size());
        return kExitFailure;
    }
    const Config& c = cp.config;
    fmt::print("Configuration is valid.\n");
    if (c.files.empty())
        fmt::print("No configuration files found; built-in defaults apply.\n");
    for (const auto& f : c.files)
        fmt::print("  read {}\n", f);
    fmt::print("\n{}", format_daemon_config(c.daemon));
    if (!c.policies.empty()) {
        Table t({"SLICES", ">WEIGHT", ">MIN", ">MAX", ">FLOOR", "MANAGE", ">WINDOW", "FILE"});
        for (const auto& r : c.policies) {
            std::string globs;
            for (const auto& g : r.globs)
                globs += (globs.empty() ? "" : " ") + g;
            const auto& p = r.protection;
            t.add_row({globs, p.weight ? std::to_string(*p.weight) : "-",
                       p.min_protection.set() ? p.min_protection.to_string() : "-",
                       p.max_protection.set() ? p.max_protection.to_string() : "-",
                       p.floor.set() ? p.floor.to_string() : "-", p.manage ? (*p.manage ? "yes" : "no") : "-",
                       p.working_set_window_us ? format_timespan(*p.working_set_window_us) : "-", r.file});
        }
        fmt::print("\nPolicies, in the order they apply:\n{}", t.render(use_color(stdout)));
    }
    return kExitOk;
}

}  // namespace memprotd
