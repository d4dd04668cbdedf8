// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Decoding and validation of the arguments org.memprotd1's methods take from
// callers, apart from the adaptor so that it can be tested and fuzzed without
// a bus (tests/fuzz/fuzz_bus_args.cc). Everything here either returns a value
// within bounds or throws sdbus::Error(InvalidArgs) with a message that names
// the argument; nothing touches the Manager.
#pragma once

#include "sdbus_compat.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "config.h"
#include "model.h"

namespace memprotd::bus_args {

inline constexpr const char* kInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs";
// systemd's UNIT_NAME_MAX.
inline constexpr size_t kMaxUnitName = 256;
inline constexpr size_t kMaxPolicyKeys = 16;
// Longest string value accepted, and longest caller text quoted in an error.
inline constexpr size_t kMaxValueString = 64;

// At most kMaxValueString bytes of a caller's text for an error message, cut
// at a UTF-8 boundary, control characters replaced by '?'.
std::string excerpt(std::string_view text);

[[noreturn]] void invalid(const std::string& message);

// A name a slice unit could have: systemd's unit name alphabet, ending in
// ".slice", no paths, at most kMaxUnitName bytes.
void check_slice_name(const std::string& unit);
// Only the length: for lookups, where an unknown name is reported as such.
void check_length(const std::string& unit);

// SetMode's argument: enforce, dry-run or paused.
Mode mode_arg(const std::string& mode);

// SetSlicePolicy's a{sv} applied over `base` (the unit's runtime policy so
// far). The keys are kPolicyKeys (config.h), each decoded by its field's
// type: a weight (u or another integer type), a size (t bytes or s in config
// syntax), a boolean (b or s), a time span (t µs or s in config syntax); ""
// unsets a key. Values are held to the rules of config.h (weight_problem,
// working_set_window_problem, policy_problem against mem_total, when it is
// known), as policy files are.
SlicePolicy merge_policy(SlicePolicy base, const std::map<std::string, sdbus::Variant>& keys,
                         uint64_t mem_total);

// SetSlicePolicy's two arguments, the one validation path the adaptor takes
// before it asks for authorisation: check_slice_name(unit), then
// merge_policy(base, keys, mem_total).
SlicePolicy slice_policy_args(const std::string& unit, SlicePolicy base,
                              const std::map<std::string, sdbus::Variant>& keys, uint64_t mem_total);

}  // namespace memprotd::bus_args
