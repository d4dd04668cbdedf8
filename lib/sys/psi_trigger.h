// SPDX-License-Identifier: LGPL-2.1-or-later
//
// PSI triggers (Documentation/accounting/psi.rst in the kernel): an fd on a
// cgroup's memory.pressure that polls EPOLLPRI when the stall time within a
// window exceeds a threshold, and EPOLLERR once the cgroup is removed (then
// it must be closed). One trigger per fd.
#pragma once

#include <cstdint>
#include <string>

#include "file_io.h"
#include "result.h"

namespace memprotd {

// The kernel accepts windows of 500 ms..10 s; without CAP_SYS_RESOURCE
// (kernel ≥ 6.5) only multiples of 2 s.
inline constexpr uint64_t kPsiUnprivilegedWindowUs = 2'000'000;
inline constexpr uint64_t kPsiMinWindowUs = 500'000;
inline constexpr uint64_t kPsiMaxWindowUs = 10'000'000;

// Whether CAP_SYS_RESOURCE is in the effective set (capget).
bool have_cap_sys_resource();

// `window_us` rounded up to the next multiple of 2 s (at most 10 s).
uint64_t unprivileged_window_us(uint64_t window_us);

class PsiTrigger {
public:
    PsiTrigger() = default;

    // Opens `pressure_path` (a memory.pressure or /proc/pressure/memory)
    // and arms "some <threshold_us> <window_us>". The window is clamped to
    // the kernel's range and rounded to 2 s when we lack CAP_SYS_RESOURCE,
    // or when the kernel refuses the exact one with EINVAL/EPERM. Refuses
    // files that are not on cgroup2 or procfs: writing a trigger into a
    // regular file (a fake tree) would overwrite it.
    static Result<PsiTrigger> open(const std::string& pressure_path, uint64_t threshold_us, uint64_t window_us);

    [[nodiscard]] int fd() const { return fd_.get(); }
    [[nodiscard]] bool valid() const { return fd_.valid(); }
    [[nodiscard]] uint64_t window_us() const { return window_us_; }
    [[nodiscard]] const std::string& path() const { return path_; }
    void close() { fd_.reset(); }

private:
    UniqueFd fd_;
    std::string path_;
    uint64_t window_us_ = 0;
};

}  // namespace memprotd
