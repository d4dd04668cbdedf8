// SPDX-License-Identifier: LGPL-2.1-or-later
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const Result<Meminfo> r = parse_meminfo(text, fuzz::kFile);
    if (!r.ok()) {
        fuzz::check_error(r.error());
        return 0;
    }
    // Values are whole kB converted without wrapping.
    for (const uint64_t v : {r->mem_total, r->mem_available, r->swap_total, r->swap_free, r->mem_free.value_or(0)})
        FUZZ_CHECK(v % 1024 == 0);
    return 0;
}
