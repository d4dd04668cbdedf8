// SPDX-License-Identifier: LGPL-2.1-or-later
#include "lru_gen_ager.h"

#include <cerrno>
#include <system_error>

#include "file_io.h"

namespace memprotd {

int LruGenAger::age(const AgingRequest& request) const { return write_control(path_, request.command()); }

Error LruGenAger::error(const AgingRequest& request, int err) const {
    return Error{path_, 0, {},
                 "cannot write \"" + request.command() + "\" (" + request.path + "): " +
                     std::generic_category().message(err)};
}

}  // namespace memprotd
