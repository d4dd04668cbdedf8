// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The sampler on a fake host with 1000 slices (10 top-level slices with 99
// children each, realistic 6.1 files), against the floor of reading the same
// files with open/read/close and no parsing. Arg 1 adds a debugfs lru_gen
// with one memcg per slice (read by both).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fake_tree.h"
#include "sampler.h"

namespace memprotd {
namespace {

constexpr int kTopSlices = 10;
constexpr int kChildrenPerTop = 99;

struct Host {
    FakeTree tree;
    std::vector<std::string> cgroup_paths;  // relative, parents first (the sampler's order)
};

Host& host() {
    static std::unique_ptr<Host> h = [] {
        // One cached directory fd per slice: make room as the daemon would.
        rlimit lim{};
        if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
            lim.rlim_cur = lim.rlim_max;
            ::setrlimit(RLIMIT_NOFILE, &lim);
        }
        // cgroupfs lives in memory; so does the fake host when it can (ext4's
        // hashed readdir would otherwise dominate and measure the wrong fs).
        // Set TMPDIR to measure elsewhere.
        if (!std::getenv("TMPDIR") && ::access("/dev/shm", W_OK) == 0)
            ::setenv("TMPDIR", "/dev/shm", 0);
        auto out = std::make_unique<Host>();
        LruGen lru;
        uint64_t id = 1;
        const auto add = [&](const std::string& path, uint64_t i) {
            const uint64_t bytes = (64ULL + i % 512) << 20;
            out->tree.add_cgroup(path, i % 2 ? anon_heavy_spec(bytes) : cache_heavy_spec(bytes));
            out->cgroup_paths.push_back(path);
            LruGenNode node{0, {}};
            for (uint64_t g = 0; g < 4; ++g)
                node.generations.push_back({100 + g, (4 - g) * 15000, 1000 * g + i, 2000 * g + i});
            lru.memcgs.push_back({++id, "/" + path, {node}});
        };
        for (int t = 0; t < kTopSlices; ++t) {
            const std::string top = fmt::format("group{:02}.slice", t);
            add(top, static_cast<uint64_t>(t));
            for (int c = 0; c < kChildrenPerTop; ++c)
                add(fmt::format("{}/group{:02}-job{:03}.slice", top, t, c),
                    static_cast<uint64_t>(t) * 100 + static_cast<uint64_t>(c));
        }
        out->tree.lru_gen(lru_gen_text(lru));
        return out;
    }();
    return *h;
}

SamplerOptions options(bool lru_gen) {
    SamplerOptions o = host().tree.sampler_options();
    o.read_lru_gen = lru_gen;
    return o;
}

// Arg 0: lru_gen read too; arg 1: file fds kept open between samples (what
// the daemon does on a real cgroup2 mount; tmpfs would reopen them).
void BM_SampleTree(benchmark::State& state) {
    const bool lru_gen = state.range(0) != 0;
    SamplerOptions opt = options(lru_gen);
    opt.file_fds = state.range(1) != 0 ? SamplerOptions::FileFds::Keep : SamplerOptions::FileFds::Reopen;
    Sampler sampler(opt);
    Snapshot snap;
    sampler.sample(snap, 0);  // warm: directory fds opened, storage sized
    if (snap.cgroups.size() != host().cgroup_paths.size() || !snap.errors.empty() ||
        snap.lru_gen.has_value() != lru_gen) {
        state.SkipWithError("the fake tree did not sample cleanly");
        return;
    }
    int64_t t = 0;
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
        sampler.sample(snap, ++t);
        benchmark::DoNotOptimize(snap.cgroups.data());
    }
    state.counters["cgroups"] = static_cast<double>(snap.cgroups.size());
    state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(snap.cgroups.size()));
}
BENCHMARK(BM_SampleTree)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond);

// The floor: the same files, one open/read/close each, nothing parsed.
void BM_PlainReadLoop(benchmark::State& state) {
    const bool lru_gen = state.range(0) != 0;
    const Host& h = host();
    std::vector<std::string> files;
    const std::string proc = h.tree.proc_root();
    files.push_back(proc + "/meminfo");
    files.push_back(proc + "/pressure/memory");
    for (const std::string& rel : h.cgroup_paths)
        for (const char* name : {"memory.current", "memory.min", "memory.low", "memory.high", "memory.max",
                                 "memory.stat", "memory.events", "memory.swap.current", "memory.pressure"})
            files.push_back(h.tree.cgroup_dir(rel) + "/" + name);
    const std::string lru_gen_file = h.tree.debugfs_root() + "/lru_gen";
    std::vector<char> buf(size_t{64} * 1024);
    for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores)
        size_t bytes = 0;
        for (const std::string& f : files) {
            int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
            ssize_t n = ::read(fd, buf.data(), buf.size());
            bytes += static_cast<size_t>(n);
            ::close(fd);
        }
        if (lru_gen) {
            int fd = ::open(lru_gen_file.c_str(), O_RDONLY | O_CLOEXEC);
            for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) bytes += static_cast<size_t>(n);
            ::close(fd);
        }
        benchmark::DoNotOptimize(bytes);
    }
    state.counters["files"] = static_cast<double>(files.size() + (lru_gen ? 1 : 0));
}
BENCHMARK(BM_PlainReadLoop)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memprotd

BENCHMARK_MAIN();
