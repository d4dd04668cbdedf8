// SPDX-License-Identifier: LGPL-2.1-or-later
#include "trim_runner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "file_io.h"
#include "sampler.h"
#include "trim.h"

namespace memprotd {

int TrimRunner::write(const std::string& path, const std::string& text) {
    const int64_t t0 = monotonic_us();
    const int err = write_control(path, text);
    const auto took = static_cast<uint64_t>(std::max<int64_t>(0, monotonic_us() - t0));
    stats_.total_write_us += took;
    stats_.max_write_us = std::max(stats_.max_write_us, took);
    return err;
}

bool TrimRunner::count(int err, const std::string& path, const std::string& text, bool einval_is_gone) {
    if (err == 0 || err == EAGAIN) {
        // EAGAIN: memory.reclaim gave up before reclaiming all it was asked.
        stats_.incomplete += err == EAGAIN ? 1 : 0;
        stats_.last_errno = 0;
        return true;
    }
    // ENOENT: the slice went away; EINVAL from lru_gen: the memcg did, or its
    // generations moved on since the sample.
    if (is_gone(err, einval_is_gone)) {
        ++stats_.vanished;
        spdlog::debug("trimming cheap cache: {}: \"{}\": {}", path, text, std::generic_category().message(err));
        return true;
    }
    ++stats_.failed;
    const std::string what =
        fmt::format("{}: cannot write \"{}\": {}", path, text, std::generic_category().message(err));
    if (err != stats_.last_errno)
        spdlog::warn("trimming cheap cache: {} (TrimCheapCache=no turns this off)", what);
    stats_.last_errno = err;
    stats_.last_error = what;
    return false;
}

bool TrimRunner::is_gone(int err, bool einval_is_gone) {
    return is_vanished(err) || (einval_is_gone && err == EINVAL);
}

bool TrimRunner::trim_one(const Plan& plan, const PlannedTrim& t, const LruGen* lru_gen, uint64_t page,
                          bool& asked, bool& wrote) {
    asked = wrote = false;
    const auto one = [&](const std::string& path, const std::string& text, bool einval_is_gone) {
        asked = true;
        const int err = write(path, text);
        wrote = wrote || err == 0 || err == EAGAIN;
        return count(err, path, text, einval_is_gone);
    };
    if (plan.trim_mechanism == TrimMechanism::Reclaim)
        return one(cgroup_root_ + t.cgroup + "/memory.reclaim", reclaim_command(t.bytes), false);
    if (plan.trim_mechanism != TrimMechanism::LruGen || lru_gen == nullptr)
        return true;
    for (const EvictRequest& r : plan_evictions(*lru_gen, t.cgroup, (t.bytes + page - 1) / page))
        if (!one(lru_gen_path_, r.command(), true))
            return false;
    return true;
}

std::vector<PlannedTrim> TrimRunner::run(const Plan& plan, const LruGen* lru_gen, uint64_t page_size) {
    const uint64_t page = page_size ? page_size : 4096;
    std::vector<PlannedTrim> made;
    for (const PlannedTrim& t : plan.trims) {
        bool asked = false, wrote = false;
        const bool ok = trim_one(plan, t, lru_gen, page, asked, wrote);
        if (asked) {
            ++stats_.trims;
            stats_.bytes += t.bytes;
        } else {
            ++stats_.skipped;
        }
        if (wrote)
            made.push_back(t);
        if (!ok)
            break;  // a refusal refuses every slice alike
    }
    return made;
}

}  // namespace memprotd
