// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bus_client.h"

#include <fmt/format.h>

#include <cstdlib>
#include <ctime>

namespace memprotd::ctl {

using nlohmann::json;

std::string bus_description() {
    const char* address = std::getenv(kBusAddressEnv);
    return address && *address ? fmt::format("the bus at {}", address) : "the system bus";
}

std::unique_ptr<sdbus::IConnection> connect() {
    try {
        const char* address = std::getenv(kBusAddressEnv);
        if (address && *address)
            return sdbus::createSessionBusConnectionWithAddress(address);
        return sdbus::createSystemBusConnection();
    } catch (const sdbus::Error& e) {
        throw NoDaemon{fmt::format("cannot connect to {}: {}", bus_description(), e.getMessage())};
    }
}

bool is_not_running(const sdbus::Error& e) {
    const std::string& n = e.getName();
    return n == "org.freedesktop.DBus.Error.ServiceUnknown" ||
           n == "org.freedesktop.DBus.Error.NameHasNoOwner" || n == "org.freedesktop.DBus.Error.NoReply" ||
           n == "org.freedesktop.DBus.Error.Disconnected";
}

json variant_to_json(const sdbus::Variant& v) {
    const std::string t = v.peekValueType();
    if (t == "t")
        return v.get<uint64_t>();
    if (t == "x")
        return v.get<int64_t>();
    if (t == "u")
        return v.get<uint32_t>();
    if (t == "i")
        return v.get<int32_t>();
    if (t == "d")
        return v.get<double>();
    if (t == "b")
        return v.get<bool>();
    if (t == "s")
        return v.get<std::string>();
    if (t == "as")
        return v.get<std::vector<std::string>>();
    return nullptr;
}

json variants_to_json(const std::map<std::string, sdbus::Variant>& m) {
    json j = json::object();
    for (const auto& [k, v] : m) j[k] = variant_to_json(v);
    return j;
}

std::string yes_no(bool b) {
    return b ? "yes" : "no";
}

std::string format_realtime(uint64_t us) {
    if (us == 0)
        return "never";
    const auto secs = static_cast<time_t>(us / 1'000'000);
    struct tm tm {};
    localtime_r(&secs, &tm);
    char buf[64];
    if (std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        return std::to_string(us);
    return buf;
}

json slice_row_json(const SliceRow& r) {
    json j = json::object();
    for_each_slice_row_field([&](const auto& field) { j[std::string(field.json)] = r.*field.member; });
    return j;
}

// ListSlices with named fields.
std::vector<SliceRow> list_slices(ManagerProxy& p) {
    std::vector<SliceRow> rows;
    for (const SliceRowWire& w : p.ListSlices()) rows.push_back(slice_row_from_wire(w));
    return rows;
}


}  // namespace memprotd::ctl
