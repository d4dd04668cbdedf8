// SPDX-License-Identifier: LGPL-2.1-or-later
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    // One MemoryStat for the whole run, as the sampler keeps one per cgroup:
    // storage reuse across parses of different shapes is part of the test.
    static MemoryStat stat;
    const Status st = parse_memory_stat(text, fuzz::kFile, stat);
    if (!st.ok()) {
        fuzz::check_error(st.error());
        return 0;
    }
    FUZZ_CHECK(!stat.empty());
    // The engine's O(1) table agrees with looking the key up.
    for (size_t i = 0; i < static_cast<size_t>(StatKey::Count); ++i) {
        const auto k = static_cast<StatKey>(i);
        FUZZ_CHECK(stat.known(k) == stat.get(stat_key_name(k)));
    }

    // Printing the entries as the kernel does must give them back unchanged:
    // this crosses the single-pass path with whatever path the input took.
    std::string printed;
    for (const auto& e : stat.entries()) {
        FUZZ_CHECK(!e.key.empty());
        printed += e.key + " " + std::to_string(e.value) + "\n";
    }
    MemoryStat again;
    FUZZ_CHECK(parse_memory_stat(printed, fuzz::kFile, again).ok());
    FUZZ_CHECK(again.size() == stat.size());
    for (size_t i = 0; i < stat.size(); ++i) {
        FUZZ_CHECK(again.entries()[i].key == stat.entries()[i].key);
        FUZZ_CHECK(again.entries()[i].value == stat.entries()[i].value);
    }
    return 0;
}
