// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The daemon's trace (Record=, --record; the format is docs/trace.md): one
// line per tick with the engine's inputs, the first sample at time 0.
//
// Threading: the loop thread only.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "model.h"
#include "plan.h"
#include "trace.h"
#include "trace_file.h"

namespace memprotd {

class Recorder {
public:
    // Opens, reopens or closes the trace: `path` empty closes it; another
    // path, cap (`max_bytes`) or Interval= than the open trace's starts a
    // new one (an earlier file is rotated, one old file kept). The header
    // records the engine's settings (engine_settings()); when they change
    // and the trace goes on, a header within it says so from that line on.
    void configure(const std::string& path, uint64_t max_bytes, const DaemonConfig& daemon,
                   const KernelFeatures& features);
    [[nodiscard]] bool active() const { return writer_.has_value(); }

    // One line per tick, in two steps: prepare() formats the tick's inputs
    // (before the tick's writes change `current`; `current` empty: the
    // tree's values), commit() adds the trims made after the tick and writes
    // the line. A failed write is a warning, said once until a write
    // succeeds again. commit() without a prepare() since the last writes nothing.
    void prepare(const Snapshot& snapshot, const KernelFeatures& features, uint64_t memory_total_override,
                 const CurrentProtections& current);
    void commit(const std::vector<PlannedTrim>& trims_made);

private:
    void start(const std::string& path, uint64_t max_bytes, TraceWriter::Start how, const TraceHeader& header);

    std::optional<TraceWriter> writer_;
    fmt::memory_buffer line_;  // one trace line, its capacity kept between ticks
    int64_t t0_us_ = -1;       // the first recorded sample's time: traces start at 0
    TraceHeader header_;       // the header the trace last stated (its interval is the samples')
    bool failed_ = false;
    bool pending_ = false;     // prepare() formatted a line that commit() has not written
};

}  // namespace memprotd
