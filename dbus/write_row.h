// SPDX-License-Identifier: LGPL-2.1-or-later
//
// One row of GetPlan's reply, a(sttb) in dbus/org.memprotd1.Manager.xml: a
// write of the last plan, in the order it is made. The daemon fills it from
// the plan, memprotctl and the tests read it. The field order of Wire is the
// wire format; only to_wire/from_wire know it.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <cstdint>
#include <string>
#include <tuple>

namespace memprotd {

struct WriteRow {
    using Wire = sdbus::Struct<std::string, uint64_t, uint64_t, bool>;

    std::string unit;
    uint64_t memory_low = 0;  // bytes
    uint64_t memory_min = 0;  // bytes
    bool decrease = false;    // part of the decrease phase (made before every increase)

    [[nodiscard]] Wire to_wire() const { return Wire(unit, memory_low, memory_min, decrease); }

    static WriteRow from_wire(const Wire& w) {
        WriteRow r;
        std::tie(r.unit, r.memory_low, r.memory_min, r.decrease) = w;
        return r;
    }
    [[nodiscard]] const char* phase() const { return decrease ? "decrease" : "increase"; }
};

}  // namespace memprotd
