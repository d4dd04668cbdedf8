# SPDX-License-Identifier: LGPL-2.1-or-later
# Fault injection on a real systemd: cgroups vanishing between sample and
# write, systemd failing the writes, the bus daemon restarted, the daemon
# OOM-killed, the config directory unreadable, the record in /run/memprotd
# corrupted and truncated. After each: memprotd runs (or was cleanly
# restarted by systemd), systemd and the kernel agree, the siblings stay
# within the budget, and the user's values can still be put back.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_memprotd
systemctl set-property --runtime system.slice MemoryLow=100M MemoryMin=8M
mkdir -p /etc/memprotd/memprotd.conf.d /etc/memprotd/policy.d
printf '[Daemon]\nInterval=2s\n' > /etc/memprotd/memprotd.conf.d/50-fast.conf
printf '[Match]\nSlice=workload.slice\n[Protection]\nWeight=400\n' > /etc/memprotd/policy.d/50-workload.conf
systemd-run --quiet --slice=workload.slice --unit=kv \
    stress-ng --vm 1 --vm-bytes 150M --vm-keep --vm-method write64 --timeout 1h
systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
check "memprotd wrote system.slice" wait_for 60 sh -c '[ "$(systemctl show -P MemoryMin system.slice)" = 0 ]'

pid() { systemctl show -P MainPID memprotd; }
restarts() { systemctl show -P NRestarts memprotd; }
# Active, answering on the bus, systemd and the kernel agreeing on every
# top-level slice, the siblings within the budget.
consistent() {
    systemctl is-active --quiet memprotd || return 1
    memprotctl status >/dev/null || return 1
    local f s budget
    for f in /sys/fs/cgroup/*.slice/memory.low; do
        s=${f#/sys/fs/cgroup/}; s=${s%/memory.low}
        agree "$s" || { echo "disagree: $s"; return 1; }
    done
    budget=$(status_field budget)
    [ -n "$budget" ] && [ "$(top_level_low_sum)" -le "$budget" ]
}
consistent_soon() { wait_for 30 consistent; }
check "consistent at the start" consistent_soon
check "workload.slice protected (memory.low >= 128M) before the faults" \
    wait_for 120 sh -c '[ "$(cat /sys/fs/cgroup/workload.slice/memory.low)" -ge $((128 << 20)) ]'

# 1. Cgroups that vanish between sample and write: short-lived slices that
# memprotd samples, plans for and may find gone when it writes.
p0=$(pid)
for i in $(seq 1 24); do
    systemd-run --quiet --slice="flap$((i % 4)).slice" --unit="flap-$i" \
        stress-ng --vm 1 --vm-bytes 48M --vm-keep --timeout 3s >/dev/null 2>&1 &
    sleep 1
done
wait
sleep 6
check "vanishing slices: the same process still runs" test "$(pid)" = "$p0"
check "vanishing slices: consistent" consistent_soon
echo "journal lines about flap slices: $(journalctl -u memprotd --no-pager | grep -c 'flap')"

# 2. The writes fail: a bus policy refuses memprotd's SetUnitProperties
# calls (systemd itself ignores a drop-in it cannot write, so the error comes
# from the bus, as it would from a systemd that refuses). memprotd logs the
# failure, backs off, keeps running, and the write goes through afterwards.
deny=/etc/dbus-1/system.d/zz-memprotd-fault.conf
cat > "$deny" <<'EOF'
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <policy context="mandatory">
    <deny send_destination="org.freedesktop.systemd1"
          send_interface="org.freedesktop.systemd1.Manager" send_member="SetUnitProperties"/>
  </policy>
</busconfig>
EOF
systemctl reload dbus
check "failing writes: the policy is in force" \
    sh -c '! busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager SetUnitProperties "sba(sv)" kv.service true 0'
check "failing writes: memprotctl set accepted" memprotctl set workload.slice MaxProtection=64M
check "failing writes: the failure is logged with the unit" \
    wait_for 30 sh -c 'journalctl -u memprotd --no-pager | grep -q "workload.slice: cannot set MemoryLow="'
sleep 6
check "failing writes: the same process still runs" test "$(pid)" = "$p0"
check "failing writes: nothing written while refused" \
    test "$(cat /sys/fs/cgroup/workload.slice/memory.low)" -gt $((64 << 20))
rm -f "$deny"
systemctl reload dbus
check "failing writes: the write goes through once allowed" \
    wait_for 90 sh -c '[ "$(cat /sys/fs/cgroup/workload.slice/memory.low)" -le $((64 << 20)) ]'
check "failing writes: consistent afterwards" consistent_soon
memprotctl reset workload.slice

# 3. The bus daemon restarts: memprotd exits with a failure and systemd
# restarts it on the new bus.
r0=$(restarts)
systemctl restart dbus
check "bus restart: memprotd was restarted by systemd" wait_for 60 sh -c "[ \"\$(systemctl show -P NRestarts memprotd)\" -gt $r0 ]"
check "bus restart: active and answering again" wait_for 60 sh -c 'systemctl is-active --quiet memprotd && memprotctl status'
check "bus restart: the log says why it exited" \
    sh -c 'journalctl -u memprotd --no-pager | grep -q "lost the D-Bus connection"'
check "bus restart: prior values still recorded" grep -q system.slice /run/memprotd/state.json
check "bus restart: consistent" consistent_soon

# 4. The daemon OOM-killed (its own memory.max far below its use), then
# given its memory back: systemd restarts it, the record survives.
r0=$(restarts)
systemctl set-property --runtime memprotd.service MemoryMax=1M MemorySwapMax=0
check "oom: killed" wait_for 60 sh -c "[ \"\$(systemctl show -P NRestarts memprotd)\" -gt $r0 ] || systemctl show -P Result memprotd | grep -q oom-kill"
echo "oom: Result=$(systemctl show -P Result memprotd) NRestarts=$(restarts)"
systemctl set-property --runtime memprotd.service MemoryMax=infinity MemorySwapMax=infinity
systemctl is-active --quiet memprotd || { systemctl reset-failed memprotd; systemctl start memprotd; }
check "oom: running again" wait_for 60 sh -c 'systemctl is-active --quiet memprotd && memprotctl status'
check "oom: prior values still recorded" grep -q system.slice /run/memprotd/state.json
check "oom: consistent" consistent_soon

# 5. The config directory unreadable (memprotd has no CAP_DAC_OVERRIDE):
# the reload fails naming the directory, the last good policy stays.
weight() { memprotctl show workload.slice --json | tr -d ' \n' | grep -o '"weight":[0-9]*' | cut -d: -f2; }
echo "workload.slice weight before: $(weight)"
chmod 000 /etc/memprotd/policy.d
systemctl reload memprotd
sleep 3
check "unreadable config: still active" systemctl is-active --quiet memprotd
check "unreadable config: the journal names the directory" \
    sh -c 'journalctl -u memprotd --no-pager | grep -q "policy.d: cannot list directory"'
check "unreadable config: the policy stays (weight 400)" test "$(weight)" = 400
chmod 755 /etc/memprotd/policy.d
systemctl reload memprotd

# 7. Another writer: workload.slice's memory.low written to the cgroup
# directly, as kubelet does. memprotd says so once, leaves the value alone,
# and writes the slice again after memprotctl reset.
since=$(date '+%Y-%m-%d %H:%M:%S')
echo $((48 << 20)) > /sys/fs/cgroup/workload.slice/memory.low
check "another writer: yielded (status)" wait_for 30 sh -c 'memprotctl status | grep -q "^Yielded:  workload.slice"'
check "another writer: one journal warning" \
    sh -c "[ \"\$(journalctl -u memprotd --since '$since' -o cat | grep -c 'another writer changed them')\" = 1 ]"
check "another writer: explain says so" sh -c 'memprotctl explain workload.slice | grep -q "left to another writer"'
sleep 12
check "another writer: its value stays" test "$(cat /sys/fs/cgroup/workload.slice/memory.low)" = $((48 << 20))
check "another writer: memprotctl reset takes it back" memprotctl reset workload.slice
check "another writer: written again" \
    wait_for 30 sh -c "[ \"\$(cat /sys/fs/cgroup/workload.slice/memory.low)\" != $((48 << 20)) ]"
check "another writer: no longer yielded" sh -c '! memprotctl status | grep -q "^Yielded:"'
check "another writer: consistent" consistent_soon

# Everything so far must leave the user's values recoverable.
check "stop restores MemoryLow of system.slice" sh -c 'systemctl stop memprotd && [ "$(systemctl show -P MemoryLow system.slice)" = 104857600 ]'
check "stop restores MemoryMin of system.slice" test "$(systemctl show -P MemoryMin system.slice)" = 8388608
systemctl start memprotd
check "started again, system.slice recorded again" \
    wait_for 60 sh -c 'grep -q system.slice /run/memprotd/state.json && [ "$(systemctl show -P MemoryMin system.slice)" = 0 ]'

# 6. The record corrupted, then truncated, each followed by a crash: the
# restarted daemon reports it, keeps the bad file aside and restores
# nothing from it.
# The daemon is stopped (SIGSTOP) before the damage: a running daemon that
# records a unit rewrites the whole file, which once undid the truncation
# between `truncate` and the kill (CI rehearsal of 2026-11-25).
for damage in garbage truncated; do
    rm -f /run/memprotd/state.json.corrupt
    since=$(date '+%Y-%m-%d %H:%M:%S')
    p0=$(pid)
    kill -STOP "$p0"
    case "$damage" in
        garbage) printf '{"version": 1, "units": [{"unit": "system.slice", "memory_low": "lots"' > /run/memprotd/state.json ;;
        truncated) truncate -s 25 /run/memprotd/state.json ;;
    esac
    kill -9 "$p0"
    check "$damage record: restarted" wait_for 30 sh -c "p=\$(systemctl show -P MainPID memprotd); [ \"\$p\" != 0 ] && [ \"\$p\" != $p0 ] && systemctl is-active --quiet memprotd"
    check "$damage record: reported with its path" \
        wait_for 10 sh -c "journalctl -u memprotd --no-pager --since '$since' | grep -q '/run/memprotd/state.json: corrupt state'"
    check "$damage record: kept aside as state.json.corrupt" test -s /run/memprotd/state.json.corrupt
    check "$damage record: consistent" consistent_soon
done
journalctl -u memprotd --no-pager | grep -i 'state.json' | tail -n 4
check "after the faults: no core dumps or sanitizer reports" \
    sh -c '! journalctl -u memprotd --no-pager | grep -Eq "dumped core|AddressSanitizer|runtime error:"'
journalctl -u memprotd --no-pager | tail -n 30
finish
