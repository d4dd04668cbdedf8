// SPDX-License-Identifier: LGPL-2.1-or-later
#include "config.h"
#include "ini.h"
#include "model.h"
#include "text.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <type_traits>
#include <utility>

namespace memprotd {

namespace {

// The kernel's PSI trigger limits (kernel/sched/psi.c: psi_trigger_create).
constexpr uint64_t kMinPressureWindowUs = 500'000;
constexpr uint64_t kMaxPressureWindowUs = 10 * kUsecPerSec;
// Sums of percentages are compared with a little slack so that 33.3% + 33.3%
// + 33.4% does not exceed 100% through rounding.
constexpr double kPercentSlack = 1e-9;

// ---------------------------------------------------------------------------
// Key tables: each section is a list of {key, applier}; the appliers are
// built from {field, value parser, check}. The known-key lists in error
// messages come from the same tables.

// What is wrong with one assignment: one error message each.
using Problems = std::vector<std::string>;

// One key of a section. `apply` gets the trimmed value (empty: reset to the
// default) and adds a message to `problems` for each thing wrong with it.
// `show` writes the value back in config syntax (nullptr: not shown).
// `engine`: the engine plans by it (engine_settings()).
template <typename Target>
struct KeyItem {
    std::string_view name;
    void (*apply)(std::string_view value, Target& target, Problems& problems);
    std::string (*show)(const Target& target) = nullptr;
    bool engine = false;
};

template <typename Target>
struct SectionItem {
    std::string_view name;
    std::span<const KeyItem<Target>> keys;
};

template <typename M>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
    using Class = C;
};

// Sets `field` of `target` from config text: an empty value resets the
// field to its default (the value in a default-constructed Class), as an
// empty assignment does in systemd; otherwise `parse` (text → Result<T>),
// then `check` (T, text → message or nullopt; nullptr for none), then the
// field is set. A refused value leaves the field as it was.
template <typename Class, typename T, typename Parse, typename Check = std::nullptr_t>
void set_member(T Class::*field, std::string_view value, Class& target, Problems& problems, Parse parse,
                Check check = nullptr) {
    if (value.empty()) {
        target.*field = Class{}.*field;
        return;
    }
    auto parsed = parse(value);
    if (!parsed) {
        problems.push_back(parsed.error().message);
        return;
    }
    if constexpr (!std::is_null_pointer_v<Check>) {
        if (std::optional<std::string> problem = check(*parsed, value)) {
            problems.push_back(std::move(*problem));
            return;
        }
    }
    target.*field = *parsed;
}

// set_member as an applier of a key table.
template <auto Field, auto Parse, auto Check = nullptr>
void set_field(std::string_view value, typename MemberOf<decltype(Field)>::Class& target, Problems& problems) {
    set_member(Field, value, target, problems, Parse, Check);
}

// A shower for one field: `Format` (T → config text).
template <auto Field, auto Format>
std::string show_field(const typename MemberOf<decltype(Field)>::Class& target) {
    return Format(target.*Field);
}

std::string show_timespan(const uint64_t& us) { return format_timespan(us); }
std::string show_size(const SizeSpec& s) { return s.to_string(); }
std::string show_boolean(const bool& b) { return b ? "yes" : "no"; }
std::string show_percent(const double& f) { return fmt::format("{:g}%", f * 100); }
std::string show_mode(const Mode& m) { return std::string(mode_name(m)); }
std::string show_trim(const TrimSetting& t) { return std::string(trim_setting_name(t)); }

template <typename Item>
const Item* find_by_name(std::span<const Item> items, std::string_view name) {
    auto it = std::find_if(items.begin(), items.end(), [name](const Item& i) { return i.name == name; });
    return it == items.end() ? nullptr : &*it;
}

// The line each key was last applied on in one file, by key name.
using KeyLines = std::map<std::string, int, std::less<>>;

int line_of(const KeyLines& lines, std::string_view key) {
    auto it = lines.find(key);
    return it == lines.end() ? 0 : it->second;
}

// "did you mean" for the commonest mistake, a key in the wrong case.
template <typename Target>
std::string unknown_key_message(std::string_view key, const SectionItem<Target>& section) {
    std::vector<std::string_view> known;
    for (const auto& k : section.keys)
        known.push_back(k.name);
    for (auto k : known) {
        if (iequals(k, key))
            return fmt::format("unknown key in [{}]; keys are case-sensitive, did you mean {}=?", section.name, k);
    }
    return fmt::format("unknown key in [{}]; expected one of {}", section.name, fmt::join(known, ", "));
}

// "[Daemon]", "[Match] or [Protection]".
template <typename Target>
std::string section_list(std::span<const SectionItem<Target>> sections) {
    std::string out;
    for (const auto& s : sections)
        out += fmt::format("{}[{}]", out.empty() ? "" : " or ", s.name);
    return out;
}

template <typename Target>
void apply_assignment(const SectionItem<Target>& section, const IniItem& item, const std::string& path,
                      Target& target, KeyLines& lines, std::vector<Error>& errors) {
    const KeyItem<Target>* key = find_by_name(section.keys, item.name);
    if (key == nullptr) {
        errors.push_back({path, item.line, item.name, unknown_key_message(item.name, section)});
        return;
    }
    Problems problems;
    key->apply(item.value, target, problems);
    if (problems.empty())
        lines[item.name] = item.line;
    for (auto& problem : problems)
        errors.push_back({path, item.line, item.name, std::move(problem)});
}

// Applies one file's items to `target` by the tables of `sections`. Keys in
// unknown sections are skipped (the header was reported; X-... sections are
// not errors); keys before any section header are errors.
template <typename Target>
void apply_items(const std::vector<IniItem>& items, std::span<const SectionItem<Target>> sections,
                 const std::string& path, Target& target, KeyLines& lines, std::vector<Error>& errors) {
    bool in_section = false;
    const SectionItem<Target>* section = nullptr;
    for (const auto& item : items) {
        if (item.kind == IniItem::Kind::Section) {
            in_section = true;
            section = find_by_name(sections, item.name);
            if (section == nullptr && !ini_is_extension_section(item.name))
                errors.push_back({path, item.line, {},
                                  fmt::format("unknown section [{}]; expected {}", item.name,
                                              section_list(sections))});
        } else if (!in_section) {
            errors.push_back({path, item.line, item.name,
                              fmt::format("key outside of any section; expected {} first", section_list(sections))});
        } else if (section != nullptr) {
            apply_assignment(*section, item, path, target, lines, errors);
        }
    }
}

Error value_error(std::string message) { return Error{{}, 0, {}, std::move(message)}; }

// ---------------------------------------------------------------------------
// [Daemon]

struct Origin {
    std::string file;
    int line = 0;
};

Result<TrimSetting> parse_trim(std::string_view text) {
    if (auto t = trim_setting_from_name(text))
        return *t;
    return value_error(fmt::format("expected auto, lru-gen, reclaim or no, got \"{}\"", text));
}

Result<Mode> parse_mode(std::string_view text) {
    if (auto m = mode_from_name(text))
        return *m;
    return value_error(fmt::format("expected enforce, dry-run or paused, got \"{}\"", text));
}

std::optional<std::string> check_interval(const uint64_t& us, std::string_view text) {
    if (us == 0 || us > kMaxIntervalUs)
        return fmt::format("expected a time span > 0 and at most 1h, got \"{}\"", text);
    return std::nullopt;
}

std::optional<std::string> check_budget(const SizeSpec& s, std::string_view text) {
    if (s.kind == SizeSpec::Kind::Infinity || (s.kind == SizeSpec::Kind::Percent && s.percent < 1) ||
        (s.kind == SizeSpec::Kind::Bytes && s.bytes == 0))
        return fmt::format("expected a percentage 1..100% of MemTotal or a size in bytes > 0, got \"{}\"", text);
    return std::nullopt;
}

std::optional<std::string> check_working_set_window(const uint64_t& us, std::string_view text) {
    return working_set_window_problem(us, fmt::format("\"{}\"", text));
}

std::optional<std::string> check_pressure_threshold(const uint64_t& us, std::string_view text) {
    if (us == 0)
        return fmt::format("expected a time span > 0 (stall time within PressureWindow=), got \"{}\"", text);
    return std::nullopt;
}

std::optional<std::string> check_pressure_window(const uint64_t& us, std::string_view text) {
    if (us < kMinPressureWindowUs || us > kMaxPressureWindowUs)
        return fmt::format("expected a time span 500ms..10s (the kernel's PSI trigger limits), got \"{}\"", text);
    return std::nullopt;
}

Result<std::string> parse_record_path(std::string_view text) {
    if (!text.starts_with('/'))
        return value_error(fmt::format("expected an absolute path (or nothing: no trace), got \"{}\"", text));
    return std::string(text);
}

Result<uint64_t> parse_record_max_size(std::string_view text) {
    Result<SizeSpec> s = parse_size(text);
    if (!s)
        return s.error();
    if (s->kind != SizeSpec::Kind::Bytes || s->bytes < kRecordMaxBytesMin)
        return value_error(fmt::format("expected a size of at least 1M, got \"{}\"", text));
    return s->bytes;
}

std::string show_string(const std::string& s) { return s; }
std::string show_bytes(const uint64_t& b) { return SizeSpec::of_bytes(b).to_string(); }

using D = DaemonConfig;

// In the order the unknown-key message lists them.
constexpr KeyItem<DaemonConfig> kDaemonKeys[] = {
    {"Mode", set_field<&D::mode, parse_mode>, show_field<&D::mode, show_mode>},
    {"Interval", set_field<&D::interval_us, parse_timespan_us, check_interval>,
     show_field<&D::interval_us, show_timespan>, true},
    {"Budget", set_field<&D::budget, parse_size, check_budget>, show_field<&D::budget, show_size>, true},
    {"WorkingSetWindow", set_field<&D::working_set_window_us, parse_timespan_us, check_working_set_window>,
     show_field<&D::working_set_window_us, show_timespan>, true},
    {"Headroom", set_field<&D::headroom, parse_percent>, show_field<&D::headroom, show_percent>, true},
    {"RestoreOnExit", set_field<&D::restore_on_exit, parse_boolean>, show_field<&D::restore_on_exit, show_boolean>},
    {"ManageTopLevelSlices", set_field<&D::manage_top_level_slices, parse_boolean>,
     show_field<&D::manage_top_level_slices, show_boolean>, true},
    {"PressureThreshold", set_field<&D::pressure_threshold_us, parse_timespan_us, check_pressure_threshold>,
     show_field<&D::pressure_threshold_us, show_timespan>},
    {"PressureWindow", set_field<&D::pressure_window_us, parse_timespan_us, check_pressure_window>,
     show_field<&D::pressure_window_us, show_timespan>},
    {"WorkingSetAging", set_field<&D::working_set_aging, parse_boolean>,
     show_field<&D::working_set_aging, show_boolean>, true},
    {"EscalateAhead", set_field<&D::escalate_ahead, parse_boolean>, show_field<&D::escalate_ahead, show_boolean>,
     true},
    {"TrimCheapCache", set_field<&D::trim_cheap_cache, parse_trim>, show_field<&D::trim_cheap_cache, show_trim>,
     true},
    {"Record", set_field<&D::record, parse_record_path>, show_field<&D::record, show_string>},
    {"RecordMaxSize", set_field<&D::record_max_bytes, parse_record_max_size>,
     show_field<&D::record_max_bytes, show_bytes>},
};

constexpr SectionItem<DaemonConfig> kDaemonSections[] = {{"Daemon", kDaemonKeys}};

void parse_daemon_file(const ConfigFile& file, DaemonConfig& daemon, std::map<std::string, Origin>& origins,
                       std::vector<Error>& errors) {
    const std::vector<IniItem> items = ini_lex(file.path, file.text, errors);
    KeyLines lines;
    apply_items<DaemonConfig>(items, kDaemonSections, file.path, daemon, lines, errors);
    for (const auto& [key, line] : lines)
        origins[key] = {file.path, line};
}

// ---------------------------------------------------------------------------
// policy.d

bool has_wildcard(std::string_view glob) { return glob.find_first_of("*?[") != std::string_view::npos; }

bool valid_unit_char(char c) {
    // systemd's VALID_CHARS for unit names (src/basic/unit-name.c).
    return is_alpha(c) || is_digit(c) || c == ':' || c == '-' || c == '_' || c == '.' || c == '\\' || c == '@';
}

bool valid_glob_char(char c) { return valid_unit_char(c) || c == '*' || c == '?' || c == '[' || c == ']' || c == '!' || c == '^'; }

// fnmatch flags for Slice= globs. FNM_NOESCAPE because systemd escapes in
// unit names look like "foo\x2dbar.slice" and must match literally; unit
// names cannot contain glob characters, so nothing needs escaping.
constexpr int kGlobFlags = FNM_NOESCAPE;

// Could `glob` match some name that ends in ".slice"? A match of X".slice"
// starts ".slice" either at an element boundary of the pattern or inside a
// '*', and in both cases the pattern's tail from that element matches
// ".slice" itself, so trying every tail is exact (given non-empty sets).
bool glob_can_match_slice(const std::string& glob) {
    if (fnmatch(glob.c_str(), "x.slice", kGlobFlags) == 0)
        return true;
    size_t i = 0;
    while (i < glob.size()) {
        if (fnmatch(glob.c_str() + i, ".slice", kGlobFlags) == 0)
            return true;
        if (glob[i] == '[') {
            size_t j = i + 1;
            if (j < glob.size() && (glob[j] == '!' || glob[j] == '^'))
                ++j;
            if (j < glob.size() && glob[j] == ']')
                ++j;
            size_t close = glob.find(']', j);
            i = close == std::string::npos ? i + 1 : close + 1;
        } else {
            ++i;
        }
    }
    return false;
}

std::optional<std::string> check_slice_glob(const std::string& glob) {
    if (has_wildcard(glob)) {
        if (!std::all_of(glob.begin(), glob.end(), valid_glob_char))
            return fmt::format("expected unit names or globs ending in \".slice\", got \"{}\" (invalid character)",
                               glob);
        if (!glob_can_match_slice(glob))
            return fmt::format("expected unit names or globs ending in \".slice\", got \"{}\" (matches no slice)",
                               glob);
        return std::nullopt;
    }
    if (!is_slice_unit(glob))
        return fmt::format("expected unit names or globs ending in \".slice\", got \"{}\"", glob);
    if (!std::all_of(glob.begin(), glob.end(), valid_unit_char))
        return fmt::format("expected a valid unit name, got \"{}\" (invalid character)", glob);
    return std::nullopt;
}

std::optional<int> compare_sizes(const SizeSpec& a, const SizeSpec& b, uint64_t mem_total) {
    using K = SizeSpec::Kind;
    if (!a.set() || !b.set())
        return std::nullopt;
    if (a.kind == K::Infinity || b.kind == K::Infinity)
        return (a.kind == K::Infinity ? 1 : 0) - (b.kind == K::Infinity ? 1 : 0);
    if (a.kind == K::Bytes && b.kind == K::Bytes)
        return a.bytes < b.bytes ? -1 : (a.bytes > b.bytes ? 1 : 0);
    if (a.kind == K::Percent && b.kind == K::Percent)
        return a.percent < b.percent ? -1 : (a.percent > b.percent ? 1 : 0);
    if (mem_total == 0)
        return std::nullopt;
    uint64_t ra = a.resolve(mem_total);
    uint64_t rb = b.resolve(mem_total);
    return ra < rb ? -1 : (ra > rb ? 1 : 0);
}

// [Match] Slice=: unit names or globs separated by whitespace, added to the
// rule's list (duplicates dropped); each bad one is a problem of its own and
// the good ones still apply. Empty resets the list, as for systemd list
// settings.
void apply_slice_globs(std::string_view value, PolicyRule& rule, Problems& problems) {
    if (value.empty()) {
        rule.globs.clear();
        return;
    }
    std::string_view rest = value;
    while (!(rest = trim_left(rest)).empty()) {
        size_t end = 0;
        while (end < rest.size() && !is_space(rest[end]))
            ++end;
        std::string glob(rest.substr(0, end));
        rest.remove_prefix(end);
        if (auto problem = check_slice_glob(glob)) {
            problems.push_back(std::move(*problem));
            continue;
        }
        if (std::find(rule.globs.begin(), rule.globs.end(), glob) == rule.globs.end())
            rule.globs.push_back(std::move(glob));
    }
}

Result<uint32_t> parse_weight(std::string_view text) {
    constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();
    auto w = parse_digits_u64(text);
    if (!w || weight_problem(static_cast<int64_t>(std::min(*w, kInt64Max))))
        return value_error(fmt::format("expected an integer {}..{}, got \"{}\"", kWeightMin, kWeightMax, text));
    return static_cast<uint32_t>(*w);
}

// Sets a [Protection] field from a policy file's text, by the field's type
// (see PolicyKey).
struct ApplyPolicyText {
    std::string_view value;
    SlicePolicy& policy;
    Problems& problems;

    void operator()(std::optional<uint32_t> SlicePolicy::*f) const {
        set_member(f, value, policy, problems, parse_weight);
    }
    void operator()(SizeSpec SlicePolicy::*f) const { set_member(f, value, policy, problems, parse_size); }
    void operator()(std::optional<bool> SlicePolicy::*f) const {
        set_member(f, value, policy, problems, parse_boolean);
    }
    void operator()(std::optional<uint64_t> SlicePolicy::*f) const {
        set_member(f, value, policy, problems, parse_timespan_us, check_working_set_window);
    }
};

// The applier of kPolicyKeys[I] on the rule's SlicePolicy.
template <size_t I>
void protection_key(std::string_view value, PolicyRule& rule, Problems& problems) {
    std::visit(ApplyPolicyText{value, rule.protection, problems}, kPolicyKeys[I].field);
}

template <size_t... I>
constexpr std::array<KeyItem<PolicyRule>, sizeof...(I)> make_protection_keys(std::index_sequence<I...>) {
    return {KeyItem<PolicyRule>{kPolicyKeys[I].name, protection_key<I>}...};
}

constexpr KeyItem<PolicyRule> kMatchKeys[] = {{"Slice", apply_slice_globs}};

// kPolicyKeys, in its order (the order the unknown-key message lists them).
constexpr auto kProtectionKeys = make_protection_keys(std::make_index_sequence<std::size(kPolicyKeys)>());

constexpr SectionItem<PolicyRule> kPolicySections[] = {{"Match", kMatchKeys}, {"Protection", kProtectionKeys}};

// Line of the first [Match] header, 0 when there is none.
int first_match_line(const std::vector<IniItem>& items) {
    for (const auto& item : items)
        if (item.kind == IniItem::Kind::Section && item.name == "Match")
            return item.line;
    return 0;
}

// Appends the file's rule and the lines of its keys, unless it has no
// Slice=. Contradictions within the file are reported here; those across
// files by check_merged_policies.
void parse_policy_file(const ConfigFile& file, uint64_t mem_total, std::vector<PolicyRule>& rules,
                       std::vector<KeyLines>& rule_lines, std::vector<Error>& errors) {
    const std::vector<IniItem> items = ini_lex(file.path, file.text, errors);
    PolicyRule rule;
    rule.file = file.path;
    KeyLines lines;
    apply_items<PolicyRule>(items, kPolicySections, file.path, rule, lines, errors);

    if (rule.globs.empty()) {
        errors.push_back({file.path, first_match_line(items), "Slice",
                          "a policy file needs [Match] Slice= with at least one slice name or glob"});
        return;  // a rule that matches nothing is not worth keeping
    }

    const SlicePolicy& p = rule.protection;
    if (compare_sizes(p.min_protection, p.max_protection, mem_total).value_or(0) > 0)
        errors.push_back({file.path, line_of(lines, "MinProtection"), "MinProtection",
                          fmt::format("expected at most MaxProtection={}, got {}", p.max_protection.to_string(),
                                      p.min_protection.to_string())});
    if (compare_sizes(p.floor, p.max_protection, mem_total).value_or(0) > 0)
        errors.push_back({file.path, line_of(lines, "Floor"), "Floor",
                          fmt::format("expected at most MaxProtection={}, got {}", p.max_protection.to_string(),
                                      p.floor.to_string())});
    rules.push_back(std::move(rule));
    rule_lines.push_back(std::move(lines));
}

bool rule_matches(const PolicyRule& rule, const char* unit) {
    return std::any_of(rule.globs.begin(), rule.globs.end(),
                       [unit](const std::string& g) { return fnmatch(g.c_str(), unit, kGlobFlags) == 0; });
}

struct MergedOrigins {
    Origin min_protection, max_protection, floor;
};

EffectivePolicy merge_policies(const Config& config, std::string_view unit, const std::vector<KeyLines>* origins,
                               MergedOrigins* merged) {
    EffectivePolicy out;
    std::string name(unit);  // fnmatch needs a terminator
    for (size_t i = 0; i < config.policies.size(); ++i) {
        const PolicyRule& rule = config.policies[i];
        if (!rule_matches(rule, name.c_str()))
            continue;
        const SlicePolicy& p = rule.protection;
        out.matched = true;
        out.named = out.named || std::find(rule.globs.begin(), rule.globs.end(), name) != rule.globs.end();
        out.sources.push_back(rule.file);
        if (p.weight)
            out.weight = *p.weight;
        if (p.manage)
            out.manage = *p.manage;
        if (p.working_set_window_us)
            out.working_set_window_us = p.working_set_window_us;
        if (p.min_protection.set()) {
            out.min_protection = p.min_protection;
            if (merged && origins)
                merged->min_protection = {rule.file, line_of((*origins)[i], "MinProtection")};
        }
        if (p.max_protection.set()) {
            out.max_protection = p.max_protection;
            if (merged && origins)
                merged->max_protection = {rule.file, line_of((*origins)[i], "MaxProtection")};
        }
        if (p.floor.set()) {
            out.floor = p.floor;
            if (merged && origins)
                merged->floor = {rule.file, line_of((*origins)[i], "Floor")};
        }
    }
    return out;
}

// The Floor= of the named slices, summed per kind.
struct FloorSum {
    uint64_t bytes = 0;
    double percent = 0;
    bool infinite = false;

    void add(const SizeSpec& floor) {
        switch (floor.kind) {
            case SizeSpec::Kind::Bytes:
                if (__builtin_add_overflow(bytes, floor.bytes, &bytes))
                    bytes = std::numeric_limits<uint64_t>::max();
                break;
            case SizeSpec::Kind::Percent:
                percent += floor.percent;
                break;
            case SizeSpec::Kind::Infinity:
                infinite = true;
                break;
            case SizeSpec::Kind::Unset:
                break;
        }
    }
};

// The sum as the message shows it when it exceeds `budget`, else nullopt.
std::optional<std::string> floor_sum_excess(const FloorSum& sum, const SizeSpec& budget, uint64_t mem_total) {
    // With MemTotal unknown only like can be compared with like; the other
    // kind only adds, so a same-kind excess is already conclusive.
    bool exceeds = sum.infinite;
    std::string total;
    if (mem_total > 0) {
        uint64_t pct_bytes = SizeSpec::of_percent(sum.percent).resolve(mem_total);
        uint64_t all = 0;
        if (__builtin_add_overflow(sum.bytes, pct_bytes, &all))
            all = std::numeric_limits<uint64_t>::max();
        exceeds = exceeds || all > budget.resolve(mem_total);
        total = SizeSpec::of_bytes(all).to_string();
    } else if (budget.kind == SizeSpec::Kind::Bytes) {
        exceeds = exceeds || sum.bytes > budget.bytes;
        total = SizeSpec::of_bytes(sum.bytes).to_string();
    } else if (budget.kind == SizeSpec::Kind::Percent) {
        exceeds = exceeds || sum.percent > budget.percent + kPercentSlack;
        total = SizeSpec::of_percent(sum.percent).to_string();
    }
    if (!exceeds)
        return std::nullopt;
    return sum.infinite ? std::string("infinity") : total;
}

// Contradictions that only appear once several files apply to one slice. We
// can only check names we know, so this looks at every plain (glob-free)
// Slice= name; same-file contradictions were reported by parse_policy_file.
void check_merged_policies(const Config& config, const std::vector<KeyLines>& origins,
                           const std::map<std::string, Origin>& daemon_origins, uint64_t mem_total,
                           std::vector<Error>& errors) {
    std::vector<std::string> names;
    for (const auto& rule : config.policies)
        for (const auto& g : rule.globs)
            if (!has_wildcard(g) && std::find(names.begin(), names.end(), g) == names.end())
                names.push_back(g);

    std::set<std::pair<std::string, std::string>> reported;
    auto report_pair = [&](const std::string& name, const char* low_key, const Origin& low, const SizeSpec& low_value,
                           const Origin& high, const SizeSpec& high_value) {
        if (low.file == high.file)
            return;
        auto id = std::make_pair(fmt::format("{}:{}", low.file, low.line), fmt::format("{}:{}", high.file, high.line));
        if (!reported.insert(id).second)
            return;
        errors.push_back({low.file, low.line, low_key,
                          fmt::format("for {}, expected at most MaxProtection={} (from {}:{}), got {}", name,
                                      high_value.to_string(), high.file, high.line, low_value.to_string())});
    };

    const SizeSpec& budget = config.daemon.budget;
    const auto budget_origin = daemon_origins.find("Budget");
    const std::string budget_where =
        budget_origin == daemon_origins.end()
            ? std::string("the default")
            : fmt::format("{}:{}", budget_origin->second.file, budget_origin->second.line);

    bool single_floor_too_big = false;
    for (size_t i = 0; i < config.policies.size(); ++i) {
        const SizeSpec& floor = config.policies[i].protection.floor;
        if (compare_sizes(floor, budget, mem_total).value_or(0) > 0) {
            single_floor_too_big = true;
            errors.push_back({config.policies[i].file, line_of(origins[i], "Floor"), "Floor",
                              fmt::format("expected at most Budget={} (from {}), got {}", budget.to_string(),
                                          budget_where, floor.to_string())});
        }
    }

    FloorSum sum;
    std::vector<std::string> contributors;
    Origin last_floor;
    for (const auto& name : names) {
        MergedOrigins m;
        EffectivePolicy eff = merge_policies(config, name, &origins, &m);
        if (compare_sizes(eff.min_protection, eff.max_protection, mem_total).value_or(0) > 0)
            report_pair(name, "MinProtection", m.min_protection, eff.min_protection, m.max_protection,
                        eff.max_protection);
        if (compare_sizes(eff.floor, eff.max_protection, mem_total).value_or(0) > 0)
            report_pair(name, "Floor", m.floor, eff.floor, m.max_protection, eff.max_protection);
        if (!eff.manage || !eff.floor.set())
            continue;
        sum.add(eff.floor);
        contributors.push_back(fmt::format("{} ({})", name, eff.floor.to_string()));
        last_floor = m.floor;
    }
    if (single_floor_too_big || contributors.size() < 2)
        return;

    if (std::optional<std::string> total = floor_sum_excess(sum, budget, mem_total))
        errors.push_back({last_floor.file, last_floor.line, "Floor",
                          fmt::format("expected the Floor= of all named slices to fit in Budget={} (from {}), but "
                                      "{} add up to {}",
                                      budget.to_string(), budget_where, fmt::join(contributors, ", "), *total)});
}

}  // namespace

// ---------------------------------------------------------------------------

std::string_view mode_name(Mode m) {
    switch (m) {
        case Mode::Enforce:
            return "enforce";
        case Mode::DryRun:
            return "dry-run";
        case Mode::Paused:
            return "paused";
    }
    return "enforce";
}

std::optional<Mode> mode_from_name(std::string_view s) {
    for (Mode m : {Mode::Enforce, Mode::DryRun, Mode::Paused})
        if (mode_name(m) == s)
            return m;
    return std::nullopt;
}

std::string_view trim_setting_name(TrimSetting t) {
    switch (t) {
        case TrimSetting::Auto:
            return "auto";
        case TrimSetting::LruGen:
            return "lru-gen";
        case TrimSetting::Reclaim:
            return "reclaim";
        case TrimSetting::No:
            return "no";
    }
    return "auto";
}
std::optional<TrimSetting> trim_setting_from_name(std::string_view s) {
    for (TrimSetting t : {TrimSetting::Auto, TrimSetting::LruGen, TrimSetting::Reclaim, TrimSetting::No})
        if (trim_setting_name(t) == s)
            return t;
    return std::nullopt;
}

EffectivePolicy Config::policy_for(std::string_view unit) const {
    return merge_policies(*this, unit, nullptr, nullptr);
}

std::optional<std::string> weight_problem(int64_t w) {
    if (w >= kWeightMin && w <= kWeightMax)
        return std::nullopt;
    return fmt::format("{} is out of range {}..{}", w, kWeightMin, kWeightMax);
}

std::optional<std::string> working_set_window_problem(uint64_t us, std::string_view shown) {
    if (us >= kMinWorkingSetWindowUs)
        return std::nullopt;
    return fmt::format("expected a time span of at least {}, got {}", format_timespan(kMinWorkingSetWindowUs),
                       shown);
}

const PolicyKey* find_policy_key(std::string_view name) {
    return find_by_name(std::span<const PolicyKey>(kPolicyKeys), name);
}

std::string policy_key_list() {
    std::vector<std::string_view> names;
    for (const PolicyKey& key : kPolicyKeys)
        names.push_back(key.name);
    return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<std::string> slice_name_problem(std::string_view unit) {
    if (unit.empty() || unit.front() == '.' || !std::all_of(unit.begin(), unit.end(), valid_unit_char))
        return fmt::format("\"{}\" is not a valid unit name", unit);
    if (!is_slice_unit(unit))
        return fmt::format("\"{}\" is not a slice unit (expected NAME.slice)", unit);
    return std::nullopt;
}

std::optional<std::string> policy_problem(const SlicePolicy& p, uint64_t mem_total) {
    if (std::optional<std::string> problem = p.weight ? weight_problem(*p.weight) : std::nullopt)
        return "Weight: " + *problem;
    for (const auto& [key, size] : {std::pair{"MinProtection", &p.min_protection},
                                    std::pair{"MaxProtection", &p.max_protection}, std::pair{"Floor", &p.floor}})
        if (size->kind == SizeSpec::Kind::Percent && size->percent > 100)
            return fmt::format("{}: {} is more than 100%", key, size->to_string());
    if (compare_sizes(p.min_protection, p.max_protection, mem_total).value_or(0) > 0)
        return fmt::format("MinProtection={} is more than MaxProtection={}", p.min_protection.to_string(),
                           p.max_protection.to_string());
    if (const std::optional<uint64_t>& us = p.working_set_window_us)
        if (std::optional<std::string> problem = working_set_window_problem(*us, format_timespan(*us)))
            return "WorkingSetWindow: " + *problem;
    return std::nullopt;
}

std::string format_daemon_config(const DaemonConfig& daemon) {
    std::string out = "[Daemon]\n";
    for (const auto& key : kDaemonKeys)
        out += fmt::format("{}={}\n", key.name, key.show(daemon));
    return out;
}

std::vector<Setting> engine_settings(const DaemonConfig& daemon) {
    std::vector<Setting> out;
    for (const auto& key : kDaemonKeys)
        if (key.engine)
            out.push_back({std::string(key.name), key.show(daemon)});
    return out;
}

ConfigParse parse_config(const ConfigInput& input, uint64_t mem_total) {
    ConfigParse out;
    out.errors = input.errors;
    Config& config = out.config;

    std::map<std::string, Origin> daemon_origins;
    for (const auto& file : input.daemon_files) {
        config.files.push_back(file.path);
        parse_daemon_file(file, config.daemon, daemon_origins, out.errors);
    }
    // Checked after all files: a drop-in may fix one half of the pair.
    if (config.daemon.pressure_threshold_us > config.daemon.pressure_window_us) {
        auto it = daemon_origins.find("PressureThreshold");
        if (it == daemon_origins.end())
            it = daemon_origins.find("PressureWindow");
        Origin where = it == daemon_origins.end() ? Origin{} : it->second;
        out.errors.push_back({where.file, where.line, "PressureThreshold",
                              fmt::format("expected at most PressureWindow={}, got {}",
                                          format_timespan(config.daemon.pressure_window_us),
                                          format_timespan(config.daemon.pressure_threshold_us))});
    }

    std::vector<KeyLines> origins;
    for (const auto& file : input.policy_files) {
        config.files.push_back(file.path);
        // An empty file masks a name (see config_loader.h) and says nothing.
        if (file.text.empty())
            continue;
        parse_policy_file(file, mem_total, config.policies, origins, out.errors);
    }
    check_merged_policies(config, origins, daemon_origins, mem_total, out.errors);
    return out;
}

}  // namespace memprotd
