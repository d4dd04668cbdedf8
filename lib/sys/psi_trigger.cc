// SPDX-License-Identifier: LGPL-2.1-or-later
#include "psi_trigger.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace memprotd {

namespace {

int arm(int fd, uint64_t threshold_us, uint64_t window_us) {
    // The kernel wants the trigger string in a single write, NUL included
    // or not; it parses up to the first NUL.
    const std::string text = "some " + std::to_string(threshold_us) + " " + std::to_string(window_us);
    const ssize_t n = ::write(fd, text.c_str(), text.size() + 1);
    return n < 0 ? errno : 0;
}

}  // namespace

bool have_cap_sys_resource() {
    __user_cap_header_struct header{};
    header.version = _LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    // glibc has no capget wrapper and libcap is not worth a dependency for
    // one bit.
    if (::syscall(SYS_capget, &header, data) != 0)
        return false;
    constexpr unsigned kCap = CAP_SYS_RESOURCE;
    return (data[kCap / 32].effective & (1U << (kCap % 32))) != 0;
}

uint64_t unprivileged_window_us(uint64_t window_us) {
    const uint64_t w = (window_us + kPsiUnprivilegedWindowUs - 1) / kPsiUnprivilegedWindowUs * kPsiUnprivilegedWindowUs;
    return std::clamp<uint64_t>(w, kPsiUnprivilegedWindowUs, kPsiMaxWindowUs);
}

Result<PsiTrigger> PsiTrigger::open(const std::string& pressure_path, uint64_t threshold_us, uint64_t window_us) {
    PsiTrigger t;
    t.path_ = pressure_path;
    t.fd_ = UniqueFd(::open(pressure_path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!t.fd_)
        return Error{pressure_path, 0, "", std::string("cannot open: ") + std::strerror(errno)};

    struct statfs fs {};
    if (::fstatfs(t.fd_.get(), &fs) != 0)
        return Error{pressure_path, 0, "", std::string("fstatfs: ") + std::strerror(errno)};
    if (fs.f_type != CGROUP2_SUPER_MAGIC && fs.f_type != PROC_SUPER_MAGIC)
        return Error{pressure_path, 0, "", "not on cgroup2 or procfs: no PSI trigger possible"};

    uint64_t window = std::clamp(window_us, kPsiMinWindowUs, kPsiMaxWindowUs);
    if (!have_cap_sys_resource())
        window = unprivileged_window_us(window);
    threshold_us = std::min(threshold_us, window);

    int err = arm(t.fd_.get(), threshold_us, window);
    if ((err == EINVAL || err == EPERM) && window != unprivileged_window_us(window)) {
        // A capability check we could not see (user namespaces) or a
        // kernel that restricts windows anyway: fall back to 2 s steps.
        window = unprivileged_window_us(window);
        err = arm(t.fd_.get(), std::min(threshold_us, window), window);
    }
    if (err != 0)
        return Error{pressure_path, 0, "",
                     "cannot arm trigger \"some " + std::to_string(threshold_us) + " " + std::to_string(window) +
                         "\": " + std::strerror(err)};
    t.window_us_ = window;
    return t;
}

}  // namespace memprotd
