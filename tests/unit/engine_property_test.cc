// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Drives the engine through many random trees and sample sequences and checks
// its invariants after every tick: budgets hold at every level, no slice gets
// beyond its bounds, decreases precede increases, nothing is NaN, and
// neither constant input nor noise within the deadband keeps writing.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "engine.h"
#include "engine_fixture.h"

namespace memprotd {
namespace {

using namespace memprotd::testing;

class RandomHost {
public:
    explicit RandomHost(uint32_t seed) : rng_(seed) {}

    uint64_t size() {
        switch (pick(0, 9)) {
            case 0:
                return 0;
            case 1:
                return kUnlimited / pick(1, 4);
            case 2:
                return pick(0, 1u << 20);
            default:
                return pick(0, 64) * 256 * MiB + pick(0, 1u << 20);
        }
    }

    uint64_t pick(uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_); }

    std::vector<SliceSpec> tree() {
        std::vector<SliceSpec> out;
        const int top = static_cast<int>(pick(1, 12));
        for (int i = 0; i < top; ++i) {
            out.push_back(slice("s" + std::to_string(i) + ".slice", ""));
            const int kids = static_cast<int>(pick(0, 3));
            for (int k = 0; k < kids; ++k)
                out.push_back(slice("s" + std::to_string(i) + "-c" + std::to_string(k) + ".slice",
                                    "s" + std::to_string(i) + ".slice"));
        }
        return out;
    }

    SliceSpec slice(std::string unit, std::string parent) {
        SliceSpec s;
        s.unit = std::move(unit);
        s.parent = std::move(parent);
        s.anon = size();
        s.active_file = size() / 2;
        s.inactive_file = size();
        s.file_mapped = pick(0, 1) ? s.inactive_file / 3 : 0;
        s.slab_reclaimable = pick(0, 64) * MiB;
        return s;
    }

    // Counters move forward, sometimes backwards (a recreated cgroup).
    void advance(std::vector<SliceSpec>& slices) {
        for (auto& s : slices) {
            const bool reset = pick(0, 30) == 0;
            s.refault_file = reset ? 0 : s.refault_file + pick(0, 100000);
            s.refault_anon = reset ? 0 : s.refault_anon + pick(0, 1000);
            s.pgsteal = reset ? 0 : s.pgsteal + pick(0, 100000);
            s.activate_file = reset ? 0 : s.activate_file + pick(0, 50000);
            s.psi_some_us = reset ? 0 : s.psi_some_us + pick(0, 2'000'000);
            s.low_events += pick(0, 3) == 0 ? pick(0, 5) : 0;
            if (pick(0, 5) == 0)
                s.anon = size();
        }
    }

    Config config() {
        Config c;
        c.daemon.budget = SizeSpec::of_percent(static_cast<double>(pick(10, 100)));
        for (int i = 0; i < 12; ++i) {
            if (pick(0, 2) != 0)
                continue;
            SlicePolicy p;
            p.weight = static_cast<uint32_t>(pick(1, 10000));
            if (pick(0, 2) == 0)
                p.min_protection = SizeSpec::of_bytes(pick(0, 4) * GiB);
            if (pick(0, 2) == 0)
                p.max_protection = pick(0, 1) ? SizeSpec::of_percent(static_cast<double>(pick(1, 100)))
                                              : SizeSpec::of_bytes(pick(4, 16) * GiB);
            if (pick(0, 4) == 0)
                p.floor = SizeSpec::of_bytes(pick(0, 2) * GiB);
            c.policies.push_back(rule("s" + std::to_string(i) + "*.slice", p));
        }
        return c;
    }

private:
    std::mt19937_64 rng_;
};

void check_invariants(const Plan& plan, const std::string& where) {
    ASSERT_TRUE(std::isfinite(plan.budget_factor)) << where;
    ASSERT_LE(plan.budget, plan.memory_total) << where;
    uint64_t top_next = 0, top_target = 0;
    std::vector<uint64_t> kids_next(plan.slices.size()), kids_target(plan.slices.size());
    for (const auto& e : plan.slices) {
        const auto& x = e.x;
        ASSERT_TRUE(std::isfinite(x.refault_ratio) && std::isfinite(x.psi_some)) << where << e.unit;
        ASSERT_LE(x.target_min, x.target_low) << where << e.unit;
        // Above demand only by room lent to cold anon, and never above that.
        ASSERT_LE(x.demand, x.keep_demand) << where << e.unit;
        ASSERT_LE(x.target_low, x.bound == Bound::KeptAnon ? x.keep_demand : x.demand) << where << e.unit;
        if (x.floor <= x.max_protection) {
            ASSERT_LE(x.target_low, std::max(x.max_protection, x.target_min)) << where << e.unit;
        }
        if (!e.parent) {
            top_next += x.next.memory_low;
            top_target += x.target_low;
        } else {
            kids_next[*e.parent] += x.next.memory_low;
            kids_target[*e.parent] += x.target_low;
        }
    }
    ASSERT_LE(top_target, plan.budget) << where;
    ASSERT_LE(top_next, plan.budget) << where;
    for (size_t k = 0; k < plan.slices.size(); ++k) {
        ASSERT_LE(kids_target[k], plan.slices[k].x.target_low) << where << plan.slices[k].unit;
        ASSERT_LE(kids_next[k], plan.slices[k].x.next.memory_low) << where << plan.slices[k].unit;
    }
    bool increases = false;
    // A unit whose MemoryLow falls while its MemoryMin rises (or the other
    // way round) is written once in each phase, never more.
    std::set<std::pair<std::string, bool>> written;
    for (const auto& w : plan.writes) {
        ASSERT_TRUE(written.emplace(w.unit, w.decrease).second)
            << where << ": " << w.unit << " written twice in one phase";
        if (!w.decrease)
            increases = true;
        ASSERT_FALSE(w.decrease && increases) << where << ": a decrease after an increase";
    }
}

TEST(EngineProperties, InvariantsHoldOverRandomHostsAndSamples) {
    constexpr int kHosts = 300;
    constexpr int kTicks = 40;
    int ticks = 0;
    for (int h = 0; h < kHosts; ++h) {
        RandomHost host(static_cast<uint32_t>(h));
        Engine engine(host.config());
        auto slices = host.tree();
        const uint64_t total = host.pick(0, 9) == 0 ? kUnlimited : host.pick(1, 64) * GiB;
        const uint64_t swap = host.pick(0, 1) ? 4 * GiB : 0;
        CurrentProtections current;
        for (const auto& s : slices)
            if (host.pick(0, 3) == 0)
                current[s.unit] = {host.size(), 0};
        for (int t = 0; t < kTicks; ++t) {
            host.advance(slices);
            if (host.pick(0, 10) == 0 && slices.size() > 1) {
                // A slice vanishes (with its children), or a new one appears.
                const std::string gone = slices.back().unit;
                slices.pop_back();
                current.erase(gone);
            }
            if (host.pick(0, 10) == 0)
                slices.push_back(host.slice("new" + std::to_string(t) + ".slice", ""));
            auto snap = make_snapshot(
                slices, total,
                static_cast<int64_t>(t) * 5'000'000 + static_cast<int64_t>(host.pick(0, 4'000'000)), swap);
            snap.host_pressure->some.total_us = static_cast<uint64_t>(t) * host.pick(0, 400'000);
            const Plan plan = engine.tick(snap, KernelFeatures{}, current, 0);
            check_invariants(plan, "host " + std::to_string(h) + " tick " + std::to_string(t) + ": ");
            if (HasFatalFailure())
                return;
            apply_writes(plan, current);
            ++ticks;
        }
    }
    EXPECT_EQ(ticks, kHosts * kTicks);
}

TEST(EngineProperties, ConstantInputStopsTheWrites) {
    for (int h = 0; h < 100; ++h) {
        RandomHost host(static_cast<uint32_t>(1000 + h));
        Engine engine(host.config());
        const auto slices = host.tree();
        CurrentProtections current;
        int last_write = -1;
        int writes_in_last_minute = 0;
        for (int t = 0; t < 400; ++t) {
            const Plan plan =
                engine.tick(make_snapshot(slices, 32 * GiB, static_cast<int64_t>(t) * 5'000'000),
                            KernelFeatures{}, current);
            if (!plan.writes.empty())
                last_write = t;
            if (t >= 388)
                writes_in_last_minute += static_cast<int>(plan.writes.size());
            apply_writes(plan, current);
        }
        EXPECT_EQ(writes_in_last_minute, 0)
            << "host " << h << " still writing; last write at tick " << last_write;
    }
}

// Real hosts are never constant: usage jitters and counters advance at
// slightly different rates every interval. Noise well inside the deadband
// must not turn into a write storm: once converged, no unit is written more
// than once in the last ten minutes.
TEST(EngineProperties, NoisyButSteadyInputStopsTheWrites) {
    for (int h = 0; h < 100; ++h) {
        RandomHost host(static_cast<uint32_t>(2000 + h));
        Engine engine(host.config());
        const auto base = host.tree();
        auto slices = base;
        CurrentProtections current;
        std::map<std::string, int> late_writes;
        constexpr int kTicks = 600;  // 50 min at 5 s
        for (int t = 0; t < kTicks; ++t) {
            for (size_t i = 0; i < slices.size(); ++i) {
                auto& s = slices[i];
                const auto jitter = [&](uint64_t v) {  // ±0.25%, not wrapping near 2^64
                    return v > kUnlimited / 2 ? v : v - v / 400 + host.pick(0, v / 200);
                };
                s.anon = jitter(base[i].anon);
                s.inactive_file = jitter(base[i].inactive_file);
                s.active_file = jitter(base[i].active_file);
                s.refault_file += 1000 + host.pick(0, 100);
                s.pgsteal += 20000 + host.pick(0, 2000);
                s.activate_file += 500 + host.pick(0, 50);
                s.psi_some_us += 1000 + host.pick(0, 100);
            }
            const Plan plan =
                engine.tick(make_snapshot(slices, 32 * GiB, static_cast<int64_t>(t) * 5'000'000),
                            KernelFeatures{}, current);
            if (t >= kTicks - 120)
                for (const auto& w : plan.writes) ++late_writes[w.unit];
            apply_writes(plan, current);
        }
        for (const auto& [unit, n] : late_writes)
            EXPECT_LE(n, 1) << "host " << h << ": " << unit << " written " << n
                            << " times in the last 10 min";
    }
}

}  // namespace
}  // namespace memprotd
