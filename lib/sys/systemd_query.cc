// SPDX-License-Identifier: LGPL-2.1-or-later
#include "systemd_query.h"

#include <chrono>
#include <string_view>

#include "sdbus_compat.h"

namespace memprotd {

namespace {

constexpr const char* kSystemdService = "org.freedesktop.systemd1";
constexpr const char* kSystemdPath = "/org/freedesktop/systemd1";
constexpr const char* kManagerInterface = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnitInterface = "org.freedesktop.systemd1.Unit";
constexpr const char* kPropertiesInterface = "org.freedesktop.DBus.Properties";
// memprotctl waits this long for each answer.
constexpr std::chrono::seconds kTimeout{5};

// The unit's object, loaded: LoadUnit answers for units without a unit file
// too (their LoadState says "not-found").
std::unique_ptr<sdbus::IProxy> unit_proxy(sdbus::IConnection& conn, const std::string& unit) {
    auto manager = sdbus_compat::make_proxy(conn, kSystemdService, kSystemdPath);
    sdbus::ObjectPath path;
    manager->callMethod("LoadUnit")
        .onInterface(kManagerInterface)
        .withArguments(unit)
        .withTimeout(kTimeout)
        .storeResultsTo(path);
    return sdbus_compat::make_proxy(conn, kSystemdService, path);
}

std::string string_property(sdbus::IProxy& unit, const std::string& iface, const std::string& name) {
    sdbus::Variant v;
    unit.callMethod("Get")
        .onInterface(kPropertiesInterface)
        .withArguments(iface, name)
        .withTimeout(kTimeout)
        .storeResultsTo(v);
    return v.get<std::string>();
}

template <typename F>
auto guarded(const std::string& unit, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const sdbus::Error& e) {
        return Error{unit, 0, e.getName(), e.getMessage().empty() ? e.what() : e.getMessage()};
    } catch (const std::exception& e) {
        return Error{unit, 0, "", e.what()};
    }
}

}  // namespace

std::string unit_interface(const std::string& unit) {
    const auto dot = unit.rfind('.');
    const std::string_view suffix =
        dot == std::string::npos ? std::string_view{} : std::string_view(unit).substr(dot + 1);
    if (suffix == "service")
        return "org.freedesktop.systemd1.Service";
    if (suffix == "scope")
        return "org.freedesktop.systemd1.Scope";
    if (suffix == "socket")
        return "org.freedesktop.systemd1.Socket";
    if (suffix == "mount")
        return "org.freedesktop.systemd1.Mount";
    if (suffix == "swap")
        return "org.freedesktop.systemd1.Swap";
    return "org.freedesktop.systemd1.Slice";
}

Result<OomdState> oomd_state(sdbus::IConnection& conn) {
    const std::string unit = "systemd-oomd.service";
    return guarded(unit, [&]() -> Result<OomdState> {
        auto proxy = unit_proxy(conn, unit);
        OomdState s;
        s.installed = string_property(*proxy, kUnitInterface, "LoadState") != "not-found";
        s.active_state = string_property(*proxy, kUnitInterface, "ActiveState");
        return s;
    });
}

Result<ManagedOom> managed_oom(sdbus::IConnection& conn, const std::string& unit) {
    return guarded(unit, [&]() -> Result<ManagedOom> {
        auto proxy = unit_proxy(conn, unit);
        const std::string iface = unit_interface(unit);
        return ManagedOom{string_property(*proxy, iface, "ManagedOOMSwap"),
                          string_property(*proxy, iface, "ManagedOOMMemoryPressure")};
    });
}

}  // namespace memprotd
