// SPDX-License-Identifier: LGPL-2.1-or-later
#include "actuator.h"

#include "sdbus_compat.h"
#include "systemd_query.h"

#include <chrono>
#include <exception>
#include <string_view>
#include <utility>

namespace memprotd {

Actuator::~Actuator() = default;

namespace {

constexpr const char* kSystemdService = "org.freedesktop.systemd1";
constexpr const char* kSystemdPath = "/org/freedesktop/systemd1";
constexpr const char* kManagerInterface = "org.freedesktop.systemd1.Manager";
constexpr const char* kPropertiesInterface = "org.freedesktop.DBus.Properties";

Error bus_error(const std::string& unit, const sdbus::Error& e) {
    return Error{unit, 0, e.getName(), e.getMessage().empty() ? e.what() : e.getMessage()};
}

// Errors that say the connection or the peer went away rather than that the
// request was refused: worth one retry on a new connection. A timeout is not
// among them: retrying would double a wait that already stalls the tick.
bool is_connection_error(const std::string& name) {
    static constexpr std::string_view kNames[] = {
        "org.freedesktop.DBus.Error.Disconnected",   "org.freedesktop.DBus.Error.ServiceUnknown",
        "org.freedesktop.DBus.Error.NameHasNoOwner", "System.Error.ENOTCONN",
        "System.Error.ECONNRESET",                   "System.Error.EPIPE",
        "System.Error.ESHUTDOWN",                    "System.Error.ECONNREFUSED",
    };
    for (std::string_view n : kNames)
        if (name == n)
            return true;
    return false;
}

}  // namespace

bool is_transport_error(const Error& e) {
    return is_connection_error(e.key) || e.key == "org.freedesktop.DBus.Error.NoReply" ||
           e.key == "org.freedesktop.DBus.Error.Timeout" || e.key == "org.freedesktop.DBus.Error.TimedOut" ||
           e.key == "System.Error.ETIMEDOUT" || e.message.starts_with("cannot connect to the system bus");
}

SystemdActuator::SystemdActuator(uint64_t timeout_us) : timeout_us_(timeout_us) {}

SystemdActuator::~SystemdActuator() = default;

Status SystemdActuator::connect() {
    if (conn_)
        return Ok{};
    try {
        auto conn = sdbus::createSystemBusConnection();
        conn->setMethodCallTimeout(timeout_us_);
        // A proxy on a borrowed connection starts no thread: calls are
        // synchronous and nothing else runs on this connection.
        manager_ = sdbus_compat::make_proxy(*conn, kSystemdService, kSystemdPath);
        conn_ = std::move(conn);
        return Ok{};
    } catch (const sdbus::Error& e) {
        manager_.reset();
        return bus_error("system bus", e);
    } catch (const std::exception& e) {
        manager_.reset();
        return Error{"system bus", 0, "", e.what()};
    }
}

void SystemdActuator::disconnect() {
    manager_.reset();  // holds a reference to conn_
    conn_.reset();
}

template <typename F>
auto SystemdActuator::with_retry(const std::string& unit, F&& call) -> decltype(call()) {
    for (int attempt = 0;; ++attempt) {
        if (Status c = connect(); !c)
            return Error{unit, 0, c.error().key, "cannot connect to the system bus: " + c.error().message};
        try {
            return call();
        } catch (const sdbus::Error& e) {
            if (attempt == 0 && is_connection_error(e.getName())) {
                disconnect();
                continue;
            }
            return bus_error(unit, e);
        } catch (const std::exception& e) {
            // sdbus-c++ may let std::bad_alloc or a bad Variant cast through.
            return Error{unit, 0, "", e.what()};
        }
    }
}

Status SystemdActuator::set(const std::string& unit, const UnitProtection& v) {
    return with_retry(unit, [&]() -> Status {
        std::vector<sdbus::Struct<std::string, sdbus::Variant>> props;
        props.emplace_back(std::string("MemoryLow"), sdbus::Variant(v.memory_low));
        props.emplace_back(std::string("MemoryMin"), sdbus::Variant(v.memory_min));
        manager_->callMethod("SetUnitProperties")
            .onInterface(kManagerInterface)
            .withArguments(unit, /*runtime=*/true, props)
            .withTimeout(std::chrono::microseconds(timeout_us_));
        return Ok{};
    });
}

Result<UnitProtection> SystemdActuator::get(const std::string& unit) {
    return with_retry(unit, [&]() -> Result<UnitProtection> {
        sdbus::ObjectPath path;
        // LoadUnit, not GetUnit: a slice with no unit file and no cgroup yet
        // is still configurable, and GetUnit would call it unknown.
        manager_->callMethod("LoadUnit")
            .onInterface(kManagerInterface)
            .withArguments(unit)
            .withTimeout(std::chrono::microseconds(timeout_us_))
            .storeResultsTo(path);
        auto proxy = sdbus_compat::make_proxy(*conn_, kSystemdService, path);
        const std::string iface = unit_interface(unit);
        UnitProtection out;
        sdbus::Variant low, min;
        proxy->callMethod("Get")
            .onInterface(kPropertiesInterface)
            .withArguments(iface, std::string("MemoryLow"))
            .withTimeout(std::chrono::microseconds(timeout_us_))
            .storeResultsTo(low);
        proxy->callMethod("Get")
            .onInterface(kPropertiesInterface)
            .withArguments(iface, std::string("MemoryMin"))
            .withTimeout(std::chrono::microseconds(timeout_us_))
            .storeResultsTo(min);
        out.memory_low = low.get<uint64_t>();
        out.memory_min = min.get<uint64_t>();
        return out;
    });
}

Status RecordingActuator::set(const std::string& unit, const UnitProtection& v) {
    calls.push_back({Call::Kind::Set, unit, v});
    for (const auto* f : {&failures_, &set_failures_}) {
        if (auto it = f->find(unit); it != f->end()) {
            ++failed_calls;
            return it->second;
        }
    }
    if (before_set)
        before_set(unit);
    values[unit] = v;
    if (after_set)
        after_set(unit, v);
    return Ok{};
}

Result<UnitProtection> RecordingActuator::get(const std::string& unit) {
    if (auto it = failures_.find(unit); it != failures_.end()) {
        calls.push_back({Call::Kind::Get, unit, {}});
        ++failed_calls;
        return it->second;
    }
    const auto it = values.find(unit);
    const UnitProtection v = it == values.end() ? UnitProtection{} : it->second;
    calls.push_back({Call::Kind::Get, unit, v});
    return v;
}

void RecordingActuator::fail(const std::string& unit, Error error, bool sets_only) {
    if (error.file.empty())
        error.file = unit;
    (sets_only ? set_failures_ : failures_).insert_or_assign(unit, std::move(error));
}

void RecordingActuator::clear_failure(const std::string& unit) {
    failures_.erase(unit);
    set_failures_.erase(unit);
}

std::vector<RecordingActuator::Call> RecordingActuator::sets() const {
    std::vector<Call> out;
    for (const Call& c : calls)
        if (c.kind == Call::Kind::Set)
            out.push_back(c);
    return out;
}

}  // namespace memprotd
