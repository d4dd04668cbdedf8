// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotctl's verbs that talk to memprotd over D-Bus (org.memprotd1):
// status, list, show, explain, plan, monitor, reload, mode, set, reset,
// metrics, dump. This registers them and reports their errors; the verbs
// themselves are in verbs_*.cc (verbs.h). The bus is the system bus, or
// $MEMPROTD_BUS_ADDRESS. Exit codes as in offline_verbs.h; kExitNoDaemon
// when nobody owns org.memprotd1 or the bus cannot be reached.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace memprotd {

class BusVerbs {
public:
    // Registers the verbs as subcommands of `app`.
    explicit BusVerbs(CLI::App& app);
    // The exit code when one of the verbs was given, nullopt otherwise.
    // Prints errors to stderr; never throws.
    [[nodiscard]] std::optional<int> run() const;

private:
    struct Verb {
        CLI::App* cmd = nullptr;
        std::string name;
    };
    std::vector<Verb> verbs_;
    bool json_ = false;
    std::string unit_;
    std::string mode_;
    std::vector<std::string> assignments_;
    int count_ = 0;
};

}  // namespace memprotd
