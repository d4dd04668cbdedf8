// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The probe's text inputs: /proc/self/mounts (or mountinfo) and
// cgroup.controllers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const std::optional<std::string> opts = cgroup2_mount_options(text, "/sys/fs/cgroup");
    if (opts)
        FUZZ_CHECK(opts->find('\n') == std::string::npos);
    (void)cgroup2_mount_options(text, "/mnt/a b\\c");

    // A name that is found must occur in the text.
    for (const std::string_view c : {"memory", "cpu", ""})
        if (controllers_contain(text, c))
            FUZZ_CHECK(!c.empty() && text.find(c) != std::string_view::npos);
    return 0;
}
