// SPDX-License-Identifier: LGPL-2.1-or-later
#include "trace.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

namespace memprotd {

namespace {

using nlohmann::json;
// The line is formatted into fmt's buffer (a stack buffer that grows),
// which is several times faster than appending to a std::string.
using Out = fmt::appender;

// A JSON string literal. Unit names and paths are plain ASCII in practice;
// anything else is escaped so the line stays valid JSON.
void put_string(Out out, std::string_view s) {
    *out++ = '"';
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
        return c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
    });
    if (plain) {
        fmt::format_to(out, FMT_COMPILE("{}\""), s);
        return;
    }
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            *out++ = '\\';
            *out++ = c;
        } else if (u < 0x20) {
            fmt::format_to(out, FMT_COMPILE("\\u{:04x}"), u);
        } else {
            *out++ = c;
        }
    }
    *out++ = '"';
}

void put_features(Out out, const KernelFeatures& f) {
    fmt::format_to(out, FMT_COMPILE("{{\"cgroup2\":{},\"memory_controller\":{},\"memory_recursiveprot\":{},\"psi\":{},"
                   "\"mglru_present\":{},\"mglru_enabled\":{},\"mglru_flags\":{},\"lru_gen_debugfs\":{},"
                   "\"memory_reclaim\":{},\"page_size\":{},\"kernel_release\":"),
                   f.cgroup2, f.memory_controller, f.memory_recursiveprot, f.psi, f.mglru_present, f.mglru_enabled,
                   f.mglru_flags, f.lru_gen_debugfs, f.memory_reclaim, f.page_size);
    put_string(out, f.kernel_release);
    *out++ = '}';
}

void put_psi(Out out, const Psi& p) {
    fmt::format_to(out, FMT_COMPILE("{{\"some\":{}"), p.some.total_us);
    if (p.full)
        fmt::format_to(out, FMT_COMPILE(",\"full\":{}"), p.full->total_us);
    *out++ = '}';
}

void put_cgroup(Out out, const CgroupSample& cg, const CurrentProtections* current) {
    UnitProtection prot{cg.low, cg.min};
    if (current != nullptr)
        if (auto it = current->find(cg.unit); it != current->end())
            prot = it->second;
    fmt::format_to(out, FMT_COMPILE("{{\"unit\":"));
    put_string(out, cg.unit);
    fmt::format_to(out, FMT_COMPILE(",\"path\":"));
    put_string(out, cg.path);
    if (cg.parent >= 0)
        fmt::format_to(out, FMT_COMPILE(",\"parent\":{}"), cg.parent);
    fmt::format_to(out, FMT_COMPILE(",\"current\":{},\"low\":{},\"min\":{},\"swap\":{},\"stat\":{{"), cg.current, prot.memory_low,
                   prot.memory_min, cg.swap_current);
    bool first = true;
    for (size_t k = 0; k < static_cast<size_t>(StatKey::Count); ++k) {
        const uint64_t v = cg.stat.known(static_cast<StatKey>(k));
        if (v == 0)
            continue;
        fmt::format_to(out, FMT_COMPILE("{}\"{}\":{}"), first ? "" : ",", stat_key_name(static_cast<StatKey>(k)), v);
        first = false;
    }
    fmt::format_to(out, FMT_COMPILE("}},\"events\":{{"));
    const MemoryEvents& e = cg.events;
    const std::pair<const char*, uint64_t> events[] = {{"low", e.low}, {"high", e.high},         {"max", e.max},
                                                       {"oom", e.oom}, {"oom_kill", e.oom_kill}, {"oom_group_kill", e.oom_group_kill}};
    first = true;
    for (const auto& [name, v] : events) {
        if (v == 0)
            continue;
        fmt::format_to(out, FMT_COMPILE("{}\"{}\":{}"), first ? "" : ",", name, v);
        first = false;
    }
    *out++ = '}';
    if (cg.pressure) {
        fmt::format_to(out, FMT_COMPILE(",\"psi\":"));
        put_psi(out, *cg.pressure);
    }
    *out++ = '}';
}

// Whether `path` is a recorded cgroup's path or below one.
bool under_recorded(std::string_view path, const std::unordered_set<std::string_view>& recorded) {
    while (!path.empty()) {
        if (recorded.contains(path))
            return true;
        const size_t slash = path.rfind('/');
        if (slash == std::string_view::npos || slash == 0)
            return false;
        path = path.substr(0, slash);
    }
    return false;
}

void put_lru_gen(Out out, const Snapshot& snap) {
    std::unordered_set<std::string_view> recorded;
    for (const auto& cg : snap.cgroups)
        recorded.insert(cg.path);
    fmt::format_to(out, FMT_COMPILE(",\"lru_gen\":["));
    bool first = true;
    for (const LruGenMemcg& m : snap.lru_gen->memcgs) {
        if (!under_recorded(m.path, recorded))
            continue;
        fmt::format_to(out, FMT_COMPILE("{}{{\"id\":{},\"path\":"), first ? "" : ",", m.id);
        put_string(out, m.path);
        fmt::format_to(out, FMT_COMPILE(",\"nodes\":["));
        for (size_t n = 0; n < m.nodes.size(); ++n) {
            fmt::format_to(out, FMT_COMPILE("{}{{\"node\":{},\"gens\":["), n ? "," : "", m.nodes[n].node);
            const auto& gens = m.nodes[n].generations;
            for (size_t g = 0; g < gens.size(); ++g)
                fmt::format_to(out, FMT_COMPILE("{}[{},{},{},{}]"), g ? "," : "", gens[g].seq, gens[g].age_ms,
                               gens[g].anon_pages, gens[g].file_pages);
            fmt::format_to(out, FMT_COMPILE("]}}"));
        }
        fmt::format_to(out, FMT_COMPILE("]}}"));
        first = false;
    }
    *out++ = ']';
}

// ---------------------------------------------------------------------------
// Reading: each getter records the first problem and reports failure.

struct Reader {
    int line = 0;
    std::optional<Error> error;

    bool fail(std::string key, std::string message) {
        if (!error)
            error = Error{{}, line, std::move(key), std::move(message)};
        return false;
    }
    const json* field(const json& obj, const char* key, bool required) {
        if (!obj.is_object())
            return fail(key, "expected an object holding it"), nullptr;
        auto it = obj.find(key);
        if (it == obj.end()) {
            if (required)
                fail(key, "missing");
            return nullptr;
        }
        return &*it;
    }
    bool u64(const json& obj, const char* key, uint64_t& v, bool required = true) {
        const json* f = field(obj, key, required);
        if (f == nullptr)
            return !required && !error;
        if (!f->is_number_unsigned())
            return fail(key, "expected an unsigned integer");
        v = f->get<uint64_t>();
        return true;
    }
    bool boolean(const json& obj, const char* key, bool& v) {
        const json* f = field(obj, key, true);
        if (f == nullptr)
            return false;
        if (!f->is_boolean())
            return fail(key, "expected true or false");
        v = f->get<bool>();
        return true;
    }
    bool string(const json& obj, const char* key, std::string& v) {
        const json* f = field(obj, key, true);
        if (f == nullptr)
            return false;
        if (!f->is_string())
            return fail(key, "expected a string");
        v = f->get<std::string>();
        return true;
    }
    const json* array(const json& obj, const char* key, bool required) {
        const json* f = field(obj, key, required);
        if (f != nullptr && !f->is_array())
            return fail(key, "expected an array"), nullptr;
        return f;
    }
};

Result<json> parse_json_line(std::string_view text, int line) {
    try {
        json j = json::parse(text);
        if (!j.is_object())
            return Error{{}, line, {}, "expected a JSON object"};
        return j;
    } catch (const json::parse_error& e) {
        return Error{{}, line, {}, fmt::format("not JSON (at byte {} of the line): {}", e.byte, e.what())};
    } catch (const json::exception& e) {  // a number out of range, an invalid UTF-8 string
        return Error{{}, line, {}, fmt::format("not valid JSON: {}", e.what())};
    }
}

void read_features(Reader& r, const json& j, KernelFeatures& f) {
    r.boolean(j, "cgroup2", f.cgroup2);
    r.boolean(j, "memory_controller", f.memory_controller);
    r.boolean(j, "memory_recursiveprot", f.memory_recursiveprot);
    r.boolean(j, "psi", f.psi);
    r.boolean(j, "mglru_present", f.mglru_present);
    r.boolean(j, "mglru_enabled", f.mglru_enabled);
    uint64_t flags = 0;
    if (r.u64(j, "mglru_flags", flags))
        f.mglru_flags = static_cast<uint32_t>(flags);
    r.boolean(j, "lru_gen_debugfs", f.lru_gen_debugfs);
    r.boolean(j, "memory_reclaim", f.memory_reclaim);
    r.u64(j, "page_size", f.page_size);
    r.string(j, "kernel_release", f.kernel_release);
}

std::optional<Psi> read_psi(Reader& r, const json& obj, const char* key) {
    const json* p = r.field(obj, key, false);
    if (p == nullptr)
        return std::nullopt;
    Psi psi;
    r.u64(*p, "some", psi.some.total_us);
    uint64_t full = 0;
    if (r.field(*p, "full", false) != nullptr && r.u64(*p, "full", full))
        psi.full = PsiLine{.total_us = full};
    return psi;
}

void read_stat(Reader& r, const json& obj, MemoryStat& stat) {
    const json* s = r.field(obj, "stat", true);
    if (s == nullptr)
        return;
    if (!s->is_object()) {
        r.fail("stat", "expected an object");
        return;
    }
    stat.clear();
    for (const auto& [key, value] : s->items()) {
        if (!known_stat_key(key))
            continue;  // a key a newer memprotd reads; this engine does not
        if (!value.is_number_unsigned()) {
            r.fail("stat." + key, "expected an unsigned integer");
            return;
        }
        stat.append(key, value.get<uint64_t>());
    }
}

void read_cgroup(Reader& r, const json& j, size_t index, Snapshot& snap) {
    CgroupSample& cg = snap.cgroups.emplace_back();
    r.string(j, "unit", cg.unit);
    r.string(j, "path", cg.path);
    uint64_t parent = 0;
    if (r.field(j, "parent", false) != nullptr && r.u64(j, "parent", parent)) {
        if (parent >= index) {
            r.fail("parent", fmt::format("cgroup {} names parent {}, which does not come before it", index, parent));
            return;
        }
        cg.parent = static_cast<int>(parent);
        cg.depth = snap.cgroups[parent].depth + 1;
    }
    r.u64(j, "current", cg.current);
    r.u64(j, "low", cg.low);
    r.u64(j, "min", cg.min);
    r.u64(j, "swap", cg.swap_current);
    read_stat(r, j, cg.stat);
    if (const json* e = r.field(j, "events", true)) {
        r.u64(*e, "low", cg.events.low, false);
        r.u64(*e, "high", cg.events.high, false);
        r.u64(*e, "max", cg.events.max, false);
        r.u64(*e, "oom", cg.events.oom, false);
        r.u64(*e, "oom_kill", cg.events.oom_kill, false);
        r.u64(*e, "oom_group_kill", cg.events.oom_group_kill, false);
    }
    cg.pressure = read_psi(r, j, "psi");
}

void read_lru_gen(Reader& r, const json& arr, LruGen& lg) {
    for (const json& m : arr) {
        LruGenMemcg& mc = lg.memcgs.emplace_back();
        r.u64(m, "id", mc.id);
        r.string(m, "path", mc.path);
        const json* nodes = r.array(m, "nodes", true);
        if (nodes == nullptr)
            return;
        for (const json& n : *nodes) {
            LruGenNode& node = mc.nodes.emplace_back();
            uint64_t id = 0;
            r.u64(n, "node", id);
            node.node = static_cast<int>(id);
            const json* gens = r.array(n, "gens", true);
            if (gens == nullptr)
                return;
            for (const json& g : *gens) {
                if (!g.is_array() || g.size() != 4 || !std::all_of(g.begin(), g.end(), [](const json& v) {
                        return v.is_number_unsigned();
                    })) {
                    r.fail("lru_gen", "expected a generation as [seq, age_ms, anon_pages, file_pages]");
                    return;
                }
                node.generations.push_back(
                    {g[0].get<uint64_t>(), g[1].get<uint64_t>(), g[2].get<uint64_t>(), g[3].get<uint64_t>()});
            }
        }
    }
}

void read_trims_made(Reader& r, const json& arr, std::vector<PlannedTrim>& made) {
    for (const json& t : arr) {
        PlannedTrim& trim = made.emplace_back();
        if (!t.is_object())
            return void(r.fail("trims_made", "expected a trim as {\"unit\": NAME, \"bytes\": N}"));
        if (!r.string(t, "unit", trim.unit) || !r.u64(t, "bytes", trim.bytes))
            return;
    }
}

}  // namespace

json settings_to_json(const std::vector<Setting>& settings) {
    json out = json::object();
    for (const Setting& s : settings)
        out[s.key] = s.value;
    return out;
}

std::string trace_header_line(const TraceHeader& h) {
    json j = {{"memprotd_trace", h.version},        {"memprotd_version", h.memprotd_version},
              {"kernel_release", h.kernel_release}, {"source", h.source},
              {"interval_us", h.interval_us}};
    if (!h.engine_config.empty())
        j["engine_config"] = settings_to_json(h.engine_config);
    return j.dump();
}

void append_trace_sample(fmt::memory_buffer& line, const Snapshot& snap, const KernelFeatures& features,
                         uint64_t memory_total_override, const CurrentProtections* current,
                         int64_t time_origin_us) {
    line.reserve(line.size() + 1024 + snap.cgroups.size() * 512);  // about 460 bytes a cgroup
    Out out(line);
    const Meminfo& m = snap.meminfo;
    fmt::format_to(out, FMT_COMPILE("{{\"time_us\":{},\"meminfo\":{{\"mem_total\":{},\"mem_available\":{},\"swap_total\":{},"
                   "\"swap_free\":{}"),
                   snap.timestamp_us - time_origin_us, m.mem_total, m.mem_available, m.swap_total, m.swap_free);
    if (m.mem_free)
        fmt::format_to(out, FMT_COMPILE(",\"mem_free\":{}"), *m.mem_free);
    fmt::format_to(out, FMT_COMPILE("}}"));
    if (memory_total_override)
        fmt::format_to(out, FMT_COMPILE(",\"memory_total\":{}"), memory_total_override);
    fmt::format_to(out, FMT_COMPILE(",\"features\":"));
    put_features(out, features);
    if (snap.host_pressure) {
        fmt::format_to(out, FMT_COMPILE(",\"host_psi\":"));
        put_psi(out, *snap.host_pressure);
    }
    fmt::format_to(out, FMT_COMPILE(",\"cgroups\":["));
    for (size_t i = 0; i < snap.cgroups.size(); ++i) {
        if (i)
            *out++ = ',';
        put_cgroup(out, snap.cgroups[i], current);
    }
    *out++ = ']';
    if (snap.lru_gen)
        put_lru_gen(out, snap);
    fmt::format_to(out, FMT_COMPILE("}}\n"));
}

void append_trace_trims(fmt::memory_buffer& line, const std::vector<PlannedTrim>& made) {
    if (made.empty())
        return;
    const std::string_view end = "}\n";
    const bool closed = line.size() >= end.size() && std::string_view(line.data() + line.size() - end.size(),
                                                                          end.size()) == end;
    if (!closed)
        return;  // not a sample line: a caller's bug, and no line is better than a broken one
    line.resize(line.size() - end.size());
    Out out(line);
    fmt::format_to(out, FMT_COMPILE(",\"trims_made\":["));
    for (size_t i = 0; i < made.size(); ++i) {
        fmt::format_to(out, FMT_COMPILE("{}{{\"unit\":"), i ? "," : "");
        put_string(out, made[i].unit);
        fmt::format_to(out, FMT_COMPILE(",\"bytes\":{}}}"), made[i].bytes);
    }
    fmt::format_to(out, FMT_COMPILE("]}}\n"));
}

void append_trace_sample(std::string& out, const Snapshot& snap, const KernelFeatures& features,
                         uint64_t memory_total_override, const CurrentProtections* current,
                         int64_t time_origin_us) {
    fmt::memory_buffer line;
    append_trace_sample(line, snap, features, memory_total_override, current, time_origin_us);
    out.append(line.data(), line.size());
}

Result<TraceHeader> parse_trace_header(std::string_view text, int line) {
    Result<json> j = parse_json_line(text, line);
    if (!j)
        return j.error();
    Reader r{line, {}};
    TraceHeader h;
    uint64_t version = 0;
    if (!r.u64(*j, "memprotd_trace", version))
        return Error{{}, line, "memprotd_trace", "not a memprotd trace: the first line must be its header"};
    if (version > static_cast<uint64_t>(kTraceVersion))
        return Error{{}, line, "memprotd_trace",
                     fmt::format("format version {} is newer than this build reads ({})", version, kTraceVersion)};
    h.version = static_cast<int>(version);
    r.string(*j, "memprotd_version", h.memprotd_version);
    r.string(*j, "kernel_release", h.kernel_release);
    r.string(*j, "source", h.source);
    r.u64(*j, "interval_us", h.interval_us);
    if (!r.error && h.interval_us == 0)
        r.fail("interval_us", "expected an interval > 0");
    if (const json* settings = r.field(*j, "engine_config", false)) {
        if (!settings->is_object())
            r.fail("engine_config", "expected an object of settings");
        else
            for (const auto& [key, value] : settings->items()) {
                if (!value.is_string() || key.empty()) {
                    r.fail("engine_config", fmt::format("{}: expected a key and its value as a string", key));
                    break;
                }
                h.engine_config.push_back({key, value.get<std::string>()});
            }
    }
    if (r.error)
        return *r.error;
    return h;
}

Result<TraceSample> parse_trace_sample(std::string_view text, int line) {
    Result<json> j = parse_json_line(text, line);
    if (!j)
        return j.error();
    if (j->contains("memprotd_trace"))
        return Error{{}, line, "memprotd_trace", "a header where a sample was expected"};
    Reader r{line, {}};
    TraceSample s;
    Snapshot& snap = s.snapshot;
    uint64_t t = 0;
    if (r.u64(*j, "time_us", t) && t > static_cast<uint64_t>(INT64_MAX))
        r.fail("time_us", "out of range");
    snap.timestamp_us = static_cast<int64_t>(t);
    if (const json* m = r.field(*j, "meminfo", true)) {
        r.u64(*m, "mem_total", snap.meminfo.mem_total);
        r.u64(*m, "mem_available", snap.meminfo.mem_available);
        r.u64(*m, "swap_total", snap.meminfo.swap_total);
        r.u64(*m, "swap_free", snap.meminfo.swap_free);
        if (m->contains("mem_free")) {
            uint64_t mem_free = 0;
            if (r.u64(*m, "mem_free", mem_free))
                snap.meminfo.mem_free = mem_free;
        }
    }
    r.u64(*j, "memory_total", s.memory_total_override, false);
    if (const json* f = r.field(*j, "features", true))
        read_features(r, *f, s.features);
    snap.host_pressure = read_psi(r, *j, "host_psi");
    if (const json* cgs = r.array(*j, "cgroups", true))
        for (size_t i = 0; i < cgs->size() && !r.error; ++i)
            read_cgroup(r, (*cgs)[i], i, snap);
    if (const json* lg = r.array(*j, "lru_gen", false); lg != nullptr && !r.error)
        read_lru_gen(r, *lg, snap.lru_gen.emplace());
    if (const json* tm = r.array(*j, "trims_made", false); tm != nullptr && !r.error)
        read_trims_made(r, *tm, s.trims_made);
    if (r.error)
        return *r.error;
    return s;
}

namespace {

Error in_file(Error e, const std::string& path) {
    e.file = path;
    return e;
}

}  // namespace

Result<TraceReader> TraceReader::parse(std::string text, std::string path) {
    TraceReader r;
    r.text_ = std::move(text);
    r.path_ = std::move(path);
    const std::string_view t = r.text_;
    size_t pos = 0;
    while (pos < t.size()) {
        const int line = static_cast<int>(r.lines_.size()) + 1;
        const size_t nl = t.find('\n', pos);
        if (nl == std::string_view::npos)
            return Error{r.path_, line, {},
                         fmt::format("truncated: no end of line after byte offset {} (an interrupted write?)", pos)};
        if (nl == pos)
            return Error{r.path_, line, {}, fmt::format("empty line at byte offset {}", pos)};
        r.lines_.push_back({pos, nl - pos});
        pos = nl + 1;
    }
    if (r.lines_.empty())
        return Error{r.path_, 1, {}, "empty file; expected the trace header"};
    Result<TraceHeader> h = parse_trace_header(r.text_of(0), 1);
    if (!h)
        return in_file(h.error(), r.path_);
    r.header_ = std::move(*h);
    r.headers_ = {{1, r.header_}};
    return r;
}

Result<TraceSample> TraceReader::sample_at(size_t k) const {
    Result<TraceSample> s = parse_trace_sample(text_of(k), line_number(k));
    if (!s)
        return in_file(s.error(), path_);
    return s;
}

Result<TraceSample> TraceReader::last_sample() const {
    if (lines_.size() < 2)
        return Error{path_, 1, {}, "no samples after the header"};
    return sample_at(lines_.size() - 1);
}

Result<TraceSample> TraceReader::sample(size_t i) const { return sample_at(sample_lines_.at(i)); }

Result<TraceHeader> TraceReader::continued_header(size_t k) const {
    Result<TraceHeader> h = parse_trace_header(text_of(k), line_number(k));
    if (!h)
        return in_file(h.error(), path_);
    if (h->version != header_.version || h->interval_us != header_.interval_us)
        return Error{path_, line_number(k), "memprotd_trace",
                     "a header of another format version or interval than the trace's first one"};
    return h;
}

Status TraceReader::scan(const std::function<void(const TraceSample&)>& each) {
    sample_lines_.clear();
    headers_.resize(1);
    for (size_t k = 1; k < lines_.size(); ++k) {
        if (k > 1 && text_of(k).find("\"memprotd_trace\"") != std::string_view::npos) {
            Result<TraceHeader> h = continued_header(k);
            if (!h)
                return h.error();
            headers_.push_back({line_number(k), std::move(*h)});
            continue;
        }
        Result<TraceSample> s = sample_at(k);
        if (!s)
            return s.error();
        const int64_t t = s->snapshot.timestamp_us;
        if (!sample_lines_.empty() && t <= last_us_) {
            sample_lines_.clear();
            return Error{path_, line_number(k), "time_us",
                         fmt::format("samples out of time order: {} is not after the previous sample's {}", t,
                                     last_us_)};
        }
        if (sample_lines_.empty())
            first_us_ = t;
        last_us_ = t;
        sample_lines_.push_back(k);
        if (each)
            each(*s);
    }
    if (sample_lines_.empty())
        return Error{path_, 1, {}, "no samples after the header"};
    return Ok{};
}

std::vector<Error> engine_config_differences(const TraceReader& trace, const std::vector<Setting>& replayed) {
    std::vector<Error> out;
    std::vector<std::string> said;
    const int last_sample = trace.samples() ? trace.sample_line(trace.samples() - 1) : 0;
    for (const auto& [line, header] : trace.headers()) {
        if (line > last_sample)
            break;  // headers are in line order
        for (const Setting& recorded : header.engine_config) {
            if (std::find(said.begin(), said.end(), recorded.key) != said.end())
                continue;
            const auto it = std::find_if(replayed.begin(), replayed.end(),
                                         [&](const Setting& s) { return s.key == recorded.key; });
            if (it != replayed.end() && it->value == recorded.value)
                continue;
            said.push_back(recorded.key);
            out.push_back({trace.path(), line, "engine_config",
                           it == replayed.end()
                               ? fmt::format("the daemon ran with {}={}, a setting this memprotctl does not know",
                                             recorded.key, recorded.value)
                               : fmt::format("the daemon ran with {0}={1}, this replay with {0}={2} (state {0}={1} "
                                             "in --config-dir to replay what the daemon did)",
                                             recorded.key, recorded.value, it->value)});
        }
    }
    return out;
}

}  // namespace memprotd
