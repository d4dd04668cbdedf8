// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The project's readers against the REAL kernel files of the test guest
// (tools/vm/run-scenario, scenarios kernel-facts and mglru-off). Runs only
// when MEMPROTD_VM_GUEST=1 (set by the guest's scenario runner); anywhere
// else every test skips and says why.
//
// MEMPROTD_EXPECT_MGLRU=0 means the guest was booted with MGLRU switched off.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "aging.h"
#include "file_io.h"
#include "lru_gen_ager.h"
#include "model.h"
#include "parse.h"
#include "probe.h"
#include "sampler.h"

namespace memprotd {
namespace {

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

bool env_is(const char* name, std::string_view value) {
    const char* v = std::getenv(name);
    return v != nullptr && value == v;
}

// Empty when this is the guest; otherwise why the tests skip.
std::string why_not_guest() {
    if (env_is("MEMPROTD_VM_GUEST", "1")) {
        return {};
    }
    std::string host = "unknown cgroup layout";
    struct statfs fs {};
    if (statfs("/sys/fs/cgroup", &fs) == 0) {
        host = static_cast<long>(fs.f_type) == kCgroup2Magic
                   ? "cgroup2 host"
                   : "/sys/fs/cgroup is not cgroup2 (v1 or hybrid host)";
    }
    return "not the memprotd test guest (MEMPROTD_VM_GUEST=1 unset; " + host +
           "); run through tools/vm/run-scenario";
}

bool expect_mglru_on() { return !env_is("MEMPROTD_EXPECT_MGLRU", "0"); }

#define SKIP_UNLESS_GUEST()                              \
    do {                                                 \
        const std::string why = why_not_guest();         \
        if (!why.empty()) GTEST_SKIP() << why;           \
    } while (0)

TEST(VmKernel, ProbeReportsEverything) {
    SKIP_UNLESS_GUEST();
    const KernelFeatures f = probe_features();
    std::cout << "kernel_release=" << f.kernel_release << " cgroup2=" << f.cgroup2
              << " memory_controller=" << f.memory_controller
              << " memory_recursiveprot=" << f.memory_recursiveprot << " psi=" << f.psi
              << " mglru_present=" << f.mglru_present << " mglru_enabled=" << f.mglru_enabled
              << " mglru_flags=0x" << std::hex << f.mglru_flags << std::dec
              << " lru_gen_debugfs=" << f.lru_gen_debugfs
              << " memory_reclaim=" << f.memory_reclaim << " page_size=" << f.page_size
              << " unusable_reason='" << f.unusable_reason << "'\n";
    EXPECT_TRUE(f.cgroup2);
    EXPECT_TRUE(f.memory_controller);
    EXPECT_TRUE(f.memory_recursiveprot);
    EXPECT_TRUE(f.psi);
    EXPECT_TRUE(f.mglru_present);
    if (expect_mglru_on()) {
        EXPECT_TRUE(f.mglru_enabled);
        EXPECT_EQ(f.mglru_flags, 0x7u);
    } else {
        EXPECT_FALSE(f.mglru_enabled) << "booted with memprotd.mglru=off";
        EXPECT_EQ(f.mglru_flags, 0x0u);
    }
    EXPECT_TRUE(f.lru_gen_debugfs);
    EXPECT_TRUE(f.memory_reclaim);
    EXPECT_FALSE(f.kernel_release.empty());
    EXPECT_EQ(f.page_size, 4096u);
    EXPECT_EQ(f.unusable_reason, "");
}

class VmSampler : public ::testing::Test {
protected:
    void SetUp() override {
        SKIP_UNLESS_GUEST();
        Sampler sampler{SamplerOptions{}};
        sampler.sample(snap_, monotonic_us());
    }
    Snapshot snap_;
};

TEST_F(VmSampler, NoErrors) {
    for (const Error& e : snap_.errors) {
        ADD_FAILURE() << "sampler error: " << e.to_string();
    }
    EXPECT_TRUE(snap_.errors.empty());
    EXPECT_FALSE(snap_.cgroups.empty());
    EXPECT_GT(snap_.timestamp_us, 0);
}

TEST_F(VmSampler, SystemSlice) {
    const int i = snap_.find_unit("system.slice");
    ASSERT_GE(i, 0) << "system.slice not sampled";
    const CgroupSample& s = snap_.cgroups[static_cast<size_t>(i)];
    EXPECT_EQ(s.path, "/system.slice");
    EXPECT_EQ(s.parent, -1);
    EXPECT_EQ(s.depth, 0);
    EXPECT_GT(s.current, 0u);
    EXPECT_EQ(s.max, kUnlimited);
    for (const char* key : {"anon", "file", "inactive_file", "workingset_refault_file", "pgsteal"}) {
        EXPECT_TRUE(s.stat.find(key).has_value()) << "memory.stat of system.slice lacks " << key;
    }
    EXPECT_GT(s.stat.get("file"), 0u);
    EXPECT_TRUE(s.pressure.has_value()) << "memory.pressure of system.slice";
}

TEST_F(VmSampler, HostPressureAndMeminfo) {
    ASSERT_TRUE(snap_.host_pressure.has_value());
    EXPECT_TRUE(snap_.host_pressure->full.has_value());
    EXPECT_GT(snap_.meminfo.mem_total, 512ull << 20);
    EXPECT_LE(snap_.meminfo.mem_available, snap_.meminfo.mem_total);
}

TEST_F(VmSampler, LruGen) {
    if (!expect_mglru_on()) {
        // Read or not, nothing to require with MGLRU off; report what came back.
        std::cout << "MGLRU off: lru_gen " << (snap_.lru_gen ? "parsed" : "absent") << "\n";
        return;
    }
    ASSERT_TRUE(snap_.lru_gen.has_value()) << "debugfs lru_gen not read";
    ASSERT_GE(snap_.lru_gen->memcgs.size(), 1u);
    bool found = false;
    for (const LruGenMemcg& m : snap_.lru_gen->memcgs) {
        if (m.path == "/system.slice") {
            found = true;
            ASSERT_FALSE(m.nodes.empty());
            EXPECT_GE(m.nodes[0].generations.size(), 2u);
            EXPECT_LE(m.nodes[0].generations.size(), 4u);
        }
    }
    EXPECT_TRUE(found) << "no lru_gen memcg with path /system.slice";
}

// What working-set aging (WorkingSetAging=) relies on: memprotd's own aging
// commands, written the way the daemon writes them, make the kernel move
// the pages used since the last aging into a new generation and leave the
// rest behind. A child in its own cgroup maps a 64 MiB file, reads all of
// it once, then keeps touching the first 16 MiB; after three agings the two
// youngest generations hold about the hot 16 MiB and older ones the cold
// 48 MiB. (The walk moves what it finds used into the generation that was
// youngest, then makes a new, empty one: the first guest run of this test
// found 0 pages in the youngest and all 64 MiB below it. So a page used
// since the last aging sits in a generation born at the aging before, and
// the engine's "generations younger than the window" counts pages used
// within the last half to whole window.) File pages, so that the answer does not depend on swap (without
// swap the kernel does not age anon at all, and the engine then counts all
// anon anyway).
TEST(VmKernel, AgingSeparatesTouchedFromUntouchedPages) {
    SKIP_UNLESS_GUEST();
    if (!expect_mglru_on())
        GTEST_SKIP() << "MGLRU off: nothing to age";
    constexpr size_t kTotal = 64u << 20, kHot = 16u << 20, kPage = 4096;
    // A slice by name: memprotd ages only memcgs of the slices it manages.
    const std::string cg = "/memprotd-aging-test.slice";
    const std::string cg_dir = "/sys/fs/cgroup" + cg;
    const std::string file = "/var/tmp/memprotd-aging-test.data";
    ASSERT_EQ(::mkdir(cg_dir.c_str(), 0755), 0) << cg_dir << ": " << std::strerror(errno);
    int ready[2];
    // Whatever assertion ends the test, the child, its file and its cgroup go.
    pid_t child = -1;
    struct Cleanup {
        const pid_t& child;
        const std::string& file;
        const std::string& dir;
        ~Cleanup() {
            if (child > 0) {
                ::kill(child, SIGKILL);
                int status = 0;
                ::waitpid(child, &status, 0);
            }
            ::unlink(file.c_str());
            for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    } cleanup{child, file, cg_dir};
    ASSERT_EQ(::pipe(ready), 0);
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(ready[0]);
        {
            std::ofstream procs(cg_dir + "/cgroup.procs");
            procs << 0 << std::flush;
            if (!procs)
                ::_exit(2);
        }
        const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(kTotal)) != 0)
            ::_exit(3);
        auto* p = static_cast<volatile char*>(::mmap(nullptr, kTotal, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        if (p == MAP_FAILED)
            ::_exit(4);
        for (size_t i = 0; i < kTotal; i += kPage)
            p[i] = 1;
        ::msync(const_cast<char*>(p), kTotal, MS_SYNC);
        for (size_t i = 0; i < kTotal; i += kPage)
            (void)p[i];
        if (::write(ready[1], "r", 1) != 1)
            ::_exit(5);
        for (;;) {
            for (size_t i = 0; i < kHot; i += kPage)
                (void)p[i];
            ::usleep(100'000);
        }
    }
    ::close(ready[1]);
    char c = 0;
    const bool started = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);

    auto read_memcg = [&]() -> std::optional<LruGenMemcg> {
        std::string text;
        if (read_at(AT_FDCWD, "/sys/kernel/debug/lru_gen", text) != 0)
            return std::nullopt;
        auto lg = parse_lru_gen(text, "/sys/kernel/debug/lru_gen");
        if (!lg)
            return std::nullopt;
        for (auto& m : lg->memcgs)
            if (m.path == cg)
                return m;
        return std::nullopt;
    };
    // File pages in the memcg's two youngest generations.
    auto young_bytes = [](const LruGenMemcg& memcg) -> uint64_t {
        if (memcg.nodes.empty())
            return 0;
        const auto& g = memcg.nodes[0].generations;
        return g.size() < 2 ? 0 : (g[g.size() - 1].file_pages + g[g.size() - 2].file_pages) * kPage;
    };
    // At least 3 aging rounds 2 s apart; up to 6 while the hot set is not yet
    // young. Once in CI three rounds left 0 MiB young (cause not known; a
    // walk the kernel skipped would promote nothing), so later rounds may
    // finish the job; the assertions after the loop are unchanged.
    const LruGenAger ager("/sys/kernel/debug/lru_gen");
    int aged = 0;
    for (int round = 0; started && round < 6; ++round) {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        std::string text;
        ASSERT_EQ(read_at(AT_FDCWD, "/sys/kernel/debug/lru_gen", text), 0);
        auto lg = parse_lru_gen(text, "/sys/kernel/debug/lru_gen");
        ASSERT_TRUE(lg) << lg.error().to_string();
        for (const AgingRequest& r : plan_aging(*lg, {{cg, 0}})) {
            const int err = ager.age(r);
            EXPECT_EQ(err, 0) << ager.error(r, err).to_string();
            ++aged;
        }
        if (round >= 2) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
            const std::optional<LruGenMemcg> now = read_memcg();
            if (now && young_bytes(*now) >= kHot * 7 / 8)
                break;
        }
    }
    const std::optional<LruGenMemcg> m = read_memcg();

    ASSERT_TRUE(started) << "the child could not join " << cg_dir << " or map " << file;
    EXPECT_GE(aged, 3);
    ASSERT_TRUE(m.has_value()) << cg << " not in lru_gen";
    ASSERT_FALSE(m->nodes.empty());
    const auto& gens = m->nodes[0].generations;
    ASSERT_GE(gens.size(), 3u);
    const uint64_t young = young_bytes(*m);
    uint64_t older = 0;
    for (size_t i = 0; i + 2 < gens.size(); ++i)
        older += gens[i].file_pages * kPage;
    std::cout << "aging: two youngest generations " << (young >> 20) << " MiB of file pages (hot 16), older "
              << (older >> 20) << " MiB (cold 48), " << gens.size() << " generations, " << aged << " aging writes\n";
    EXPECT_GE(young, kHot * 7 / 8);
    EXPECT_LE(young, kHot * 3 / 2);
    EXPECT_GE(older, (kTotal - kHot) * 7 / 8);
    EXPECT_TRUE(plan_aging(LruGen{{*m}}, {{cg, 60'000}}).empty()) << "a fresh memcg is not aged again";
}

}  // namespace
}  // namespace memprotd
