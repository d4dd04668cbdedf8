// SPDX-License-Identifier: LGPL-2.1-or-later
#include "manager.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "format.h"

namespace memprotd {

namespace {

// A PSI trigger fires at most this often: a storm of pressure events must
// not turn into a storm of plans and D-Bus calls.
constexpr int64_t kMinTickSpacingUs = 500'000;
// Wake-up slack for the periodic timer; sd-event may batch with others.
constexpr uint64_t kTimerAccuracyUs = 50'000;

// With MGLRU off the kernel keeps pages on the classic LRU and lru_gen's
// generations say nothing about recency (a new memcg's look young): the
// working set comes from memory.stat and nothing is aged.
// Test: ManagerAgingTest.ReadsAndAgesNothingWhileMglruIsOff.
ManagerOptions for_features(ManagerOptions o, const KernelFeatures& f) {
    if (!f.mglru_enabled)
        o.sampler.read_lru_gen = false;
    return o;
}

// Runs f and adds the calling thread's CPU time in it to `sink`.
template <typename F>
void cpu_timed(uint64_t& sink, F&& f) {
    const int64_t c0 = thread_cpu_us();
    f();
    sink += static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_us() - c0));
}

}  // namespace

Manager::Manager(ManagerOptions options, KernelFeatures features, std::unique_ptr<Actuator> actuator)
    : opt_(for_features(std::move(options), features)),
      features_(std::move(features)),
      actuator_(std::move(actuator)),
      sampler_(opt_.sampler),
      state_(opt_.runtime_dir),
      config_(opt_.config_dirs),
      engine_(Config{}) {
    if (actuator_)
        applier_.emplace(*actuator_, state_, [this] { return now(); });
    if (opt_.sampler.read_lru_gen && !opt_.tree_only)
        ager_.emplace(opt_.sampler.debugfs_root + "/lru_gen");
    if (actuator_ && !opt_.tree_only)
        trimmer_.emplace(opt_.sampler.cgroup_root, opt_.sampler.debugfs_root + "/lru_gen");
    if (const int r = sd_event_new(&event_); r < 0) {
        spdlog::error("cannot create the event loop: {}", std::strerror(-r));
        event_ = nullptr;
    }
    if (opt_.psi_triggers && event_)
        triggers_.emplace(
            event_, opt_.sampler.cgroup_root,
            [this](const std::string& unit) {
                if (on_pressure)
                    on_pressure(unit);
                schedule_soon();
            },
            [this](const std::string& /*unit*/) { schedule_soon(); });
}

Manager::~Manager() {
    triggers_.reset();
    for (sd_event_source* s : signals_)
        sd_event_source_disable_unref(s);
    sd_event_source_disable_unref(timer_);
    sd_event_source_disable_unref(soon_);
    sd_event_source_disable_unref(watchdog_);
    sd_event_unref(event_);
}

int64_t Manager::now() const { return opt_.now_us ? opt_.now_us() : monotonic_us(); }

uint64_t Manager::mem_total() const {
    return opt_.memory_total_override ? opt_.memory_total_override : snapshot_.meminfo.mem_total;
}

const AgingStats& Manager::aging() const {
    static const AgingStats kNone;
    return ager_ ? ager_->stats() : kNone;
}

TrimChoice Manager::trim_choice() const {
    if (!trimmer_)
        return {TrimMechanism::None, "not without systemd (--root)"};
    return choose_trim(config_.effective().daemon.trim_cheap_cache, features_);
}

const TrimStats& Manager::trims() const {
    static const TrimStats kNone;
    return trimmer_ ? trimmer_->stats() : kNone;
}

std::vector<Error> Manager::init() {
    if (Result<Meminfo> mi = sampler_.meminfo(); mi)
        snapshot_.meminfo = *mi;
    else
        spdlog::warn("{}", mi.error().to_string());
    if (std::vector<Error> errors = config_.load(mem_total()); !errors.empty())
        return errors;
    config_changed();
    // The stop before this start kept the protection; the next stop restores again.
    std::error_code ec;
    if (std::filesystem::remove(keep_protection_path(), ec))
        spdlog::info("{} removed: resuming the protection kept by the last stop", keep_protection_path());
    if (Status s = state_.load(); !s)
        spdlog::error("{}", s.error().to_string());
    else if (!state_.entries().empty())
        spdlog::info("{} unit(s) have prior values recorded in {}", state_.entries().size(), state_.path());
    return {};
}

void Manager::config_changed() {
    const Config& c = config_.effective();
    engine_.set_config(c);
    if (applier_)
        applier_->forget_unmanaged();
    recorder_.configure(!opt_.record_path.empty() ? opt_.record_path : c.daemon.record, c.daemon.record_max_bytes,
                        c.daemon, features_);
}

Mode Manager::mode() const {
    if (mode_override_)
        return *mode_override_;  // set_mode never lets Enforce in without an actuator
    if (opt_.force_dry_run || opt_.tree_only || !actuator_)
        return Mode::DryRun;
    return config_.effective().daemon.mode;
}

Status Manager::set_mode(Mode m) {
    if (m == Mode::Enforce && (opt_.tree_only || !actuator_))
        return Error{"", 0, "Mode", "cannot enforce: running without systemd (--root)"};
    const Mode before = mode();
    mode_override_ = m;
    if (before != m) {
        spdlog::info("mode {} → {}", mode_name(before), mode_name(m));
        schedule_soon();
    }
    return Ok{};
}

Status Manager::set_slice_policy(const std::string& unit, const SlicePolicy& policy) {
    if (Status s = config_.set_policy(unit, policy, mem_total()); !s)
        return s;
    config_changed();
    spdlog::info("{}: runtime policy set", unit);
    schedule_soon();
    return Ok{};
}

Status Manager::reset_slice_policy(const std::string& unit) {
    const bool taken_back = applier_ && applier_->take_back(unit);
    const Status s = config_.reset_policy(unit);
    if (!s && !taken_back)
        return s;
    if (s) {
        config_changed();
        spdlog::info("{}: runtime policy reset", unit);
    }
    if (taken_back)
        spdlog::info("{}: taken back from the other writer; memprotd writes it again", unit);
    schedule_soon();
    return Ok{};
}

const std::map<std::string, YieldedUnit, std::less<>>& Manager::yielded() const {
    static const std::map<std::string, YieldedUnit, std::less<>> kNone;
    return applier_ ? applier_->yielded() : kNone;
}

std::vector<Error> Manager::reload() {
    if (opt_.notify)
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(monotonic_us()));
    std::vector<Error> errors = config_.load(mem_total());
    if (!errors.empty()) {
        for (const Error& e : errors)
            spdlog::error("{}", e.to_string());
        spdlog::error("reload failed with {} error(s); keeping the last good configuration", errors.size());
    } else {
        config_changed();
        if (applier_) {
            applier_->forget_current();  // someone may have changed units behind our back
            applier_->take_back_all();   // and units yielded to another writer are written again
        }
        if (triggers_)
            triggers_->close_all();  // re-armed at the next tick with the new threshold and window
        spdlog::info("configuration reloaded from {} file(s)", config_.effective().files.size());
        schedule_soon();
    }
    if (on_config_reloaded)
        on_config_reloaded(errors);
    if (opt_.notify)
        sd_notify(0, "READY=1");
    last_status_.clear();
    notify_status();
    return errors;
}

std::string Manager::keep_protection_path() const { return opt_.runtime_dir + "/" + kKeepProtectionFile; }

uint64_t Manager::uptime_us() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, monotonic_us() - started_us_));
}

// sample → tick → apply → age → trim → record → notify.
TickResult Manager::run_once() {
    TickResult result;
    const int64_t t = now();
    const int64_t since_last_us = last_tick_us_ > 0 ? t - last_tick_us_ : 0;
    last_tick_us_ = t;
    const int64_t cpu0 = thread_cpu_us();
    TickStats& ts = tick_stats_;
    // The trim watch counts the refaults of the trimmed slices' services:
    // they are sampled while trimming is on.
    sampler_.set_include_services(trimmer_ &&
                                  trim_mechanism(config_.effective().daemon.trim_cheap_cache, features_) !=
                                      TrimMechanism::None);
    cpu_timed(ts.sample_cpu_us, [&] { sampler_.sample(snapshot_, t); });
    for (const Error& e : snapshot_.errors)
        spdlog::debug("sample: {}", e.to_string());
    std::set<std::string_view> present;  // this sample's units, for every part that forgets gone ones
    for (const CgroupSample& cg : snapshot_.cgroups)
        present.insert(cg.unit);
    plan_log_.forget_gone(present);
    if (applier_) {
        applier_->forget_gone(present);
        applier_->check_writers(snapshot_.cgroups, features_.page_size);
    }

    const bool enforce = mode() == Mode::Enforce && applier_;
    const uint64_t interval_us = config_.effective().daemon.interval_us;
    if (enforce && !applier_->knows_all(snapshot_.cgroups))
        cpu_timed(ts.systemd_cpu_us, [&] {
            applier_->refresh(snapshot_.cgroups, engine_.managed(snapshot_), interval_us, result);
        });
    static const CurrentProtections kFromTree;
    const CurrentProtections& current = enforce ? applier_->current() : kFromTree;
    cpu_timed(ts.engine_cpu_us,
              [&] { plan_ = engine_.tick(snapshot_, features_, current, opt_.memory_total_override); });
    have_plan_ = true;
    if (recorder_.active())
        cpu_timed(ts.record_cpu_us,
                  [&] { recorder_.prepare(snapshot_, features_, opt_.memory_total_override, current); });
    apply_and_age(result, enforce, since_last_us);
    if (recorder_.active())
        cpu_timed(ts.record_cpu_us, [&] { recorder_.commit(trims_made_); });

    if (!ready_sent_) {
        ready_sent_ = true;
        if (opt_.notify)
            sd_notify(0, "READY=1");
    }
    cpu_timed(ts.log_cpu_us, [&] { notify_status(); });
    arm_triggers();
    if (timer_)
        sd_event_source_set_time(timer_, static_cast<uint64_t>(monotonic_us()) + interval_us);
    ++ts.ticks;
    if (on_plan_applied)
        cpu_timed(ts.signal_cpu_us, [&] { on_plan_applied(plan_); });
    ts.cpu_us += static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_us() - cpu0));
    return result;
}

void Manager::apply_and_age(TickResult& result, bool enforce, int64_t since_last_us) {
    TickStats& ts = tick_stats_;
    const DaemonConfig& dc = config_.effective().daemon;
    std::vector<PlannedWrite> applied;
    if (enforce)
        cpu_timed(ts.systemd_cpu_us, [&] { applied = applier_->apply(plan_, dc.interval_us, result); });
    cpu_timed(ts.log_cpu_us, [&] {
        plan_log_.changes(plan_, applied, mode() == Mode::DryRun);
        logging::PlanLog::inputs(plan_, ts.ticks + 1, since_last_us);
    });
    if (enforce && ager_ && dc.working_set_aging && snapshot_.lru_gen)
        cpu_timed(ts.aging_cpu_us, [&] { ager_->run(*snapshot_.lru_gen, plan_); });
    trims_made_.clear();
    if (enforce && trimmer_ && !plan_.trims.empty())
        cpu_timed(ts.trim_cpu_us, [&] {
            trims_made_ = trimmer_->run(plan_, snapshot_.lru_gen ? &*snapshot_.lru_gen : nullptr, features_.page_size);
            engine_.trims_made(trims_made_, plan_.timestamp_us);
        });
}

void Manager::arm_triggers() {
    if (!triggers_)
        return;
    const DaemonConfig& dc = config_.effective().daemon;
    triggers_->update(plan_, dc.pressure_threshold_us, dc.pressure_window_us);
}

void Manager::notify_status() {
    std::string status = fmt::format("managing {} slices, protecting {} of budget {}, {} writes", plan_.slices.size(),
                                     format_bytes(plan_.protected_total), format_bytes(plan_.budget), total_writes());
    if (mode() != Mode::Enforce)
        status += fmt::format(" ({})", mode_name(mode()));
    if (status == last_status_)
        return;
    last_status_ = status;
    if (opt_.notify)
        sd_notifyf(0, "STATUS=%s", status.c_str());
}

void Manager::schedule_soon() {
    if (!event_)
        return;
    int enabled = SD_EVENT_OFF;
    if (soon_ && sd_event_source_get_enabled(soon_, &enabled) >= 0 && enabled != SD_EVENT_OFF)
        return;  // one is already pending: coalesce
    const int64_t wall = monotonic_us();
    const uint64_t at = static_cast<uint64_t>(std::max(wall, last_tick_us_ + kMinTickSpacingUs));
    if (!soon_) {
        if (sd_event_add_time(event_, &soon_, CLOCK_MONOTONIC, at, 0, on_soon, this) < 0)
            soon_ = nullptr;
        return;
    }
    sd_event_source_set_time(soon_, at);
    sd_event_source_set_enabled(soon_, SD_EVENT_ONESHOT);
}

int Manager::on_timer(sd_event_source* s, uint64_t /*usec*/, void* userdata) {
    auto* self = static_cast<Manager*>(userdata);
    self->run_once();  // re-arms timer_ from now
    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    return 0;
}

int Manager::on_soon(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) {
    auto* self = static_cast<Manager*>(userdata);
    ++self->tick_stats_.early;
    self->run_once();
    return 0;
}

int Manager::on_watchdog(sd_event_source* s, uint64_t usec, void* userdata) {
    auto* self = static_cast<Manager*>(userdata);
    sd_notify(0, "WATCHDOG=1");
    sd_event_source_set_time(s, usec + self->watchdog_usec_ / 2);
    sd_event_source_set_enabled(s, SD_EVENT_ON);
    return 0;
}

int Manager::on_signal(sd_event_source* /*s*/, const struct signalfd_siginfo* si, void* userdata) {
    auto* self = static_cast<Manager*>(userdata);
    if (si->ssi_signo == SIGHUP) {
        self->reload();
        return 0;
    }
    spdlog::info("stopping on signal {}", strsignal(static_cast<int>(si->ssi_signo)));
    self->stop();
    return 0;
}

int Manager::run() {
    if (!event_)
        return -ENOMEM;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
        sd_event_source* s = nullptr;
        const int r = sd_event_add_signal(event_, &s, sig | SD_EVENT_SIGNAL_PROCMASK, on_signal, this);
        if (r < 0) {
            spdlog::error("cannot handle signal {}: {}", sig, std::strerror(-r));
            return r;
        }
        signals_.push_back(s);
    }
    int r = sd_event_add_time(event_, &timer_, CLOCK_MONOTONIC, static_cast<uint64_t>(monotonic_us()),
                              kTimerAccuracyUs, on_timer, this);
    if (r < 0) {
        spdlog::error("cannot add the sampling timer: {}", std::strerror(-r));
        return r;
    }
    if (opt_.notify && sd_watchdog_enabled(0, &watchdog_usec_) > 0 && watchdog_usec_ > 0) {
        r = sd_event_add_time_relative(event_, &watchdog_, CLOCK_MONOTONIC, watchdog_usec_ / 2, 0, on_watchdog, this);
        if (r < 0)
            spdlog::warn("cannot add the watchdog timer: {}", std::strerror(-r));
        else
            sd_event_source_set_enabled(watchdog_, SD_EVENT_ON);
    }
    r = sd_event_loop(event_);
    shutdown();
    if (r < 0) {
        spdlog::error("event loop failed: {}", std::strerror(-r));
        return r;
    }
    return 0;
}

void Manager::stop() {
    if (event_)
        sd_event_exit(event_, 0);
}

void Manager::fail(int error) {
    restore_on_shutdown_ = false;
    if (event_)
        sd_event_exit(event_, error < 0 ? error : -EIO);
}

std::vector<Error> Manager::shutdown() {
    if (shut_down_)
        return {};
    shut_down_ = true;
    if (opt_.notify)
        sd_notify(0, "STOPPING=1");
    if (triggers_)
        triggers_->close_all();
    std::vector<Error> errors;
    std::error_code ec;
    if (restore_on_shutdown_ && std::filesystem::exists(keep_protection_path(), ec)) {
        spdlog::info("{} exists: keeping the protection written (a restart, e.g. for a package upgrade)",
                     keep_protection_path());
        restore_on_shutdown_ = false;
    }
    if (!restore_on_shutdown_ && !state_.entries().empty())
        spdlog::info("not restoring: prior values of {} unit(s) stay recorded in {} for the next start",
                     state_.entries().size(), state_.path());
    if (restore_on_shutdown_ && config_.effective().daemon.restore_on_exit && mode() == Mode::Enforce && actuator_ &&
        !state_.entries().empty()) {
        const size_t n = state_.entries().size();
        errors = state_.restore(*actuator_);
        for (const Error& e : errors)
            spdlog::error("cannot restore prior values: {}", e.to_string());
        spdlog::info("restored prior MemoryLow/MemoryMin of {} unit(s)", n - state_.entries().size());
        if (state_.list_error())
            spdlog::warn("{} (a purge of the package leaves systemd's runtime drop-ins of the restored units "
                         "until reboot)",
                         state_.list_error()->to_string());
    }
    return errors;
}

}  // namespace memprotd
