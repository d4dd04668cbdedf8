// SPDX-License-Identifier: LGPL-2.1-or-later
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "parse.h"

namespace {

void check_line(const memprotd::PsiLine& l) {
    // Only plain decimals are accepted, so nothing negative, NaN or infinite
    // may come out (the engine divides and compares with these).
    for (const double v : {l.avg10, l.avg60, l.avg300})
        FUZZ_CHECK(std::isfinite(v) && v >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const Result<Psi> r = parse_psi(text, fuzz::kFile);
    if (!r.ok()) {
        fuzz::check_error(r.error());
        return 0;
    }
    check_line(r->some);
    if (r->full)
        check_line(*r->full);
    return 0;
}
