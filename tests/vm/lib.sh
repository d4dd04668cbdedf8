# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for VM scenarios; source with
#   . "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
# check DESCRIPTION COMMAND...  prints PASS/FAIL, the seconds since boot
# when the check ended (where a scenario spends its time), and counts
# failures; finish exits non-zero when any check failed.
vm_failures=0
check() {
    local what=$1; shift
    if "$@" >/dev/null 2>&1; then
        echo "PASS: $what [$(cut -d' ' -f1 /proc/uptime) s]"
    else
        echo "FAIL: $what [$(cut -d' ' -f1 /proc/uptime) s]"
        vm_failures=$((vm_failures + 1))
    fi
}
finish() {
    # A sanitizer build of the daemon (see install_memprotd) reports to the
    # journal; any report fails the scenario.
    if journalctl -u memprotd --no-pager 2>/dev/null | grep -Eq "AddressSanitizer|LeakSanitizer|runtime error:"; then
        echo "FAIL: sanitizer report in memprotd's journal:"
        journalctl -u memprotd --no-pager | grep -E -A20 "AddressSanitizer|LeakSanitizer|runtime error:" | head -n 60
        vm_failures=$((vm_failures + 1))
    fi
    if [ "$vm_failures" -gt 0 ]; then
        echo "$vm_failures check(s) FAILED"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
# The project's gtest binary, run with the guest flag set; a failing or
# missing binary counts as one failed check.
run_gtest() {
    local bin=$MEMPROTD_BUILD_ROOT/$1; shift
    if [ ! -x "$bin" ]; then
        echo "FAIL: $bin not built"
        vm_failures=$((vm_failures + 1))
        return
    fi
    if "$bin" "$@"; then
        echo "PASS: $(basename "$bin")"
    else
        echo "FAIL: $(basename "$bin") exited non-zero"
        vm_failures=$((vm_failures + 1))
    fi
}

# --- for the daemon scenarios ----------------------------------------------------
# Installs the build the way `meson install` put it in $MEMPROTD_BUILD_ROOT/vm-root
# (the vm suite's stage-install test), keeping the guest's /lib -> usr/lib link.
install_memprotd() {
    local stage=$MEMPROTD_BUILD_ROOT/vm-root
    [ -x "$stage/usr/libexec/memprotd" ] || { echo "FAIL: $stage has no memprotd (stage-install not run?)"; exit 1; }
    tar -C "$stage" -cf - . | tar -C / -xf - --keep-directory-symlink --no-same-owner
    # An ASan+UBSan build (tools/test's sanitizer build runs the daemon
    # scenarios too): core dumps stay as they are (the unit's seccomp filter
    # denies setrlimit) and no leak check at exit (LeakSanitizer needs
    # ptrace, which the filter denies too; the host's ASan build checks
    # leaks). Every report is fatal and lands in the journal.
    if ldd /usr/libexec/memprotd | grep -q libasan; then
        echo "memprotd is an ASan+UBSan build"
        export ASAN_OPTIONS=detect_leaks=0  # memprotctl too
        mkdir -p /etc/systemd/system/memprotd.service.d
        printf '[Service]\nEnvironment=ASAN_OPTIONS=disable_coredump=0:detect_leaks=0:abort_on_error=1\nEnvironment=UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1\nWatchdogSec=120s\n' \
            > /etc/systemd/system/memprotd.service.d/50-sanitizers.conf
    fi
    systemctl daemon-reload
    systemctl reload dbus
}
# install_memprotd, then the shipped workload and batch example policies
# without their MinProtection=/Floor= (sized for real hosts, not a 1 GiB
# guest) and Interval=2s: the set-up of the load scenarios.
install_with_example_policies() {
    install_memprotd
    mkdir -p /etc/memprotd/policy.d /etc/memprotd/memprotd.conf.d
    local p
    for p in 50-workload 60-batch; do
        cp "$MEMPROTD_SOURCE_ROOT/units/policy.d/$p.conf.example" "/etc/memprotd/policy.d/$p.conf"
    done
    sed -i '/^MinProtection=/d; /^Floor=/d' /etc/memprotd/policy.d/50-workload.conf
    printf '[Daemon]\nInterval=2s\n' > /etc/memprotd/memprotd.conf.d/50-fast.conf
}
# wait_for SECONDS COMMAND...: polls once a second until COMMAND succeeds.
wait_for() {
    local limit=$1; shift
    local i
    for ((i = 0; i < limit; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}
# slice_field UNIT KEY: a number from `memprotctl list --json` (flat objects).
slice_field() {
    memprotctl list --json | tr -d ' \n' | grep -o "{[^{}]*\"unit\":\"$1\"[^{}]*}" |
        grep -o "\"$2\":[0-9.]*" | head -n1 | cut -d: -f2
}
# status_field KEY: a top-level number from `memprotctl status --json`.
status_field() {
    memprotctl status --json | tr -d ' \n' | grep -o "\"$1\":[0-9.]*" | head -n1 | cut -d: -f2
}
# Sum of memory.low over the top-level slices below ROOT (default
# /sys/fs/cgroup), "max" counting as 2^62: what must stay within the budget.
top_level_low_sum() {
    local f v sum=0
    for f in "${1:-/sys/fs/cgroup}"/*.slice/memory.low; do
        v=$(cat "$f"); [ "$v" = max ] && v=$((1 << 62)); sum=$((sum + v))
    done
    echo "$sum"
}
# The kernel's value and systemd's, which must agree.
memory_low_of() { cat "/sys/fs/cgroup/$1/memory.low"; }
systemd_memory_low_of() {
    local v
    v=$(systemctl show -P MemoryLow "$1")
    [ "$v" = infinity ] && v=max
    echo "$v"
}
# agree SLICE: systemd's MemoryLow and the kernel's memory.low are equal.
# The two reads are not atomic: memprotd may write between them (systemd is
# told first, the kernel a moment later), so callers retry with wait_for and
# only a disagreement that lasts fails.
agree() { [ "$(systemd_memory_low_of "$1")" = "$(memory_low_of "$1")" ]; }

# --- for the scenarios that install the Debian package ---------------------------
# apt_get ARGS...: apt-get without prompts or recommends; its output is
# appended to $MEMPROTD_RESULT_DIR/apt.log (on the host:
# BUILD/meson-logs/vm/NAME/share/result/apt.log).
apt_log=${MEMPROTD_RESULT_DIR:-/tmp}/apt.log
apt_get() {
    DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends "$@" </dev/null >>"$apt_log" 2>&1
}
# install_memprotd_deb: `apt install ./memprotd_*.deb` of the package that
# tools/package built into $MEMPROTD_BUILD_ROOT/package (the suite's
# build-package test), as one check; sets deb to its path. Without a .deb
# there the scenario fails at once. The package enables and starts
# memprotd.service: callers put what its first start must find
# (configuration, the slices' prior values) in place before.
install_memprotd_deb() {
    local failures=$vm_failures debs=("$MEMPROTD_BUILD_ROOT"/package/memprotd_*.deb)
    deb=${debs[0]}
    [ -e "$deb" ] || { echo "FAIL: no memprotd_*.deb in $MEMPROTD_BUILD_ROOT/package (tools/package not run?)"; exit 1; }
    echo "package: $deb"
    check "apt install ./$(basename "$deb")" apt_get install "$deb"
    [ "$vm_failures" = "$failures" ] || tail -n 20 "$apt_log"
}

# --- the loads of the 6.12 scenarios (trim, trim-hot-set, escalation) ------------
# start_table MIB PAUSE: workload.slice's unit "table" keeps MIB MiB of
# anonymous memory and touches 1,000 random pages of it, then sleeps PAUSE
# seconds, for ever: a key-value store's table.
start_table() {
    systemd-run --quiet --slice=workload.slice --unit=table python3 -c "
import random, time
b = bytearray(b'x' * ($1 << 20))
n = len(b) >> 12
while True:
    for _ in range(1000):
        b[random.randrange(n) << 12] = 1
    time.sleep($2)
"
}
# start_streamer: batch.slice's unit "stream" reads a sparse 4 GiB file over
# and over: single-use page cache, more than the guest's memory.
start_streamer() {
    truncate -s 4G /var/tmp/stream.dat
    systemd-run --quiet --slice=batch.slice --unit=stream \
        sh -c 'while :; do cat /var/tmp/stream.dat > /dev/null; done'
}
# start_spikes: workload.slice's unit "spikes" allocates and touches 150 MiB
# at once every 20 s, holds it 10 s and frees it (a request spike); its
# journal says how long each touch took.
start_spikes() {
    systemd-run --quiet --slice=workload.slice --unit=spikes python3 -c '
import time
while True:
    t0 = time.monotonic()
    spike = b"s" * (150 << 20)
    print(f"spike touched in {time.monotonic() - t0:.2f} s", flush=True)
    time.sleep(10)
    del spike
    time.sleep(10)
'
}

# --- traces recorded on the guest ---------------------------------------------------
# record_trace NAME: memprotd records to /var/log/memprotd/NAME.jsonl (the
# shipped unit's LogsDirectory=) from its next start or reload.
record_trace() {
    trace=/var/log/memprotd/$1.jsonl
    mkdir -p /etc/memprotd/memprotd.conf.d
    printf '[Daemon]\nRecord=%s\n' "$trace" > /etc/memprotd/memprotd.conf.d/60-record.conf
}
# check_replay UNIT FIELD: the trace record_trace named holds 3 samples or
# more and states the daemon's engine settings, `memprotctl simulate
# --replay` of it with the guest's configuration runs without saying they
# differ, and some sample of the replay plans FIELD (of the plan JSON's slice)
# above 0 for UNIT; with "trims" as a third argument, every trim the daemon
# made (trims_made) is planned by the replay at its sample. The complete
# lines are replayed (the daemon may be writing one) and kept as
# $MEMPROTD_RESULT_DIR/NAME-KERNEL.jsonl (on the host:
# BUILD/meson-logs/vm/SCENARIO/share/result/) for offline replays.
check_replay() {
    local unit=$1 field=$2 copy out=/tmp/replay.json
    local checker=$MEMPROTD_SOURCE_ROOT/tests/vm/replay_check.py
    copy=${MEMPROTD_RESULT_DIR:-/tmp}/$(basename "$trace" .jsonl)-$(uname -r | cut -d. -f1,2).jsonl
    head -n "$(wc -l < "$trace")" "$trace" > "$copy"
    check "the trace $trace holds 3 samples or more" test "$(wc -l < "$copy")" -ge 4
    check "the trace's header states the daemon's engine settings" sh -c "head -n 1 '$copy' | grep -q '\"engine_config\"'"
    check "the recorded trace replays, under the settings the daemon ran with (no warning)" \
        sh -c "memprotctl simulate --replay '$copy' --json > $out 2> /tmp/replay.err && ! grep -q engine_config /tmp/replay.err"
    if [ -s /tmp/replay.err ]; then cat /tmp/replay.err; fi
    check "its replay plans $field for $unit" python3 "$checker" field "$out" "$unit" "$field"
    if [ "${3:-}" = trims ]; then
        local rc=0 why
        why=$(python3 "$checker" trims "$copy" "$out" 2>&1) || rc=$?
        check "the trace records the daemon's trims, each planned by the replay" test "$rc" = 0
        [ -z "$why" ] || printf '%s\n' "$why"
    fi
    memprotctl simulate --replay "$copy" | sed -n '1p;/^Changes/,/^$/p' | head -n 12 || true
}
