// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Single-value files: memory.current/min/low/high/max and lru_gen/enabled.
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

    const Result<uint64_t> r = parse_u64_or_max(text, fuzz::kFile);
    if (r.ok()) {
        // What was read must read back the same when printed canonically.
        const std::string printed = *r == kUnlimited ? "max" : std::to_string(*r);
        const Result<uint64_t> again = parse_u64_or_max(printed + "\n", fuzz::kFile);
        FUZZ_CHECK(again.ok() && *again == *r);
    } else {
        fuzz::check_error(r.error());
    }

    const Result<uint32_t> e = parse_lru_gen_enabled(text, fuzz::kFile);
    if (e.ok()) {
        const Result<uint32_t> again = parse_lru_gen_enabled(fmt::format("0x{:04x}\n", *e), fuzz::kFile);
        FUZZ_CHECK(again.ok() && *again == *e);
    } else {
        fuzz::check_error(e.error());
    }
    return 0;
}
