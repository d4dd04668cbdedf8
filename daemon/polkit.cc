// SPDX-License-Identifier: LGPL-2.1-or-later
#include "polkit.h"

#include "sdbus_compat.h"
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <utility>

namespace memprotd {

namespace {

constexpr const char* kBusService = "org.freedesktop.DBus";
constexpr const char* kBusPath = "/org/freedesktop/DBus";
constexpr const char* kPolkitService = "org.freedesktop.PolicyKit1";
constexpr const char* kPolkitPath = "/org/freedesktop/PolicyKit1/Authority";
constexpr const char* kPolkitInterface = "org.freedesktop.PolicyKit1.Authority";
// CheckAuthorizationFlags.AllowUserInteraction
constexpr uint32_t kAllowUserInteraction = 1;
// Long enough for a person to type a password into an agent.
constexpr auto kPolkitTimeout = std::chrono::minutes(2);

using PolkitResult = sdbus::Struct<bool, bool, std::map<std::string, std::string>>;
using Subject = sdbus::Struct<std::string, std::map<std::string, sdbus::Variant>>;

}  // namespace

Authoriser::~Authoriser() = default;

PolkitAuthoriser::PolkitAuthoriser(sdbus::IConnection& conn)
    : bus_(sdbus_compat::make_proxy(conn, kBusService, kBusPath)),
      polkit_(sdbus_compat::make_proxy(conn, kPolkitService, kPolkitPath)) {}

PolkitAuthoriser::~PolkitAuthoriser() = default;

void PolkitAuthoriser::check(const std::string& sender, const std::string& action, Done done) {
    try {
        bus_->callMethodAsync("GetConnectionUnixUser")
            .onInterface(kBusService)
            .withArguments(sender)
            .uponReplyInvoke([this, sender, action, done](sdbus_compat::ReplyError reply_error, uint32_t uid) {
                const sdbus::Error* error = sdbus_compat::error_of(reply_error);
                if (error) {
                    spdlog::warn("cannot find the uid of {}: {}", sender, error->getMessage());
                    done({false, "cannot identify the caller"});
                    return;
                }
                if (uid == 0) {
                    done({true, {}});
                    return;
                }
                ask_polkit(sender, action, done);
            });
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot ask the bus about {}: {}", sender, e.getMessage());
        done({false, "cannot identify the caller"});
    }
}

void PolkitAuthoriser::ask_polkit(const std::string& sender, const std::string& action, Done done) {
    const Subject subject{std::string("system-bus-name"),
                          std::map<std::string, sdbus::Variant>{{"name", sdbus::Variant(sender)}}};
    const std::map<std::string, std::string> details;
    try {
        polkit_->callMethodAsync("CheckAuthorization")
            .onInterface(kPolkitInterface)
            .withTimeout(kPolkitTimeout)
            .withArguments(subject, action, details, kAllowUserInteraction, std::string())
            .uponReplyInvoke([sender, action, done](sdbus_compat::ReplyError reply_error, const PolkitResult& result) {
                const sdbus::Error* error = sdbus_compat::error_of(reply_error);
                if (error) {
                    spdlog::warn("polkit check of {} for {} failed: {}: {}", action, sender, error->getName(),
                                 error->getMessage());
                    done({false, "authorisation check failed: " + error->getMessage()});
                    return;
                }
                const bool authorized = std::get<0>(result);
                const bool challenge = std::get<1>(result);
                if (authorized) {
                    done({true, {}});
                    return;
                }
                done({false, challenge ? "authentication required (no polkit agent answered)"
                                       : "not authorised for " + action});
            });
    } catch (const sdbus::Error& e) {
        spdlog::warn("cannot ask polkit about {}: {}", sender, e.getMessage());
        done({false, "authorisation check failed: " + e.getMessage()});
    }
}

void FixedAuthoriser::check(const std::string& /*sender*/, const std::string& action, Done done) {
    ++checks;
    if (allow_)
        done({true, {}});
    else
        done({false, "not authorised for " + action});
}

}  // namespace memprotd
