// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

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

}  // namespace
}  // namespace memprotd
