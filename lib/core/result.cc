// SPDX-License-Identifier: LGPL-2.1-or-later
#include "result.h"

#include <fmt/format.h>

namespace memprotd {

std::string Error::to_string() const {
    std::string out;
    if (!file.empty()) {
        out += file;
        if (line > 0)
            out += fmt::format(":{}", line);
        out += ": ";
    }
    if (!key.empty())
        out += key + ": ";
    out += message;
    return out;
}

}  // namespace memprotd
