// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The daemon's core: owns the sd-event loop, the sampler, the engine, the
// actuator and the state store, and runs sample → plan → apply.
//
// Threading: everything, including the callbacks below, runs on the thread
// that calls run() (or run_once()); nothing here is locked. The D-Bus
// adaptor dispatches its connection from event() (BusEventSource,
// manager_bus.h) so its handlers run on that same thread.
// Calls into the actuator are synchronous (5 s timeout each), so a method
// handler that triggers a tick can block the loop that long.
#pragma once

#include <fmt/format.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actuator.h"
#include "config.h"
#include "engine.h"
#include "lru_gen_ager.h"
#include "model.h"
#include "psi_trigger.h"
#include "result.h"
#include "sampler.h"
#include "state_store.h"
#include "trace_file.h"

namespace memprotd {

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

// What one tick did.
struct TickResult {
    size_t applied = 0;   // successful writes
    size_t failed = 0;    // writes systemd refused (the tick's writes stop at the first)
    size_t deferred = 0;  // writes not attempted: after a failure or while a unit backs off
    size_t restored = 0;  // units no longer managed that got their prior values back
    std::vector<Error> errors;
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
    [[nodiscard]] const Config& config() const { return effective_; }
    [[nodiscard]] Mode mode() const;
    // Enforce needs an actuator (not in --root mode). A runtime mode sticks
    // across reloads until the next set_mode. Leaving enforce keeps the
    // values as they are; it does not restore.
    Status set_mode(Mode mode);
    // Runtime policy for one unit (a name, not a glob), merged on top of
    // the files' policies; lost on restart. Takes effect at the next tick,
    // which is scheduled at once.
    Status set_slice_policy(const std::string& unit, const SlicePolicy& policy);
    Status reset_slice_policy(const std::string& unit);
    [[nodiscard]] const std::map<std::string, SlicePolicy>& slice_policy_overrides() const { return overrides_; }
    [[nodiscard]] uint64_t total_writes() const { return total_writes_; }
    // Working-set aging (WorkingSetAging=) since start: memcgs aged, memcgs
    // gone before their write (EINVAL), ticks whose aging failed, and the
    // last failure ("" if none; last_errno 0 once a write succeeds again).
    // The kernel walks the memcg's page tables inside the write, so each
    // write is timed: the slowest one, and the time all of them took.
    struct AgingStats {
        uint64_t aged = 0;
        uint64_t vanished = 0;
        uint64_t failed = 0;
        uint64_t max_write_us = 0;
        uint64_t total_write_us = 0;
        int last_errno = 0;
        std::string last_error;
    };
    [[nodiscard]] const AgingStats& aging() const { return aging_; }
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
    struct Backoff {
        int failures = 0;
        int64_t next_us = 0;
    };
    struct Trigger {
        Manager* owner = nullptr;
        std::string unit;
        PsiTrigger psi;
        sd_event_source* source = nullptr;
    };

    int64_t now() const;
    void rebuild_effective();
    void refresh_current(TickResult& result);
    Status apply_write(const PlannedWrite& w, const PlanEntry* entry);
    bool due(const std::string& unit, int64_t now_us) const;
    void note_failure(const std::string& unit, int64_t now_us);
    void log_plan(const Plan& plan, const std::vector<PlannedWrite>& applied);
    // At debug level: one line per tick and one per slice with the inputs
    // and targets behind the plan, and how long since the last tick.
    void trace_plan(const Plan& plan, int64_t since_last_us);
    void restore_unmanaged(TickResult& result);
    // The plan's writes through the write gate; returns those made.
    std::vector<PlannedWrite> apply_plan(TickResult& result, int64_t t);
    // Drops the per-unit state of units no longer in the snapshot.
    void forget_gone_units();
    void age_working_sets();
    void update_triggers();
    void close_trigger(const std::string& cgroup);
    void schedule_soon();
    void notify_status();
    // Opens, reopens or closes the trace for the path, cap and interval in
    // force (Record=, RecordMaxSize=, Interval=; --record replaces Record=).
    void update_recorder();
    // One trace line for this tick's inputs; a failure is a warning.
    void record_sample(const CurrentProtections& current);

    static int on_timer(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_soon(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_watchdog(sd_event_source* s, uint64_t usec, void* userdata);
    static int on_signal(sd_event_source* s, const struct signalfd_siginfo* si, void* userdata);
    static int on_trigger(sd_event_source* s, int fd, uint32_t revents, void* userdata);

    ManagerOptions opt_;
    KernelFeatures features_;
    std::unique_ptr<Actuator> actuator_;
    Sampler sampler_;
    StateStore state_;
    Config file_config_;  // the last good configuration from the files
    Config effective_;    // file_config_ + overrides_
    Engine engine_;
    std::map<std::string, SlicePolicy> overrides_;
    std::optional<Mode> mode_override_;

    Snapshot snapshot_;
    Plan plan_;
    bool have_plan_ = false;
    CurrentProtections current_;  // systemd's values, per unit
    // Slices the config in force does not manage, as the last refresh_current
    // found them: not judged again every tick (cleared when the config changes).
    std::set<std::string, std::less<>> unmanaged_;
    std::map<std::string, Backoff, std::less<>> backoff_;
    std::map<std::string, UnitProtection, std::less<>> last_logged_;  // dry-run dedup
    uint64_t total_writes_ = 0;
    std::optional<LruGenAger> ager_;  // when lru_gen is read and the tree is real
    AgingStats aging_;
    TickStats tick_stats_;
    std::optional<TraceWriter> recorder_;
    fmt::memory_buffer record_buf_;  // one trace line, its capacity kept between ticks
    int64_t record_t0_us_ = -1;     // the first recorded sample's time: traces start at 0
    uint64_t record_interval_us_ = 0;  // Interval= when the trace began (its header's)
    bool record_failed_ = false;    // warned once until a write succeeds again
    bool shut_down_ = false;
    bool restore_on_shutdown_ = true;
    bool ready_sent_ = false;

    sd_event* event_ = nullptr;
    sd_event_source* timer_ = nullptr;
    sd_event_source* soon_ = nullptr;
    sd_event_source* watchdog_ = nullptr;
    std::vector<sd_event_source*> signals_;
    std::map<std::string, std::unique_ptr<Trigger>> triggers_;  // by cgroup path
    int64_t last_tick_us_ = 0;
    int64_t started_us_ = monotonic_us();
    uint64_t watchdog_usec_ = 0;
    std::string last_status_;
};

}  // namespace memprotd
