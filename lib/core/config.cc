// SPDX-License-Identifier: LGPL-2.1-or-later
#include "config.h"
#include "ini.h"
#include "model.h"
#include "text.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace memprotd {

namespace {

constexpr uint64_t kMinWorkingSetWindowUs = kUsecPerSec;
// The kernel's PSI trigger limits (kernel/sched/psi.c: psi_trigger_create).
constexpr uint64_t kMinPressureWindowUs = 500'000;
constexpr uint64_t kMaxPressureWindowUs = 10 * kUsecPerSec;
// Sums of percentages are compared with a little slack so that 33.3% + 33.3%
// + 33.4% does not exceed 100% through rounding.
constexpr double kPercentSlack = 1e-9;

// "did you mean" for the commonest mistake, a key in the wrong case.
std::string unknown_key_message(std::string_view key, std::string_view section,
                                const std::vector<std::string_view>& known) {
    for (auto k : known) {
        if (iequals(k, key))
            return fmt::format("unknown key in [{}]; keys are case-sensitive, did you mean {}=?", section, k);
    }
    return fmt::format("unknown key in [{}]; expected one of {}", section, fmt::join(known, ", "));
}

// ---------------------------------------------------------------------------
// [Daemon]

struct Origin {
    std::string file;
    int line = 0;
};

// Returns an error message for a bad value, nullopt when applied. An empty
// value resets the key to its default, as an empty assignment does in systemd.
std::optional<std::string> apply_daemon_key(std::string_view key, std::string_view value, DaemonConfig& c) {
    const DaemonConfig defaults;
    if (key == "Mode") {
        if (value.empty()) {
            c.mode = defaults.mode;
            return std::nullopt;
        }
        auto m = mode_from_name(value);
        if (!m)
            return fmt::format("expected enforce, dry-run or paused, got \"{}\"", value);
        c.mode = *m;
        return std::nullopt;
    }
    if (key == "Interval") {
        if (value.empty()) {
            c.interval_us = defaults.interval_us;
            return std::nullopt;
        }
        auto t = parse_timespan_us(value);
        if (!t)
            return t.error().message;
        if (*t == 0 || *t > kMaxIntervalUs)
            return fmt::format("expected a time span > 0 and at most 1h, got \"{}\"", value);
        c.interval_us = *t;
        return std::nullopt;
    }
    if (key == "Budget") {
        if (value.empty()) {
            c.budget = defaults.budget;
            return std::nullopt;
        }
        auto s = parse_size(value);
        if (!s)
            return s.error().message;
        if (s->kind == SizeSpec::Kind::Infinity || (s->kind == SizeSpec::Kind::Percent && s->percent < 1) ||
            (s->kind == SizeSpec::Kind::Bytes && s->bytes == 0))
            return fmt::format("expected a percentage 1..100% of MemTotal or a size in bytes > 0, got \"{}\"", value);
        c.budget = *s;
        return std::nullopt;
    }
    if (key == "WorkingSetWindow") {
        if (value.empty()) {
            c.working_set_window_us = defaults.working_set_window_us;
            return std::nullopt;
        }
        auto t = parse_timespan_us(value);
        if (!t)
            return t.error().message;
        if (*t < kMinWorkingSetWindowUs)
            return fmt::format("expected a time span of at least 1s, got \"{}\"", value);
        c.working_set_window_us = *t;
        return std::nullopt;
    }
    if (key == "Headroom") {
        if (value.empty()) {
            c.headroom = defaults.headroom;
            return std::nullopt;
        }
        auto p = parse_percent(value);
        if (!p)
            return p.error().message;
        c.headroom = *p;
        return std::nullopt;
    }
    if (key == "RestoreOnExit" || key == "ManageTopLevelSlices" || key == "WorkingSetAging") {
        bool DaemonConfig::*const member = key == "RestoreOnExit"          ? &DaemonConfig::restore_on_exit
                                           : key == "ManageTopLevelSlices" ? &DaemonConfig::manage_top_level_slices
                                                                           : &DaemonConfig::working_set_aging;
        bool& field = c.*member;
        if (value.empty()) {
            field = defaults.*member;
            return std::nullopt;
        }
        auto b = parse_boolean(value);
        if (!b)
            return b.error().message;
        field = *b;
        return std::nullopt;
    }
    if (key == "PressureThreshold") {
        if (value.empty()) {
            c.pressure_threshold_us = defaults.pressure_threshold_us;
            return std::nullopt;
        }
        auto t = parse_timespan_us(value);
        if (!t)
            return t.error().message;
        if (*t == 0)
            return fmt::format("expected a time span > 0 (stall time within PressureWindow=), got \"{}\"", value);
        c.pressure_threshold_us = *t;
        return std::nullopt;
    }
    if (key == "PressureWindow") {
        if (value.empty()) {
            c.pressure_window_us = defaults.pressure_window_us;
            return std::nullopt;
        }
        auto t = parse_timespan_us(value);
        if (!t)
            return t.error().message;
        if (*t < kMinPressureWindowUs || *t > kMaxPressureWindowUs)
            return fmt::format("expected a time span 500ms..10s (the kernel's PSI trigger limits), got \"{}\"",
                               value);
        c.pressure_window_us = *t;
        return std::nullopt;
    }
    return std::string{};  // unknown key; the caller words the message
}

const std::vector<std::string_view> kDaemonKeys = {
    "Mode",     "Interval",      "Budget",           "WorkingSetWindow", "Headroom", "RestoreOnExit",
    "ManageTopLevelSlices", "PressureThreshold", "PressureWindow", "WorkingSetAging",
};

void parse_daemon_file(const ConfigFile& file, DaemonConfig& daemon, std::map<std::string, Origin>& origins,
                       std::vector<Error>& errors) {
    auto items = ini_lex(file.path, file.text, errors);
    enum class Section { None, Daemon, Ignored };
    Section section = Section::None;
    for (const auto& item : items) {
        if (item.kind == IniItem::Kind::Section) {
            if (item.name == "Daemon") {
                section = Section::Daemon;
            } else {
                section = Section::Ignored;
                if (!ini_is_extension_section(item.name))
                    errors.push_back({file.path, item.line, {},
                                      fmt::format("unknown section [{}]; expected [Daemon]", item.name)});
            }
            continue;
        }
        if (section == Section::None) {
            errors.push_back({file.path, item.line, item.name, "key outside of any section; expected [Daemon] first"});
            continue;
        }
        if (section == Section::Ignored)
            continue;  // the section header was reported already
        auto problem = apply_daemon_key(item.name, item.value, daemon);
        if (!problem) {
            origins[item.name] = {file.path, item.line};
        } else if (problem->empty()) {
            errors.push_back({file.path, item.line, item.name, unknown_key_message(item.name, "Daemon", kDaemonKeys)});
        } else {
            errors.push_back({file.path, item.line, item.name, std::move(*problem)});
        }
    }
}

// ---------------------------------------------------------------------------
// policy.d

struct RuleOrigins {
    int slice = 0;
    int weight = 0;
    int min_protection = 0;
    int max_protection = 0;
    int floor = 0;
    int manage = 0;
};

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

std::optional<std::string> apply_size(std::string_view value, SizeSpec& field) {
    if (value.empty()) {
        field = SizeSpec{};
        return std::nullopt;
    }
    auto s = parse_size(value);
    if (!s)
        return s.error().message;
    field = *s;
    return std::nullopt;
}

const std::vector<std::string_view> kMatchKeys = {"Slice"};
const std::vector<std::string_view> kProtectionKeys = {"Weight", "MinProtection", "MaxProtection", "Floor",
                                                       "Manage"};

// Returns nullopt when applied, "" for an unknown key, else the message.
std::optional<std::string> apply_protection_key(std::string_view key, std::string_view value, SlicePolicy& p) {
    if (key == "Weight") {
        if (value.empty()) {
            p.weight.reset();
            return std::nullopt;
        }
        auto w = parse_digits_u64(value);
        if (!w || *w < kWeightMin || *w > kWeightMax)
            return fmt::format("expected an integer {}..{}, got \"{}\"", kWeightMin, kWeightMax, value);
        p.weight = static_cast<uint32_t>(*w);
        return std::nullopt;
    }
    if (key == "MinProtection")
        return apply_size(value, p.min_protection);
    if (key == "MaxProtection")
        return apply_size(value, p.max_protection);
    if (key == "Floor")
        return apply_size(value, p.floor);
    if (key == "Manage") {
        if (value.empty()) {
            p.manage.reset();
            return std::nullopt;
        }
        auto b = parse_boolean(value);
        if (!b)
            return b.error().message;
        p.manage = *b;
        return std::nullopt;
    }
    return std::string{};
}

void parse_policy_file(const ConfigFile& file, uint64_t mem_total, std::vector<PolicyRule>& rules,
                       std::vector<RuleOrigins>& rule_origins, std::vector<Error>& errors) {
    auto items = ini_lex(file.path, file.text, errors);
    PolicyRule rule;
    rule.file = file.path;
    RuleOrigins origins;
    enum class Section { None, Match, Protection, Ignored };
    Section section = Section::None;
    int match_line = 0;
    for (const auto& item : items) {
        if (item.kind == IniItem::Kind::Section) {
            if (item.name == "Match") {
                section = Section::Match;
                if (match_line == 0)
                    match_line = item.line;
            } else if (item.name == "Protection") {
                section = Section::Protection;
            } else {
                section = Section::Ignored;
                if (!ini_is_extension_section(item.name))
                    errors.push_back({file.path, item.line, {},
                                      fmt::format("unknown section [{}]; expected [Match] or [Protection]", item.name)});
            }
            continue;
        }
        switch (section) {
            case Section::None:
                errors.push_back({file.path, item.line, item.name,
                                  "key outside of any section; expected [Match] or [Protection] first"});
                continue;
            case Section::Ignored:
                continue;
            case Section::Match: {
                if (item.name != "Slice") {
                    errors.push_back({file.path, item.line, item.name,
                                      unknown_key_message(item.name, "Match", kMatchKeys)});
                    continue;
                }
                if (item.value.empty()) {
                    // Empty assignment resets the list, as for systemd list settings.
                    rule.globs.clear();
                    continue;
                }
                std::string_view rest = item.value;
                while (!(rest = trim_left(rest)).empty()) {
                    size_t end = 0;
                    while (end < rest.size() && !is_space(rest[end]))
                        ++end;
                    std::string glob(rest.substr(0, end));
                    rest.remove_prefix(end);
                    if (auto problem = check_slice_glob(glob)) {
                        errors.push_back({file.path, item.line, item.name, std::move(*problem)});
                        continue;
                    }
                    if (std::find(rule.globs.begin(), rule.globs.end(), glob) == rule.globs.end())
                        rule.globs.push_back(std::move(glob));
                }
                if (origins.slice == 0)
                    origins.slice = item.line;
                continue;
            }
            case Section::Protection: {
                auto problem = apply_protection_key(item.name, item.value, rule.protection);
                if (!problem) {
                    int& line = item.name == "Weight"          ? origins.weight
                                : item.name == "MinProtection" ? origins.min_protection
                                : item.name == "MaxProtection" ? origins.max_protection
                                : item.name == "Floor"         ? origins.floor
                                                               : origins.manage;
                    line = item.line;
                } else if (problem->empty()) {
                    errors.push_back({file.path, item.line, item.name,
                                      unknown_key_message(item.name, "Protection", kProtectionKeys)});
                } else {
                    errors.push_back({file.path, item.line, item.name, std::move(*problem)});
                }
                continue;
            }
        }
    }

    if (rule.globs.empty()) {
        errors.push_back({file.path, match_line, "Slice",
                          "a policy file needs [Match] Slice= with at least one slice name or glob"});
        return;  // a rule that matches nothing is not worth keeping
    }

    const SlicePolicy& p = rule.protection;
    if (compare_sizes(p.min_protection, p.max_protection, mem_total).value_or(0) > 0)
        errors.push_back({file.path, origins.min_protection, "MinProtection",
                          fmt::format("expected at most MaxProtection={}, got {}", p.max_protection.to_string(),
                                      p.min_protection.to_string())});
    if (compare_sizes(p.floor, p.max_protection, mem_total).value_or(0) > 0)
        errors.push_back({file.path, origins.floor, "Floor",
                          fmt::format("expected at most MaxProtection={}, got {}", p.max_protection.to_string(),
                                      p.floor.to_string())});
    rules.push_back(std::move(rule));
    rule_origins.push_back(origins);
}

bool rule_matches(const PolicyRule& rule, const char* unit) {
    return std::any_of(rule.globs.begin(), rule.globs.end(),
                       [unit](const std::string& g) { return fnmatch(g.c_str(), unit, kGlobFlags) == 0; });
}

struct MergedOrigins {
    Origin min_protection, max_protection, floor;
};

EffectivePolicy merge_policies(const Config& config, std::string_view unit, const std::vector<RuleOrigins>* origins,
                               MergedOrigins* merged) {
    EffectivePolicy out;
    std::string name(unit);  // fnmatch needs a terminator
    for (size_t i = 0; i < config.policies.size(); ++i) {
        const PolicyRule& rule = config.policies[i];
        if (!rule_matches(rule, name.c_str()))
            continue;
        const SlicePolicy& p = rule.protection;
        out.matched = true;
        out.sources.push_back(rule.file);
        if (p.weight)
            out.weight = *p.weight;
        if (p.manage)
            out.manage = *p.manage;
        if (p.min_protection.set()) {
            out.min_protection = p.min_protection;
            if (merged && origins)
                merged->min_protection = {rule.file, (*origins)[i].min_protection};
        }
        if (p.max_protection.set()) {
            out.max_protection = p.max_protection;
            if (merged && origins)
                merged->max_protection = {rule.file, (*origins)[i].max_protection};
        }
        if (p.floor.set()) {
            out.floor = p.floor;
            if (merged && origins)
                merged->floor = {rule.file, (*origins)[i].floor};
        }
    }
    return out;
}

// Contradictions that only appear once several files apply to one slice. We
// can only check names we know, so this looks at every plain (glob-free)
// Slice= name; same-file contradictions were reported by parse_policy_file.
void check_merged_policies(const Config& config, const std::vector<RuleOrigins>& origins,
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
            errors.push_back({config.policies[i].file, origins[i].floor, "Floor",
                              fmt::format("expected at most Budget={} (from {}), got {}", budget.to_string(),
                                          budget_where, floor.to_string())});
        }
    }

    uint64_t bytes_sum = 0;
    double percent_sum = 0;
    bool infinite = false;
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
        switch (eff.floor.kind) {
            case SizeSpec::Kind::Bytes:
                if (__builtin_add_overflow(bytes_sum, eff.floor.bytes, &bytes_sum))
                    bytes_sum = std::numeric_limits<uint64_t>::max();
                break;
            case SizeSpec::Kind::Percent:
                percent_sum += eff.floor.percent;
                break;
            case SizeSpec::Kind::Infinity:
                infinite = true;
                break;
            case SizeSpec::Kind::Unset:
                break;
        }
        contributors.push_back(fmt::format("{} ({})", name, eff.floor.to_string()));
        last_floor = m.floor;
    }
    if (single_floor_too_big || contributors.size() < 2)
        return;

    // With MemTotal unknown only like can be compared with like; the other
    // kind only adds, so a same-kind excess is already conclusive.
    bool exceeds = infinite;
    std::string total;
    if (mem_total > 0) {
        uint64_t pct_bytes = SizeSpec::of_percent(percent_sum).resolve(mem_total);
        uint64_t sum = 0;
        if (__builtin_add_overflow(bytes_sum, pct_bytes, &sum))
            sum = std::numeric_limits<uint64_t>::max();
        exceeds = exceeds || sum > budget.resolve(mem_total);
        total = SizeSpec::of_bytes(sum).to_string();
    } else if (budget.kind == SizeSpec::Kind::Bytes) {
        exceeds = exceeds || bytes_sum > budget.bytes;
        total = SizeSpec::of_bytes(bytes_sum).to_string();
    } else if (budget.kind == SizeSpec::Kind::Percent) {
        exceeds = exceeds || percent_sum > budget.percent + kPercentSlack;
        total = SizeSpec::of_percent(percent_sum).to_string();
    }
    if (exceeds)
        errors.push_back({last_floor.file, last_floor.line, "Floor",
                          fmt::format("expected the Floor= of all named slices to fit in Budget={} (from {}), but "
                                      "{} add up to {}",
                                      budget.to_string(), budget_where, fmt::join(contributors, ", "),
                                      infinite ? std::string("infinity") : total)});
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

EffectivePolicy Config::policy_for(std::string_view unit) const {
    return merge_policies(*this, unit, nullptr, nullptr);
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

    std::vector<RuleOrigins> origins;
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
