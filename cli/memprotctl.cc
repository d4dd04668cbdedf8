// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl: the command-line client. Offline verbs (simulate,
// check-config) run here; the others talk to memprotd over D-Bus.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <optional>
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

// The verbs that work without the daemon: simulate (a tree or --replay
// of a trace), record and check-config. Their options are bound to the
// members, so an OfflineVerbs must outlive the parse.
class OfflineVerbs {
public:
    explicit OfflineVerbs(CLI::App& app) {
        add_simulate(app);
        add_record(app);
        check_ = app.add_subcommand("check-config", "Validate the configuration and print the effective policy");
        check_->add_option("--config-dir", cc_.config_dir, "check DIR instead of the search path");
        check_->add_flag("--json", cc_.json, "print JSON");
    }

    // After a successful parse: the values CLI11 keeps as text, checked and
    // converted (CLI::ValidationError on a bad one), and replay's share of
    // simulate's options.
    void finish_parse() {
        if (!sim_memory_total_.empty())
            sim_.memory_total = parse_bytes_option(sim_memory_total_);
        if (!sim_interval_.empty())
            sim_.interval_us = parse_interval_option(sim_interval_);
        sim_.explain = explain_->count() > 0;
        replay_.json = sim_.json;
        replay_.config_dir = sim_.config_dir;
        replay_.explain = sim_.explain;
        replay_.explain_unit = sim_.explain_unit;
        if (!rec_memory_total_.empty())
            rec_.memory_total = parse_bytes_option(rec_memory_total_);
        if (!rec_interval_.empty())
            rec_.interval_us = parse_interval_option(rec_interval_);
    }

    // The exit code when one of these verbs was given, nullopt otherwise.
    [[nodiscard]] std::optional<int> run() const {
        if (*simulate_)
            return replay_opt_->count() > 0 ? run_replay(replay_) : run_simulate(sim_);
        if (*record_)
            return run_record(rec_);
        if (*check_)
            return run_check_config(cc_);
        return std::nullopt;
    }

private:
    void add_simulate(CLI::App& app) {
        simulate_ = app.add_subcommand("simulate", "Run the policy engine on a cgroup tree and print the plan");
        add_tree_options(simulate_, sim_);
        simulate_->add_option("--config-dir", sim_.config_dir,
                              "take the whole configuration from DIR (memprotd.conf, memprotd.conf.d/, policy.d/)");
        simulate_->add_option("--memory-total", sim_memory_total_, "MemTotal to assume, e.g. 16G (default: meminfo)");
        simulate_->add_option("--samples", sim_.samples, "number of samples to run the engine for")
            ->capture_default_str()
            ->check(CLI::Range(1, 100000));
        simulate_->add_option("--interval", sim_interval_, "time between samples (default: Interval= from the config)");
        simulate_->add_flag("--no-wait", sim_.no_wait,
                            "take samples back to back and advance a simulated clock by --interval (static trees)");
        simulate_->add_flag("--services", sim_.include_services, "also list services and scopes below slices");
        explain_ = simulate_
                       ->add_option("--explain", sim_.explain_unit,
                                    "explain the numbers in words: of every slice, or only of UNIT")
                       ->expected(0, 1)
                       ->type_name("[UNIT]");
        simulate_->add_flag("--json", sim_.json, "print JSON (see docs/api.md § JSON output)");
        replay_opt_ = simulate_->add_option(
            "--replay", replay_.trace,
            "run the engine over a trace (memprotctl record, memprotd --record) instead of a tree; "
            "see docs/trace.md");
        for (const char* name : {"--root", "--proc-root", "--debugfs-root", "--memory-total", "--samples",
                                 "--interval", "--no-wait", "--services"})
            replay_opt_->excludes(name);
    }

    void add_record(CLI::App& app) {
        record_ = app.add_subcommand("record", "Record the engine's inputs from a cgroup tree into a trace file");
        add_tree_options(record_, rec_);
        record_->add_option("--memory-total", rec_memory_total_, "MemTotal to record instead of meminfo's, e.g. 16G");
        record_->add_option("--samples", rec_.samples, "number of samples to record")
            ->capture_default_str()
            ->check(CLI::Range(1, 10000000));
        record_->add_option("--interval", rec_interval_,
                            "time between samples (default: 5s, or with --append the trace's interval)");
        record_->add_flag("--no-wait", rec_.no_wait,
                          "take the samples back to back, stamped --interval apart in simulated time (static trees)");
        record_->add_option("--output,-o", rec_.output, "the trace file to write (JSON lines, docs/trace.md)")
            ->required();
        record_->add_flag("--append", rec_.append, "continue an existing trace; times follow its last sample");
    }

    SimulateOptions sim_;
    ReplayOptions replay_;
    RecordOptions rec_;
    CheckConfigOptions cc_;
    std::string sim_memory_total_, sim_interval_, rec_memory_total_, rec_interval_;
    CLI::App* simulate_ = nullptr;
    CLI::App* record_ = nullptr;
    CLI::App* check_ = nullptr;
    CLI::Option* explain_ = nullptr;
    CLI::Option* replay_opt_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"memprotctl — query and steer memprotd, the memory protection daemon.\n"
                 "simulate, record and check-config work without the daemon and without root."};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("memprotctl ") + MEMPROTD_VERSION);
    app.footer("Exit status: 0 success, 1 failure, 2 usage error, 3 memprotd is not running.\n"
               "See memprotctl(1).");
    OfflineVerbs offline(app);
    BusVerbs bus_verbs(app);
    try {
        app.parse(argc, argv);
        offline.finish_parse();
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitUsage;
    }
    try {
        if (const auto rc = offline.run())
            return *rc;
        if (const auto rc = bus_verbs.run())
            return *rc;
    } catch (const std::exception& e) {
        fmt::print(stderr, "memprotctl: {}\n", e.what());
        return kExitFailure;
    }
    return kExitUsage;
}
