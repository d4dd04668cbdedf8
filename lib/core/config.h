// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The configuration model and its parser: systemd-style INI text in, plain
// structs out. Pure: the files are read by lib/sys/config_loader and handed
// in as (path, text) pairs. See docs/configuration.md. The lexer is ini.h,
// the value parsers (sizes, time spans, percentages, booleans) values.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "result.h"
#include "values.h"

namespace memprotd {

// Weight= bounds, for config files, SetSlicePolicy and memprotctl alike.
inline constexpr uint32_t kWeightMin = 1;
inline constexpr uint32_t kWeightMax = 10000;
inline constexpr uint32_t kWeightDefault = 100;
// "W is out of range 1..10000" when `w` is not a Weight= value, else nullopt.
std::optional<std::string> weight_problem(int64_t w);

enum class Mode { Enforce, DryRun, Paused };
std::string_view mode_name(Mode m);  // "enforce", "dry-run", "paused"
std::optional<Mode> mode_from_name(std::string_view s);

// TrimCheapCache=: how memprotd trims cheap cache when the host's free
// memory falls short of what protected slices' bursts need (lib/core/trim.h):
// auto (the first mechanism this kernel has), lru-gen (evict file pages
// through debugfs lru_gen, oldest generation first), reclaim
// (memory.reclaim "N swappiness=0", 6.11+), or no.
enum class TrimSetting { Auto, LruGen, Reclaim, No };
std::string_view trim_setting_name(TrimSetting t);  // "auto", "lru-gen", "reclaim", "no"
std::optional<TrimSetting> trim_setting_from_name(std::string_view s);

// The shortest WorkingSetWindow= ([Daemon], policies, SetSlicePolicy): 1 s.
inline constexpr uint64_t kMinWorkingSetWindowUs = 1'000'000;
// "expected a time span of at least 1s, got SHOWN" when `us` is shorter than
// kMinWorkingSetWindowUs, else nullopt; `shown` is the value as the caller
// wrote it.
std::optional<std::string> working_set_window_problem(uint64_t us, std::string_view shown);

// The longest Interval= (and memprotctl simulate --interval) allowed: 1 h.
inline constexpr uint64_t kMaxIntervalUs = 3600ULL * 1'000'000;

// RecordMaxSize=: the trace file is rotated at this size and one old file
// kept, so a trace never takes more than twice this (docs/trace.md).
inline constexpr uint64_t kRecordMaxBytesDefault = 64ULL << 20;
inline constexpr uint64_t kRecordMaxBytesMin = 1ULL << 20;

// memprotd.conf [Daemon]
struct DaemonConfig {
    Mode mode = Mode::Enforce;                       // Mode= enforce | dry-run
    uint64_t interval_us = 5'000'000;                // Interval=
    SizeSpec budget = SizeSpec::of_percent(70);      // Budget= (of MemTotal)
    uint64_t working_set_window_us = 60'000'000;     // WorkingSetWindow=
    double headroom = 0.10;                          // Headroom=
    bool restore_on_exit = true;                     // RestoreOnExit=
    bool working_set_aging = true;                   // WorkingSetAging=
    // EscalateAhead=: where memory.low only defers reclaim (MGLRU, 6.3+),
    // hold each protected slice's working set under MemoryMin= from the
    // start instead of after low events show MemoryLow= did not hold.
    bool escalate_ahead = false;                     // EscalateAhead=
    TrimSetting trim_cheap_cache = TrimSetting::No;    // TrimCheapCache=
    bool manage_top_level_slices = true;             // ManageTopLevelSlices=
    uint64_t pressure_threshold_us = 150'000;        // PressureThreshold=
    uint64_t pressure_window_us = 1'000'000;         // PressureWindow=
    std::string record;                              // Record= trace file (absolute path), empty: off
    uint64_t record_max_bytes = kRecordMaxBytesDefault;  // RecordMaxSize= per file (docs/trace.md)
};

// policy.d/*.conf [Protection]; unset fields fall through to earlier files
// and then to the defaults.
struct SlicePolicy {
    std::optional<uint32_t> weight;    // Weight= kWeightMin..kWeightMax, default kWeightDefault
    SizeSpec min_protection;           // MinProtection=
    SizeSpec max_protection;           // MaxProtection=
    SizeSpec floor;                    // Floor= → MemoryMin
    std::optional<bool> manage;        // Manage= (no: leave the slice alone)
    std::optional<uint64_t> working_set_window_us;  // WorkingSetWindow= (default: [Daemon]'s)
};

// One [Protection] key: its name and its field in SlicePolicy. The field's
// type says what the key takes and which rules hold: a weight
// (weight_problem), a size (parse_size; percentages at most 100%), a boolean,
// or a time span (working_set_window_problem).
struct PolicyKey {
    std::string_view name;
    std::variant<std::optional<uint32_t> SlicePolicy::*, SizeSpec SlicePolicy::*,
                 std::optional<bool> SlicePolicy::*, std::optional<uint64_t> SlicePolicy::*>
        field;
};

// The [Protection] keys, for policy files, SetSlicePolicy and memprotctl set
// alike, in the order messages list them.
inline constexpr PolicyKey kPolicyKeys[] = {
    {"Weight", &SlicePolicy::weight},
    {"MinProtection", &SlicePolicy::min_protection},
    {"MaxProtection", &SlicePolicy::max_protection},
    {"Floor", &SlicePolicy::floor},
    {"Manage", &SlicePolicy::manage},
    {"WorkingSetWindow", &SlicePolicy::working_set_window_us},
};

// The entry of kPolicyKeys named `name` (case-sensitive), or nullptr.
const PolicyKey* find_policy_key(std::string_view name);
// "Weight, MinProtection, ..., WorkingSetWindow".
std::string policy_key_list();

struct PolicyRule {
    std::string file;                  // where it came from, for messages
    std::vector<std::string> globs;    // [Match] Slice= (unit names, fnmatch globs)
    SlicePolicy protection;
};

// A slice's policy after merging every matching rule in file order.
struct EffectivePolicy {
    bool matched = false;              // some rule matched the unit
    bool named = false;                // some matching rule lists the unit by its exact name (not a glob)
    bool manage = true;
    uint32_t weight = kWeightDefault;
    SizeSpec min_protection;
    SizeSpec max_protection;
    SizeSpec floor;
    std::optional<uint64_t> working_set_window_us;  // unset: [Daemon] WorkingSetWindow=
    std::vector<std::string> sources;  // files of the matching rules
};

struct Config {
    DaemonConfig daemon;
    std::vector<PolicyRule> policies;  // in application order (lexical by file name)
    std::vector<std::string> files;    // every file that was read, in order

    [[nodiscard]] EffectivePolicy policy_for(std::string_view unit) const;
};

struct ConfigFile {
    std::string path;
    std::string text;
};

// What the loader found: the main file and its drop-ins in application
// order, and the policy files in lexical order.
struct ConfigInput {
    std::vector<ConfigFile> daemon_files;
    std::vector<ConfigFile> policy_files;
    std::vector<Error> errors;  // files that existed but could not be read
};

struct ConfigParse {
    Config config;
    std::vector<Error> errors;  // every problem, each with file, line and key
    [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Parses everything and reports every error, not just the first; the result
// starts with `input.errors`. `mem_total` (0 = unknown) is used to compare
// percentages with byte sizes when checking for contradictory bounds.
// Syntax is systemd's (keys case-sensitive, '#'/';' comment lines, trailing
// backslash continues a line, an empty value resets a key to its default or
// clears Slice=), plus one extension: " #" after a value starts a comment.
// A policy file with empty text masks and is skipped.
ConfigParse parse_config(const ConfigInput& input, uint64_t mem_total = 0);

// A runtime policy's rules (SetSlicePolicy, memprotctl set), the same a
// policy file's are held to: Weight= kWeightMin..kWeightMax, percentages at
// most 100%, MinProtection= at most MaxProtection= (against mem_total, when
// it is known; 0 = unknown), WorkingSetWindow= at least
// kMinWorkingSetWindowUs. Returns what is wrong, or nullopt.
std::optional<std::string> policy_problem(const SlicePolicy& policy, uint64_t mem_total);
// The unit a runtime policy is for: a slice unit name (systemd's unit
// characters, no globs, no leading '.'). Returns what is wrong, or nullopt.
std::optional<std::string> slice_name_problem(std::string_view unit);

// "[Daemon]" and every key of it with its value, in config syntax, one per
// line, from the same table that parses them: parse_config() reads it back.
std::string format_daemon_config(const DaemonConfig& daemon);

// One key and its value in config syntax.
struct Setting {
    std::string key;
    std::string value;
    bool operator==(const Setting&) const = default;
};
// The [Daemon] settings the engine plans by, in the table's order: Interval=,
// Budget=, WorkingSetWindow=, Headroom=, ManageTopLevelSlices=,
// WorkingSetAging=, EscalateAhead=, TrimCheapCache= (not Mode=,
// RestoreOnExit=, PressureThreshold=, PressureWindow=, Record=,
// RecordMaxSize=, which only the daemon's loop reads). A trace records them,
// so that a replay can say where its configuration differs (docs/trace.md).
std::vector<Setting> engine_settings(const DaemonConfig& daemon);

}  // namespace memprotd
