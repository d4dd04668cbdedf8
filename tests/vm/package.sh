# SPDX-License-Identifier: LGPL-2.1-or-later
# The Debian package's life on a real systemd: apt install (enabled, active,
# writing protection), an upgrade to a higher version (restarted, no slice's
# memory.low below its value before the upgrade at any 10 Hz sample, the
# administrator's edit of memprotd.conf kept), apt remove (the prior values
# back) and apt purge (nothing left under /etc, /var/lib, /var/log, /run,
# systemd's runtime drop-ins that memprotd's writes made included). On the
# way, a trace recorded with Record= under /var/log/memprotd is replayed.
# The .deb is tools/package's ($deb after install_memprotd_deb); the
# upgrade is the same package repacked with a higher version (what an
# upgrade runs is the maintainer scripts and the restart, not new binaries).
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

low_of() { cat /sys/fs/cgroup/workload.slice/memory.low; }
low_is() { [ "$(low_of)" = "$1" ]; }
low_above() { [ "$(low_of)" -gt "$1" ]; }
# memory.low every 0.1 s with bash builtins only (a fork per sample is too
# slow in the emulated guest): read from the file, wait on a pipe that stays
# empty.
sample_low() {
    local v fd
    exec {fd}<> <(:)
    while :; do
        read -r v < /sys/fs/cgroup/workload.slice/memory.low && echo "$v"
        read -r -t 0.1 -u "$fd" v || true
    done
}

# A workload that memprotd protects: 150 MiB of anonymous memory it holds,
# in workload.slice, whose MemoryLow= the administrator set to 64M before.
systemd-run --quiet --unit=wl --slice=workload.slice \
    python3 -c 'import time; b = bytearray(b"x" * (150 << 20)); time.sleep(3600)'
systemctl set-property --runtime workload.slice MemoryLow=64M
prior=$((64 << 20))
check "the administrator's MemoryLow=64M is in force" wait_for 10 low_is "$prior"

install_memprotd_deb
check "memprotd enabled" systemctl is-enabled --quiet memprotd
check "memprotd active" wait_for 30 systemctl is-active --quiet memprotd
check "memprotd raised workload.slice's protection above 64M" wait_for 60 low_above "$prior"
systemctl status --no-pager memprotd | head -n 5 || true

# A trace where the packaged unit lets the daemon write (LogsDirectory=):
# recorded on this real host and read back by the replay.
record_trace package
systemctl reload memprotd
trace_lines() { [ "$(wc -l < "$trace")" -ge 4 ]; }
check "the daemon records under /var/log/memprotd (3 samples within 60 s)" wait_for 60 trace_lines
check "/var/log/memprotd is the unit's, mode 0700" test "$(stat -c %a /var/log/memprotd)" = 700
check_replay workload.slice written_memory_low

# The administrator's edit, which the upgrade must keep.
printf '\n# local edit: kept across upgrades\n' >> /etc/memprotd/memprotd.conf

work=$(mktemp -d)
dpkg-deb -R "$deb" "$work/pkg"
sed -i 's/^Version: .*/&+upgrade1/' "$work/pkg/DEBIAN/control"
dpkg-deb --build --root-owner-group "$work/pkg" "$work/memprotd_upgrade.deb" >/dev/null
new_version=$(dpkg-deb -f "$work/memprotd_upgrade.deb" Version)

# Let the protection settle, then sample memory.low at 10 Hz through the upgrade.
sleep 12
before=$(low_of)
pid_before=$(systemctl show -P MainPID memprotd)
since=$(date '+%Y-%m-%d %H:%M:%S')
t0=$(date +%s.%N)
sample_low > "$work/low.samples" &
sampler=$!
check "apt install the upgrade ($new_version)" apt_get install "$work/memprotd_upgrade.deb"
check "memprotd active after the upgrade" wait_for 30 systemctl is-active --quiet memprotd
sleep 12  # two ticks of the upgraded daemon
kill "$sampler"; wait "$sampler" 2>/dev/null || true
seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
samples=$(wc -l < "$work/low.samples")
lowest=$(sort -n "$work/low.samples" | head -n1)
echo "upgrade: memory.low before $before, lowest of $samples samples in $seconds s $lowest, after $(low_of)"
check "the installed version is $new_version" test "$(dpkg-query -W -f '${Version}' memprotd)" = "$new_version"
check "the upgrade restarted memprotd" test "$(systemctl show -P MainPID memprotd)" != "$pid_before"
check "sampled at 8 Hz or more ($samples in $seconds s)" awk -v n="$samples" -v s="$seconds" 'BEGIN { exit !(n >= 8 * s) }'
check "no sample of memory.low below its value before the upgrade" test "$lowest" -ge "$before"
check "systemd's MemoryLow= not below it after the upgrade" test "$(systemctl show -P MemoryLow workload.slice)" -ge "$before"
journalctl -u memprotd --since "$since" --no-pager -o cat | grep -Ei "keep|resum|restor" || true
check "the stopping daemon kept the protection" \
    sh -c "journalctl -u memprotd --since '$since' -o cat | grep -q 'keeping the protection written'"
check "nothing was restored during the upgrade" \
    sh -c "! journalctl -u memprotd --since '$since' -o cat | grep -q 'restored prior'"
check "the upgraded daemon resumed and removed the marker" \
    sh -c "journalctl -u memprotd --since '$since' -o cat | grep -q 'resuming the protection kept' && [ ! -e /run/memprotd/keep-protection ]"
check "the edited memprotd.conf was kept" grep -q '^# local edit: kept across upgrades' /etc/memprotd/memprotd.conf

check "apt remove memprotd" apt_get remove memprotd
check "memprotd stopped" sh -c '! systemctl is-active --quiet memprotd'
check "workload.slice's MemoryLow= back to the administrator's 64M" \
    test "$(systemctl show -P MemoryLow workload.slice)" = "$prior"
check "and so is memory.low" test "$(low_of)" = "$prior"
check "remove keeps the configuration" test -e /etc/memprotd/memprotd.conf

# The list the purge works from: workload.slice's MemoryMin= drop-in is
# memprotd's, its MemoryLow= drop-in the administrator's.
cat /run/memprotd/restored-dropins || true
check "restored-dropins lists workload.slice's MemoryMin=" grep -qxF 'workload.slice MemoryMin=0' /run/memprotd/restored-dropins
check "and not its MemoryLow=" sh -c '! grep -q "^workload.slice MemoryLow=" /run/memprotd/restored-dropins'
check "apt purge memprotd" apt_get purge memprotd
check "purged: no /etc/memprotd" test ! -e /etc/memprotd
check "purged: no /var/lib/memprotd" test ! -e /var/lib/memprotd
check "purged: no /run/memprotd" test ! -e /run/memprotd
check "purged: no /var/log/memprotd (traces)" test ! -e /var/log/memprotd
check "purged: dpkg knows nothing of memprotd" sh -c '! dpkg-query -W memprotd 2>/dev/null'
check "purged: no unit left" sh -c '! systemctl cat memprotd.service'
# systemd's runtime drop-ins: the administrator's MemoryLow=64M of
# workload.slice stays, every other one memprotd's writes made is gone.
ours() { find /run/systemd/system.control \( -name 50-MemoryLow.conf -o -name 50-MemoryMin.conf \) 2>/dev/null | sort; }
ours
admin_dropin=/run/systemd/system.control/workload.slice.d/50-MemoryLow.conf
check "purged: the administrator's drop-in kept" grep -qx "MemoryLow=$prior" "$admin_dropin"
check "purged: no other MemoryLow=/MemoryMin= drop-in left" test "$(ours)" = "$admin_dropin"
check "purged: systemd reloaded (workload.slice needs no daemon-reload)" \
    test "$(systemctl show -P NeedDaemonReload workload.slice)" = no
check "purged: workload.slice's MemoryLow= still the administrator's" \
    test "$(systemctl show -P MemoryLow workload.slice)" = "$prior"
systemctl stop wl.service 2>/dev/null || true
finish
