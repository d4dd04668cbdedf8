// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The bus verbs of memprotctl, one function each, grouped by family:
// verbs_status.cc (status, list, show, explain, plan, dump),
// verbs_metrics.cc (metrics), verbs_control.cc (reload, mode, set, reset),
// verbs_monitor.cc (monitor). Each prints to stdout and returns an exit
// code (offline_verbs.h); sdbus::Error and CLI::ValidationError propagate to
// BusVerbs::run, which reports them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bus_client.h"

namespace memprotd::ctl {

// status and explain also ask systemd on `conn` (systemd-oomd, ManagedOOM*=).
int status(sdbus::IConnection& conn, ManagerProxy& p, bool as_json);
int list(ManagerProxy& p, bool as_json);
int show(ManagerProxy& p, const std::string& unit, bool as_json);
int explain(sdbus::IConnection& conn, ManagerProxy& p, const std::string& unit, bool as_json);
int plan(ManagerProxy& p, bool as_json);
int dump(ManagerProxy& p);

// OpenMetrics text for node_exporter's textfile collector.
int metrics(ManagerProxy& p);

int reload(ManagerProxy& p);
int set_mode(ManagerProxy& p, const std::string& mode);
int set_policy(ManagerProxy& p, const std::string& unit, const std::vector<std::string>& assignments);
int reset_policy(ManagerProxy& p, const std::string& unit);
// set's KEY=VALUE words as SetSlicePolicy's a{sv}: "Weight=200" → u,
// "Manage=no" → b, everything else the string given (the daemon checks
// ranges, parses sizes and reports unknown keys). Throws
// CLI::ValidationError for words that are no assignment.
std::map<std::string, sdbus::Variant> parse_assignments(const std::vector<std::string>& assignments);

// Follows the signals until SIGINT/SIGTERM, or until `count` events when
// count > 0. `p` must have been made with subscribe=true.
int monitor(sdbus::IConnection& conn, ManagerProxy& p, bool as_json, int count);

}  // namespace memprotd::ctl
