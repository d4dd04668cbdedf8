// SPDX-License-Identifier: LGPL-2.1-or-later
#include "manager.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <system_error>
#include <utility>

#include "aging.h"
#include "config_loader.h"
#include "file_io.h"
#include "format.h"
#include "logging.h"
#include "managed.h"
#include "memprotd-config.h"
#include "parse.h"
#include "trace.h"
#include "write_gate.h"

namespace memprotd {

namespace {

// A PSI trigger fires at most this often: a storm of pressure events must
// not turn into a storm of plans and D-Bus calls.
constexpr int64_t kMinTickSpacingUs = 500'000;
constexpr int64_t kMaxBackoffUs = 5 * 60 * 1'000'000LL;
// Wake-up slack for the periodic timer; sd-event may batch with others.
constexpr uint64_t kTimerAccuracyUs = 50'000;
// An aging write that takes this long is logged (the loop waits for it).
constexpr uint64_t kSlowAgingUs = 1'000'000;


std::string reason_for(const PlanEntry& e) {
    const Explanation& x = e.x;
    std::string r = fmt::format("decided by {}; demand {} (working set {}, cheap cache {}), weight {}",
                                bound_name(x.bound), format_bytes(x.demand), format_bytes(x.working_set),
                                format_bytes(x.cheap_cache), x.weight);
    if (x.next.memory_low != x.target_low)
        r += fmt::format(", target {}", format_bytes(x.target_low));
    if (!x.damping.empty())
        r += "; " + x.damping;
    return r;
}

// With MGLRU off the kernel keeps pages on the classic LRU and lru_gen's
// generations say nothing about recency (a new memcg's look young): the
// working set comes from memory.stat and nothing is aged.
// Test: ManagerAgingTest.ReadsAndAgesNothingWhileMglruIsOff.
ManagerOptions for_features(ManagerOptions o, const KernelFeatures& f) {
    if (!f.mglru_enabled)
        o.sampler.read_lru_gen = false;
    return o;
}

}  // namespace

Manager::Manager(ManagerOptions options, KernelFeatures features, std::unique_ptr<Actuator> actuator)
    : opt_(for_features(std::move(options), features)),
      features_(std::move(features)),
      actuator_(std::move(actuator)),
      sampler_(opt_.sampler),
      state_(opt_.runtime_dir),
      engine_(Config{}) {
    if (opt_.sampler.read_lru_gen && !opt_.tree_only)
        ager_.emplace(opt_.sampler.debugfs_root + "/lru_gen");
    if (const int r = sd_event_new(&event_); r < 0) {
        spdlog::error("cannot create the event loop: {}", std::strerror(-r));
        event_ = nullptr;
    }
}

Manager::~Manager() {
    for (auto& [path, t] : triggers_)
        sd_event_source_disable_unref(t->source);
    triggers_.clear();
    for (sd_event_source* s : signals_)
        sd_event_source_disable_unref(s);
    sd_event_source_disable_unref(timer_);
    sd_event_source_disable_unref(soon_);
    sd_event_source_disable_unref(watchdog_);
    sd_event_unref(event_);
}

int64_t Manager::now() const { return opt_.now_us ? opt_.now_us() : monotonic_us(); }

std::vector<Error> Manager::init() {
    // Percentages in the config need MemTotal; a whole sample for it would
    // double the start-up cost on a big tree.
    const std::string meminfo_path = opt_.sampler.proc_root + "/meminfo";
    std::string text;
    if (const int err = read_file(meminfo_path, text); err != 0) {
        spdlog::warn("{}: {}", meminfo_path, std::strerror(err));
    } else if (Result<Meminfo> mi = parse_meminfo(text, meminfo_path); mi) {
        snapshot_.meminfo = *mi;
    } else {
        spdlog::warn("{}", mi.error().to_string());
    }
    const uint64_t mem_total = opt_.memory_total_override ? opt_.memory_total_override : snapshot_.meminfo.mem_total;
    ConfigParse parsed = load_config(opt_.config_dirs, mem_total);
    if (!parsed.ok())
        return parsed.errors;
    file_config_ = std::move(parsed.config);
    rebuild_effective();
    update_recorder();

    if (Status s = state_.load(); !s)
        spdlog::error("{}", s.error().to_string());
    else if (!state_.entries().empty())
        spdlog::info("{} unit(s) have prior values recorded in {}", state_.entries().size(), state_.path());
    return {};
}

Mode Manager::mode() const {
    if (mode_override_)
        return *mode_override_;  // set_mode never lets Enforce in without an actuator
    if (opt_.force_dry_run || opt_.tree_only || !actuator_)
        return Mode::DryRun;
    return file_config_.daemon.mode;
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

void Manager::rebuild_effective() {
    effective_ = file_config_;
    for (const auto& [unit, policy] : overrides_)
        effective_.policies.push_back(PolicyRule{"runtime:" + unit, {unit}, policy});
    engine_.set_config(effective_);
    unmanaged_.clear();
}

Status Manager::set_slice_policy(const std::string& unit, const SlicePolicy& policy) {
    if (std::optional<std::string> problem = slice_name_problem(unit))
        return Error{unit, 0, "", *problem};
    const uint64_t mem_total = opt_.memory_total_override ? opt_.memory_total_override : snapshot_.meminfo.mem_total;
    if (std::optional<std::string> problem = policy_problem(policy, mem_total))
        return Error{unit, 0, "", *problem};
    overrides_.insert_or_assign(unit, policy);
    rebuild_effective();
    spdlog::info("{}: runtime policy set", unit);
    schedule_soon();
    return Ok{};
}

Status Manager::reset_slice_policy(const std::string& unit) {
    if (overrides_.erase(unit) == 0)
        return Error{unit, 0, "", "no runtime policy to reset"};
    rebuild_effective();
    spdlog::info("{}: runtime policy reset", unit);
    schedule_soon();
    return Ok{};
}

std::vector<Error> Manager::reload() {
    if (opt_.notify)
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(monotonic_us()));
    const uint64_t mem_total = opt_.memory_total_override ? opt_.memory_total_override : snapshot_.meminfo.mem_total;
    ConfigParse parsed = load_config(opt_.config_dirs, mem_total);
    if (!parsed.ok()) {
        for (const Error& e : parsed.errors)
            spdlog::error("{}", e.to_string());
        spdlog::error("reload failed with {} error(s); keeping the last good configuration", parsed.errors.size());
        if (on_config_reloaded)
            on_config_reloaded(parsed.errors);
    } else {
        file_config_ = std::move(parsed.config);
        rebuild_effective();
        update_recorder();
        // Someone may have changed units behind our back: ask systemd again.
        current_.clear();
        // Re-armed at the next tick with the new threshold and window.
        for (auto& [cgroup, t] : triggers_)
            close_trigger(cgroup);
        triggers_.clear();
        spdlog::info("configuration reloaded from {} file(s)", file_config_.files.size());
        if (on_config_reloaded)
            on_config_reloaded({});
        schedule_soon();
    }
    if (opt_.notify)
        sd_notify(0, "READY=1");
    last_status_.clear();
    notify_status();
    return std::move(parsed.errors);
}

bool Manager::due(const std::string& unit, int64_t now_us) const {
    const auto it = backoff_.find(unit);
    return it == backoff_.end() || now_us >= it->second.next_us;
}

void Manager::note_failure(const std::string& unit, int64_t now_us) {
    Backoff& b = backoff_[unit];
    b.failures = std::min(b.failures + 1, 30);
    const auto interval = static_cast<int64_t>(file_config_.daemon.interval_us);
    const int64_t delay = std::min(kMaxBackoffUs, interval << std::min(b.failures - 1, 20));
    // Half an interval early, so "the next tick" is due despite timer jitter.
    b.next_us = now_us + delay - interval / 2;
}

void Manager::refresh_current(TickResult& result) {
    if (!actuator_)
        return;
    // The units the engine will manage (the same rule, select_managed):
    // systemd's view of them is the truth; the tree's memory.low is only a
    // stand-in until we have it. Nothing to ask when every slice is known.
    const auto& cgroups = snapshot_.cgroups;
    const bool all_known = std::all_of(cgroups.begin(), cgroups.end(), [&](const CgroupSample& cg) {
        return !is_slice_unit(cg.unit) || current_.contains(cg.unit) || unmanaged_.contains(cg.unit);
    });
    if (all_known)
        return;
    std::vector<EffectivePolicy> policies(cgroups.size());
    std::vector<const EffectivePolicy*> policy(cgroups.size(), nullptr);
    for (size_t i = 0; i < cgroups.size(); ++i) {
        if (!is_slice_unit(cgroups[i].unit))
            continue;
        policies[i] = effective_.policy_for(cgroups[i].unit);
        policy[i] = &policies[i];
    }
    const std::vector<bool> want =
        select_managed(cgroups, policy, effective_.daemon.manage_top_level_slices).managed;
    const int64_t t = now();
    for (size_t i = 0; i < want.size(); ++i) {
        const std::string& unit = snapshot_.cgroups[i].unit;
        if (!want[i] && is_slice_unit(unit))
            unmanaged_.insert(unit);
        if (!want[i] || current_.contains(unit) || !due(unit, t))
            continue;
        Result<UnitProtection> v = actuator_->get(unit);
        if (!v) {
            note_failure(unit, t);
            spdlog::warn("{}: cannot read MemoryLow/MemoryMin from systemd: {}", unit, v.error().to_string());
            result.errors.push_back(v.error());
            // With the bus or systemd gone every call would wait for its
            // timeout; the watchdog must not be starved by hundreds of them.
            if (is_transport_error(v.error()))
                break;
            continue;
        }
        current_.insert_or_assign(unit, *v);
    }
}

Status Manager::apply_write(const PlannedWrite& w, const PlanEntry* entry) {
    if (!state_.has(w.unit)) {
        Result<UnitProtection> prior = actuator_->get(w.unit);
        if (!prior)
            return prior.error();
        if (Status s = state_.record(w.unit, *prior); !s)
            return s;
        if (entry && *prior != entry->x.prior) {
            // The plan assumed other values than systemd has: write nothing
            // now and plan again from the truth.
            current_.insert_or_assign(w.unit, *prior);
            return Error{w.unit, 0, "", "systemd's values differ from the tree's; planning again"};
        }
    }
    if (Status s = actuator_->set(w.unit, w.values); !s)
        return s;
    current_.insert_or_assign(w.unit, w.values);
    return Ok{};
}

void Manager::restore_unmanaged(TickResult& result) {
    if (state_.entries().empty())
        return;
    std::set<std::string, std::less<>> managed;
    for (const PlanEntry& e : plan_.slices)
        managed.insert(e.unit);
    const int64_t t = now();
    std::vector<std::string> candidates;
    for (const auto& e : state_.entries())
        if (!managed.contains(e.unit) && due(e.unit, t))
            candidates.push_back(e.unit);
    if (candidates.empty())
        return;
    const auto before = state_.entries().size();
    std::vector<Error> errors = state_.restore(*actuator_, [&](const std::string& unit) {
        return std::find(candidates.begin(), candidates.end(), unit) != candidates.end();
    });
    for (const Error& e : errors) {
        note_failure(e.file, t);
        spdlog::warn("cannot restore prior values: {}", e.to_string());
        result.errors.push_back(e);
    }
    for (const std::string& unit : candidates) {
        if (!state_.has(unit)) {
            spdlog::info("{}: no longer managed; prior MemoryLow/MemoryMin restored", unit);
            current_.erase(unit);
            backoff_.erase(unit);
        }
    }
    result.restored += before - state_.entries().size();
}

namespace {

// Runs f and adds the calling thread's CPU time in it to `sink`.
template <typename F>
void cpu_timed(uint64_t& sink, F&& f) {
    const int64_t c0 = thread_cpu_us();
    f();
    sink += static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_us() - c0));
}

}  // namespace

std::vector<PlannedWrite> Manager::apply_plan(TickResult& result, int64_t t) {
    std::vector<PlannedWrite> applied;
    restore_unmanaged(result);
    // Which writes a failed or deferred one blocks is WriteGate's rule (write_gate_test.cc);
    // tests: ManagerTest.StopsTheTicksIncreasesWhenADecreaseFails,
    // ManagerTest.RetriesAFailingUnitWithExponentialBackoffWithoutBlockingOthers.
    WriteGate gate(plan_);
    for (const PlannedWrite& w : plan_.writes) {
        if (!gate.allows(w) || !due(w.unit, t)) {
            ++result.deferred;
        } else if (Status s = apply_write(w, gate.entry(w.unit)); s) {
            ++result.applied;
            ++total_writes_;
            backoff_.erase(w.unit);
            applied.push_back(w);
            continue;
        } else {
            ++result.failed;
            note_failure(w.unit, t);
            const auto b = backoff_.find(w.unit);
            const int64_t half_interval = static_cast<int64_t>(file_config_.daemon.interval_us) / 2;
            spdlog::warn("{}: cannot set MemoryLow={} MemoryMin={}: {}; next attempt in {} s", w.unit,
                         w.values.memory_low, w.values.memory_min, s.error().to_string(),
                         b == backoff_.end() ? 0 : (b->second.next_us - t + half_interval) / 1'000'000);
            result.errors.push_back(s.error());
        }
        gate.not_made(w);
    }
    return applied;
}

uint64_t Manager::uptime_us() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, monotonic_us() - started_us_));
}

void Manager::forget_gone_units() {
    std::set<std::string_view> present;
    for (const CgroupSample& cg : snapshot_.cgroups)
        present.insert(cg.unit);
    for (auto it = current_.begin(); it != current_.end();)
        it = present.contains(it->first) ? std::next(it) : current_.erase(it);
    for (auto it = backoff_.begin(); it != backoff_.end();)
        it = present.contains(it->first) || state_.has(it->first) ? std::next(it) : backoff_.erase(it);
    for (auto it = last_logged_.begin(); it != last_logged_.end();)
        it = present.contains(it->first) ? std::next(it) : last_logged_.erase(it);
    for (auto it = unmanaged_.begin(); it != unmanaged_.end();)
        it = present.contains(*it) ? std::next(it) : unmanaged_.erase(it);
}

TickResult Manager::run_once() {
    TickResult result;
    const int64_t t = now();
    const int64_t since_last_us = last_tick_us_ > 0 ? t - last_tick_us_ : 0;
    last_tick_us_ = t;
    const int64_t cpu0 = thread_cpu_us();
    TickStats& ts = tick_stats_;
    cpu_timed(ts.sample_cpu_us, [&] { sampler_.sample(snapshot_, t); });
    for (const Error& e : snapshot_.errors)
        spdlog::debug("sample: {}", e.to_string());
    forget_gone_units();

    const Mode m = mode();
    const bool enforce = m == Mode::Enforce && actuator_;
    if (enforce)
        cpu_timed(ts.systemd_cpu_us, [&] { refresh_current(result); });
    static const CurrentProtections kFromTree;
    cpu_timed(ts.engine_cpu_us, [&] {
        plan_ = engine_.tick(snapshot_, features_, enforce ? current_ : kFromTree, opt_.memory_total_override);
    });
    have_plan_ = true;
    if (recorder_)
        cpu_timed(ts.record_cpu_us, [&] { record_sample(enforce ? current_ : kFromTree); });

    std::vector<PlannedWrite> applied;
    if (enforce)
        cpu_timed(ts.systemd_cpu_us, [&] { applied = apply_plan(result, t); });
    cpu_timed(ts.log_cpu_us, [&] {
        log_plan(plan_, applied);
        trace_plan(plan_, since_last_us);
    });
    if (enforce)
        cpu_timed(ts.aging_cpu_us, [&] { age_working_sets(); });

    if (!ready_sent_) {
        ready_sent_ = true;
        if (opt_.notify)
            sd_notify(0, "READY=1");
    }
    cpu_timed(ts.log_cpu_us, [&] { notify_status(); });
    update_triggers();
    if (timer_)
        sd_event_source_set_time(timer_, static_cast<uint64_t>(monotonic_us()) + effective_.daemon.interval_us);
    ++ts.ticks;
    if (on_plan_applied)
        cpu_timed(ts.signal_cpu_us, [&] { on_plan_applied(plan_); });
    ts.cpu_us += static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_us() - cpu0));
    return result;
}

void Manager::update_recorder() {
    const std::string& path = !opt_.record_path.empty() ? opt_.record_path : effective_.daemon.record;
    const uint64_t cap = effective_.daemon.record_max_bytes;
    if (path.empty()) {
        if (recorder_)
            spdlog::info("recording to {} stopped", recorder_->path());
        recorder_.reset();
        return;
    }
    const uint64_t interval = effective_.daemon.interval_us;
    if (recorder_ && recorder_->path() == path && recorder_->max_bytes() == cap && record_interval_us_ == interval)
        return;
    // A new trace each time: an earlier one is rotated, not continued (the
    // monotonic clock of an earlier boot or run does not continue, and the
    // header's interval must be the samples').
    recorder_.emplace(path, cap, /*old_files=*/1);
    record_t0_us_ = -1;
    record_interval_us_ = interval;
    const TraceHeader header{kTraceVersion, MEMPROTD_VERSION, features_.kernel_release, "memprotd", interval};
    if (Status s = recorder_->open(TraceWriter::Start::Rotate, trace_header_line(header)); !s) {
        spdlog::warn("not recording: {}", s.error().to_string());
        recorder_.reset();
        return;
    }
    spdlog::info("recording the engine's inputs to {} (rotated at {} bytes, one old file kept)", path, cap);
}

void Manager::record_sample(const CurrentProtections& current) {
    if (record_t0_us_ < 0)
        record_t0_us_ = snapshot_.timestamp_us;
    record_buf_.clear();
    append_trace_sample(record_buf_, snapshot_, features_, opt_.memory_total_override,
                        current.empty() ? nullptr : &current, record_t0_us_);
    if (Status s = recorder_->write({record_buf_.data(), record_buf_.size()}); !s) {
        if (!record_failed_)
            spdlog::warn("trace: {} (the tick goes on; warned once until a write succeeds)", s.error().to_string());
        record_failed_ = true;
    } else {
        record_failed_ = false;
    }
}

void Manager::age_working_sets() {
    if (!ager_ || !effective_.daemon.working_set_aging || !snapshot_.lru_gen)
        return;
    // Half each slice's window: the four generations the kernel keeps then
    // span about one and a half of its windows, and the engine's freshness
    // test (youngest generation within the slice's window) holds between
    // two agings.
    std::vector<AgedSlice> managed;
    managed.reserve(plan_.slices.size());
    for (const PlanEntry& e : plan_.slices)
        managed.push_back({e.cgroup, e.working_set_window_us / 2000});
    // The daemon's loop waits for the writes; a slow one is worth a line,
    // one per tick at most.
    uint64_t slowest = 0;
    std::string slowest_path;
    for (const AgingRequest& r : plan_aging(*snapshot_.lru_gen, managed)) {
        const int64_t t0 = monotonic_us();
        const int err = ager_->age(r);
        const auto took = static_cast<uint64_t>(std::max<int64_t>(0, monotonic_us() - t0));
        aging_.total_write_us += took;
        aging_.max_write_us = std::max(aging_.max_write_us, took);
        if (took > slowest) {
            slowest = took;
            slowest_path = r.path;
        }
        if (err == 0) {
            ++aging_.aged;
            aging_.last_errno = 0;
            continue;
        }
        const Error e = ager_->error(r, err);
        // EINVAL: the memcg went away between the sample and the write.
        if (err == EINVAL) {
            ++aging_.vanished;
            spdlog::debug("working-set aging: {}", e.to_string());
            continue;
        }
        // Anything else (a read-only sandbox, no permission) refuses every
        // memcg alike: said once until it changes, tried again next tick.
        ++aging_.failed;
        if (err != aging_.last_errno)
            spdlog::warn("working-set aging: {}; protected slices' working sets may be overstated "
                         "(WorkingSetAging=no turns this off)",
                         e.to_string());
        aging_.last_errno = err;
        aging_.last_error = e.to_string();
        break;
    }
    if (slowest >= kSlowAgingUs)
        spdlog::info("working-set aging took {:.1f} s for {} (the slowest write this tick)",
                     static_cast<double>(slowest) / 1e6, slowest_path);
}

void Manager::log_plan(const Plan& plan, const std::vector<PlannedWrite>& applied) {
    const bool dry = mode() == Mode::DryRun;
    for (const PlanEntry& e : plan.slices) {
        if (dry) {
            // The tree never changes under a dry run, so the same plan comes
            // back every tick: say it once.
            if (!e.write()) {
                last_logged_.erase(e.unit);
                continue;
            }
            const auto it = last_logged_.find(e.unit);
            if (it != last_logged_.end() && it->second == e.x.next)
                continue;
            last_logged_.insert_or_assign(e.unit, e.x.next);
            logging::change(e.unit, e.x.prior, e.x.next, reason_for(e), /*dry_run=*/true);
            continue;
        }
        // A unit can have two writes in one tick (MemoryMin down, then
        // MemoryLow up): one line for what it ended with.
        const PlannedWrite* last = nullptr;
        for (const PlannedWrite& w : applied)
            if (w.unit == e.unit)
                last = &w;
        if (last)
            logging::change(e.unit, e.x.prior, last->values, reason_for(e), /*dry_run=*/false);
    }
}

void Manager::trace_plan(const Plan& plan, int64_t since_last_us) {
    if (!spdlog::should_log(spdlog::level::debug))
        return;
    spdlog::debug("tick {}: {:.1f} s since the last; budget {} (factor {:.2f}), demand {}, protected {}",
                  tick_stats_.ticks + 1, static_cast<double>(since_last_us) / 1e6, format_bytes(plan.budget),
                  plan.budget_factor, format_bytes(plan.demand_total), format_bytes(plan.protected_total));
    for (const PlanEntry& e : plan.slices) {
        const Explanation& x = e.x;
        spdlog::debug("tick {}: {}: current {} working set {} (base {}, thrash +{}) demand {} psi {:.3f} "
                      "target low {} min {}; low {} → {}{}{}",
                      tick_stats_.ticks + 1, e.unit, format_bytes(x.current), format_bytes(x.working_set),
                      format_bytes(x.working_set_base), format_bytes(x.thrash_correction), format_bytes(x.demand),
                      x.psi_some, format_bytes(x.target_low), format_bytes(x.target_min),
                      format_bytes(x.prior.memory_low), format_bytes(x.next.memory_low),
                      x.damping.empty() ? "" : "; ", x.damping);
    }
}

void Manager::notify_status() {
    std::string status = fmt::format("managing {} slices, protecting {} of budget {}, {} writes", plan_.slices.size(),
                                     format_bytes(plan_.protected_total), format_bytes(plan_.budget), total_writes_);
    if (mode() != Mode::Enforce)
        status += fmt::format(" ({})", mode_name(mode()));
    if (status == last_status_)
        return;
    last_status_ = status;
    if (opt_.notify)
        sd_notifyf(0, "STATUS=%s", status.c_str());
}

void Manager::close_trigger(const std::string& cgroup) {
    const auto it = triggers_.find(cgroup);
    if (it == triggers_.end())
        return;
    it->second->source = sd_event_source_disable_unref(it->second->source);
    it->second->psi.close();
}

void Manager::update_triggers() {
    if (!opt_.psi_triggers || !event_)
        return;
    std::map<std::string, const PlanEntry*> wanted;
    for (const PlanEntry& e : plan_.slices)
        wanted.emplace(e.cgroup, &e);
    for (auto it = triggers_.begin(); it != triggers_.end();) {
        if (wanted.contains(it->first)) {
            ++it;
            continue;
        }
        close_trigger(it->first);
        it = triggers_.erase(it);
    }
    const DaemonConfig& dc = effective_.daemon;
    for (const auto& [cgroup, entry] : wanted) {
        if (triggers_.contains(cgroup))
            continue;
        // Kept even when it failed, so a slice whose trigger cannot be armed
        // is not retried (and logged) every tick; it is retried when the
        // slice comes back.
        auto t = std::make_unique<Trigger>();
        t->owner = this;
        t->unit = entry->unit;
        Result<PsiTrigger> psi =
            PsiTrigger::open(opt_.sampler.cgroup_root + cgroup + "/memory.pressure", dc.pressure_threshold_us,
                             dc.pressure_window_us);
        if (!psi) {
            spdlog::debug("no PSI trigger: {}", psi.error().to_string());
        } else {
            t->psi = std::move(*psi);
            const int r = sd_event_add_io(event_, &t->source, t->psi.fd(), EPOLLPRI, on_trigger, t.get());
            if (r < 0) {
                spdlog::debug("{}: cannot watch the PSI trigger: {}", entry->unit, std::strerror(-r));
                t->psi.close();
            }
        }
        triggers_.emplace(cgroup, std::move(t));
    }
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

int Manager::on_trigger(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) {
    auto* t = static_cast<Trigger*>(userdata);
    Manager* self = t->owner;
    if (revents & (EPOLLERR | EPOLLHUP)) {
        // The cgroup was removed: the next sample drops the slice.
        spdlog::debug("{}: cgroup gone, PSI trigger closed", t->unit);
        t->source = sd_event_source_disable_unref(t->source);
        t->psi.close();
        self->schedule_soon();
        return 0;
    }
    if (revents & EPOLLPRI) {
        spdlog::debug("{}: memory pressure trigger fired", t->unit);
        if (self->on_pressure)
            self->on_pressure(t->unit);
        self->schedule_soon();
    }
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
    for (auto& [cgroup, t] : triggers_)
        close_trigger(cgroup);
    triggers_.clear();
    std::vector<Error> errors;
    if (!restore_on_shutdown_ && !state_.entries().empty())
        spdlog::info("not restoring: prior values of {} unit(s) stay recorded in {} for the next start",
                     state_.entries().size(), state_.path());
    if (restore_on_shutdown_ && file_config_.daemon.restore_on_exit && mode() == Mode::Enforce && actuator_ &&
        !state_.entries().empty()) {
        const size_t n = state_.entries().size();
        errors = state_.restore(*actuator_);
        for (const Error& e : errors)
            spdlog::error("cannot restore prior values: {}", e.to_string());
        spdlog::info("restored prior MemoryLow/MemoryMin of {} unit(s)", n - state_.entries().size());
    }
    return errors;
}

}  // namespace memprotd
