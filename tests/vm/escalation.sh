# SPDX-License-Identifier: LGPL-2.1-or-later
# MemoryMin= when MemoryLow= does not hold (Debian 13, kernel 6.12): from
# 6.3, MGLRU's global reclaim only defers a memcg below memory.low and
# reclaims it on its next visit, counting a low event. A 420 MiB anonymous
# working set, touched at random in workload.slice, beside stress-ng keeping
# 720 MiB in batch.slice, in the 1 GiB guest with zram swap (the setup of
# kernel-notes.md, "6.12: what memory.low means under MGLRU"): memprotd
# protects the workload with MemoryLow=, sees low events while the slice is
# within it, and moves its working set under MemoryMin= (within what
# MemoryLow= alone gives it and three quarters of the budget), saying so in
# the journal and in explain. Then, restarted with EscalateAhead=yes, it
# holds the working set under MemoryMin= before any low event.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_with_example_policies
record_trace escalation

modprobe zram num_devices=1
echo 768M > /sys/block/zram0/disksize
mkswap -q /dev/zram0 >/dev/null && swapon -p 100 /dev/zram0
check "zram swap on" grep -q zram0 /proc/swaps

start_table 420 0.001
sleep 10
systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
anon() { awk '$1 == "anon" { print $2 }' "/sys/fs/cgroup/$1/memory.stat"; }
protected() { [ "$(memory_low_of workload.slice)" -ge $(( $(anon workload.slice) * 9 / 10 )) ]; }
check "workload.slice protected with MemoryLow= (>= 90% of its anon memory)" wait_for 120 protected
echo "workload.slice: anon $(anon workload.slice), memory.low $(memory_low_of workload.slice), memory.min $(cat /sys/fs/cgroup/workload.slice/memory.min)"

since=$(date '+%Y-%m-%d %H:%M:%S')
low0=$(awk '$1 == "low" { print $2 }' /sys/fs/cgroup/workload.slice/memory.events)
systemd-run --quiet --slice=batch.slice --unit=batch \
    stress-ng --vm 1 --vm-bytes 720M --vm-keep --vm-method write64 --timeout 1h
escalated() { [ "$(systemctl show -P MemoryMin workload.slice)" -gt 0 ]; }
check "MemoryMin= of workload.slice raised within 180 s" wait_for 180 escalated
low1=$(awk '$1 == "low" { print $2 }' /sys/fs/cgroup/workload.slice/memory.events)
echo "workload.slice: low events $low0 -> $low1; MemoryLow $(systemctl show -P MemoryLow workload.slice)," \
    "MemoryMin $(systemctl show -P MemoryMin workload.slice), swap $(cat /sys/fs/cgroup/workload.slice/memory.swap.current)"
check "low events came first" test "$low1" -gt "$low0"
check "the journal says MemoryLow= did not hold" \
    sh -c "journalctl -u memprotd --since '$since' -o cat | grep -q 'workload.slice: MemoryLow= did not hold'"
check "explain says MemoryMin holds the working set" \
    sh -c 'memprotctl explain workload.slice | grep -q "holds the working set: MemoryLow did not hold"'
budget=$(status_field budget)
check "MemoryMin= within three quarters of the budget ($budget)" \
    test "$(systemctl show -P MemoryMin workload.slice)" -le $(( budget * 3 / 4 ))
check "MemoryMin= holds the working set (>= 90% of its anon memory)" \
    test "$(systemctl show -P MemoryMin workload.slice)" -ge $(( $(anon workload.slice) * 9 / 10 ))
memprotctl explain workload.slice || true
check_replay workload.slice written_memory_min

# EscalateAhead=yes: the batch job gone, memprotd restarted with it holds
# the table's working set under MemoryMin= as soon as it protects the slice,
# without waiting for low events.
systemctl stop batch.service 2>/dev/null || true
printf '[Daemon]\nEscalateAhead=yes\n' > /etc/memprotd/memprotd.conf.d/70-ahead.conf
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl restart memprotd
ahead_note() { journalctl -u memprotd --since "$since" -o cat | grep -q 'workload.slice: MemoryMin= holds its working set ahead of reclaim'; }
check "EscalateAhead=yes: the journal says MemoryMin= holds the working set ahead of reclaim" wait_for 60 ahead_note
check "EscalateAhead=yes: explain says so" \
    sh -c 'memprotctl explain workload.slice | grep -q "holds the working set ahead of reclaim"'
held() { [ "$(systemctl show -P MemoryMin workload.slice)" -ge $(( $(anon workload.slice) * 9 / 10 )) ]; }
check "EscalateAhead=yes: MemoryMin= holds the working set (>= 90% of its anon memory)" wait_for 30 held
systemctl stop table.service 2>/dev/null || true
finish
