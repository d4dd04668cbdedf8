// SPDX-License-Identifier: LGPL-2.1-or-later
//
// make-fake-tree DIR N [SEED]: writes a fake host (FakeTree layout: DIR/cgroup,
// DIR/proc, DIR/sys, DIR/debug) with N slices, 20 top-level slices and the
// rest spread below them, for `memprotd --root DIR/cgroup` and bench/overhead.
// With SEED the sizes, kinds, protections and pressure are drawn from
// std::mt19937(SEED) (raw draws, so every standard library gives the same
// tree): the random trees of the golden-output test (tests/cli/golden.py).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <filesystem>
#include <random>
#include <string>

#include <fmt/format.h>

#include "fake_tree.h"

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) {
        std::fprintf(stderr, "usage: make-fake-tree DIR N [SEED]\n");
        return 2;
    }
    try {
        namespace fs = std::filesystem;
        const fs::path out = argv[1];
        const int n = std::atoi(argv[2]);
        constexpr int kTop = 20;
        constexpr uint64_t kMiB = 1ULL << 20;
        std::optional<std::mt19937> rng;
        if (argc == 4)
            rng.emplace(static_cast<std::mt19937::result_type>(std::strtoul(argv[3], nullptr, 10)));
        memprotd::FakeTree tree;
        tree.meminfo(256ULL << 30, 200ULL << 30);
        for (int i = 0; i < n; ++i) {
            const int top = i % kTop;
            uint64_t bytes = (64 + static_cast<uint64_t>(i % 37) * 23) * kMiB;
            bool cache = i % 3 == 0;
            if (rng) {
                bytes = (16 + (*rng)() % 4096) * kMiB;
                cache = (*rng)() % 2 == 0;
            }
            auto spec = cache ? memprotd::cache_heavy_spec(bytes) : memprotd::anon_heavy_spec(bytes);
            if (rng) {
                if ((*rng)() % 4 == 0)
                    spec.low = ((*rng)() % 512) * kMiB;
                if ((*rng)() % 8 == 0)
                    spec.min = ((*rng)() % 128) * kMiB;
                if ((*rng)() % 3 == 0) {
                    const uint32_t some = static_cast<uint32_t>((*rng)() % 4000);
                    spec.pressure_text = fmt::format(
                        "some avg10={}.{:02} avg60=1.00 avg300=0.50 total={}\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
                        some / 100, some % 100, (*rng)() % 100000000);
                }
            }
            if (i < kTop)
                tree.add_cgroup(fmt::format("w{:02}.slice", top), spec);
            else
                tree.add_cgroup(fmt::format("w{:02}.slice/w{:02}-c{:03}.slice", top, top, i / kTop), spec);
        }
        fs::remove_all(out);
        fs::create_directories(out);
        fs::copy(tree.base(), out, fs::copy_options::recursive);
        // The copied mount table still names the temporary directory.
        std::string mounts = fmt::format("cgroup2 {}/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0\n",
                                         fs::absolute(out).string());
        std::FILE* f = std::fopen((out / "proc/self/mounts").c_str(), "we");
        if (!f || std::fputs(mounts.c_str(), f) < 0 || std::fclose(f) != 0) {
            std::fprintf(stderr, "make-fake-tree: cannot write the mount table\n");
            return 1;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make-fake-tree: %s\n", e.what());
        return 1;
    }
    return 0;
}
