# SPDX-License-Identifier: LGPL-2.1-or-later
# memprotd as a user meets it on a real systemd: install (apt install of the
# .deb, which enables and starts it), status and introspection, hardening
# score, a broken reload, an unprivileged user, daemon-reexec, kill -9 and
# stop with the user's prior values restored.
# With MEMPROTD_INSTALL=deb (tests/vm/meson.build) the .deb, else (the ASan
# build, which has no package) the staged `meson install` and enable --now.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

# The user's own settings, which memprotd must give back, and a drop-in:
# both in place before memprotd first starts.
systemctl set-property --runtime system.slice MemoryLow=100M MemoryMin=8M
mkdir -p /etc/memprotd/memprotd.conf.d
printf '[Daemon]\nInterval=2s\n' > /etc/memprotd/memprotd.conf.d/50-fast.conf

# The youngest generation of a memcg in debugfs lru_gen (rows are oldest first).
max_seq_of() {
    awk -v p="$1" '$1 == "memcg" { m = ($3 == p) } m && NF == 4 { s = $1 } END { print s + 0 }' \
        /sys/kernel/debug/lru_gen
}
export -f max_seq_of
journald_seq=$(max_seq_of /system.slice/systemd-journald.service)
echo "journald's memcg before memprotd: max_seq $journald_seq"

if [ "${MEMPROTD_INSTALL:-}" = deb ]; then
    install_memprotd_deb
    check "the package enabled memprotd" systemctl is-enabled --quiet memprotd
else
    install_memprotd
    check "systemctl enable --now memprotd" systemctl enable --now memprotd
fi
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
check "the service sent READY and its status" test "$(systemctl show -P StatusText memprotd | cut -c1-8)" = managing
# systemd 253 and later run it as Type=notify-reload (units/meson.build).
systemd_version=$(systemctl --version | awk 'NR == 1 {print $2}')
want_type=notify
[ "$systemd_version" -ge 253 ] && want_type=notify-reload
check "Type=$want_type on systemd $systemd_version" test "$(systemctl show -P Type memprotd)" = "$want_type"
memprotctl status || true
check "status: cgroup2" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"cgroup2\":true"'
check "status: memory_recursiveprot" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"memory_recursiveprot\":true"'
check "status: PSI" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"psi\":true"'
check "status: MGLRU enabled" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"mglru_enabled\":true"'
# Its own pages are locked in RAM (units/memprotd.service.in), so reclaim
# cannot page it out; an ASan build says it is not, and why.
vmlck_kb() { sed -n 's/^VmLck:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$(systemctl show -P MainPID memprotd)/status"; }
if ldd /usr/libexec/memprotd | grep -q libasan; then
    check "status: an ASan build's memory is not locked, and says why" sh -c \
        'memprotctl status | grep -q "^Locked:   own memory not locked.*ASan build"'
else
    check "status: own memory locked" sh -c 'memprotctl status | grep -q "^Locked:   own memory locked in RAM"'
    check "the kernel counts memprotd's locked mappings (VmLck > 0)" test "$(vmlck_kb)" -gt 0
    check "status --json: memory_lock" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"memory_lock\":{\"locked\":true"'
fi
# systemd-oomd beside memprotd: status says whether it runs (the guest image
# does not install it), explain shows a slice's ManagedOOM*= when one asks it
# to kill.
if systemctl cat systemd-oomd.service >/dev/null 2>&1; then oomd=$(systemctl is-active systemd-oomd); else oomd="not installed"; fi
check "status: systemd-oomd $oomd" sh -c "memprotctl status | grep -q '^OOM:      systemd-oomd $oomd'"
check "status --json: systemd-oomd known" sh -c \
    'memprotctl status --json | tr -d " \n" | grep -o "\"systemd_oomd\":{[^}]*}" | grep -q "\"known\":true"'
check "explain: no systemd-oomd line without ManagedOOM*=kill" sh -c '! memprotctl explain system.slice | grep -q "^systemd-oomd:"'
systemctl set-property --runtime system.slice ManagedOOMMemoryPressure=kill
check "explain: ManagedOOMMemoryPressure=kill shown" sh -c \
    'memprotctl explain system.slice | grep -q "^systemd-oomd: ManagedOOMSwap=auto ManagedOOMMemoryPressure=kill"'
check "explain --json: managed_oom" sh -c \
    'memprotctl explain system.slice --json | tr -d " \n" | grep -q "\"memory_pressure\":\"kill\""'
systemctl set-property --runtime system.slice ManagedOOMMemoryPressure=auto
check "busctl introspect org.memprotd1" sh -c 'busctl introspect org.memprotd1 /org/memprotd1 | grep -q SetSlicePolicy'
# The offline verb on the live host: its mount table and /sys/fs/cgroup (the
# unit and cli suites read only fixtures).
check "simulate on the live host plans system.slice" \
    sh -c 'memprotctl simulate --json | tr -d " \n" | grep -q "\"unit\":\"system.slice\""'

score=$(systemd-analyze security memprotd.service 2>/dev/null | sed -n 's/.*Overall exposure level for memprotd.service: \([0-9.]*\).*/\1/p')
echo "systemd-analyze security: exposure $score"
# The README states 1.0 on systemd 252 and 257 (the issue's bound is 2.0).
check "exposure <= 1.0 (the README's figure)" awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 1.0) }'

# memprotd writes system.slice; the kernel and systemd agree on the value.
# No Floor= for system.slice: its MemoryMin goes to 0 (MemoryLow may stay
# within the deadband of the user's 100M on an idle guest).
check "memprotd wrote system.slice (MemoryMin 8M -> 0)" \
    wait_for 60 sh -c '[ "$(systemctl show -P MemoryMin system.slice)" = 0 ]'
check "systemd and the kernel agree on system.slice" wait_for 10 agree system.slice
check "prior values recorded in /run/memprotd" grep -q system.slice /run/memprotd/state.json

# Working-set aging from inside the unit's sandbox: ProtectKernelTunables=
# makes /sys read-only, and ReadWritePaths= reopens debugfs lru_gen alone.
# The guest has been idle since boot, so the managed slices' youngest
# generations are older than half the window at the first tick.
# aging_of KEY [DUMP]: a number from Dump's working_set_aging (from DUMP,
# one `memprotctl dump` output, when several keys must come from one moment).
aging_of() {
    printf '%s' "${2:-$(memprotctl dump)}" | tr -d ' \n' | grep -o '"working_set_aging":{[^}]*}' |
        grep -o "\"$1\":[0-9]*" | cut -d: -f2
}
export -f aging_of
check "status: lru_gen debugfs" sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"lru_gen_debugfs\":true"'
check "working-set aging reached the kernel" wait_for 30 bash -c '[ "$(aging_of aged)" -gt 0 ]'
dump=$(memprotctl dump)
echo "working-set aging: aged $(aging_of aged "$dump"), vanished $(aging_of vanished "$dump"), failed $(aging_of failed "$dump")," \
    "slowest write $(aging_of max_write_us "$dump") us, all writes $(aging_of total_write_us "$dump") us"
memprotctl status | grep '^Aging:'
check "status reports aging" sh -c 'memprotctl status | grep -Eq "^Aging: +[1-9][0-9]* memcg\(s\) aged"'
check "aging writes timed" bash -c \
    '[ "$(aging_of max_write_us "$1")" -gt 0 ] && [ "$(aging_of total_write_us "$1")" -ge "$(aging_of max_write_us "$1")" ]' \
    _ "$dump"
check "no aging write failed" test "$(aging_of failed)" = 0
[ "$(aging_of failed)" = 0 ] || grep '^memcg' /sys/kernel/debug/lru_gen
check "no aging warning in the journal" sh -c '! journalctl -u memprotd -o cat | grep -q "working-set aging:"'
# The kernel made the generation: journald's memcg (an idle service nothing
# else ages: there is no memory pressure here) has a younger one than before.
check "journald's memcg was aged" wait_for 45 bash -c \
    "[ \$(max_seq_of /system.slice/systemd-journald.service) -gt $journald_seq ]"
echo "journald's memcg: max_seq $journald_seq -> $(max_seq_of /system.slice/systemd-journald.service)"

# A broken drop-in on reload: the daemon stays, the old config stays, the
# journal names the file and the line.
printf '[Daemon]\nInterval=banana\n' > /etc/memprotd/memprotd.conf.d/99-broken.conf
# The reload completes (RELOADING=1 then READY=1) even when the new files are
# refused: systemctl reload returns 0 and the unit is active, not reloading.
check "systemctl reload returns after a refused config" timeout 30 systemctl reload memprotd
check "the unit is back from reloading" wait_for 10 sh -c '[ "$(systemctl show -P ActiveState memprotd)" = active ]'
sleep 2
check "still active after a broken reload" systemctl is-active --quiet memprotd
check "old Interval still in force" test "$(status_field interval_us)" = 2000000
check "journal names file and line" \
    sh -c 'journalctl -u memprotd --no-pager | grep -q "99-broken.conf:2"'
rm /etc/memprotd/memprotd.conf.d/99-broken.conf
systemctl reload memprotd

# An unprivileged user reads but may not change anything.
check "tester can read status" runuser -u tester -- memprotctl status
check "tester can read properties" runuser -u tester -- busctl get-property org.memprotd1 /org/memprotd1 org.memprotd1.Manager Mode
# denied VERB...: memprotctl as tester fails with exit 1 and the bus's
# AccessDenied (memprotctl says "permission denied"), not any other error.
denied() {
    local out rc
    out=$(runuser -u tester -- memprotctl "$@" 2>&1)
    rc=$?
    echo "memprotctl $* as tester: exit $rc: $out"
    [ "$rc" = 1 ] && grep -q "permission denied" <<<"$out"
}
check "tester may not change the mode (AccessDenied)" denied mode paused
check "tester may not set a policy (AccessDenied)" denied set system.slice Weight=5
check "tester may not reload (AccessDenied)" denied reload
denied mode paused | tail -n1
check "mode is still enforce" test "$(busctl get-property org.memprotd1 /org/memprotd1 org.memprotd1.Manager Mode)" = 's "enforce"'
check "root may change the mode" memprotctl mode dry-run
check "mode is now dry-run" test "$(busctl get-property org.memprotd1 /org/memprotd1 org.memprotd1.Manager Mode)" = 's "dry-run"'
memprotctl mode enforce

# systemd re-executes: memprotd keeps planning and writing.
before=$(status_field last_plan_timestamp)
systemctl daemon-reexec
sleep 1
check "active after daemon-reexec" systemctl is-active --quiet memprotd
check "plans after daemon-reexec" wait_for 30 sh -c "[ \"\$(memprotctl status --json | tr -d ' \n' | grep -o '\"last_plan_timestamp\":[0-9]*' | cut -d: -f2)\" -gt $before ]"
# A floor 48 MiB above what system.slice has now: the kernel's memory.low
# must rise by at least 32 MiB (the last few MiB may stay within the
# deadband), so the value that arrives differs from the one before.
low_before=$(cat /sys/fs/cgroup/system.slice/memory.low)
floor=$(( (low_before >> 20) + 48 ))
echo "system.slice memory.low before: $low_before; MinProtection=${floor}M"
check "can write after daemon-reexec" memprotctl set system.slice MinProtection=${floor}M
check "the write arrived (memory.low rose by >= 32 MiB toward ${floor}M)" \
    wait_for 60 sh -c "[ \$(cat /sys/fs/cgroup/system.slice/memory.low) -ge $((low_before + (32 << 20))) ]"
echo "system.slice memory.low after: $(cat /sys/fs/cgroup/system.slice/memory.low)"
memprotctl reset system.slice

# kill -9: systemd restarts it; the record of the user's values survives.
pid=$(systemctl show -P MainPID memprotd)
kill -9 "$pid"
check "restarted after kill -9" wait_for 30 sh -c "p=\$(systemctl show -P MainPID memprotd); [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ] && systemctl is-active --quiet memprotd"
check "prior values still recorded" grep -q system.slice /run/memprotd/state.json
wait_for 20 sh -c '[ "$(systemctl show -P MemoryMin system.slice)" = 0 ]'

# Stop: the user's values come back.
# On a real systemd memprotd's own writes never look like another writer's.
check "no slice yielded to another writer" \
    sh -c 'memprotctl status --json | tr -d " \n" | grep -q "\"yielded\":\[\]"'
check "systemctl stop memprotd" systemctl stop memprotd
check "MemoryLow of system.slice restored" test "$(systemctl show -P MemoryLow system.slice)" = 104857600
check "MemoryMin of system.slice restored" test "$(systemctl show -P MemoryMin system.slice)" = 8388608
check "kernel agrees after restore" test "$(cat /sys/fs/cgroup/system.slice/memory.low)" = 104857600
journalctl -u memprotd --no-pager | tail -n 40
finish
