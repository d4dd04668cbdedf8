# SPDX-License-Identifier: LGPL-2.1-or-later
# Booted with memprotd.mglru=off: MGLRU is present but switched off, and the
# project's probe says so.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"

check "booted with MGLRU off" test "$MEMPROTD_MGLRU" = off
check "lru_gen/enabled exists" test -e /sys/kernel/mm/lru_gen/enabled
check "lru_gen/enabled reads 0x0000" test "$(cat /sys/kernel/mm/lru_gen/enabled)" = 0x0000
MEMPROTD_EXPECT_MGLRU=0 run_gtest tests/vm/test-vm-kernel
finish
