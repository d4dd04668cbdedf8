// SPDX-License-Identifier: LGPL-2.1-or-later
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "fuzz_check.h"
#include "parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const Result<MemoryEvents> r = parse_memory_events(text, fuzz::kFile);
    if (!r.ok()) {
        fuzz::check_error(r.error());
        return 0;
    }
    const MemoryEvents& ev = *r;
    const std::string printed = fmt::format("low {}\nhigh {}\nmax {}\noom {}\noom_kill {}\noom_group_kill {}\n",
                                            ev.low, ev.high, ev.max, ev.oom, ev.oom_kill, ev.oom_group_kill);
    const Result<MemoryEvents> again = parse_memory_events(printed, fuzz::kFile);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->low == ev.low && again->high == ev.high && again->max == ev.max);
    FUZZ_CHECK(again->oom == ev.oom && again->oom_kill == ev.oom_kill && again->oom_group_kill == ev.oom_group_kill);
    return 0;
}
