// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The one seam through which memprotd changes anything on the host: a unit's
// MemoryLow=/MemoryMin=, set and read through systemd (docs/architecture.md).
// Implementations never throw; failures come back as Error with
//   file    = the unit name,
//   key     = the D-Bus error name ("org.freedesktop.DBus.Error.AccessDenied",
//             "org.freedesktop.systemd1.NoSuchUnit", ...) or empty,
//   message = the human-readable text.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plan.h"
#include "result.h"

namespace sdbus {
class IConnection;
class IProxy;
}  // namespace sdbus

namespace memprotd {

// The bus or systemd did not answer at all (no connection, timeout), as
// opposed to refusing one request: further calls now would fail the same way.
bool is_transport_error(const Error& e);

class Actuator {
public:
    virtual ~Actuator();
    // Sets both values as runtime properties (they vanish on reboot).
    virtual Status set(const std::string& unit, const UnitProtection& v) = 0;
    // The unit's present values as its manager reports them.
    virtual Result<UnitProtection> get(const std::string& unit) = 0;
};

// systemd over the system bus. Connects lazily on first use, so constructing
// one never fails and a dry-run daemon works without a bus. A call that fails
// because the connection broke (dbus-daemon restarted, systemd re-executed
// and dropped the reply) is retried once on a fresh connection.
class SystemdActuator final : public Actuator {
public:
    explicit SystemdActuator(uint64_t timeout_us = 5'000'000);
    ~SystemdActuator() override;
    SystemdActuator(const SystemdActuator&) = delete;
    SystemdActuator& operator=(const SystemdActuator&) = delete;

    Status set(const std::string& unit, const UnitProtection& v) override;
    Result<UnitProtection> get(const std::string& unit) override;

private:
    Status connect();
    void disconnect();
    template <typename F>
    auto with_retry(const std::string& unit, F&& call) -> decltype(call());

    uint64_t timeout_us_;
    std::unique_ptr<sdbus::IConnection> conn_;
    std::unique_ptr<sdbus::IProxy> manager_;
};

// For tests and dry-run comparisons: keeps values in a map (units it has not
// seen read as 0/0 unless seeded) and records every call in order.
class RecordingActuator final : public Actuator {
public:
    struct Call {
        enum class Kind { Set, Get };
        Kind kind;
        std::string unit;
        UnitProtection values;  // what was set, or what get returned
        friend bool operator==(const Call&, const Call&) = default;
    };

    Status set(const std::string& unit, const UnitProtection& v) override;
    Result<UnitProtection> get(const std::string& unit) override;

    // Makes every later call (or only every set) for `unit` fail with
    // `error` until cleared.
    void fail(const std::string& unit, Error error, bool sets_only = false);
    void clear_failure(const std::string& unit);

    std::map<std::string, UnitProtection> values;
    std::vector<Call> calls;  // successful and failed, in order
    size_t failed_calls = 0;
    // Called before a set takes effect (tests check what was on disk then).
    std::function<void(const std::string& unit)> before_set;
    // Called after a set took effect, as systemd then writes the cgroup
    // (tests mirror it into their fake tree: FakeTree::apply_protection).
    std::function<void(const std::string& unit, const UnitProtection& v)> after_set;

    [[nodiscard]] std::vector<Call> sets() const;

private:
    std::map<std::string, Error> failures_;
    std::map<std::string, Error> set_failures_;
};

}  // namespace memprotd
