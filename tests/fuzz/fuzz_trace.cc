// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Trace lines (lib/json/trace.h), as simulate --replay reads them: an error
// names the line, and whatever parses writes back to a line that parses to
// the same line again.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    if (const Result<TraceHeader> h = parse_trace_header(text, 1); !h.ok()) {
        FUZZ_CHECK(h.error().line == 1);
        FUZZ_CHECK(!h.error().message.empty());
    } else {
        FUZZ_CHECK(h->version <= kTraceVersion);
    }

    const Result<TraceSample> s = parse_trace_sample(text, 7);
    if (!s.ok()) {
        FUZZ_CHECK(s.error().line == 7);
        FUZZ_CHECK(!s.error().message.empty());
        return 0;
    }
    // What parses writes back (trims made included) and reads back the same.
    const auto line_of = [](const TraceSample& t) {
        fmt::memory_buffer buf;
        append_trace_sample(buf, t.snapshot, t.features, t.memory_total_override);
        append_trace_trims(buf, t.trims_made);
        return std::string(buf.data(), buf.size() - 1);
    };
    const std::string once = line_of(*s);
    const Result<TraceSample> back = parse_trace_sample(once, 7);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->trims_made.size() == s->trims_made.size());
    FUZZ_CHECK(once == line_of(*back));
    return 0;
}
