// SPDX-License-Identifier: LGPL-2.1-or-later
//
// One row of ListSlices' reply, a(ssttttttttd) in
// dbus/org.memprotd1.Manager.xml: the daemon fills it from its plan,
// memprotctl and the tests read it. The field order of Wire is the wire
// format; only to_wire/from_wire know it.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <cstdint>
#include <string>
#include <tuple>

namespace memprotd {

struct SliceRow {
    using Wire = sdbus::Struct<std::string, std::string, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                               uint64_t, uint64_t, uint64_t, double>;

    std::string unit;
    std::string cgroup;              // path below the cgroup2 mount, "/a.slice/b.slice"
    uint64_t current = 0;            // memory.current, bytes
    uint64_t working_set = 0;        // bytes
    uint64_t cheap_cache = 0;        // bytes
    uint64_t demand = 0;             // bytes
    uint64_t memory_low = 0;         // MemoryLow= when the plan was made
    uint64_t memory_min = 0;         // MemoryMin= when the plan was made
    uint64_t target_memory_low = 0;  // what the engine aims for
    uint64_t target_memory_min = 0;
    double psi_some = 0;             // smoothed memory PSI some, fraction 0..1

    [[nodiscard]] Wire to_wire() const {
        return Wire(unit, cgroup, current, working_set, cheap_cache, demand, memory_low, memory_min,
                    target_memory_low, target_memory_min, psi_some);
    }

    static SliceRow from_wire(const Wire& w) {
        SliceRow r;
        std::tie(r.unit, r.cgroup, r.current, r.working_set, r.cheap_cache, r.demand, r.memory_low,
                 r.memory_min, r.target_memory_low, r.target_memory_min, r.psi_some) = w;
        return r;
    }
};

}  // namespace memprotd
