// SPDX-License-Identifier: LGPL-2.1-or-later
#include "aging_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "aging.h"
#include "sampler.h"

namespace memprotd {

namespace {

// An aging write that takes this long is logged (the loop waits for it).
constexpr uint64_t kSlowAgingUs = 1'000'000;

}  // namespace

void AgingRunner::run(const LruGen& lru_gen, const Plan& plan) {
    // The daemon's loop waits for the writes; a slow one is worth a line,
    // one per tick at most.
    uint64_t slowest = 0;
    std::string slowest_path;
    for (const AgingRequest& r : plan_aging(lru_gen, aged_slices(plan))) {
        const int64_t t0 = monotonic_us();
        const int err = ager_.age(r);
        const auto took = static_cast<uint64_t>(std::max<int64_t>(0, monotonic_us() - t0));
        stats_.total_write_us += took;
        stats_.max_write_us = std::max(stats_.max_write_us, took);
        if (took > slowest) {
            slowest = took;
            slowest_path = r.path;
        }
        if (err == 0) {
            ++stats_.aged;
            stats_.last_errno = 0;
            continue;
        }
        const Error e = ager_.error(r, err);
        // EINVAL: the memcg went away between the sample and the write.
        if (err == EINVAL) {
            ++stats_.vanished;
            spdlog::debug("working-set aging: {}", e.to_string());
            continue;
        }
        // Anything else (a read-only sandbox, no permission) refuses every
        // memcg alike: said once until it changes, tried again next tick.
        ++stats_.failed;
        if (err != stats_.last_errno)
            spdlog::warn("working-set aging: {}; protected slices' working sets may be overstated "
                         "(WorkingSetAging=no turns this off)",
                         e.to_string());
        stats_.last_errno = err;
        stats_.last_error = e.to_string();
        break;
    }
    if (slowest >= kSlowAgingUs)
        spdlog::info("working-set aging took {:.1f} s for {} (the slowest write this tick)",
                     static_cast<double>(slowest) / 1e6, slowest_path);
}

}  // namespace memprotd
