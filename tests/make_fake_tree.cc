// SPDX-License-Identifier: LGPL-2.1-or-later
//
// make-fake-tree DIR N: writes a fake host (FakeTree layout: DIR/cgroup,
// DIR/proc, DIR/sys, DIR/debug) with N slices, 20 top-level slices and the
// rest spread below them, for `memprotd --root DIR/cgroup` and bench/overhead.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "fake_tree.h"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make-fake-tree DIR N\n");
        return 2;
    }
    try {
        namespace fs = std::filesystem;
        const fs::path out = argv[1];
        const int n = std::atoi(argv[2]);
        constexpr int kTop = 20;
        constexpr uint64_t kMiB = 1ULL << 20;
        memprotd::FakeTree tree;
        tree.meminfo(256ULL << 30, 200ULL << 30);
        for (int i = 0; i < n; ++i) {
            const int top = i % kTop;
            const uint64_t bytes = (64 + static_cast<uint64_t>(i % 37) * 23) * kMiB;
            const auto spec = i % 3 == 0 ? memprotd::cache_heavy_spec(bytes) : memprotd::anon_heavy_spec(bytes);
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
