// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The one owner of the daemon's configuration: the last good configuration
// from the files and the runtime policies set over the bus, merged into the
// single effective Config that everything else reads.
//
// Threading: the loop thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "result.h"

namespace memprotd {

class RuntimeConfig {
public:
    // `dirs`: the configuration directories in priority order, as
    // load_config takes them.
    explicit RuntimeConfig(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {}

    // Reads the files (`mem_total` for percentages). On errors the last good
    // configuration stays and every error is returned, with file and line.
    std::vector<Error> load(uint64_t mem_total);
    // A runtime policy for one unit (a name, not a glob), merged on top of
    // the files' policies; checked by the files' rules (slice_name_problem,
    // policy_problem), refused whole with the first problem. Lost on restart.
    Status set_policy(const std::string& unit, const SlicePolicy& policy, uint64_t mem_total);
    Status reset_policy(const std::string& unit);

    // The files' configuration plus the runtime policies, appended as
    // PolicyRules whose file is "runtime:<unit>". Its [Daemon] section is
    // the files'.
    [[nodiscard]] const Config& effective() const { return effective_; }
    [[nodiscard]] const std::map<std::string, SlicePolicy>& overrides() const { return overrides_; }

private:
    void rebuild();

    std::vector<std::string> dirs_;
    Config files_;  // the last good configuration from the files
    std::map<std::string, SlicePolicy> overrides_;
    Config effective_;
};

}  // namespace memprotd
