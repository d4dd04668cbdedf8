// SPDX-License-Identifier: LGPL-2.1-or-later
#include "parse.h"
#include "text.h"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>

namespace memprotd {

namespace {

constexpr uint64_t kKiB = 1024;

// Splits on '\n' and numbers the lines from 1. Blank lines (only whitespace)
// are skipped so that a trailing newline, or several, is not a special case;
// the kernel never prints blank lines in the middle of these files, and
// nothing is lost by tolerating them there.
class Lines {
public:
    explicit Lines(std::string_view text) : rest_(text) {}

    // The next non-blank line without its trailing whitespace, or nullopt.
    std::optional<std::string_view> next() {
        while (!rest_.empty()) {
            const size_t nl = rest_.find('\n');
            std::string_view line = rest_.substr(0, nl);
            rest_ = nl == std::string_view::npos ? std::string_view{} : rest_.substr(nl + 1);
            if (number_ < std::numeric_limits<int>::max())  // a multi-GiB input must not overflow
                ++number_;
            line = trim_right(line);
            if (!trim_left(line).empty())
                return line;
        }
        return std::nullopt;
    }

    // 1-based number of the line last returned by next().
    [[nodiscard]] int number() const { return number_; }

private:
    std::string_view rest_;
    int number_ = 0;
};

// The next whitespace-separated field of `rest`, which is advanced past it;
// empty when there is none.
std::string_view next_field(std::string_view& rest) {
    size_t i = 0;
    while (i < rest.size() && is_space(rest[i]))
        ++i;
    size_t j = i;
    while (j < rest.size() && !is_space(rest[j]))
        ++j;
    std::string_view field = rest.substr(i, j - i);
    rest.remove_prefix(j);
    return field;
}

// Quotes untrusted text for an error message: bounded in length and with
// control and non-ASCII bytes escaped, so that a corrupt file cannot produce
// a huge or terminal-garbling log line.
std::string quote(std::string_view s) {
    constexpr size_t kMax = 40;
    std::string out = "'";
    const size_t n = s.size() < kMax ? s.size() : kMax;
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'')
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    if (s.size() > kMax)
        out += "...";
    out += "'";
    return out;
}

// Out of line and cold: building an Error allocates, and the success path
// should not pay for the code that does it.
[[gnu::cold, gnu::noinline]] Error make_error(std::string_view file, int line, std::string_view key,
                                              std::string message) {
    return Error{std::string(file), line, std::string(key), std::move(message)};
}

enum class NumError { kNone, kInvalid, kRange };

// The whole of `s` as a u64. from_chars rejects signs and leading spaces,
// which is what we want: the kernel prints neither.
NumError to_u64(std::string_view s, uint64_t& out) {
    const char* const end = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(s.data(), end, out, 10);
    if (ec == std::errc::result_out_of_range)
        return NumError::kRange;
    if (ec != std::errc() || ptr != end)
        return NumError::kInvalid;
    return NumError::kNone;
}

[[gnu::cold, gnu::noinline]] Error number_error(NumError e, std::string_view file, int line,
                                                std::string_view key, std::string_view text) {
    if (e == NumError::kRange)
        return make_error(file, line, key, fmt::format("value out of range: {}", quote(text)));
    if (text.empty())
        return make_error(file, line, key, "missing value");
    return make_error(file, line, key, fmt::format("expected an unsigned integer, got {}", quote(text)));
}

// PSI averages are printed as "%lu.%02lu". Only plain decimals are accepted:
// from_chars would also take "inf", "nan" and exponents, none of which the
// kernel writes.
NumError to_decimal(std::string_view s, double& out) {
    size_t i = 0;
    while (i < s.size() && is_digit(s[i]))
        ++i;
    if (i == 0)
        return NumError::kInvalid;
    if (i < s.size()) {
        if (s[i] != '.')
            return NumError::kInvalid;
        const size_t frac = ++i;
        while (i < s.size() && is_digit(s[i]))
            ++i;
        if (i == frac || i != s.size())
            return NumError::kInvalid;
    }
    const char* const end = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(s.data(), end, out, std::chars_format::fixed);
    if (ec == std::errc::result_out_of_range)
        return NumError::kRange;
    if (ec != std::errc() || ptr != end)
        return NumError::kInvalid;
    return NumError::kNone;
}

[[gnu::cold, gnu::noinline]] Error empty_error(std::string_view file) {
    return make_error(file, 0, {}, "empty file");
}

// Parses one "key value" line of a flat keyed file (memory.stat,
// memory.events). Returns nullopt on success with key and value set.
std::optional<Error> parse_flat_keyed_line(std::string_view line, int lineno, std::string_view file,
                                           std::string_view& key, uint64_t& value) {
    std::string_view rest = line;
    key = next_field(rest);
    const std::string_view text = next_field(rest);
    if (const NumError e = to_u64(text, value); e != NumError::kNone)
        return number_error(e, file, lineno, key, text);
    if (!trim_left(rest).empty())
        return make_error(file, lineno, key,
                          fmt::format("unexpected text after the value: {}", quote(trim_left(rest))));
    return std::nullopt;
}

// Fields of /proc/mounts are octal-escaped by the kernel (mangle() in
// fs/proc_namespace.c): space, tab, newline and backslash.
std::string escape_mount_field(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
        switch (c) {
        case ' ': out += "\\040"; break;
        case '\t': out += "\\011"; break;
        case '\n': out += "\\012"; break;
        case '\\': out += "\\134"; break;
        default: out += c; break;
        }
    }
    return out;
}

bool all_digits(std::string_view s) {
    if (s.empty())
        return false;
    for (const char c : s)
        if (!is_digit(c))
            return false;
    return true;
}

// A file of one value on one line (memory.max, lru_gen/enabled): the value,
// leading whitespace trimmed, and its line number.
struct SingleValue {
    std::string_view value;
    int line = 0;
};

Result<SingleValue> single_value(std::string_view text, std::string_view file) {
    Lines lines(text);
    const std::optional<std::string_view> line = lines.next();
    if (!line)
        return empty_error(file);
    const int lineno = lines.number();
    if (lines.next())
        return make_error(file, lines.number(), {}, "expected a single value");
    return SingleValue{trim_left(*line), lineno};
}

}  // namespace

Result<uint64_t> parse_u64_or_max(std::string_view text, std::string_view file) {
    const Result<SingleValue> single = single_value(text, file);
    if (!single)
        return single.error();
    const auto [value, lineno] = *single;
    if (value == "max")
        return kUnlimited;
    uint64_t out = 0;
    if (const NumError e = to_u64(value, out); e != NumError::kNone) {
        if (e == NumError::kInvalid)
            return make_error(file, lineno, {}, fmt::format("expected an unsigned integer or 'max', got {}",
                                                        quote(value)));
        return number_error(e, file, lineno, {}, value);
    }
    return out;
}

Status parse_memory_stat(std::string_view text, std::string_view file, MemoryStat& out) {
    out.clear();
    // This runs for every managed cgroup on every sample, so well-formed
    // lines ("key value\n", one space, at most 19 digits so no
    // overflow check is needed) are read in a single pass; anything else
    // falls back to the general line parser, which accepts or reports it.
    const char* const begin = text.data();
    const char* const end = begin + text.size();
    const char* p = begin;
    int lineno = 0;
    while (p < end) {
        if (lineno < std::numeric_limits<int>::max())
            ++lineno;
        const char* const start = p;
        // Every byte above ' ' is a key byte for the general parser too.
        while (p < end && static_cast<unsigned char>(*p) > ' ')
            ++p;
        if (p != start && p < end && *p == ' ') {
            const char* const digits = ++p;
            uint64_t v = 0;
            while (p < end && is_digit(*p) && p - digits < 19)
                v = v * 10 + static_cast<uint64_t>(*p++ - '0');
            if (p != digits && (p == end || *p == '\n')) {
                out.append({start, static_cast<size_t>(digits - 1 - start)}, v);
                p += p < end ? 1 : 0;
                continue;
            }
        }

        const char* nl = static_cast<const char*>(std::memchr(start, '\n', static_cast<size_t>(end - start)));
        if (nl == nullptr)
            nl = end;
        p = nl < end ? nl + 1 : end;
        const std::string_view line = trim_right({start, static_cast<size_t>(nl - start)});
        if (trim_left(line).empty())
            continue;
        std::string_view key;
        uint64_t value = 0;
        if (std::optional<Error> err = parse_flat_keyed_line(line, lineno, file, key, value))
            return std::move(*err);
        out.append(key, value);
    }
    if (out.empty())
        return empty_error(file);
    return Ok{};
}

Result<MemoryEvents> parse_memory_events(std::string_view text, std::string_view file) {
    MemoryEvents ev;
    Lines lines(text);
    bool any = false;
    while (const std::optional<std::string_view> line = lines.next()) {
        std::string_view key;
        uint64_t value = 0;
        if (std::optional<Error> err = parse_flat_keyed_line(*line, lines.number(), file, key, value))
            return std::move(*err);
        any = true;
        if (key == "low")
            ev.low = value;
        else if (key == "high")
            ev.high = value;
        else if (key == "max")
            ev.max = value;
        else if (key == "oom")
            ev.oom = value;
        else if (key == "oom_kill")
            ev.oom_kill = value;
        else if (key == "oom_group_kill")
            ev.oom_group_kill = value;
    }
    if (!any)
        return empty_error(file);
    return ev;
}

namespace {

// One "some|full avg10=.. avg60=.. avg300=.. total=.." line, after the
// leading word. Like systemd-oomd, all four fields are required; fields a
// later kernel might add are ignored.
std::optional<Error> parse_psi_line(std::string_view rest, std::string_view word, int lineno,
                                    std::string_view file, PsiLine& out) {
    static constexpr std::string_view kAvgKeys[] = {"avg10", "avg60", "avg300"};
    double* const avgs[] = {&out.avg10, &out.avg60, &out.avg300};
    bool seen[4] = {};

    for (std::string_view field = next_field(rest); !field.empty(); field = next_field(rest)) {
        const size_t eq = field.find('=');
        if (eq == std::string_view::npos)
            return make_error(file, lineno, word, fmt::format("expected key=value, got {}", quote(field)));
        const std::string_view key = field.substr(0, eq);
        const std::string_view value = field.substr(eq + 1);

        size_t slot = 4;
        for (size_t i = 0; i < 3; ++i)
            if (key == kAvgKeys[i])
                slot = i;
        if (key == "total")
            slot = 3;
        if (slot == 4)
            continue;
        if (seen[slot])
            return make_error(file, lineno, key, fmt::format("duplicate {}= on the '{}' line", key, word));
        seen[slot] = true;

        if (slot == 3) {
            if (const NumError e = to_u64(value, out.total_us); e != NumError::kNone)
                return number_error(e, file, lineno, key, value);
        } else if (const NumError e = to_decimal(value, *avgs[slot]); e != NumError::kNone) {
            if (e == NumError::kRange)
                return number_error(e, file, lineno, key, value);
            return make_error(file, lineno, key, fmt::format("expected a decimal like 12.34, got {}", quote(value)));
        }
    }

    static constexpr std::string_view kAllKeys[] = {"avg10", "avg60", "avg300", "total"};
    for (size_t i = 0; i < 4; ++i)
        if (!seen[i])
            return make_error(file, lineno, kAllKeys[i], fmt::format("missing {}= on the '{}' line", kAllKeys[i], word));
    return std::nullopt;
}

}  // namespace

Result<Psi> parse_psi(std::string_view text, std::string_view file) {
    Psi psi;
    bool have_some = false;
    bool have_full = false;
    Lines lines(text);
    while (const std::optional<std::string_view> line = lines.next()) {
        std::string_view rest = *line;
        const std::string_view word = next_field(rest);
        PsiLine parsed;
        bool* have = nullptr;
        if (word == "some")
            have = &have_some;
        else if (word == "full")
            have = &have_full;
        else
            return make_error(file, lines.number(), word,
                              fmt::format("expected 'some' or 'full', got {}", quote(word)));
        if (*have)
            return make_error(file, lines.number(), word, fmt::format("duplicate '{}' line", word));
        if (std::optional<Error> err = parse_psi_line(rest, word, lines.number(), file, parsed))
            return std::move(*err);
        *have = true;
        if (word == "some")
            psi.some = parsed;
        else
            psi.full = parsed;
    }
    if (!have_some && !have_full)
        return empty_error(file);
    if (!have_some)
        return make_error(file, 0, "some", "missing 'some' line");
    return psi;
}

Result<Meminfo> parse_meminfo(std::string_view text, std::string_view file) {
    Meminfo mi;
    uint64_t free_bytes = 0;
    bool have_total = false;
    bool any = false;
    Lines lines(text);
    while (const std::optional<std::string_view> line = lines.next()) {
        any = true;
        const std::string_view trimmed = trim_left(*line);
        const size_t colon = trimmed.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return make_error(file, lines.number(), {},
                              fmt::format("expected 'Key: value', got {}", quote(trimmed)));
        const std::string_view key = trimmed.substr(0, colon);

        uint64_t* dest = nullptr;
        if (key == "MemTotal")
            dest = &mi.mem_total;
        else if (key == "MemFree")
            dest = &free_bytes;
        else if (key == "MemAvailable")
            dest = &mi.mem_available;
        else if (key == "SwapTotal")
            dest = &mi.swap_total;
        else if (key == "SwapFree")
            dest = &mi.swap_free;
        else
            continue;  // not needed; its format (unit or none) is not our business

        std::string_view rest = trimmed.substr(colon + 1);
        const std::string_view number = next_field(rest);
        const std::string_view unit = next_field(rest);
        uint64_t kib = 0;
        if (const NumError e = to_u64(number, kib); e != NumError::kNone)
            return number_error(e, file, lines.number(), key, number);
        if (unit != "kB")
            return make_error(file, lines.number(), key,
                              unit.empty() ? std::string("missing unit kB")
                                           : fmt::format("expected unit kB, got {}", quote(unit)));
        if (!trim_left(rest).empty())
            return make_error(file, lines.number(), key,
                              fmt::format("unexpected text after the unit: {}", quote(trim_left(rest))));
        if (kib > std::numeric_limits<uint64_t>::max() / kKiB)
            return make_error(file, lines.number(), key, fmt::format("value out of range: {} kB", kib));
        *dest = kib * kKiB;
        if (dest == &mi.mem_total)
            have_total = true;
        if (dest == &free_bytes)
            mi.mem_free = free_bytes;
    }
    if (!any)
        return empty_error(file);
    if (!have_total)
        return make_error(file, 0, "MemTotal", "missing MemTotal");
    return mi;
}

Result<uint32_t> parse_lru_gen_enabled(std::string_view text, std::string_view file) {
    const Result<SingleValue> single = single_value(text, file);
    if (!single)
        return single.error();
    const auto [value, lineno] = *single;
    if (value.size() < 3 || value[0] != '0' || (value[1] != 'x' && value[1] != 'X'))
        return make_error(file, lineno, {}, fmt::format("expected a hex value like 0x0007, got {}", quote(value)));
    const std::string_view digits = value.substr(2);
    uint32_t out = 0;
    const char* const end = digits.data() + digits.size();
    const auto [ptr, ec] = std::from_chars(digits.data(), end, out, 16);
    if (ec == std::errc::result_out_of_range)
        return make_error(file, lineno, {}, fmt::format("value out of range: {}", quote(value)));
    if (ec != std::errc() || ptr != end)
        return make_error(file, lineno, {}, fmt::format("expected a hex value like 0x0007, got {}", quote(value)));
    return out;
}

namespace {

// A page count of a generation row. In lru_gen_full the kernel appends 'x'
// to the count of a type whose generation is already gone (seq < min_seq of
// that type); such a generation holds no pages of that type.
NumError to_gen_count(std::string_view s, uint64_t& out) {
    if (!s.empty() && s.back() == 'x') {
        s.remove_suffix(1);
        const NumError e = to_u64(s, out);
        out = 0;
        return e;
    }
    return to_u64(s, out);
}

// One generation row ("SEQ AGE_MS NR_ANON NR_FILE", its first field
// `first`, the rest in `rest`) appended to `node`. Rows of lru_gen_full's
// tiers and mm walk (more than four fields) are skipped. An error names the
// line and the field.
Status parse_generation_row(std::string_view first, std::string_view rest, LruGenNode* node, std::string_view file,
                            int lineno) {
    // Rows of lru_gen_full may start with a marked number ("1L").
    if (!is_digit(first.front()))
        return make_error(file, lineno, {}, fmt::format("unexpected line starting with {}", quote(first)));

    std::string_view fields[4] = {first, {}, {}, {}};
    size_t count = 1;
    for (std::string_view f = next_field(rest); !f.empty(); f = next_field(rest)) {
        if (count == 4) {
            count = 5;  // more than a generation row has
            break;
        }
        fields[count++] = f;
    }
    // lru_gen_full adds tier rows (7 fields) and an mm-walk row (6
    // fields) after each generation; they carry no page counts.
    if (count > 4)
        return Ok{};
    if (count < 4)
        return make_error(file, lineno, {},
                          fmt::format("truncated generation row: {} fields, expected 4", count));
    if (node == nullptr)
        return make_error(file, lineno, {}, "generation row before any node line");

    LruGeneration gen;
    static constexpr std::string_view kNames[] = {"seq", "age_ms", "nr_anon", "nr_file"};
    NumError e = to_u64(fields[0], gen.seq);
    size_t bad = 0;
    if (e == NumError::kNone) {
        bad = 1;
        e = to_u64(fields[1], gen.age_ms);
    }
    if (e == NumError::kNone) {
        bad = 2;
        e = to_gen_count(fields[2], gen.anon_pages);
    }
    if (e == NumError::kNone) {
        bad = 3;
        e = to_gen_count(fields[3], gen.file_pages);
    }
    if (e != NumError::kNone)
        return number_error(e, file, lineno, kNames[bad], fields[bad]);
    node->generations.push_back(gen);
    return Ok{};
}

}  // namespace

Result<LruGen> parse_lru_gen(std::string_view text, std::string_view file) {
    LruGen out;
    LruGenMemcg* memcg = nullptr;
    LruGenNode* node = nullptr;
    Lines lines(text);
    while (const std::optional<std::string_view> line = lines.next()) {
        const int lineno = lines.number();
        std::string_view rest = *line;
        const std::string_view first = next_field(rest);

        if (first == "memcg") {
            const std::string_view id_text = next_field(rest);
            uint64_t id = 0;
            if (const NumError e = to_u64(id_text, id); e != NumError::kNone)
                return number_error(e, file, lineno, "memcg", id_text);
            memcg = &out.memcgs.emplace_back();
            memcg->id = id;
            // The path is the rest of the line: cgroup names may contain
            // spaces. 6.1 prints an empty path for memcgs it cannot name.
            memcg->path = std::string(trim_left(rest));
            node = nullptr;
            continue;
        }

        if (first == "node") {
            if (memcg == nullptr)
                return make_error(file, lineno, "node", "node line before any memcg line");
            const std::string_view id_text = next_field(rest);
            uint64_t nid = 0;
            if (const NumError e = to_u64(id_text, nid); e != NumError::kNone)
                return number_error(e, file, lineno, "node", id_text);
            if (nid > static_cast<uint64_t>(std::numeric_limits<int>::max()))
                return make_error(file, lineno, "node", fmt::format("value out of range: {}", quote(id_text)));
            if (!trim_left(rest).empty())
                return make_error(file, lineno, "node",
                                  fmt::format("unexpected text after the node: {}", quote(trim_left(rest))));
            node = &memcg->nodes.emplace_back();
            node->node = static_cast<int>(nid);
            continue;
        }

        if (Status row = parse_generation_row(first, rest, node, file, lineno); !row)
            return row.error();
    }
    if (out.memcgs.empty())
        return empty_error(file);
    return out;
}

bool controllers_contain(std::string_view text, std::string_view controller) {
    if (controller.empty())
        return false;
    for (std::string_view rest = text;;) {
        // is_space() includes '\n': the file is one line, but a stray newline
        // must not glue the last name to the next.
        size_t i = 0;
        while (i < rest.size() && is_space(rest[i]))
            ++i;
        size_t j = i;
        while (j < rest.size() && !is_space(rest[j]))
            ++j;
        if (i == j)
            return false;
        if (rest.substr(i, j - i) == controller)
            return true;
        rest.remove_prefix(j);
    }
}

std::optional<std::string> cgroup2_mount_options(std::string_view mounts_text, std::string_view mount_point) {
    const std::string want = escape_mount_field(mount_point);
    std::optional<std::string> found;
    Lines lines(mounts_text);
    while (const std::optional<std::string_view> line = lines.next()) {
        std::string_view rest = *line;
        std::string_view f[16] = {};
        size_t n = 0;
        for (std::string_view field = next_field(rest); !field.empty() && n < std::size(f);
             field = next_field(rest))
            f[n++] = field;

        // mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
        // The per-mount and the superblock options are joined, as
        // /proc/mounts shows them, since memory_recursiveprot is a superblock
        // option.
        size_t sep = 0;
        if (n >= 10 && all_digits(f[0]))
            for (size_t i = 6; i < n; ++i)
                if (f[i] == "-") {
                    sep = i;
                    break;
                }
        if (sep != 0 && sep + 3 < n) {
            if (f[sep + 1] == "cgroup2" && f[4] == want)
                found = std::string(f[5]) + "," + std::string(f[sep + 3]);
            continue;
        }

        // mounts: "SOURCE MOUNTPOINT FSTYPE OPTS FREQ PASSNO". The last
        // match wins: a later mount on the same point covers the earlier.
        if (n >= 4 && f[2] == "cgroup2" && f[1] == want)
            found = std::string(f[3]);
    }
    return found;
}

}  // namespace memprotd
