// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The daemon's loop: on the sd-event loop, each tick samples, plans
// (Engine), applies (Applier), ages (AgingRunner), records (Recorder), logs
// and notifies. The configuration is RuntimeConfig's; the parts own their
// state.
//
// Threading: everything, including the callbacks below, runs on the thread
// that calls run() (or run_once()); nothing here is locked. The D-Bus
// adaptor dispatches its connection from event() (BusEventSource,
// manager_bus.h) so its handlers run on that same thread.
// Calls into the actuator are synchronous (5 s timeout each), so a method
// handler that triggers a tick can block the loop that long.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actuator.h"
#include "aging_runner.h"
#include "trim.h"
#include "trim_runner.h"
#include "applier.h"
#include "config.h"
#include "engine.h"
#include "logging.h"
#include "model.h"
#include "pressure_triggers.h"
#include "recorder.h"
#include "result.h"
#include "runtime_config.h"
#include "sampler.h"
#include "state_store.h"

namespace memprotd {

// In the runtime directory: when this file exists at stop, the daemon keeps
// the values it wrote and the record of prior values (as after a crash);
// the next start removes it. The Debian package creates it before an
// upgrade restarts the service, so an upgrade never drops protection.
inline constexpr const char* kKeepProtectionFile = "keep-protection";

struct ManagerOptions {
    SamplerOptions sampler;
    std::vector<std::string> config_dirs;      // priority order, as load_config takes them
    std::string runtime_dir = "/run/memprotd";  // state.json
    uint64_t memory_total_override = 0;         // --memory-total; 0 = MemTotal from meminfo
    bool force_dry_run = false;                 // --dry-run: dry-run whatever Mode= says
    // --root: no systemd. Current values come from the tree's memory.low/min,
    // nothing is ever written, set_mode(Enforce) is refused.
    bool tree_only = false;
    bool psi_triggers = true;  // one trigger per managed slice (not with --root)
    bool notify = true;        // sd_notify (a no-op without NOTIFY_SOCKET anyway)
    // --record: the trace file (docs/trace.md), replacing Record=; empty: Record= decides.
    std::string record_path;
    // The clock, CLOCK_MONOTONIC µs; tests replace it to step through backoff.
    std::function<int64_t()> now_us;
};

class Manager {
public:
    // `actuator` may be null only with options.tree_only. `features` is what
    // probe_features() found; the manager does not re-probe.
    Manager(ManagerOptions options, KernelFeatures features, std::unique_ptr<Actuator> actuator);
    ~Manager();
    Manager(const Manager&) = delete;
    Manager& operator=(const Manager&) = delete;

    // Reads MemTotal (for percentages), loads the configuration and the
    // state store. Returns every config error, with file and line; the
    // daemon must not start when there are any. A corrupt state file is
    // logged and set aside, not fatal.
    std::vector<Error> init();

    // One cycle now: sample, plan, apply (in enforce mode), log, notify.
    TickResult run_once();

    // The event loop until SIGTERM/SIGINT (or stop()). Ticks at once and
    // then every Interval=. Returns 0, or a negative errno when the loop
    // could not be set up. Calls shutdown() before returning.
    int run();
    // Leaves run() after the current callback.
    void stop();
    // Leaves run() with `error` (a negative errno) and without restoring:
    // for a lost bus, where systemd restarts the service and the restarted
    // daemon resumes from the record. Restoring now would only make every
    // protection flap.
    void fail(int error);
    // Restores prior values when RestoreOnExit=yes and the mode is enforce;
    // tells systemd we are stopping. Idempotent; run() calls it.
    std::vector<Error> shutdown();

    // Re-reads the configuration (SIGHUP). On errors the last good one is
    // kept and every error is logged and returned; on success the engine
    // uses the new one from the next tick. on_config_reloaded fires either way.
    std::vector<Error> reload();

    // --- for the D-Bus adaptor ---
    [[nodiscard]] const Plan& last_plan() const { return plan_; }
    [[nodiscard]] bool have_plan() const { return have_plan_; }
    [[nodiscard]] const KernelFeatures& features() const { return features_; }
    [[nodiscard]] const Snapshot& last_snapshot() const { return snapshot_; }
    // The configuration in effect: the last good files plus the runtime
    // overrides, appended as PolicyRules whose file is "runtime:<unit>".
    [[nodiscard]] const Config& config() const { return config_.effective(); }
    [[nodiscard]] Mode mode() const;
    // Enforce needs an actuator (not in --root mode). A runtime mode sticks
    // across reloads until the next set_mode. Leaving enforce keeps the
    // values as they are; it does not restore.
    Status set_mode(Mode mode);
    // Runtime policy for one unit (a name, not a glob), merged on top of
    // the files' policies; lost on restart. Takes effect at the next tick,
    // which is scheduled at once.
    Status set_slice_policy(const std::string& unit, const SlicePolicy& policy);
    // Also takes a unit back that was yielded to another writer (one whose
    // memory.low/min changed behind memprotd: Applier::check_writers); an
    // error only when there was neither a runtime policy nor a yield.
    Status reset_slice_policy(const std::string& unit);
    // Units left to another writer, until a reload or reset_slice_policy.
    [[nodiscard]] const std::map<std::string, YieldedUnit, std::less<>>& yielded() const;
    [[nodiscard]] const std::map<std::string, SlicePolicy>& slice_policy_overrides() const {
        return config_.overrides();
    }
    [[nodiscard]] uint64_t total_writes() const { return applier_ ? applier_->total_writes() : 0; }
    // Working-set aging (WorkingSetAging=) since start (AgingStats).
    [[nodiscard]] const AgingStats& aging() const;
    // Trimming cheap cache (TrimCheapCache=): the mechanism on this kernel and
    // why, and what it did since start (TrimStats).
    [[nodiscard]] TrimChoice trim_choice() const;
    [[nodiscard]] const TrimStats& trims() const;
    // Ticks since start, how many ran before their interval was up (a PSI
    // trigger, a reload or a policy change asked for one), and the CPU time
    // of the loop thread in them (the kernel's included): all of it, and
    // its parts: sampling (cgroup files, lru_gen), the calls to systemd
    // (reading and writing MemoryLow/MemoryMin), working-set aging, and the
    // signals after a plan. The rest of a tick is the engine and logging.
    // bus_cpu_us: D-Bus calls served outside ticks (add_bus_cpu).
    struct TickStats {
        uint64_t ticks = 0;
        uint64_t early = 0;
        uint64_t cpu_us = 0;
        uint64_t sample_cpu_us = 0;
        uint64_t systemd_cpu_us = 0;
        uint64_t aging_cpu_us = 0;
        uint64_t trim_cpu_us = 0;    // trimming cheap cache (the kernel's reclaim in the writes)
        uint64_t signal_cpu_us = 0;
        uint64_t engine_cpu_us = 0;  // Engine::tick
        uint64_t log_cpu_us = 0;     // the journal lines and sd_notify status of a tick
        uint64_t record_cpu_us = 0;  // writing the trace (Record=, --record)
        uint64_t bus_cpu_us = 0;
    };
    [[nodiscard]] const TickStats& tick_stats() const { return tick_stats_; }
    void add_bus_cpu(uint64_t us) { tick_stats_.bus_cpu_us += us; }
    // Since the Manager was made (CLOCK_MONOTONIC, the real clock).
    [[nodiscard]] uint64_t uptime_us() const;
    [[nodiscard]] sd_event* event() const { return event_; }
    [[nodiscard]] const StateStore& state() const { return state_; }

    // Called on the loop thread after a plan has been applied (or, in
    // dry-run/paused mode, computed), after a PSI trigger of a managed
    // slice fired (with its unit name), and after every reload (the errors
    // are empty when it succeeded).
    std::function<void(const Plan&)> on_plan_applied;
    std::function<void(const std::string& unit)> on_pressure;
    std::function<void(const std::vector<Error>& errors)> on_config_reloaded;

private:
    int64_t now() const;
    std::string keep_protection_path() const;
    uint64_t mem_total() const;
    // After any change of the configuration: the engine, the applier and
    // the recorder follow it.
    void config_changed();
    void apply_and_age(TickResult& result, bool enforce, int64_t since_last_us);  // and trim
    void schedule_soon();
    void notify_status();
    void arm_triggers();

    static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_soon(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_watchdog(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_signal(sd_event_source* s, const struct signalfd_siginfo* si, void* userdata);

    ManagerOptions opt_;
    KernelFeatures features_;
    std::unique_ptr<Actuator> actuator_;
    Sampler sampler_;
    StateStore state_;
    RuntimeConfig config_;
    Engine engine_;
    std::optional<Mode> mode_override_;

    Snapshot snapshot_;
    Plan plan_;
    bool have_plan_ = false;
    std::optional<Applier> applier_;      // with an actuator (not --root)
    std::optional<AgingRunner> ager_;     // when lru_gen is read and the tree is real
    std::optional<TrimRunner> trimmer_;   // with an actuator, when the tree is real
    std::vector<PlannedTrim> trims_made_; // this tick's (the trace records them)
    Recorder recorder_;
    logging::PlanLog plan_log_;
    TickStats tick_stats_;
    bool shut_down_ = false;
    bool restore_on_shutdown_ = true;
    bool ready_sent_ = false;

    sd_event* event_ = nullptr;
    sd_event_source* timer_ = nullptr;
    sd_event_source* soon_ = nullptr;
    sd_event_source* watchdog_ = nullptr;
    std::vector<sd_event_source*> signals_;
    std::optional<PressureTriggers> triggers_;  // with options.psi_triggers
    int64_t last_tick_us_ = 0;
    int64_t started_us_ = monotonic_us();
    uint64_t watchdog_usec_ = 0;
    std::string last_status_;
};

}  // namespace memprotd
