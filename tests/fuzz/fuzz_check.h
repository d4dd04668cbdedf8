// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Shared by the libFuzzer targets: a failed invariant must stop the fuzzer
// with a crash it can minimise, in every build type (assert() is compiled out
// with NDEBUG).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "result.h"

#define FUZZ_CHECK(cond)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                 \
        }                                                                                 \
    } while (0)

namespace memprotd::fuzz {

inline constexpr std::string_view kFile = "fuzz-input";

// Every error must say where it came from and what was wrong, and render.
inline void check_error(const Error& e) {
    FUZZ_CHECK(e.file == kFile);
    FUZZ_CHECK(e.line >= 0);
    FUZZ_CHECK(!e.message.empty());
    FUZZ_CHECK(!e.to_string().empty());
}

}  // namespace memprotd::fuzz
