// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace memprotd {
namespace {

using ::testing::HasSubstr;

// Lines as /proc/self/status prints them (the capability masks are hex).
std::string status_with(const std::string& cap_eff) {
    return "Name:\tmemprotd\nUmask:\t0077\nCapInh:\t0000000000000000\nCapPrm:\t" + cap_eff + "\nCapEff:\t" + cap_eff +
           "\nCapBnd:\t" + cap_eff + "\nNoNewPrivs:\t1\n";
}

TEST(MemoryLock, ReadsCapIpcLockFromCapEff) {
    EXPECT_TRUE(has_cap_ipc_lock(status_with("000001ffffffffff")));  // root, every capability
    EXPECT_TRUE(has_cap_ipc_lock(status_with("0000000000004000")));  // bit 14 alone
    EXPECT_FALSE(has_cap_ipc_lock(status_with("0000000001000000")));  // CAP_SYS_RESOURCE alone (the unit's)
    EXPECT_FALSE(has_cap_ipc_lock(status_with("0000000000000000")));
}

TEST(MemoryLock, MissingOrMalformedCapEffIsNoCapability) {
    EXPECT_FALSE(has_cap_ipc_lock(""));
    EXPECT_FALSE(has_cap_ipc_lock("Name:\tx\nCapPrm:\t0000000000004000\n"));
    EXPECT_FALSE(has_cap_ipc_lock(status_with("zz00000000004000")));
    EXPECT_FALSE(has_cap_ipc_lock(status_with("00000000000040g0")));
    EXPECT_FALSE(has_cap_ipc_lock("Name:\tx\nCapEff:\t\n"));
}

TEST(MemoryLock, LocksWithTheCapabilityOrNoLimit) {
    EXPECT_EQ(memory_lock_refusal(8 << 20, true), "");
    EXPECT_EQ(memory_lock_refusal(RLIM_INFINITY, false), "");
}

TEST(MemoryLock, RefusesAFiniteLimitWithoutTheCapabilityAndSaysWhy) {
    const std::string why = memory_lock_refusal(8 << 20, false);
    EXPECT_THAT(why, HasSubstr("RLIMIT_MEMLOCK is 8388608 bytes"));
    EXPECT_THAT(why, HasSubstr("LimitMEMLOCK=infinity"));
}

// The whole path but the mlockall: /proc/self/status from the given root
// (here without CAP_IPC_LOCK) and the process's own RLIMIT_MEMLOCK, lowered
// to a finite value first (lowering needs no privilege). Nothing is locked.
TEST(MemoryLock, LockOwnMemoryReadsTheStatusUnderTheRootAndTheLimit) {
    const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) / "memory-lock-proc";
    std::filesystem::create_directories(root / "self");
    std::ofstream(root / "self" / "status") << status_with("0000000001000000");
    rlimit rl{};
    ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &rl), 0);
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 64 << 10);
    ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &rl), 0);

    const MemoryLock lock = lock_own_memory(root.string());

    EXPECT_FALSE(lock.locked);
#if defined(__SANITIZE_ADDRESS__)
    EXPECT_THAT(lock.reason, HasSubstr("an ASan build"));
#else
    EXPECT_THAT(lock.reason, HasSubstr("RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur) +
                                       " bytes and CAP_IPC_LOCK is not held"));
#endif
    std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace memprotd
