// SPDX-License-Identifier: LGPL-2.1-or-later
#include <fmt/format.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "format.h"
#include "offline_verbs.h"
#include "verbs.h"

namespace memprotd::ctl {

using nlohmann::json;

namespace {

// Dispatches the connection's messages (the proxy's callbacks count into
// `seen`) until `sfd` (a signalfd) is readable, the bus closes, or
// seen reaches count > 0.
int follow(sdbus::IConnection& conn, int sfd, const int& seen, int count) {
    while (count <= 0 || seen < count) {
        while (sdbus_compat::process_pending(conn) && (count <= 0 || seen < count)) {
        }
        if (count > 0 && seen >= count)
            break;
        const sdbus_compat::PollData pd = sdbus_compat::poll_data(conn);
        // fds[2] is sdbus-c++ 2's event fd; poll(2) skips a negative fd.
        struct pollfd fds[3] = {{pd.fd, pd.events, 0}, {sfd, POLLIN, 0}, {pd.event_fd, POLLIN, 0}};
        const int r = ::poll(fds, 3, pd.poll_timeout_ms);
        if (r < 0 && errno != EINTR)
            return kExitFailure;
        if (fds[1].revents & POLLIN)
            break;
        if (fds[0].revents & (POLLHUP | POLLERR)) {
            fmt::print(stderr, "memprotctl: the bus connection closed\n");
            return kExitFailure;
        }
    }
    return kExitOk;
}

}  // namespace

int monitor(sdbus::IConnection& conn, ManagerProxy& p, bool as_json, int count) {
    int seen = 0;
    auto emit = [&](const json& j, const std::string& text) {
        if (as_json)
            fmt::print("{}\n", j.dump());
        else
            fmt::print(
                "{} {}\n",
                format_realtime(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count())),
                text);
        std::fflush(stdout);
        ++seen;
    };
    p.plan_applied = [&](uint64_t ts, uint32_t writes) {
        emit({{"signal", "PlanApplied"}, {"timestamp", ts}, {"writes", writes}},
             fmt::format("plan applied: {} write(s)", writes));
    };
    p.pressure_changed = [&](const std::string& unit, double avg10) {
        emit({{"signal", "PressureChanged"}, {"unit", unit}, {"some_avg10", avg10}},
             fmt::format("pressure: {} some avg10 {:.2f}%", unit, avg10));
    };
    p.config_reloaded = [&](bool ok, const std::vector<std::string>& errors) {
        std::string text = ok ? "configuration reloaded" : "configuration reload failed:";
        for (const auto& e : errors) text += "\n    " + e;
        emit({{"signal", "ConfigReloaded"}, {"ok", ok}, {"errors", errors}}, text);
    };
    p.properties_changed = [&](const std::map<std::string, sdbus::Variant>& changed) {
        std::string text;
        for (const auto& [k, v] : changed) {
            const json j = variant_to_json(v);
            std::string shown = j.is_string() ? j.get<std::string>() : j.dump();
            if (k == "Budget" && j.is_number_unsigned())
                shown = format_bytes(j.get<uint64_t>());
            else if (k == "LastPlanTimestamp")
                continue;  // PlanApplied says it
            text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", k, shown);
        }
        if (!text.empty())
            emit({{"signal", "PropertiesChanged"}, {"changed", variants_to_json(changed)}}, text);
    };

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        fmt::print(stderr, "memprotctl: signalfd: {}\n", std::strerror(errno));
        return kExitFailure;
    }
    // Tests and scripts wait for this line before they make things happen.
    fmt::print(stderr, "Monitoring {} on {}; press Ctrl-C to stop.\n", kBusName, bus_description());
    std::fflush(stderr);
    const int rc = follow(conn, sfd, seen, count);
    ::close(sfd);
    return rc;
}

}  // namespace memprotd::ctl
