// SPDX-License-Identifier: LGPL-2.1-or-later
#include "manager_bus.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "bus_args.h"
#include "format.h"
#include "memprotd-config.h"
#include "plan_json.h"

namespace memprotd {

namespace {

using bus_args::check_length;
using bus_args::invalid;
using bus_args::kInvalidArgs;

constexpr const char* kAccessDenied = "org.freedesktop.DBus.Error.AccessDenied";
// Messages processed per wake-up before other sources get a turn.
constexpr int kBusBatch = 64;

uint64_t realtime_us() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
}

std::optional<sdbus::Variant> to_variant(const nlohmann::json& v) {
    using T = nlohmann::json::value_t;
    switch (v.type()) {
        case T::boolean:
            return sdbus::Variant(v.get<bool>());
        case T::number_unsigned:
            return sdbus::Variant(v.get<uint64_t>());
        case T::number_integer: {
            const auto i = v.get<int64_t>();
            if (i >= 0)
                return sdbus::Variant(static_cast<uint64_t>(i));
            return sdbus::Variant(i);
        }
        case T::number_float:
            return sdbus::Variant(v.get<double>());
        case T::string:
            return sdbus::Variant(v.get<std::string>());
        case T::array: {
            std::vector<std::string> out;
            for (const auto& e : v)
                if (e.is_string())
                    out.push_back(e.get<std::string>());
            return sdbus::Variant(out);
        }
        default:
            return std::nullopt;
    }
}

}  // namespace

std::unique_ptr<sdbus::IConnection> open_bus() {
    const char* address = std::getenv(kBusAddressEnv);
    if (address && *address)
        return sdbus::createSessionBusConnectionWithAddress(address);
    return sdbus::createSystemBusConnection();
}

// --- BusEventSource ---

BusEventSource::BusEventSource(sdbus::IConnection& conn, sd_event* event) : conn_(conn), event_(event) {}

BusEventSource::~BusEventSource() {
    sd_event_source_disable_unref(io_);
    sd_event_source_disable_unref(event_io_);
    sd_event_source_disable_unref(timer_);
}

int BusEventSource::attach() {
    if (!event_)
        return -EINVAL;
    int fd = -1;
    int event_fd = -1;
    try {
        const sdbus_compat::PollData pd = sdbus_compat::poll_data(conn_);
        fd = pd.fd;
        event_fd = pd.event_fd;
    } catch (const sdbus::Error& e) {
        spdlog::error("cannot get the bus fd: {}", e.getMessage());
        return -EIO;
    }
    if (int r = sd_event_add_io(event_, &io_, fd, EPOLLIN, on_io, this); r < 0)
        return r;
    if (int r = sd_event_source_set_prepare(io_, on_prepare); r < 0)
        return r;
    // sdbus-c++ 2 wakes its loop through an event fd as well.
    if (event_fd >= 0) {
        if (int r = sd_event_add_io(event_, &event_io_, event_fd, EPOLLIN, on_io, this); r < 0)
            return r;
        (void)sd_event_source_set_description(event_io_, "bus-event-fd");
    }
    if (int r = sd_event_add_time(event_, &timer_, CLOCK_MONOTONIC, 0, 0, on_time, this); r < 0)
        return r;
    (void)sd_event_source_set_description(io_, "bus-io");
    (void)sd_event_source_set_description(timer_, "bus-timeout");
    return update();
}

int BusEventSource::on_prepare(sd_event_source* /*s*/, void* userdata) {
    return static_cast<BusEventSource*>(userdata)->update();
}

int BusEventSource::on_io(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/, void* userdata) {
    return static_cast<BusEventSource*>(userdata)->process();
}

int BusEventSource::on_time(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) {
    return static_cast<BusEventSource*>(userdata)->process();
}

int BusEventSource::update() {
    sdbus_compat::PollData pd;
    try {
        pd = sdbus_compat::poll_data(conn_);
    } catch (const sdbus::Error& e) {
        fail(e.getMessage());
        return 0;
    }
    // sd-bus speaks poll(2) events; for these bits epoll's are the same.
    (void)sd_event_source_set_io_events(io_, static_cast<uint32_t>(static_cast<unsigned short>(pd.events)));
    if (pd.timeout_usec == UINT64_MAX) {
        (void)sd_event_source_set_enabled(timer_, SD_EVENT_OFF);
    } else {
        (void)sd_event_source_set_time(timer_, pd.timeout_usec);
        (void)sd_event_source_set_enabled(timer_, SD_EVENT_ONESHOT);
    }
    return 0;
}

int BusEventSource::process() {
    const int64_t cpu0 = thread_cpu_us();
    try {
        for (int i = 0; i < kBusBatch && sdbus_compat::process_pending(conn_); ++i) {
        }
    } catch (const sdbus::Error& e) {
        fail(e.getMessage());
    }
    if (on_processed)
        on_processed(static_cast<uint64_t>(std::max<int64_t>(0, thread_cpu_us() - cpu0)));
    // A handler error must not take the loop down with it.
    return 0;
}

void BusEventSource::fail(const std::string& why) {
    spdlog::error("D-Bus connection failed: {}", why);
    (void)sd_event_source_set_enabled(io_, SD_EVENT_OFF);
    if (event_io_)
        (void)sd_event_source_set_enabled(event_io_, SD_EVENT_OFF);
    (void)sd_event_source_set_enabled(timer_, SD_EVENT_OFF);
    if (on_error) {
        auto cb = std::move(on_error);
        on_error = nullptr;
        cb(why);
    }
}

// --- ManagerAdaptor ---

ManagerAdaptor::ManagerAdaptor(sdbus::IConnection& conn, Manager& manager, Authoriser& auth,
                               MemoryLock memory_lock)
    : AdaptorInterfaces(conn, sdbus_compat::object_path(kObjectPath)),
      manager_(manager),
      auth_(auth),
      memory_lock_(std::move(memory_lock)) {
    registerAdaptor();
    announced_mode_ = std::string(mode_name(manager_.mode()));
    announced_budget_ = manager_.have_plan() ? manager_.last_plan().budget : 0;
    writes_seen_ = manager_.total_writes();
    manager_.on_plan_applied = [this](const Plan& plan) { plan_applied(plan); };
    manager_.on_pressure = [this](const std::string& unit) { pressure(unit); };
    // Also for SIGHUP (systemctl reload): ConfigReloaded reports every reload.
    manager_.on_config_reloaded = [this](const std::vector<Error>& errors) {
        std::vector<std::string> lines;
        for (const Error& e : errors)
            lines.push_back(e.to_string());
        config_reloaded(errors.empty(), lines);
    };
}

ManagerAdaptor::~ManagerAdaptor() {
    *alive_ = false;
    manager_.on_plan_applied = nullptr;
    manager_.on_pressure = nullptr;
    manager_.on_config_reloaded = nullptr;
    unregisterAdaptor();
}

void ManagerAdaptor::plan_applied(const Plan& plan) {
    last_plan_realtime_us_ = realtime_us();
    const uint64_t total = manager_.total_writes();
    const auto writes = static_cast<uint32_t>(std::min<uint64_t>(total - writes_seen_, UINT32_MAX));
    writes_seen_ = total;
    (void)plan;
    try {
        emitPlanApplied(last_plan_realtime_us_, writes);
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot emit PlanApplied: {}", e.getMessage());
    }
    announce_changes();
}

void ManagerAdaptor::pressure(const std::string& unit) {
    double avg10 = 0;
    const Snapshot& snap = manager_.last_snapshot();
    if (const int i = snap.find_unit(unit); i >= 0 && snap.cgroups[static_cast<size_t>(i)].pressure)
        avg10 = snap.cgroups[static_cast<size_t>(i)].pressure->some.avg10;
    try {
        emitPressureChanged(unit, avg10);
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot emit PressureChanged: {}", e.getMessage());
    }
}

void ManagerAdaptor::config_reloaded(bool ok, const std::vector<std::string>& errors) {
    try {
        emitConfigReloaded(ok, errors);
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot emit ConfigReloaded: {}", e.getMessage());
    }
    announce_changes();
}

void ManagerAdaptor::announce_changes() {
    std::vector<std::string> changed;
    if (std::string m(mode_name(manager_.mode())); m != announced_mode_) {
        announced_mode_ = std::move(m);
        changed.emplace_back("Mode");
    }
    if (const uint64_t b = Budget(); b != announced_budget_) {
        announced_budget_ = b;
        changed.emplace_back("Budget");
    }
    if (last_plan_realtime_us_ != announced_timestamp_) {
        announced_timestamp_ = last_plan_realtime_us_;
        changed.emplace_back("LastPlanTimestamp");
    }
    if (changed.empty())
        return;
    try {
        sdbus_compat::emit_properties_changed(getObject(), kInterface, changed);
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot emit PropertiesChanged: {}", e.getMessage());
    }
}

void ManagerAdaptor::authorised(sdbus::Result<>&& result, Action action) {
    const std::string sender = sdbus_compat::current_sender(getObject());
    // sdbus::Result is move-only; the callback must be copyable.
    auto shared = std::make_shared<sdbus::Result<>>(std::move(result));
    std::weak_ptr<bool> alive = alive_;
    auth_.check(sender, kManageAction, [shared, alive, action = std::move(action), sender](AuthDecision d) {
        if (alive.expired())
            return;
        try {
            if (!d.allowed) {
                spdlog::info("refused a change requested by {}: {}", sender, d.message);
                shared->returnError(sdbus_compat::make_error(kAccessDenied, d.message));
                return;
            }
            action(*shared);
        } catch (const sdbus::Error& e) {
            try {
                shared->returnError(e);
            } catch (const sdbus::Error& e2) {
                spdlog::warn("cannot reply to {}: {}", sender, e2.getMessage());
            }
        }
    });
}

const PlanEntry& ManagerAdaptor::find_slice(const std::string& unit) const {
    check_length(unit);
    const PlanEntry* e = manager_.have_plan() ? manager_.last_plan().find(unit) : nullptr;
    if (!e)
        invalid(manager_.have_plan()
                    ? fmt::format("unknown unit \"{}\": not a slice of the current plan", unit)
                    : fmt::format("unknown unit \"{}\": no plan has been made yet", unit));
    return *e;
}

std::vector<SliceRowWire> ManagerAdaptor::ListSlices() {
    std::vector<SliceRowWire> rows;
    if (!manager_.have_plan())
        return rows;
    for (const PlanEntry& e : manager_.last_plan().slices) {
        const Explanation& x = e.x;
        const SliceRow row{.unit = e.unit,
                           .cgroup = e.cgroup,
                           .current = x.current,
                           .working_set = x.working_set,
                           .cheap_cache = x.cheap_cache,
                           .demand = x.demand,
                           .memory_low = x.prior.memory_low,
                           .memory_min = x.prior.memory_min,
                           .target_memory_low = x.target_low,
                           .target_memory_min = x.target_min,
                           .psi_some = x.psi_some};
        rows.push_back(to_wire(row));
    }
    return rows;
}

std::map<std::string, sdbus::Variant> ManagerAdaptor::GetSlice(const std::string& unit) {
    const PlanEntry& e = find_slice(unit);
    std::map<std::string, sdbus::Variant> out;
    const nlohmann::json j = slice_to_json(manager_.last_plan(), e);
    for (const auto& [key, value] : j.items())
        if (auto v = to_variant(value))
            out.emplace(key, std::move(*v));
    out.emplace("runtime_policy", sdbus::Variant(manager_.slice_policy_overrides().contains(unit)));
    return out;
}

std::string ManagerAdaptor::Explain(const std::string& unit) {
    check_length(unit);
    if (manager_.have_plan())
        if (const UnmanagedSlice* u = manager_.last_plan().find_unmanaged(unit))
            return explain_unmanaged(*u);
    std::string text = explain_text(manager_.last_plan(), find_slice(unit));
    if (const auto y = manager_.yielded().find(unit); y != manager_.yielded().end())
        text += fmt::format("  left to another writer: the cgroup has memory.low {} and memory.min {}, not the {} and "
                            "{} memprotd wrote; memprotd writes it again after `systemctl reload memprotd` or "
                            "`memprotctl reset {}`.\n",
                            format_bytes(y->second.seen.memory_low), format_bytes(y->second.seen.memory_min),
                            format_bytes(y->second.wrote.memory_low), format_bytes(y->second.wrote.memory_min), unit);
    return text;
}

std::vector<WriteRow::Wire> ManagerAdaptor::GetPlan() {
    std::vector<WriteRow::Wire> rows;
    if (!manager_.have_plan())
        return rows;
    for (const PlannedWrite& w : manager_.last_plan().writes)
        rows.push_back(WriteRow{w.unit, w.values.memory_low, w.values.memory_min, w.decrease}.to_wire());
    return rows;
}

// Units another writer changed, which memprotd no longer writes.
nlohmann::json ManagerAdaptor::trimming_json() const {
    const TrimChoice c = manager_.trim_choice();
    const TrimStats& t = manager_.trims();
    return {{"setting", std::string(trim_setting_name(manager_.config().daemon.trim_cheap_cache))},
            {"mechanism", std::string(trim_mechanism_name(c.mechanism))},
            {"why", c.why},
            {"trims", t.trims},
            {"bytes", t.bytes},
            {"skipped", t.skipped},
            {"incomplete", t.incomplete},
            {"vanished", t.vanished},
            {"failed", t.failed},
            {"max_write_us", t.max_write_us},
            {"total_write_us", t.total_write_us},
            {"last_error", t.last_error}};
}

nlohmann::json ManagerAdaptor::yielded_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [unit, y] : manager_.yielded())
        out.push_back({{"unit", unit},
                       {"wrote_memory_low", y.wrote.memory_low},
                       {"wrote_memory_min", y.wrote.memory_min},
                       {"memory_low", y.seen.memory_low},
                       {"memory_min", y.seen.memory_min}});
    return out;
}

std::string ManagerAdaptor::Dump() {
    const auto faults = process_page_faults();
    nlohmann::json j = {
        {"version", MEMPROTD_VERSION},
        {"mode", std::string(mode_name(manager_.mode()))},
        {"features", features_to_json(manager_.features())},
        {"config", config_to_json(manager_.config())},
        {"plan", manager_.have_plan() ? plan_to_json(manager_.last_plan()) : nlohmann::json(nullptr)},
        {"last_plan_timestamp", last_plan_realtime_us_},
        {"total_writes", manager_.total_writes()},
        {"working_set_aging",
         {{"enabled", manager_.config().daemon.working_set_aging},
          {"aged", manager_.aging().aged},
          {"vanished", manager_.aging().vanished},
          {"failed", manager_.aging().failed},
          {"max_write_us", manager_.aging().max_write_us},
          {"total_write_us", manager_.aging().total_write_us},
          {"last_error", manager_.aging().last_error}}},
        {"trimming", trimming_json()},
        {"yielded", yielded_json()},
        {"memory_lock", {{"locked", memory_lock_.locked}, {"reason", memory_lock_.reason}}},
        {"ticks",
         {{"total", manager_.tick_stats().ticks},
          {"early", manager_.tick_stats().early},
          {"cpu_us", manager_.tick_stats().cpu_us},
          {"sample_cpu_us", manager_.tick_stats().sample_cpu_us},
          {"systemd_cpu_us", manager_.tick_stats().systemd_cpu_us},
          {"aging_cpu_us", manager_.tick_stats().aging_cpu_us},
          {"trim_cpu_us", manager_.tick_stats().trim_cpu_us},
          {"signal_cpu_us", manager_.tick_stats().signal_cpu_us},
          {"engine_cpu_us", manager_.tick_stats().engine_cpu_us},
          {"log_cpu_us", manager_.tick_stats().log_cpu_us},
          {"record_cpu_us", manager_.tick_stats().record_cpu_us},
          {"bus_cpu_us", manager_.tick_stats().bus_cpu_us},
          {"process_cpu_us", process_cpu_us()},
          {"major_faults", faults.major},
          {"minor_faults", faults.minor},
          {"uptime_us", manager_.uptime_us()}}},
    };
    return j.dump();
}

void ManagerAdaptor::Reload(sdbus::Result<>&& result) {
    authorised(std::move(result), [this](const sdbus::Result<>& r) {
        const std::vector<Error> errors = manager_.reload();
        // ConfigReloaded came from the Manager, either way.
        if (errors.empty()) {
            r.returnResults();
            return;
        }
        std::string message;
        for (const Error& e : errors) message += (message.empty() ? "" : "\n") + e.to_string();
        r.returnError(sdbus_compat::make_error(kErrorConfigInvalid, message));
    });
}

void ManagerAdaptor::SetMode(sdbus::Result<>&& result, std::string mode) {
    const memprotd::Mode m = bus_args::mode_arg(mode);
    authorised(std::move(result), [this, m](const sdbus::Result<>& r) {
        if (Status s = manager_.set_mode(m); !s)
            throw sdbus_compat::make_error(kErrorNotSupported, s.error().message);
        announce_changes();
        r.returnResults();
    });
}

void ManagerAdaptor::SetSlicePolicy(sdbus::Result<>&& result, std::string unit,
                                    std::map<std::string, sdbus::Variant> policy) {
    const auto& overrides = manager_.slice_policy_overrides();
    const auto it = overrides.find(unit);
    // Validate before asking: nobody should type a password for a typo.
    SlicePolicy merged = bus_args::slice_policy_args(unit, it == overrides.end() ? SlicePolicy{} : it->second,
                                                     policy, MemoryTotal());
    authorised(std::move(result), [this, unit, merged](const sdbus::Result<>& r) {
        if (Status s = manager_.set_slice_policy(unit, merged); !s)
            throw sdbus_compat::make_error(kInvalidArgs, s.error().to_string());
        r.returnResults();
    });
}

void ManagerAdaptor::ResetSlicePolicy(sdbus::Result<>&& result, std::string unit) {
    check_length(unit);
    if (!manager_.slice_policy_overrides().contains(unit) && !manager_.yielded().contains(unit))
        invalid(fmt::format("\"{}\" has no runtime policy and was not left to another writer", unit));
    authorised(std::move(result), [this, unit](const sdbus::Result<>& r) {
        if (Status s = manager_.reset_slice_policy(unit); !s)
            throw sdbus_compat::make_error(kInvalidArgs, s.error().to_string());
        r.returnResults();
    });
}

// --- properties ---

std::string ManagerAdaptor::Version() {
    return MEMPROTD_VERSION;
}

std::string ManagerAdaptor::Mode() {
    return std::string(mode_name(manager_.mode()));
}

std::map<std::string, sdbus::Variant> ManagerAdaptor::KernelFeatures() {
    const memprotd::KernelFeatures& f = manager_.features();
    return {
        {"cgroup2", sdbus::Variant(f.cgroup2)},
        {"memory_controller", sdbus::Variant(f.memory_controller)},
        {"memory_recursiveprot", sdbus::Variant(f.memory_recursiveprot)},
        {"psi", sdbus::Variant(f.psi)},
        {"mglru_present", sdbus::Variant(f.mglru_present)},
        {"mglru_enabled", sdbus::Variant(f.mglru_enabled)},
        {"mglru_flags", sdbus::Variant(f.mglru_flags)},
        {"lru_gen_debugfs", sdbus::Variant(f.lru_gen_debugfs)},
        {"memory_reclaim", sdbus::Variant(f.memory_reclaim)},
        {"kernel_release", sdbus::Variant(f.kernel_release)},
        {"page_size", sdbus::Variant(f.page_size)},
    };
}

uint64_t ManagerAdaptor::MemoryTotal() {
    if (manager_.have_plan())
        return manager_.last_plan().memory_total;
    return manager_.last_snapshot().meminfo.mem_total;
}

uint64_t ManagerAdaptor::Budget() {
    return manager_.have_plan() ? manager_.last_plan().budget : 0;
}

uint64_t ManagerAdaptor::BudgetConfigured() {
    return manager_.have_plan() ? manager_.last_plan().budget_configured : 0;
}

uint64_t ManagerAdaptor::ProtectedTotal() {
    return manager_.have_plan() ? manager_.last_plan().protected_total : 0;
}

uint64_t ManagerAdaptor::DemandTotal() {
    return manager_.have_plan() ? manager_.last_plan().demand_total : 0;
}

uint32_t ManagerAdaptor::ManagedSlices() {
    return manager_.have_plan() ? static_cast<uint32_t>(manager_.last_plan().slices.size()) : 0;
}

uint64_t ManagerAdaptor::LastPlanTimestamp() {
    return last_plan_realtime_us_;
}

uint64_t ManagerAdaptor::LastPlanTimestampMonotonic() {
    return manager_.have_plan()
               ? static_cast<uint64_t>(std::max<int64_t>(0, manager_.last_plan().timestamp_us))
               : 0;
}

uint64_t ManagerAdaptor::Interval() {
    return manager_.config().daemon.interval_us;
}

uint64_t ManagerAdaptor::TotalWrites() {
    return manager_.total_writes();
}

std::vector<std::string> ManagerAdaptor::ConfigFiles() {
    return manager_.config().files;
}

}  // namespace memprotd
