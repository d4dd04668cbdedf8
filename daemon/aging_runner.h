// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Working-set aging (WorkingSetAging=): after a plan is applied, ages the
// memcgs of the managed slices through debugfs lru_gen on the schedule
// lib/core/aging.h fixes (aged_slices, plan_aging), and keeps count.
//
// Threading: the loop thread only; each write blocks it while the kernel
// walks the memcg's page tables.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "lru_gen_ager.h"
#include "model.h"
#include "plan.h"

namespace memprotd {

// Since start: memcgs aged, memcgs gone before their write (EINVAL), ticks
// whose aging failed, and the last failure ("" if none; last_errno 0 once a
// write succeeds again). Each write is timed: the slowest one, and the time
// all of them took.
struct AgingStats {
    uint64_t aged = 0;
    uint64_t vanished = 0;
    uint64_t failed = 0;
    uint64_t max_write_us = 0;
    uint64_t total_write_us = 0;
    int last_errno = 0;
    std::string last_error;
};

class AgingRunner {
public:
    // `lru_gen_path`: debugfs's lru_gen file.
    explicit AgingRunner(std::string lru_gen_path) : ager_(std::move(lru_gen_path)) {}

    // Ages what `lru_gen` (this tick's sample) says is due for the plan's
    // slices. A failure other than a vanished memcg stops this tick's aging
    // and is logged once until the error changes.
    void run(const LruGen& lru_gen, const Plan& plan);

    [[nodiscard]] const AgingStats& stats() const { return stats_; }

private:
    LruGenAger ager_;
    AgingStats stats_;
};

}  // namespace memprotd
