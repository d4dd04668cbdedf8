// SPDX-License-Identifier: LGPL-2.1-or-later
//
// org.memprotd1.Manager at /org/memprotd1: the Manager's state and knobs on
// the bus (dbus/org.memprotd1.Manager.xml is the contract). The adaptor is a
// thin layer: it validates arguments, asks the Authoriser for mutating
// calls and forwards to the Manager. Everything runs on the Manager's loop
// thread: BusEventSource feeds the connection from the Manager's sd-event.
//
// Errors: every method reply error is an sdbus::Error thrown or returned at
// this boundary; nothing here throws into the Manager's callbacks.
#pragma once

#include <systemd/sd-event.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "bus_names.h"
#include "manager.h"
#include "memory_lock.h"
#include "polkit.h"
#include "sdbus_compat.h"
#include "slice_row.h"
#include "write_row.h"

// Generated from dbus/org.memprotd1.Manager.xml at build time.
#include "org.memprotd1.Manager.adaptor.h"

namespace memprotd {

// The system bus, or the bus at $MEMPROTD_BUS_ADDRESS when that is set
// (tests, private demos). Throws sdbus::Error.
std::unique_ptr<sdbus::IConnection> open_bus();

// Processes a connection's messages from an sd-event loop (sdbus-c++ 1.2 has
// no sd-event integration; 2.x's attachSdEventLoop is not used so that both
// run the same code): an io source on the bus fd whose prepare callback
// updates the poll events, one on sdbus-c++ 2's event fd, and a timer for
// sd-bus' own timeouts. Handlers run on the loop's thread; never use
// enterEventLoopAsync(), which would run them on a second thread.
class BusEventSource {
public:
    BusEventSource(sdbus::IConnection& conn, sd_event* event);
    ~BusEventSource();
    BusEventSource(const BusEventSource&) = delete;
    BusEventSource& operator=(const BusEventSource&) = delete;

    // 0, or a negative errno when the sources could not be added.
    int attach();
    // Called once when the connection fails (dbus-daemon gone); the
    // sources are disabled by then. The daemon should exit.
    std::function<void(const std::string& why)> on_error;
    // Called after each batch of messages with the loop thread's CPU time
    // in it (µs): what serving D-Bus calls costs.
    std::function<void(uint64_t cpu_us)> on_processed;

private:
    static int on_prepare(sd_event_source* s, void* userdata);
    static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    static int on_time(sd_event_source* s, uint64_t usec, void* userdata);
    int update();
    int process();
    void fail(const std::string& why);

    sdbus::IConnection& conn_;
    sd_event* event_;
    sd_event_source* io_ = nullptr;
    sd_event_source* event_io_ = nullptr;  // sdbus-c++ 2 only
    sd_event_source* timer_ = nullptr;
};

class ManagerAdaptor final : public sdbus::AdaptorInterfaces<org::memprotd1::Manager_adaptor> {
public:
    // Registers /org/memprotd1 on `conn` and hooks the Manager's callbacks
    // (on_plan_applied, on_pressure, on_config_reloaded; they must be
    // unset, and are reset in the destructor). Requesting the bus name is
    // the caller's job, after this, so that no call finds the name without
    // the object. `manager` and `auth` must outlive the adaptor.
    // `memory_lock` is whether the daemon's own pages are locked in RAM
    // (Dump's "memory_lock").
    ManagerAdaptor(sdbus::IConnection& conn, Manager& manager, Authoriser& auth, MemoryLock memory_lock = {});
    ~ManagerAdaptor();
    ManagerAdaptor(const ManagerAdaptor&) = delete;
    ManagerAdaptor& operator=(const ManagerAdaptor&) = delete;

private:

    // methods
    std::vector<SliceRowWire> ListSlices() override;
    std::map<std::string, sdbus::Variant> GetSlice(const std::string& unit) override;
    std::string Explain(const std::string& unit) override;
    std::vector<WriteRow::Wire> GetPlan() override;
    std::string Dump() override;
    void Reload(sdbus::Result<>&& result) override;
    void SetMode(sdbus::Result<>&& result, std::string mode) override;
    void SetSlicePolicy(sdbus::Result<>&& result, std::string unit,
                        std::map<std::string, sdbus::Variant> policy) override;
    void ResetSlicePolicy(sdbus::Result<>&& result, std::string unit) override;

    // properties
    std::string Version() override;
    std::string Mode() override;
    std::map<std::string, sdbus::Variant> KernelFeatures() override;
    uint64_t MemoryTotal() override;
    uint64_t Budget() override;
    uint64_t BudgetConfigured() override;
    uint64_t ProtectedTotal() override;
    uint64_t DemandTotal() override;
    uint32_t ManagedSlices() override;
    uint64_t LastPlanTimestamp() override;
    uint64_t LastPlanTimestampMonotonic() override;
    uint64_t Interval() override;
    uint64_t TotalWrites() override;
    std::vector<std::string> ConfigFiles() override;

    using Action = std::function<void(const sdbus::Result<>&)>;
    // Asks auth_ about the caller of the method being processed; runs
    // `action` when allowed, replies AccessDenied otherwise.
    void authorised(sdbus::Result<>&& result, Action action);
    const PlanEntry& find_slice(const std::string& unit) const;
    [[nodiscard]] nlohmann::json yielded_json() const;
    // Dump's "trimming": TrimCheapCache=, the mechanism and why, TrimStats.
    [[nodiscard]] nlohmann::json trimming_json() const;
    void plan_applied(const Plan& plan);
    void pressure(const std::string& unit);
    void config_reloaded(bool ok, const std::vector<std::string>& errors);
    // PropertiesChanged for Mode, Budget and LastPlanTimestamp when they
    // differ from what was last announced.
    void announce_changes();

    Manager& manager_;
    Authoriser& auth_;
    const MemoryLock memory_lock_;
    // Pending authorisations hold a weak_ptr: an adaptor destroyed while
    // polkit thinks must not be called back.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    uint64_t last_plan_realtime_us_ = 0;
    uint64_t writes_seen_ = 0;
    std::string announced_mode_;
    uint64_t announced_budget_ = 0;
    uint64_t announced_timestamp_ = 0;
};

}  // namespace memprotd
