// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The cost of recording (memprotd --record, Record=): one trace line for a
// snapshot of N slices, as the daemon writes it each tick, and reading it
// back (simulate --replay). Items are slice-samples; the bytes_per_slice
// counter is the line's size over N. Compare with bench-engine's tick.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "engine_fixture.h"
#include "trace.h"

namespace {

using namespace memprotd;
using namespace memprotd::testing;

// Sizes and counters of a busy host: nine- to eleven-digit byte counts and
// counters in the millions, a quarter of the slices top-level.
Snapshot make_host(int n) {
    std::vector<SliceSpec> slices;
    const int top = std::max(1, n / 4);
    for (int i = 0; i < n; ++i) {
        SliceSpec s;
        s.unit = i < top ? "t" + std::to_string(i) + ".slice"
                         : "t" + std::to_string(i % top) + "-c" + std::to_string(i) + ".slice";
        if (i >= top)
            s.parent = "t" + std::to_string(i % top) + ".slice";
        s.anon = static_cast<uint64_t>(640 + i % 512) * MiB + 12345;
        s.active_file = static_cast<uint64_t>(100 + i % 64) * MiB;
        s.inactive_file = static_cast<uint64_t>(320 + i % 300) * MiB;
        s.file_mapped = 37 * MiB;
        s.file_dirty = 123ULL * 4096;
        s.slab_reclaimable = 9 * MiB + 4096;
        s.refault_file = 1'234'567 + static_cast<uint64_t>(i);
        s.refault_anon = 45'678;
        s.pgsteal = 9'876'543;
        s.activate_file = 345'678;
        s.psi_some_us = 123'456'789;
        s.low_events = 12;
        s.low = static_cast<uint64_t>(512 + i % 100) * MiB;
        slices.push_back(s);
    }
    // Slices sorted parents first, as the sampler gives them.
    std::stable_sort(slices.begin(), slices.end(),
                     [](const SliceSpec& a, const SliceSpec& b) { return a.parent.empty() && !b.parent.empty(); });
    return make_snapshot(slices, 256 * GiB, 123'456'789'000, 8 * GiB);
}

KernelFeatures features() {
    KernelFeatures f;
    f.cgroup2 = f.memory_controller = f.psi = f.mglru_present = f.mglru_enabled = true;
    f.mglru_flags = 7;
    f.kernel_release = "6.1.0-28-amd64";
    return f;
}

void BM_TraceWriteSample(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    const Snapshot snap = make_host(n);
    const KernelFeatures f = features();
    fmt::memory_buffer buf;  // as the daemon does: one buffer, reused
    for (auto _ : state) {
        buf.clear();
        append_trace_sample(buf, snap, f, 0, nullptr, 0);
        benchmark::DoNotOptimize(buf.data());
    }
    state.SetItemsProcessed(state.iterations() * n);
    state.counters["bytes_per_slice"] = static_cast<double>(buf.size()) / n;
    state.counters["bytes_per_day_100_slices_5s"] = static_cast<double>(buf.size()) / n * 100 * 17280;
}
BENCHMARK(BM_TraceWriteSample)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_TraceReadSample(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    std::string line;
    append_trace_sample(line, make_host(n), features(), 0, nullptr, 0);
    line.pop_back();
    for (auto _ : state) {
        Result<TraceSample> s = parse_trace_sample(line, 2);
        benchmark::DoNotOptimize(s);
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TraceReadSample)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
