// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Trimming cheap cache (TrimCheapCache=): after a plan is applied, asks the
// kernel for the plan's trims (Plan::trims, engine step 7) with the plan's
// mechanism (lib/core/trim.h): eviction commands to debugfs lru_gen, or
// "BYTES swappiness=0" to the slice's memory.reclaim. A kernel write beside
// the aging writes; systemd stays the only writer of protection values.
//
// Threading: the loop thread only; each write blocks it while the kernel
// reclaims.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model.h"
#include "plan.h"

namespace memprotd {

// Since start: trims asked of the kernel and their bytes, the ones it could
// not complete (EAGAIN: it reclaimed less than asked), trims with nothing
// to write (no lru_gen sample, or nothing outside the two youngest
// generations), slices gone before their write, failures and the last one
// ("" if none); each write timed.
struct TrimStats {
    uint64_t trims = 0;
    uint64_t bytes = 0;
    uint64_t skipped = 0;
    uint64_t incomplete = 0;
    uint64_t vanished = 0;
    uint64_t failed = 0;
    uint64_t max_write_us = 0;
    uint64_t total_write_us = 0;
    int last_errno = 0;
    std::string last_error;
};

class TrimRunner {
public:
    // `cgroup_root`: the cgroup2 mount; `lru_gen_path`: debugfs's lru_gen file.
    TrimRunner(std::string cgroup_root, std::string lru_gen_path)
        : cgroup_root_(std::move(cgroup_root)), lru_gen_path_(std::move(lru_gen_path)) {}

    // Makes the plan's trims and returns those the kernel took (at least one
    // of its commands written);
    // `lru_gen` is this tick's sample (lru-gen needs it; without it nothing
    // is evicted). A refusal (anything but a vanished slice or an incomplete
    // reclaim: a read-only sandbox, no permission, a kernel that rejects the
    // command) stops this tick's trims and is logged once until it changes.
    std::vector<PlannedTrim> run(const Plan& plan, const LruGen* lru_gen, uint64_t page_size);

    [[nodiscard]] const TrimStats& stats() const { return stats_; }

    // Whether a write's errno means the target went away (counted, not an
    // error): ENOENT or ENODEV, and EINVAL where it means a memcg ID or
    // generation that moved on (lru_gen writes, `einval_is_gone`); from
    // memory.reclaim EINVAL is a kernel that rejects the command.
    [[nodiscard]] static bool is_gone(int err, bool einval_is_gone);

private:
    // One write, timed; its errno (0: done, EAGAIN: done in part).
    int write(const std::string& path, const std::string& text);
    // Counts a write's outcome; false when the kernel refused it (is_gone
    // says what is no refusal).
    bool count(int err, const std::string& path, const std::string& text, bool einval_is_gone);
    // One trim: false on a refusal; `wrote` says whether the kernel took at
    // least one of its commands, `asked` whether there was one to give.
    bool trim_one(const Plan& plan, const PlannedTrim& t, const LruGen* lru_gen, uint64_t page, bool& asked,
                  bool& wrote);

    std::string cgroup_root_;
    std::string lru_gen_path_;
    TrimStats stats_;
};

}  // namespace memprotd
