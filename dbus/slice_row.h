// SPDX-License-Identifier: LGPL-2.1-or-later
//
// One row of ListSlices' reply, a(ssttttttttd) in
// dbus/org.memprotd1.Manager.xml: the daemon fills it from its plan,
// memprotctl and the tests read it. kSliceRowFields is the one list of its
// fields: their order is the wire format (SliceRowWire, to_wire,
// slice_row_from_wire), and their names are memprotctl's JSON keys and
// OpenMetrics families.
#pragma once

#include <sdbus-c++/sdbus-c++.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace memprotd {

struct SliceRow {
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
};

// One field of SliceRow: its member, its JSON key, and its OpenMetrics family
// and help text (empty metric: not a metric, a label or nothing).
template <typename T>
struct SliceRowField {
    T SliceRow::*member;
    std::string_view json;
    std::string_view metric;
    std::string_view help;
};

// Every field of SliceRow, in wire order.
inline constexpr auto kSliceRowFields = std::make_tuple(
    SliceRowField<std::string>{&SliceRow::unit, "unit", "", ""},
    SliceRowField<std::string>{&SliceRow::cgroup, "cgroup", "", ""},
    SliceRowField<uint64_t>{&SliceRow::current, "current", "memprotd_slice_memory_current_bytes",
                            "memory.current of the slice."},
    SliceRowField<uint64_t>{&SliceRow::working_set, "working_set", "memprotd_slice_working_set_bytes",
                            "Estimated working set."},
    SliceRowField<uint64_t>{&SliceRow::cheap_cache, "cheap_cache", "memprotd_slice_cheap_cache_bytes",
                            "Clean, unmapped, rarely refaulting page cache."},
    SliceRowField<uint64_t>{&SliceRow::demand, "demand", "memprotd_slice_demand_bytes",
                            "Protection the slice needs."},
    SliceRowField<uint64_t>{&SliceRow::memory_low, "memory_low", "memprotd_slice_memory_low_bytes",
                            "MemoryLow= as systemd had it when the plan was made."},
    SliceRowField<uint64_t>{&SliceRow::memory_min, "memory_min", "memprotd_slice_memory_min_bytes",
                            "MemoryMin= as systemd had it when the plan was made."},
    SliceRowField<uint64_t>{&SliceRow::target_memory_low, "target_memory_low",
                            "memprotd_slice_target_memory_low_bytes", "MemoryLow= the engine aims for."},
    SliceRowField<uint64_t>{&SliceRow::target_memory_min, "target_memory_min",
                            "memprotd_slice_target_memory_min_bytes", "MemoryMin= the engine aims for."},
    SliceRowField<double>{&SliceRow::psi_some, "psi_some", "memprotd_slice_pressure_some_ratio",
                          "Smoothed memory PSI some stall fraction."});

// Calls f(field) for each entry of kSliceRowFields, in order.
template <typename F>
constexpr void for_each_slice_row_field(F&& f) {
    std::apply([&](const auto&... field) { (f(field), ...); }, kSliceRowFields);
}

// The row as ListSlices carries it: a(ssttttttttd)'s element.
using SliceRowWire = decltype(std::apply(
    [](const auto&... field) {
        using Struct = sdbus::Struct<std::remove_cvref_t<decltype(SliceRow{}.*field.member)>...>;
        return std::type_identity<Struct>{};
    },
    kSliceRowFields))::type;

[[nodiscard]] inline SliceRowWire to_wire(const SliceRow& r) {
    return std::apply([&](const auto&... field) { return SliceRowWire(r.*field.member...); },
                      kSliceRowFields);
}

[[nodiscard]] inline SliceRow slice_row_from_wire(const SliceRowWire& w) {
    SliceRow r;
    std::apply([&](const auto&... field) { std::tie(r.*field.member...) = w; }, kSliceRowFields);
    return r;
}

}  // namespace memprotd
