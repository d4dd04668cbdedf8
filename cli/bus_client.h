// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl's side of org.memprotd1: the connection, the proxy and the
// helpers every bus verb shares to turn what the daemon sends into text or
// JSON. Internal to memprotctl (namespace memprotd::ctl).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bus_names.h"
#include "sdbus_compat.h"
#include "slice_row.h"
#include "write_row.h"

// Generated from dbus/org.memprotd1.Manager.xml at build time.
#include "org.memprotd1.Manager.proxy.h"

namespace memprotd::ctl {

// Thrown when the daemon cannot be reached; becomes kExitNoDaemon.
struct NoDaemon {
    std::string detail;
};

// "the system bus", or "the bus at ADDRESS" under $MEMPROTD_BUS_ADDRESS.
std::string bus_description();

// The system bus, or the bus at $MEMPROTD_BUS_ADDRESS. Throws NoDaemon.
std::unique_ptr<sdbus::IConnection> connect();

// True for the errors that mean nobody owns org.memprotd1 (or the bus went
// away), which memprotctl reports as kExitNoDaemon.
bool is_not_running(const sdbus::Error& e);

class ManagerProxy final
    : public sdbus::ProxyInterfaces<org::memprotd1::Manager_proxy, sdbus::Properties_proxy> {
public:
    // With `subscribe` the signal matches are installed (monitor only).
    ManagerProxy(sdbus::IConnection& conn, bool subscribe)
        : ProxyInterfaces(conn, sdbus_compat::service_name(kBusName), sdbus_compat::object_path(kObjectPath)) {
        if (subscribe)
            registerProxy();
    }
    ~ManagerProxy() { unregisterProxy(); }
    ManagerProxy(const ManagerProxy&) = delete;
    ManagerProxy& operator=(const ManagerProxy&) = delete;

    std::function<void(uint64_t, uint32_t)> plan_applied;
    std::function<void(const std::string&, double)> pressure_changed;
    std::function<void(bool, const std::vector<std::string>&)> config_reloaded;
    std::function<void(const std::map<std::string, sdbus::Variant>&)> properties_changed;

private:
    void onPlanApplied(const uint64_t& timestamp, const uint32_t& writes) override {
        if (plan_applied)
            plan_applied(timestamp, writes);
    }
    void onPressureChanged(const std::string& unit, const double& some_avg10) override {
        if (pressure_changed)
            pressure_changed(unit, some_avg10);
    }
    void onConfigReloaded(const bool& ok, const std::vector<std::string>& errors) override {
        if (config_reloaded)
            config_reloaded(ok, errors);
    }
    void onPropertiesChanged(const sdbus_compat::InterfaceName& interface,
                             const std::map<sdbus_compat::PropertyName, sdbus::Variant>& changed,
                             const std::vector<sdbus_compat::PropertyName>& /*invalidated*/) override {
        if (interface == kInterface && properties_changed)
            properties_changed(sdbus_compat::to_string_map(changed));
    }
};

// A variant of a basic type, an a{sv} of them, as JSON; null for other types.
nlohmann::json variant_to_json(const sdbus::Variant& v);
nlohmann::json variants_to_json(const std::map<std::string, sdbus::Variant>& m);

std::string yes_no(bool b);
// Local time "YYYY-MM-DD HH:MM:SS" of a realtime µs stamp; "never" for 0.
std::string format_realtime(uint64_t us);

// props[name] when it holds a T, else `fallback`.
template <typename T>
T prop(const std::map<std::string, sdbus::Variant>& props, const std::string& name, T fallback = {}) {
    const auto it = props.find(name);
    if (it == props.end() || !it->second.containsValueOfType<T>())
        return fallback;
    return it->second.get<T>();
}

// ListSlices with named fields, and one row as status/list --json print it.
std::vector<SliceRow> list_slices(ManagerProxy& p);
nlohmann::json slice_row_json(const SliceRow& r);

}  // namespace memprotd::ctl
