// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The parsers run for every managed cgroup on every sample (memory.stat,
// memory.pressure) and once per sample for the whole host (lru_gen), so
// they must stay cheap next to the read() that feeds them.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "parse.h"

namespace {

using namespace memprotd;

// Kernel 6.1 key order; values of a busy slice.
std::string memory_stat_61() {
    static constexpr std::string_view kKeys[] = {
        "anon", "file", "kernel", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc",
        "shmem", "zswap", "zswapped", "file_mapped", "file_dirty", "file_writeback", "swapcached", "anon_thp",
        "file_thp", "shmem_thp", "inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable",
        "slab_reclaimable", "slab_unreclaimable", "slab", "workingset_refault_anon", "workingset_refault_file",
        "workingset_activate_anon", "workingset_activate_file", "workingset_restore_anon",
        "workingset_restore_file", "workingset_nodereclaim", "pgscan", "pgsteal", "pgscan_kswapd",
        "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct", "pgfault", "pgmajfault", "pgrefill", "pgactivate",
        "pgdeactivate", "pglazyfree", "pglazyfreed", "zswpin", "zswpout", "thp_fault_alloc",
        "thp_collapse_alloc"};
    std::string text;
    uint64_t v = 1470869504;
    for (const std::string_view key : kKeys) {
        text += fmt::format("{} {}\n", key, v);
        v = v * 7 / 13 + 4096;  // a spread of value lengths, like the real file
    }
    return text;
}

// ~100 memcgs on one node, 4 generations each, as 6.1 prints them.
std::string lru_gen_61(int memcgs) {
    std::string text;
    for (int id = 1; id <= memcgs; ++id) {
        const std::string path = id == 1 ? "/" : fmt::format("/workload.slice/app-{}.service", id);
        text += fmt::format("memcg {:5} {}\n", id, path);
        text += fmt::format(" node {:5}\n", 0);
        for (int seq = 0; seq < 4; ++seq)
            text += fmt::format(" {:10} {:10} {:10}  {:10} \n", 100 + seq, 13784 - seq * 3000, 1014 * seq * id,
                                22337 + id);
    }
    return text;
}

void BM_ParseMemoryStat(benchmark::State& state) {
    const std::string text = memory_stat_61();
    MemoryStat stat;
    for (auto _ : state) {
        Status st = parse_memory_stat(text, "memory.stat", stat);
        benchmark::DoNotOptimize(st);
        benchmark::DoNotOptimize(stat);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
    state.counters["keys"] = static_cast<double>(stat.size());
}
BENCHMARK(BM_ParseMemoryStat);

void BM_ParsePsi(benchmark::State& state) {
    const std::string text =
        "some avg10=1.53 avg60=0.87 avg300=0.21 total=2851209\n"
        "full avg10=0.50 avg60=0.25 avg300=0.06 total=1133487\n";
    for (auto _ : state) {
        auto r = parse_psi(text, "memory.pressure");
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_ParsePsi);

void BM_ParseMeminfo(benchmark::State& state) {
    // A full 6.1 /proc/meminfo is ~55 lines; only four are needed.
    std::string text =
        "MemTotal:       24594324 kB\nMemFree:         9127240 kB\nMemAvailable:   18431572 kB\n";
    for (int i = 0; i < 45; ++i)
        text += fmt::format("Field{}: {:>15} kB\n", i, 1000 + i);
    text += "SwapTotal:       2097148 kB\nSwapFree:        2097148 kB\nHugePages_Total:       0\n";
    for (auto _ : state) {
        auto r = parse_meminfo(text, "/proc/meminfo");
        benchmark::DoNotOptimize(r);
    }
}
BENCHMARK(BM_ParseMeminfo);

void BM_ParseLruGen(benchmark::State& state) {
    const std::string text = lru_gen_61(static_cast<int>(state.range(0)));
    for (auto _ : state) {
        auto r = parse_lru_gen(text, "/sys/kernel/debug/lru_gen");
        benchmark::DoNotOptimize(r);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseLruGen)->Arg(100);

}  // namespace

BENCHMARK_MAIN();
