// SPDX-License-Identifier: LGPL-2.1-or-later
#include "recorder.h"

#include <spdlog/spdlog.h>

#include "memprotd-config.h"
#include "trace.h"

namespace memprotd {

void Recorder::configure(const std::string& path, uint64_t max_bytes, const DaemonConfig& daemon,
                         const KernelFeatures& features) {
    if (path.empty()) {
        if (writer_)
            spdlog::info("recording to {} stopped", writer_->path());
        writer_.reset();
        return;
    }
    const TraceHeader header{kTraceVersion, MEMPROTD_VERSION, features.kernel_release, "memprotd",
                             daemon.interval_us, engine_settings(daemon)};
    const bool same_trace = writer_ && writer_->path() == path && writer_->max_bytes() == max_bytes &&
                            header_.interval_us == header.interval_us;
    if (same_trace) {
        // The trace goes on under other settings: a header within it says so.
        if (header_.engine_config != header.engine_config) {
            header_ = header;
            if (Status s = writer_->restate(trace_header_line(header)); !s)
                spdlog::warn("trace: {} (the tick goes on)", s.error().to_string());
        }
        return;
    }
    // A new trace each time: an earlier one is rotated, not continued (the
    // monotonic clock of an earlier boot or run does not continue, and the
    // header's interval must be the samples'). A file of this path that
    // holds only its header is started again in place.
    const bool fresh = writer_ && writer_->path() == path && writer_->only_header();
    start(path, max_bytes, fresh ? TraceWriter::Start::Truncate : TraceWriter::Start::Rotate, header);
}

void Recorder::start(const std::string& path, uint64_t max_bytes, TraceWriter::Start how, const TraceHeader& header) {
    writer_.emplace(path, max_bytes, /*old_files=*/1);
    t0_us_ = -1;
    pending_ = false;
    header_ = header;
    if (Status s = writer_->open(how, trace_header_line(header)); !s) {
        spdlog::warn("not recording: {}", s.error().to_string());
        writer_.reset();
        return;
    }
    if (how == TraceWriter::Start::Rotate)
        spdlog::info("recording the engine's inputs to {} (rotated at {} bytes, one old file kept)", path,
                     max_bytes);
}

void Recorder::prepare(const Snapshot& snapshot, const KernelFeatures& features, uint64_t memory_total_override,
                       const CurrentProtections& current) {
    pending_ = false;
    if (!writer_)
        return;
    if (t0_us_ < 0)
        t0_us_ = snapshot.timestamp_us;
    line_.clear();
    append_trace_sample(line_, snapshot, features, memory_total_override, current.empty() ? nullptr : &current,
                        t0_us_);
    pending_ = true;
}

void Recorder::commit(const std::vector<PlannedTrim>& trims_made) {
    if (!writer_ || !pending_)
        return;
    pending_ = false;
    append_trace_trims(line_, trims_made);
    if (Status s = writer_->write({line_.data(), line_.size()}); !s) {
        if (!failed_)
            spdlog::warn("trace: {} (the tick goes on; warned once until a write succeeds)", s.error().to_string());
        failed_ = true;
    } else {
        failed_ = false;
    }
}

}  // namespace memprotd
