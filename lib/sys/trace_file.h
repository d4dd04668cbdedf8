// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Trace files (docs/trace.md) as lines: a writer that starts, appends to or
// rotates a file, and never fsyncs (a trace is diagnostic). What the lines
// say is lib/json/trace.h's business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "file_io.h"
#include "result.h"

namespace memprotd {

class TraceWriter {
public:
    enum class Start {
        Truncate,  // a new trace; an existing file is overwritten
        Append,    // continue an existing trace (it must exist); its header stays
        Rotate,    // a new trace; an existing non-empty file is rotated first
    };

    // `max_bytes` (0 = no cap): once a write would take FILE beyond it,
    // FILE becomes FILE.1 (FILE.1 becomes FILE.2 and so on, up to
    // `old_files`; the oldest is removed) and a new FILE starts with the
    // same header. So at most (old_files + 1) × max_bytes (plus one line)
    // are ever kept.
    TraceWriter(std::string path, uint64_t max_bytes, int old_files);

    // Opens the file; `header_line` (no newline) starts a new one.
    Status open(Start start, std::string header_line);
    // Writes `lines` (whole lines, each ending in '\n') at once, rotating
    // first when the cap requires it.
    Status write(std::string_view lines);
    // Makes `header_line` (no newline) the trace's header from here on: it
    // is written as a line within the trace, or replaces the header of a
    // file with no line after it, or starts the new file when the cap
    // rotates first; and it starts every file rotated later.
    Status restate(std::string header_line);
    // The file holds its header and nothing after it.
    [[nodiscard]] bool only_header() const { return size_ <= header_.size(); }

    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] uint64_t size() const { return size_; }
    [[nodiscard]] uint64_t max_bytes() const { return max_bytes_; }

private:
    Status rotate();
    Status open_new();
    Status write_all(std::string_view bytes);

    std::string path_;
    uint64_t max_bytes_;
    int old_files_;
    std::string header_;
    UniqueFd fd_;
    uint64_t size_ = 0;
};

// The whole file; the Error names the file and what went wrong.
Result<std::string> read_trace_file(const std::string& path);

}  // namespace memprotd
