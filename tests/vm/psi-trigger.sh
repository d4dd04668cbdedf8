# SPDX-License-Identifier: LGPL-2.1-or-later
# Per-slice PSI triggers end to end: with a long Interval= (60 s) a memory
# stall in a managed slice must wake memprotd early, within the trigger
# window, and it must say so on the bus (PressureChanged for that slice) and
# in its tick counter (Dump's ticks.early).
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_memprotd
mkdir -p /etc/memprotd/memprotd.conf.d
printf '[Daemon]\nInterval=60s\nPressureThreshold=100ms\nPressureWindow=1s\n' \
    > /etc/memprotd/memprotd.conf.d/50-psi.conf
systemctl start workload.slice
check "systemctl enable --now memprotd" systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
ticks_of() { memprotctl dump | tr -d ' \n' | grep -o '"ticks":{[^}]*}' | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
export -f ticks_of
# The first tick arms the triggers of the slices it manages.
check "workload.slice is managed" wait_for 30 sh -c 'memprotctl list --json | grep -q "\"unit\": *\"workload.slice\""'
sleep 3
early0=$(ticks_of early)
total0=$(ticks_of total)
echo "before the stall: ticks $total0, early $early0"

mon=$MEMPROTD_RESULT_DIR/monitor.jsonl
memprotctl monitor --json > "$mon" 2>/dev/null &
monpid=$!
sleep 2
# A stall: 200 MiB of anon memory kept in a unit capped at 48M with no swap
# is throttled and reclaimed without end, which the kernel counts as memory
# stall time of the unit and of workload.slice above it.
systemd-run --quiet --slice=workload.slice --unit=staller -p MemoryHigh=48M -p MemorySwapMax=0 \
    stress-ng --vm 1 --vm-bytes 200M --vm-keep --timeout 20s
check "PressureChanged for workload.slice on the bus" \
    wait_for 30 grep -q '"signal":"PressureChanged".*"unit":"workload.slice"' "$mon"
check "an early tick (before the 60 s interval)" wait_for 10 bash -c "[ \"\$(ticks_of early)\" -gt $early0 ]"
echo "after the stall: ticks $(ticks_of total), early $(ticks_of early)"
grep PressureChanged "$mon" | head -n 3
cat /sys/fs/cgroup/workload.slice/memory.pressure
kill "$monpid" 2>/dev/null
# Throttled at its MemoryHigh=, the staller may take the whole stop timeout
# (90 s) to act on SIGTERM.
systemctl kill --signal=SIGKILL staller 2>/dev/null || true
finish
