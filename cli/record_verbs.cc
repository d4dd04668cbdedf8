// SPDX-License-Identifier: LGPL-2.1-or-later
#include "record_verbs.h"

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "config_loader.h"
#include "engine.h"
#include "format.h"
#include "memprotd-config.h"
#include "offline_verbs.h"
#include "plan_json.h"
#include "sampler.h"
#include "table.h"
#include "trace.h"
#include "trace_file.h"
#include "values.h"

namespace memprotd {

namespace {

int fail(const Error& e) {
    fmt::print(stderr, "memprotctl: {}\n", e.to_string());
    return kExitFailure;
}

struct TraceEnd {
    int64_t last_us = 0;       // the last sample's time
    uint64_t interval_us = 0;  // the header's
};

// Where an existing trace ends (for --append); the trace must be this
// version's and whole.
Result<TraceEnd> trace_end(const std::string& path) {
    Result<std::string> text = read_trace_file(path);
    if (!text)
        return text.error();
    Result<TraceReader> trace = TraceReader::parse(std::move(*text), path);
    if (!trace)
        return trace.error();
    const TraceHeader& h = trace->header();
    if (h.version != kTraceVersion)
        return Error{path, 1, "memprotd_trace",
                     fmt::format("format version {}; this build appends only to version {}", h.version,
                                 kTraceVersion)};
    if (trace->lines() < 2)
        return Error{path, 1, {}, "no samples to continue from"};
    Result<TraceSample> last = trace->last_sample();
    if (!last)
        return last.error();
    return TraceEnd{last->snapshot.timestamp_us, h.interval_us};
}

}  // namespace

int run_record(const RecordOptions& o) {
    const KernelFeatures features = probe_tree(o.root, o.proc_root);
    if (!features.unusable_reason.empty()) {
        fmt::print(stderr, "memprotctl: cannot record {}: {}\n", o.root, features.unusable_reason);
        return kExitFailure;
    }
    int64_t first_us = 0;  // a new trace starts at 0; --append one interval after its last sample
    uint64_t interval = o.interval_us ? o.interval_us : kDefaultRecordIntervalUs;
    if (o.append) {
        Result<TraceEnd> end = trace_end(o.output);
        if (!end)
            return fail(end.error());
        if (o.interval_us && o.interval_us != end->interval_us)
            return fail(Error{o.output, 1, "interval_us",
                              fmt::format("the trace's interval is {}; --interval must be the same",
                                          format_timespan(end->interval_us))});
        interval = end->interval_us;
        first_us = end->last_us + static_cast<int64_t>(interval);
    }
    Sampler sampler(tree_sampler_options(o.root, o.proc_root, o.debugfs_root, /*include_services=*/false));
    Snapshot snap;
    const int64_t start_us = monotonic_us();
    sampler.sample(snap, first_us);
    if (o.memory_total == 0 && snap.meminfo.mem_total == 0) {
        fmt::print(stderr, "memprotctl: MemTotal is unknown (no {}/meminfo); pass --memory-total\n", o.proc_root);
        return kExitFailure;
    }

    const TraceHeader header{kTraceVersion, MEMPROTD_VERSION, features.kernel_release, "memprotctl record",
                             interval, {}};
    TraceWriter writer(o.output, /*max_bytes=*/0, /*old_files=*/0);
    if (Status s = writer.open(o.append ? TraceWriter::Start::Append : TraceWriter::Start::Truncate,
                               trace_header_line(header));
        !s)
        return fail(s.error());
    const bool progress = !o.no_wait && o.samples > 1;
    const bool tty = isatty(STDERR_FILENO) != 0;
    std::string buf;
    for (int i = 0; i < o.samples; ++i) {
        if (i > 0) {
            if (!o.no_wait)
                sleep_us(interval);
            const int64_t elapsed = o.no_wait ? static_cast<int64_t>(interval) * i : monotonic_us() - start_us;
            sampler.sample(snap, first_us + elapsed);
        }
        buf.clear();
        append_trace_sample(buf, snap, features, o.memory_total);
        if (Status s = writer.write(buf); !s)
            return fail(s.error());
        if (progress)
            fmt::print(stderr, "{}sample {}/{}{}", tty ? "\r" : "", i + 1, o.samples, tty ? "" : "\n");
    }
    if (progress && tty)
        fmt::print(stderr, "\n");
    for (const auto& e : snap.errors)
        fmt::print(stderr, "warning: {}\n", e.to_string());
    fmt::print("{} {} sample{} of {} cgroups to {} ({} bytes)\n", o.append ? "Appended" : "Recorded", o.samples,
               o.samples == 1 ? "" : "s", snap.cgroups.size(), o.output, writer.size());
    return kExitOk;
}

namespace {

// `j` as dump(2) prints it, its later lines indented by `level` more steps,
// to sit inside an object printed piece by piece.
std::string indented(const nlohmann::json& j, int level) {
    std::string out;
    const std::string pad = "\n" + std::string(static_cast<size_t>(level) * 2, ' ');
    for (const char c : j.dump(2)) {
        if (c == '\n')
            out += pad;
        else
            out += c;
    }
    return out;
}

// Prints a replay as it runs: a timeline of changes, or one JSON object
// ("trace", "samples", then the last plan's "budget", "memory_total" and
// "slices").
class ReplayPrinter {
public:
    ReplayPrinter(const ReplayOptions& o, const TraceReader& trace) : o_(o) {
        const TraceHeader& h = trace.header();
        const size_t n = trace.samples();
        if (o.json) {
            nlohmann::json header = {{"version", h.version},
                                     {"memprotd_version", h.memprotd_version},
                                     {"kernel_release", h.kernel_release},
                                     {"source", h.source},
                                     {"interval_us", h.interval_us}};
            if (!h.engine_config.empty())
                header["engine_config"] = settings_to_json(h.engine_config);
            fmt::print("{{\n  \"trace\": {},\n  \"samples\": [\n", indented(header, 1));
            return;
        }
        fmt::print("Replay of {} ({} sample{} over {:.1f} s, {} ms apart; recorded by {} {} on kernel {}; "
                   "nothing is written)\n",
                   o.trace, n, n == 1 ? "" : "s", static_cast<double>(trace.last_us() - trace.first_us()) / 1e6,
                   h.interval_us / 1000, h.source, h.memprotd_version,
                   h.kernel_release.empty() ? "unknown" : h.kernel_release);
        fmt::print("\nChanges{} (time since the first sample: old → new, and why):\n",
                   o.explain_unit.empty() ? "" : " of " + o.explain_unit);
    }

    void sample(const Plan& plan, const CurrentProtections& current, double time_s);
    void end(const Plan& plan);

private:
    const ReplayOptions& o_;
    bool first_ = true;
    bool changed_ = false;
};

void ReplayPrinter::sample(const Plan& plan, const CurrentProtections& current, double time_s) {
    nlohmann::json slices = nlohmann::json::array();
    for (const PlanEntry& e : plan.slices) {
        const Explanation& x = e.x;
        if (o_.json) {
            const auto it = current.find(e.unit);
            const UnitProtection written = it != current.end() ? it->second : x.prior;
            nlohmann::json j = slice_to_json(plan, e);
            j["written_memory_low"] = written.memory_low;
            j["written_memory_min"] = written.memory_min;
            slices.push_back(std::move(j));
        } else if (e.write() && (o_.explain_unit.empty() || o_.explain_unit == e.unit)) {
            changed_ = true;
            fmt::print("{:>9.1f}s  {}: MemoryLow {} → {}, MemoryMin {} → {}  ({}{}{})\n", time_s, e.unit,
                       format_bytes(x.prior.memory_low), format_bytes(x.next.memory_low),
                       format_bytes(x.prior.memory_min), format_bytes(x.next.memory_min), bound_name(x.bound),
                       x.damping ? "; " : "", damping_text(x.damping));
            if (!o_.explain_unit.empty())
                fmt::print("{}\n", explain_text(plan, e));
        }
    }
    if (o_.json) {
        const nlohmann::json j = {{"time", time_s}, {"budget", plan.budget}, {"slices", std::move(slices)}};
        fmt::print("{}    {}", first_ ? "" : ",\n", indented(j, 2));
    }
    first_ = false;
}

void ReplayPrinter::end(const Plan& plan) {
    if (o_.json) {
        nlohmann::json slices = nlohmann::json::array();
        for (const auto& e : plan.slices)
            slices.push_back(slice_to_json(plan, e));
        fmt::print("\n  ],\n  \"budget\": {},\n  \"memory_total\": {},\n  \"slices\": {}\n}}\n", plan.budget,
                   plan.memory_total, indented(slices, 1));
        return;
    }
    if (!changed_)
        fmt::print("  none\n");
    fmt::print("\nAfter the last sample: memory {}, budget {}\n{}\n{}", format_bytes(plan.memory_total),
               format_bytes(plan.budget), plan_table(plan, use_color(stdout)), plan_legend());
    print_explanations(plan, o_.explain, o_.explain_unit);
}

// The engine for the trace's interval with the configuration of
// --config-dir; says on stderr where its settings differ from the daemon's.
std::optional<Engine> replay_engine(const ReplayOptions& o, const TraceReader& trace, uint64_t mem_total) {
    ConfigParse cp = load_config(config_dirs(o.config_dir), mem_total);
    if (!cp.ok()) {
        print_errors(cp.errors);
        fmt::print(stderr, "memprotctl: the configuration has {} error(s); nothing replayed\n", cp.errors.size());
        return std::nullopt;
    }
    // The engine's rate limits and holds count intervals: it must see the
    // one the samples were taken at, whatever Interval= says.
    cp.config.daemon.interval_us = trace.header().interval_us;
    for (const Error& e : engine_config_differences(trace, engine_settings(cp.config.daemon)))
        fmt::print(stderr, "warning: {}\n", e.to_string());
    return std::optional<Engine>(std::in_place, std::move(cp.config));
}

}  // namespace

// Two passes: the first checks every line, so that an error leaves stdout
// empty; the second runs the engine and prints as it goes, so a long
// trace's output need not fit in memory.
int run_replay(const ReplayOptions& o) {
    Result<std::string> text = read_trace_file(o.trace);
    if (!text)
        return fail(text.error());
    Result<TraceReader> trace = TraceReader::parse(std::move(*text), o.trace);
    if (!trace)
        return fail(trace.error());
    bool unit_found = false;  // --explain UNIT is a cgroup of some sample
    if (Status s = trace->scan([&](const TraceSample& t) {
            unit_found = unit_found || t.snapshot.find_unit(o.explain_unit) >= 0;
        });
        !s)
        return fail(s.error());
    if (!o.explain_unit.empty() && !unit_found)
        return fail(Error{o.trace, 0, {}, fmt::format("{} is in no sample", o.explain_unit)});

    Result<TraceSample> first = trace->sample(0);  // valid: checked by the scan
    const uint64_t mem_total = first->memory_total_override ? first->memory_total_override
                                                             : first->snapshot.meminfo.mem_total;
    if (mem_total == 0)
        return fail(Error{o.trace, trace->sample_line(0), "meminfo", "MemTotal is 0 and no memory_total was recorded"});
    std::optional<Engine> engine = replay_engine(o, *trace, mem_total);
    if (!engine)
        return kExitFailure;

    // Start from the protections of the first sample; then only our writes.
    CurrentProtections current;
    for (const auto& cg : first->snapshot.cgroups)
        current[cg.unit] = {cg.low, cg.min};
    // The watch after trims (Engine::trims_made) starts from the trims the
    // daemon recorded as made; a trace of `memprotctl record` has none, and
    // there the replay's own planned trims count as made.
    const bool daemons = trace->header().source == "memprotd";
    ReplayPrinter printer(o, *trace);
    Plan plan;
    for (size_t i = 0; i < trace->samples(); ++i) {
        const Result<TraceSample> s = trace->sample(i);  // valid: checked by the scan
        plan = engine->tick(s->snapshot, s->features, current, s->memory_total_override);
        for (const auto& w : plan.writes)
            current[w.unit] = w.values;
        engine->trims_made(daemons ? s->trims_made : plan.trims, plan.timestamp_us);
        printer.sample(plan, current, static_cast<double>(s->snapshot.timestamp_us - trace->first_us()) / 1e6);
    }
    printer.end(plan);
    return kExitOk;
}

}  // namespace memprotd
