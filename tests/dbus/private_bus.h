// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Helpers for the D-Bus tests: a private dbus-daemon with its own config and
// socket in a temporary directory (never the host's buses), and running a
// program as a child with output captured to files.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace memprotd::test {

class PrivateBus {
public:
    // Starts `dbus-daemon --nofork --print-address` with a config that lets
    // anyone own any name and call anything. Throws std::runtime_error when
    // it does not come up.
    PrivateBus();
    // Kills the daemon (SIGTERM, then waits) and removes the directory.
    ~PrivateBus();
    PrivateBus(const PrivateBus&) = delete;
    PrivateBus& operator=(const PrivateBus&) = delete;

    [[nodiscard]] const std::string& address() const { return address_; }
    // Kills the daemon now (SIGTERM, then waits), as when the system bus is
    // restarted; the directory stays until destruction.
    void stop();
    [[nodiscard]] const std::string& dir() const { return dir_; }

private:
    std::string dir_;
    std::string address_;
    pid_t pid_ = -1;
};

struct ProcessResult {
    int exit_code = -1;  // -1: killed by a signal or timed out
    std::string out;
    std::string err;
};

// A child process with stdout/stderr going to files below `dir`.
class Child {
public:
    Child(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
          const std::string& dir);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // Non-blocking: true once the child has exited.
    bool poll();
    [[nodiscard]] std::string out() const;
    [[nodiscard]] std::string err() const;
    void signal(int sig) const;
    // Valid after poll() returned true.
    [[nodiscard]] ProcessResult result() const;

private:
    pid_t pid_ = -1;
    int status_ = 0;
    bool done_ = false;
    std::string out_path_;
    std::string err_path_;
};

}  // namespace memprotd::test
