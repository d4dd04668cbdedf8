# SPDX-License-Identifier: LGPL-2.1-or-later
# Booted with memprotd.mglru=off: MGLRU is present but switched off, and the
# project's probe says so. The daemon then plans and writes from memory.stat
# alone: its working sets come from memory.stat, nothing is aged, and an anon
# workload gets protected.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"

check "booted with MGLRU off" test "$MEMPROTD_MGLRU" = off
check "lru_gen/enabled exists" test -e /sys/kernel/mm/lru_gen/enabled
check "lru_gen/enabled reads 0x0000" test "$(cat /sys/kernel/mm/lru_gen/enabled)" = 0x0000
MEMPROTD_EXPECT_MGLRU=0 run_gtest tests/vm/test-vm-kernel

install_memprotd
mkdir -p /etc/memprotd/memprotd.conf.d
printf '[Daemon]\nInterval=2s\n' > /etc/memprotd/memprotd.conf.d/50-fast.conf
systemd-run --quiet --slice=workload.slice --unit=kv \
    stress-ng --vm 1 --vm-bytes 200M --vm-keep --vm-method write64 --timeout 10m
sleep 3
check "systemctl enable --now memprotd" systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
check "status: MGLRU not enabled" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"mglru_enabled\":false"'
anon() { awk '$1 == "anon" { print $2 }' "/sys/fs/cgroup/$1/memory.stat"; }
protected() { [ "$(memory_low_of workload.slice)" -ge $(( $(anon workload.slice) * 9 / 10 )) ]; }
check "workload.slice memory.low >= 90% of its anon memory within 120 s" wait_for 120 protected
echo "workload.slice: anon $(anon workload.slice), memory.low $(memory_low_of workload.slice)"
check "working set from memory.stat" \
    sh -c 'memprotctl show workload.slice --json | tr -d " \n" | grep -q "\"working_set_source\":\"memory.stat\""'
check "memprotd wrote through systemd" test "$(status_field total_writes)" -gt 0
check "nothing aged with MGLRU off" sh -c 'memprotctl dump | tr -d " \n" | grep -q "\"aged\":0"'
systemctl stop kv
finish
