// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl: the command-line client. Offline verbs (simulate,
// check-config) run here; the others talk to memprotd over D-Bus.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

#include "config.h"
#include "ctl_verbs.h"
#include "memprotd-config.h"
#include "offline_verbs.h"
#include "record_verbs.h"

using namespace memprotd;

namespace {

// CLI11 validator for sizes written as in the config ("16G", "17179869184").
uint64_t parse_bytes_option(const std::string& s) {
    auto r = parse_size(s);
    if (!r || r->kind != SizeSpec::Kind::Bytes)
        throw CLI::ValidationError("--memory-total", "expected bytes with an optional K/M/G/T suffix, got \"" + s + "\"");
    return r->bytes;
}

uint64_t parse_interval_option(const std::string& s) {
    auto r = parse_timespan_us(s);
    if (!r || *r == 0 || *r > kMaxIntervalUs)
        throw CLI::ValidationError("--interval",
                                   "expected a time span > 0 and at most 1h, such as 5s or 1min, got \"" + s + "\"");
    return *r;
}

// --root, --proc-root and --debugfs-root: where simulate and record read a tree.
template <class Options>
void add_tree_options(CLI::App* sub, Options& o) {
    sub->add_option("--root", o.root, "cgroup2 tree to read (any directory laid out like cgroupfs)")
        ->capture_default_str();
    sub->add_option("--proc-root", o.proc_root, "where meminfo, pressure/memory and self/mounts are read")->capture_default_str();
    sub->add_option("--debugfs-root", o.debugfs_root, "where lru_gen is read (default: none for --root)");
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"memprotctl — query and steer memprotd, the memory protection daemon.\n"
                 "simulate, record and check-config work without the daemon and without root."};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("memprotctl ") + MEMPROTD_VERSION);
    app.footer("Exit status: 0 success, 1 failure, 2 usage error, 3 memprotd is not running.\n"
               "See memprotctl(1).");

    SimulateOptions sim;
    std::string sim_memory_total, sim_interval;
    auto* simulate = app.add_subcommand("simulate", "Run the policy engine on a cgroup tree and print the plan");
    add_tree_options(simulate, sim);
    simulate->add_option("--config-dir", sim.config_dir,
                         "take the whole configuration from DIR (memprotd.conf, memprotd.conf.d/, policy.d/)");
    simulate->add_option("--memory-total", sim_memory_total, "MemTotal to assume, e.g. 16G (default: meminfo)");
    simulate->add_option("--samples", sim.samples, "number of samples to run the engine for")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    simulate->add_option("--interval", sim_interval, "time between samples (default: Interval= from the config)");
    simulate->add_flag("--no-wait", sim.no_wait,
                       "take samples back to back and advance a simulated clock by --interval (static trees)");
    simulate->add_flag("--services", sim.include_services, "also list services and scopes below slices");
    auto* explain = simulate
                        ->add_option("--explain", sim.explain_unit,
                                     "explain the numbers in words: of every slice, or only of UNIT")
                        ->expected(0, 1)
                        ->type_name("[UNIT]");
    simulate->add_flag("--json", sim.json, "print JSON (see docs/api.md § JSON output)");
    ReplayOptions replay;
    auto* replay_opt =
        simulate->add_option("--replay", replay.trace,
                             "run the engine over a trace (memprotctl record, memprotd --record) instead of a tree; "
                             "see docs/trace.md");
    for (const char* name : {"--root", "--proc-root", "--debugfs-root", "--memory-total", "--samples", "--interval",
                             "--no-wait", "--services"})
        replay_opt->excludes(name);

    RecordOptions rec;
    std::string rec_memory_total, rec_interval;
    auto* record = app.add_subcommand("record", "Record the engine's inputs from a cgroup tree into a trace file");
    add_tree_options(record, rec);
    record->add_option("--memory-total", rec_memory_total, "MemTotal to record instead of meminfo's, e.g. 16G");
    record->add_option("--samples", rec.samples, "number of samples to record")
        ->capture_default_str()
        ->check(CLI::Range(1, 10000000));
    record->add_option("--interval", rec_interval,
                       "time between samples (default: 5s, or with --append the trace's interval)");
    record->add_flag("--no-wait", rec.no_wait,
                     "take the samples back to back, stamped --interval apart in simulated time (static trees)");
    record->add_option("--output,-o", rec.output, "the trace file to write (JSON lines, docs/trace.md)")->required();
    record->add_flag("--append", rec.append, "continue an existing trace; times follow its last sample");

    CheckConfigOptions cc;
    auto* check = app.add_subcommand("check-config", "Validate the configuration and print the effective policy");
    check->add_option("--config-dir", cc.config_dir, "check DIR instead of the search path");
    check->add_flag("--json", cc.json, "print JSON");

    BusVerbs bus_verbs(app);

    try {
        app.parse(argc, argv);
        if (!sim_memory_total.empty())
            sim.memory_total = parse_bytes_option(sim_memory_total);
        if (!sim_interval.empty())
            sim.interval_us = parse_interval_option(sim_interval);
        sim.explain = explain->count() > 0;
        replay.json = sim.json;
        replay.config_dir = sim.config_dir;
        replay.explain = sim.explain;
        replay.explain_unit = sim.explain_unit;
        if (!rec_memory_total.empty())
            rec.memory_total = parse_bytes_option(rec_memory_total);
        if (!rec_interval.empty())
            rec.interval_us = parse_interval_option(rec_interval);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitUsage;
    }

    try {
        if (*simulate)
            return replay_opt->count() > 0 ? run_replay(replay) : run_simulate(sim);
        if (*record)
            return run_record(rec);
        if (*check)
            return run_check_config(cc);
        if (const auto rc = bus_verbs.run())
            return *rc;
    } catch (const std::exception& e) {
        fmt::print(stderr, "memprotctl: {}\n", e.what());
        return kExitFailure;
    }
    return kExitUsage;
}
