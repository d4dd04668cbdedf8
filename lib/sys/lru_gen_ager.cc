// SPDX-License-Identifier: LGPL-2.1-or-later
#include "lru_gen_ager.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "file_io.h"

namespace memprotd {

int LruGenAger::age(const AgingRequest& request) const {
    const std::string cmd = request.command();
    // No O_CREAT: this is a control file, never one to make.
    UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd)
        return errno;
    const ssize_t n = ::write(fd.get(), cmd.data(), cmd.size());
    if (n < 0)
        return errno;
    return static_cast<size_t>(n) == cmd.size() ? 0 : EIO;
}

Error LruGenAger::error(const AgingRequest& request, int err) const {
    return Error{path_, 0, {},
                 "cannot write \"" + request.command() + "\" (" + request.path + "): " +
                     std::generic_category().message(err)};
}

}  // namespace memprotd
