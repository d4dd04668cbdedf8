// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The one place where memprotd meets the differences between sdbus-c++ 1.x
// (Debian 12) and 2.x (Debian 13). MEMPROTD_SDBUS_MAJOR is set by meson.build
// from the library's pkg-config version; nothing else in the tree tests it.
//
// 2.x uses strong types for names (ServiceName, InterfaceName, PropertyName,
// Error::Name), hands reply errors as std::optional<Error> instead of a
// pointer, returns the processed message by value, renames
// processPendingRequest to processPendingEvent and adds an event fd that an
// external loop must poll beside the bus fd. Everything here is a thin
// conversion with the same behaviour on both.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#ifndef MEMPROTD_SDBUS_MAJOR
#error "MEMPROTD_SDBUS_MAJOR is not set: use the sdbus dependency declared in meson.build"
#endif

namespace memprotd::sdbus_compat {

#if MEMPROTD_SDBUS_MAJOR >= 2
using ServiceName = sdbus::ServiceName;
using InterfaceName = sdbus::InterfaceName;
using PropertyName = sdbus::PropertyName;
// The error argument of an async reply callback.
using ReplyError = std::optional<sdbus::Error>;
inline const sdbus::Error* error_of(const ReplyError& e) { return e ? &*e : nullptr; }
#else
using ServiceName = std::string;
using InterfaceName = std::string;
using PropertyName = std::string;
using ReplyError = const sdbus::Error*;
inline const sdbus::Error* error_of(ReplyError e) { return e; }
#endif

inline ServiceName service_name(const std::string& s) { return ServiceName(s); }
inline InterfaceName interface_name(const std::string& s) { return InterfaceName(s); }
#if MEMPROTD_SDBUS_MAJOR >= 2
inline sdbus::ObjectPath object_path(const std::string& s) { return sdbus::ObjectPath(s); }
#else
inline std::string object_path(const std::string& s) { return s; }
#endif

inline sdbus::Error make_error(const std::string& name, const std::string& message) {
#if MEMPROTD_SDBUS_MAJOR >= 2
    return sdbus::Error(sdbus::Error::Name(name), message);
#else
    return sdbus::Error(name, message);
#endif
}

// A proxy on a borrowed connection: starts no thread, calls are synchronous
// unless made async, and the caller's loop processes the replies.
inline std::unique_ptr<sdbus::IProxy> make_proxy(sdbus::IConnection& conn, const std::string& service,
                                                 const std::string& path) {
    return sdbus::createProxy(conn, service_name(service), object_path(path));
}

// The unique bus name of the caller of the method being processed ("" when
// there is none).
inline std::string current_sender(const sdbus::IObject& object) {
#if MEMPROTD_SDBUS_MAJOR >= 2
    const sdbus::Message msg = object.getCurrentlyProcessedMessage();
    const char* sender = msg.getSender();
    return sender ? std::string(sender) : std::string();
#else
    const sdbus::Message* msg = object.getCurrentlyProcessedMessage();
    return msg ? msg->getSender() : std::string();
#endif
}

// What an external event loop must watch: `fd` for `events`, `event_fd`
// (-1 when the library has none) for POLLIN, and wake by `timeout_usec`
// (absolute CLOCK_MONOTONIC; UINT64_MAX for none).
struct PollData {
    int fd = -1;
    short events = 0;
    uint64_t timeout_usec = UINT64_MAX;
    int event_fd = -1;
    int poll_timeout_ms = -1;  // relative, for poll(2)
};

inline PollData poll_data(sdbus::IConnection& conn) {
    const auto pd = conn.getEventLoopPollData();
    PollData out;
    out.fd = pd.fd;
    out.events = pd.events;
    out.poll_timeout_ms = pd.getPollTimeout();
#if MEMPROTD_SDBUS_MAJOR >= 2
    const auto t = pd.timeout.count();
    out.timeout_usec = (t < 0 || pd.timeout == std::chrono::microseconds::max()) ? UINT64_MAX
                                                                                 : static_cast<uint64_t>(t);
    out.event_fd = pd.eventFd;
#else
    out.timeout_usec = pd.timeout_usec;
#endif
    return out;
}

// Processes one pending event; true when there may be more.
inline bool process_pending(sdbus::IConnection& conn) {
#if MEMPROTD_SDBUS_MAJOR >= 2
    return conn.processPendingEvent();
#else
    return conn.processPendingRequest();
#endif
}

inline void emit_properties_changed(sdbus::IObject& object, const std::string& interface,
                                    const std::vector<std::string>& names) {
    std::vector<PropertyName> props;
    props.reserve(names.size());
    for (const std::string& n : names)
        props.emplace_back(n);
    object.emitPropertiesChangedSignal(interface_name(interface), props);
}

// Property maps as returned by GetAll or PropertiesChanged, keyed by plain
// strings.
inline std::map<std::string, sdbus::Variant> to_string_map(const std::map<PropertyName, sdbus::Variant>& m) {
#if MEMPROTD_SDBUS_MAJOR >= 2
    return {m.begin(), m.end()};
#else
    return m;
#endif
}

// An object at `path` with one method (for stand-ins of other services in
// tests): `handler` as sdbus-c++'s implementedAs takes it.
template <typename Handler>
std::unique_ptr<sdbus::IObject> make_object_with_method(sdbus::IConnection& conn, const std::string& path,
                                                        const std::string& interface, const std::string& method,
                                                        Handler&& handler) {
    auto obj = sdbus::createObject(conn, object_path(path));
#if MEMPROTD_SDBUS_MAJOR >= 2
    obj->addVTable(sdbus::registerMethod(sdbus::MethodName(method)).implementedAs(std::forward<Handler>(handler)))
        .forInterface(interface_name(interface));
#else
    obj->registerMethod(method).onInterface(interface).implementedAs(std::forward<Handler>(handler));
    obj->finishRegistration();
#endif
    return obj;
}

inline void request_name(sdbus::IConnection& conn, const std::string& name) {
    conn.requestName(service_name(name));
}

}  // namespace memprotd::sdbus_compat
