// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The trace format (docs/trace.md): JSON lines, a header line and then one
// line per sample with what the engine reads from it. Pure: text in and out;
// files are lib/sys/trace_file.h's business.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "model.h"
#include "plan.h"
#include "result.h"

namespace memprotd {

// The format version this build writes and the newest it reads.
inline constexpr int kTraceVersion = 1;

struct TraceHeader {
    int version = kTraceVersion;
    std::string memprotd_version;
    std::string kernel_release;
    std::string source;          // "memprotd" or "memprotctl record"
    uint64_t interval_us = 0;    // the interval the samples were taken at
    // The daemon's engine_settings() (config.h) from here on, in the
    // table's order when written and by key when read back; empty: not
    // recorded (`memprotctl record`, or a memprotd from before 2026-12-01).
    std::vector<Setting> engine_config{};
};

// One sample: the engine's inputs. `snapshot.errors` is not kept.
struct TraceSample {
    Snapshot snapshot;
    KernelFeatures features;
    uint64_t memory_total_override = 0;  // 0: the snapshot's MemTotal
    // The daemon's trims after this sample's tick (Engine::trims_made), in
    // the order made; only `unit` and `bytes` are kept. Empty when none was
    // made or the trace does not say ("trims_made" left out).
    std::vector<PlannedTrim> trims_made;
};

// A header's engine_config as JSON, {"Key": "value", ...}: the header line's
// and `simulate --replay --json`'s.
nlohmann::json settings_to_json(const std::vector<Setting>& settings);

// The header line, without the newline.
std::string trace_header_line(const TraceHeader& h);

// Appends one sample line, with its newline, to `out`. Kept: time, meminfo,
// host PSI totals, features, every cgroup (unit, path, parent, memory.current,
// memory.low, memory.min, memory.swap.current, the StatKey memory.stat keys
// that are not 0, memory.events counts that are not 0, PSI totals) and the
// lru_gen memcgs at or below a recorded cgroup. `current` (may be null)
// replaces a unit's memory.low/memory.min by the values systemd reported,
// which is what the engine reads in enforce mode. The time written is
// snap.timestamp_us - time_origin_us (traces start at 0).
void append_trace_sample(std::string& out, const Snapshot& snap, const KernelFeatures& features,
                         uint64_t memory_total_override, const CurrentProtections* current = nullptr,
                         int64_t time_origin_us = 0);
// The same into fmt's buffer, which keeps its capacity between calls (the
// daemon's one buffer) and is the faster of the two.
void append_trace_sample(fmt::memory_buffer& out, const Snapshot& snap, const KernelFeatures& features,
                         uint64_t memory_total_override, const CurrentProtections* current = nullptr,
                         int64_t time_origin_us = 0);

// Adds to a line that append_trace_sample just wrote the trims the daemon
// made after its tick ("trims_made": [{unit, bytes}], left out when `made`
// is empty). The line must end as append_trace_sample leaves it ("}\n").
void append_trace_trims(fmt::memory_buffer& line, const std::vector<PlannedTrim>& made);

// Parse one line (without its newline). Errors carry `line` and say what is
// wrong; the caller sets Error::file. A header of a newer version is an error.
Result<TraceHeader> parse_trace_header(std::string_view text, int line);
Result<TraceSample> parse_trace_sample(std::string_view text, int line);

// A whole trace read back: a file, or the files of a rotated trace put
// together (`cat FILE.1 FILE`). Errors name `path` and the line.
class TraceReader {
public:
    // Splits `text` into lines — each must end in '\n' (a missing one is a
    // truncated write) and none may be empty — and parses the header.
    static Result<TraceReader> parse(std::string text, std::string path);

    [[nodiscard]] const TraceHeader& header() const { return header_; }
    [[nodiscard]] const std::string& path() const { return path_; }
    // Every header and its line: the first, then (after scan()) those
    // within the trace, where a rotated part continues or the daemon's
    // engine settings changed.
    struct HeaderAt {
        int line = 0;
        TraceHeader header;
    };
    [[nodiscard]] const std::vector<HeaderAt>& headers() const { return headers_; }
    // Lines in all, the header's included.
    [[nodiscard]] size_t lines() const { return lines_.size(); }
    // The last line as a sample, without a scan (where --append continues).
    [[nodiscard]] Result<TraceSample> last_sample() const;

    // Checks every line after the header: samples that parse, in increasing
    // time, and headers within the trace (where a rotated part continues)
    // that give the first one's version and interval. `each` sees every
    // sample. An empty trace (no sample) is an error.
    Status scan(const std::function<void(const TraceSample&)>& each = {});
    // After a successful scan(): the samples, parsed again on each call so
    // that a long trace need not fit in memory parsed.
    [[nodiscard]] size_t samples() const { return sample_lines_.size(); }
    [[nodiscard]] Result<TraceSample> sample(size_t i) const;
    [[nodiscard]] int sample_line(size_t i) const { return line_number(sample_lines_[i]); }
    [[nodiscard]] int64_t first_us() const { return first_us_; }
    [[nodiscard]] int64_t last_us() const { return last_us_; }

private:
    struct Line {
        size_t begin = 0;
        size_t size = 0;
    };
    [[nodiscard]] std::string_view text_of(size_t k) const { return {text_.data() + lines_[k].begin, lines_[k].size}; }
    [[nodiscard]] static int line_number(size_t k) { return static_cast<int>(k) + 1; }
    [[nodiscard]] Result<TraceSample> sample_at(size_t k) const;
    [[nodiscard]] Result<TraceHeader> continued_header(size_t k) const;

    std::string text_;
    std::string path_;
    std::vector<Line> lines_;
    TraceHeader header_;
    std::vector<HeaderAt> headers_;
    std::vector<size_t> sample_lines_;  // indices into lines_
    int64_t first_us_ = 0;
    int64_t last_us_ = 0;
};

// Where `replayed` (a replay's engine_settings()) differs from the settings
// the trace's headers record, each key once, at the first header that
// differs (a key the replay's configuration leaves out takes the replaying
// build's default, which need not be the recording daemon's); a header after
// the last sample stated settings no sample ran under and is not compared.
// Each Error names the trace, the header's line and the key. After a
// successful scan().
std::vector<Error> engine_config_differences(const TraceReader& trace, const std::vector<Setting>& replayed);

}  // namespace memprotd
