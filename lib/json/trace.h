// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The trace format (docs/trace.md): JSON lines, a header line and then one
// line per sample with what the engine reads from it. Pure: text in and out;
// files are lib/sys/trace_file.h's business.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

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
};

// One sample: the engine's inputs. `snapshot.errors` is not kept.
struct TraceSample {
    Snapshot snapshot;
    KernelFeatures features;
    uint64_t memory_total_override = 0;  // 0: the snapshot's MemTotal
};

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

// Parse one line (without its newline). Errors carry `line` and say what is
// wrong; the caller sets Error::file. A header of a newer version is an error.
Result<TraceHeader> parse_trace_header(std::string_view text, int line);
Result<TraceSample> parse_trace_sample(std::string_view text, int line);

}  // namespace memprotd
