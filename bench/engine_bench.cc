// SPDX-License-Identifier: LGPL-2.1-or-later
//
// One engine tick over N slices: a quarter top-level, the rest nested one
// level below, with policies matching a third of them by glob, counters that
// advance every tick so the rate and damping paths all run; with and
// without debugfs lru_gen. Host memory grows with N (128 MiB a slice), so
// that every N runs in the same regime: the top-level slices' demands sum to
// about 1.03× the budget (70% of it), so the split water-fills at every N.
//
// The steady state the daemon runs in: the Manager passes the engine one
// Snapshot that the sampler refills in place every tick (its storage
// reused), so the bench does the same, outside the timed region (manual
// time: the tick and applying its writes), after two warm-up ticks (the
// first creates every slice's state and policy).
//
// Arg 2 (cold): the daemon ticks once an Interval= (seconds), and the host's
// workloads run between ticks, so a real tick finds the engine's state out
// of the CPU caches at any N. Cold runs stream through a buffer larger than
// the last-level cache before the refill (outside the timed region); warm
// runs keep whatever the previous tick left cached, which at 1,000 slices is
// all of it and at 10,000 is not.
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "alloc_count.h"
#include "engine.h"
#include "engine_fixture.h"

namespace {

using namespace memprotd;
using namespace memprotd::testing;

std::vector<SliceSpec> make_slices(int n) {
    std::vector<SliceSpec> out;
    const int top = std::max(1, n / 4);
    for (int i = 0; i < top; ++i) {
        SliceSpec s;
        s.unit = "t" + std::to_string(i) + ".slice";
        s.anon = static_cast<uint64_t>(64 + i % 512) * MiB;
        s.inactive_file = static_cast<uint64_t>(32 + i % 300) * MiB;
        s.active_file = 16 * MiB;
        out.push_back(s);
    }
    for (int i = top; i < n; ++i) {
        SliceSpec s;
        const int parent = i % top;
        s.parent = "t" + std::to_string(parent) + ".slice";
        s.unit = "t" + std::to_string(parent) + "-c" + std::to_string(i) + ".slice";
        s.anon = static_cast<uint64_t>(16 + i % 128) * MiB;
        s.inactive_file = static_cast<uint64_t>(8 + i % 64) * MiB;
        out.push_back(s);
    }
    return out;
}

// Debugfs lru_gen as MGLRU prints it for these slices: each slice's memcg
// and one service in it, two generations each (the young one within the
// window).
LruGen lru_gen_of(const Snapshot& snap) {
    LruGen lg;
    uint64_t id = 1;
    for (const CgroupSample& cg : snap.cgroups) {
        const LruGenNode node{0, {{10, 90'000, 1000, 2000}, {11, 1'000, 3000, 4000}}};
        lg.memcgs.push_back({id++, cg.path, {node}});
        lg.memcgs.push_back({id++, cg.path + "/app.service", {node}});
    }
    return lg;
}

// What the sampler does between ticks: counters advanced, memory.stat
// parsed again into the storage it had.
void refill(Snapshot& snap, std::vector<SliceSpec>& slices) {
    for (size_t i = 0; i < slices.size(); ++i) {
        SliceSpec& s = slices[i];
        s.refault_file += 100;
        s.pgsteal += 1000;
        s.psi_some_us += 1000;
        const CgroupSample fresh = make_cgroup(s);
        CgroupSample& cg = snap.cgroups[i];
        cg.stat.clear();
        for (const auto& e : fresh.stat.entries())
            cg.stat.append(e.key, e.value);
        cg.pressure = fresh.pressure;
    }
}

// Writes every cache line of a 64 MiB buffer (twice this machine's 32 MiB
// L3), evicting what the previous tick left in the caches.
void evict_caches() {
    static std::vector<char> buffer(64U << 20);
    static char round = 0;
    ++round;
    for (size_t i = 0; i < buffer.size(); i += 64)
        buffer[i] = round;
    benchmark::ClobberMemory();
}

// Arg 0: slices; arg 1: 1 = with debugfs lru_gen (a memcg per slice and one
// per service), where each slice's working set sums its memcgs'.
void BM_EngineTick(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    const bool lru_gen = state.range(1) != 0;
    const bool cold = state.range(2) != 0;
    Config config;
    for (int g = 0; g < 10; ++g)
        config.policies.push_back(rule("t" + std::to_string(g) + "*.slice", weight(static_cast<uint32_t>(100 + g * 50))));
    Engine engine(config);
    auto slices = make_slices(n);
    Snapshot snap = make_snapshot(slices, static_cast<uint64_t>(n) * 128 * MiB, 0);
    if (lru_gen)
        snap.lru_gen = lru_gen_of(snap);
    CurrentProtections current;
    const auto tick = [&] {
        snap.timestamp_us += 5'000'000;
        Plan plan = engine.tick(snap, KernelFeatures{}, current);
        for (const auto& w : plan.writes)
            current[w.unit] = w.values;
        benchmark::DoNotOptimize(plan);
    };
    for (int warm = 0; warm < 2; ++warm) {
        refill(snap, slices);
        tick();
    }
    uint64_t allocs = 0;
    for (auto _ : state) {
        if (cold)
            evict_caches();
        refill(snap, slices);
        const uint64_t a0 = heap_allocations();
        const auto t0 = std::chrono::steady_clock::now();
        tick();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        allocs += heap_allocations() - a0;
    }
    state.SetItemsProcessed(state.iterations() * n);
    state.counters["allocs_per_slice"] =
        static_cast<double>(allocs) / static_cast<double>(state.iterations()) / static_cast<double>(n);
}
BENCHMARK(BM_EngineTick)
    ->ArgsProduct({{10, 100, 1000, 10000}, {0, 1}, {0}})
    ->ArgsProduct({{1000, 10000}, {0, 1}, {1}})
    ->ArgNames({"slices", "lru_gen", "cold"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
