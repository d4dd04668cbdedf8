// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Who may change memprotd: root, or whoever polkit allows action
// org.memprotd1.manage. The adaptor asks an Authoriser before every mutating
// call; tests substitute one that allows or denies outright.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace sdbus {
class IConnection;
class IProxy;
}  // namespace sdbus

namespace memprotd {

inline constexpr const char* kManageAction = "org.memprotd1.manage";

struct AuthDecision {
    bool allowed = false;
    std::string message;  // why not (for the AccessDenied reply), or empty
};

class Authoriser {
public:
    using Done = std::function<void(AuthDecision)>;
    virtual ~Authoriser();
    // Decides whether the bus client `sender` (a unique name, ":1.42") may
    // perform `action`. Calls `done` exactly once on the loop thread, maybe
    // before returning; never throws.
    virtual void check(const std::string& sender, const std::string& action, Done done) = 0;
};

// uid 0 (asked of the bus driver with GetConnectionUnixUser) is allowed
// outright; anyone else is checked with polkit's
// org.freedesktop.PolicyKit1.Authority.CheckAuthorization for subject
// ("system-bus-name", {"name": sender}) with AllowUserInteraction, so an
// agent may ask for a password. Both calls are asynchronous on `conn`, whose
// messages the daemon's loop processes: a password prompt does not stall
// the daemon. Any failure (polkit not running, timeout) denies.
class PolkitAuthoriser final : public Authoriser {
public:
    explicit PolkitAuthoriser(sdbus::IConnection& conn);
    ~PolkitAuthoriser() override;
    PolkitAuthoriser(const PolkitAuthoriser&) = delete;
    PolkitAuthoriser& operator=(const PolkitAuthoriser&) = delete;

    void check(const std::string& sender, const std::string& action, Done done) override;

private:
    void ask_polkit(const std::string& sender, const std::string& action, Done done);

    std::unique_ptr<sdbus::IProxy> bus_;
    std::unique_ptr<sdbus::IProxy> polkit_;
};

// For tests and --root runs: one fixed answer.
class FixedAuthoriser final : public Authoriser {
public:
    explicit FixedAuthoriser(bool allow) : allow_(allow) {}
    void check(const std::string& sender, const std::string& action, Done done) override;
    void set(bool allow) { allow_ = allow; }
    int checks = 0;  // how often check() was called

private:
    bool allow_;
};

}  // namespace memprotd
