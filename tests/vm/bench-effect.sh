# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Guest side of the effectiveness benchmark (tools/bench-effect; see
# bench/effect/README.md). NOT part of the VM test suite: run through
# tools/vm/run-scenario by tools/bench-effect, one boot per scenario.
#
# Runs kvload (anon, workload.slice) beside cacheread (page cache,
# batch.slice) under each protection policy in turn, and leaves per-run JSON
# lines in $MEMPROTD_RESULT_DIR/runs/<scenario>/<run>/. The memcached
# scenarios run Debian's memcached (workload.slice, filled by mcload) beside
# Debian's fio (buffered random reads from files on the guest's disk,
# batch.slice) instead; mcload, the client, runs in system.slice, so
# workload.slice holds memcached's memory only.
#
# Environment (all optional; tools/bench-effect passes them with --env):
#   BENCH_SCENARIO     stream | reuse | phase-free | phase-cold     (stream)
#                      reuse-zipf, stream-zipf: kvload with zipf keys
#                      (BENCH_ZIPF_THETA, 0.8) so part of its table is cold
#                      reuse-warm, stream-warm: zipf keys clustered by rank
#                      (BENCH_WARM_THETA, 0.99): a hot head and a warm tail
#                      read every 10-40 s, which reclaim can take
#                      phase-reuse: uniform keys beside the reused set; the
#                      key range halves, the upper half stays resident, cold
#                      reuse-mmap, phase-mmap: as reuse-warm and phase-reuse,
#                      with the batch job reading its set through mmap
#                      memcached: memcached -m BENCH_MC_MEMORY filled with
#                      BENCH_MC_FILL of 4 KiB values, mcload (BENCH_MC_CONNS
#                      connections at BENCH_MC_RATE ops/s, 0: closed loop,
#                      and a probe at BENCH_MC_PROBE_RATE; 90% gets, uniform
#                      keys) beside fio randread (psync, 4 KiB, 2 jobs of
#                      BENCH_FIO_SIZE each, on the guest's disk)
#                      memcached-zipf: the same with zipf keys
#                      (BENCH_WARM_THETA, 0.99)
#                      burst: memcached and fio as in memcached, and every
#                      BENCH_BURST_EVERY s (from 10 s into the batch run)
#                      burster in workload.slice allocates and touches
#                      BENCH_BURST_SIZE, holds it BENCH_BURST_HOLD s and
#                      frees it (burst.jsonl: a line per burst); burst-trim:
#                      the same (for the boots that pair memprotd with
#                      memprotd-notrim)
#                      anon-batch: memcached as above beside anonbatch
#                      (BENCH_ANON_SIZE of anonymous memory it keeps
#                      touching at random, batch.slice) instead of fio:
#                      memory both need, none of it cheap
#   BENCH_POLICIES     space-separated: none static-75 static-250M memprotd
#                      static-min-75 (MemoryMin= 75% of RAM on workload.slice)
#                      memprotd-notrim (TrimCheapCache=no)
#                      memprotd-window30m (workload.slice WorkingSetWindow=30min)
#                      memprotd-alt (memprotd's settings, BENCH_MEMPROTD_ALT)
#   BENCH_ROUNDS       repeat the policy list (1), in the order BENCH_ORDER gives
#   BENCH_ORDER        each round's order of the policies                (reverse)
#                      reverse: as listed, reversed every other round;
#                      latin: a Williams square (round r is row (r-1) mod n;
#                      for an odd n, rounds n+1..2n are the rows mirrored):
#                      over n rounds (2n if n is odd) each policy runs in
#                      each place, and right after each other policy,
#                      equally often;
#                      shuffle:SEED: a random order per round from SEED
#   BENCH_DURATION     seconds the batch job runs in each run          (60)
#   BENCH_WARMUP       seconds kvload runs alone before the batch starts (8)
#   BENCH_KV_SIZE      kvload table                                   (384M)
#   BENCH_KV_ARGS      extra kvload arguments ("")
#   BENCH_REUSE_SIZE   reused file working set                        (576M)
#   BENCH_REUSE_BACKING  sparse | brd (real data on the RAM disk)      (sparse)
#   BENCH_STREAM_SIZE  sparse streamer file                           (4G)
#   BENCH_ZRAM_SIZE    zram swap device size                          (768M)
#   BENCH_BIN          dir with kvload and cacheread
#   BENCH_MEMPROTD     the memprotd binary ("" or missing: policy skipped)
#   BENCH_MEMPROTD_ALT memprotd-alt's binary, a second build (likewise)
#   BENCH_SETTLE_MAX   seconds memprotd may take to settle before the batch (120)
#   BENCH_PHASE_AT     seconds into the batch run the table halves     (duration/2)
#   BENCH_REFS         reference runs before the policies        ("alone cpu-ref")
#                      (set but empty: none; tools/bench-effect lists alone and
#                      cpu-ref in BENCH_POLICIES, so they rotate with the rest)
#   BENCH_DEADLINE     guest uptime (s) by which the runs must end; a stalled
#                      run is made again only if that leaves time (0: none)
#   BENCH_MEMPROTD_POLICY  weights: memprotd's defaults plus each example's
#                      Weight= only; examples: units/policy.d/*.example as
#                      shipped (weights)
#   BENCH_INVALID_GAP  a run is invalid when the harness's sampler wrote
#                      nothing for this many s with memory PSI under 10% (40)
#   BENCH_PROTOCOL     the bench/effect/PROTOCOL.md version, recorded ("")
#   BENCH_MEMPROTD_DAEMON  extra [Daemon] settings for memprotd, space-separated ("")
#   BENCH_MEMPROTD_LOG_LEVEL  memprotd's --log-level (info; debug: a line per tick
#                      and slice with its inputs and targets, kept in memprotd.log;
#                      the run's trace.jsonl holds the inputs either way)
#   BENCH_KALLSYMS     1: copy /proc/kallsyms to the results (0)
#   BENCH_MC_MEMORY    memcached -m, MiB                                (450)
#   BENCH_MC_FILL      what mcload stores in memcached before each run  (380M)
#   BENCH_MC_RATE      mcload's total ops/s over its connections; 0: closed
#                      loop, ops/s is what memcached delivers         (300)
#   BENCH_MC_CONNS     mcload's connections                              (4)
#   BENCH_MC_PROBE_RATE  mcload's open-loop probe, ops/s (0: none)       (0)
#   BENCH_MC_PROBE_CONNS the probe's connections                         (1)
#   BENCH_FIO_SIZE     each of fio's two files                          (800M)
#   BENCH_ANON_SIZE    anonbatch's memory (anon-batch)                  (600M)
#   BENCH_BURST_SIZE, BENCH_BURST_EVERY, BENCH_BURST_HOLD  the burst
#                      scenario's spikes                       (150M, 20, 10)
set -u

R=$MEMPROTD_RESULT_DIR
scenario=${BENCH_SCENARIO:-stream}
policies=${BENCH_POLICIES:-none static-75 static-250M memprotd}
rounds=${BENCH_ROUNDS:-1}
order=${BENCH_ORDER:-reverse}
duration=${BENCH_DURATION:-60}
warmup=${BENCH_WARMUP:-8}
kv_size=${BENCH_KV_SIZE:-384M}
kv_args=${BENCH_KV_ARGS:-}
reuse_size=${BENCH_REUSE_SIZE:-576M}
stream_size=${BENCH_STREAM_SIZE:-4G}
zram_size=${BENCH_ZRAM_SIZE:-768M}
bin=${BENCH_BIN:-$MEMPROTD_BUILD_ROOT/bench/effect}
settle_max=${BENCH_SETTLE_MAX:-120}
data=/mnt/bench-data
cg=/sys/fs/cgroup
out=$R/runs/$scenario
mkdir -p "$out"

log() { echo "bench-effect[$scenario]: $(cut -d' ' -f1 /proc/uptime)s: $*"; }
die() { log "FATAL: $*"; exit 1; }

[ -x "$bin/kvload" ] && [ -x "$bin/cacheread" ] || die "kvload/cacheread not found in $bin"
case $scenario in memcached|memcached-zipf|anon-batch|burst|burst-trim) is_mc=1 ;; *) is_mc=0 ;; esac
# The batch job: cacheread (kvload scenarios), fio (memcached scenarios) or
# anonbatch (anon-batch).
case $scenario in anon-batch) batch_kind=anon ;; memcached*|burst*) batch_kind=fio ;; *) batch_kind=cacheread ;; esac
anon_size=${BENCH_ANON_SIZE:-600M}
is_burst=0
case $scenario in burst|burst-trim) is_burst=1 ;; esac
burst_size=${BENCH_BURST_SIZE:-150M} burst_every=${BENCH_BURST_EVERY:-20} burst_hold=${BENCH_BURST_HOLD:-10}
mc_memory=${BENCH_MC_MEMORY:-450}
mc_fill=${BENCH_MC_FILL:-380M}
mc_rate=${BENCH_MC_RATE:-300}
mc_conns=${BENCH_MC_CONNS:-4}
# The burst scenarios judge the probe's latency during bursts: a probe by default.
mc_probe_rate=${BENCH_MC_PROBE_RATE:-$([ "$is_burst" = 1 ] && echo 100 || echo 0)}
mc_probe_conns=${BENCH_MC_PROBE_CONNS:-1}
invalid_gap=${BENCH_INVALID_GAP:-40}
mpd_policy_files=${BENCH_MEMPROTD_POLICY:-weights}
case $mpd_policy_files in weights|examples) ;; *) die "BENCH_MEMPROTD_POLICY=$mpd_policy_files: weights or examples" ;; esac
fio_size=${BENCH_FIO_SIZE:-800M}
fio_dir=/var/tmp/bench-fio
if [ "$is_mc" = 1 ]; then
    [ -x "$bin/mcload" ] || die "mcload not found in $bin"
    command -v memcached >/dev/null && command -v fio >/dev/null || die "memcached or fio missing in the guest image"
fi
[ "$batch_kind" != anon ] || [ -x "$bin/anonbatch" ] || die "anonbatch not found in $bin"
[ "$is_burst" = 0 ] || [ -x "$bin/burster" ] || die "burster not found in $bin"

# A batch-job stop: a second under this many MB/s. fio reads 4 KiB at a
# time with a syscall each, about 1000 a second (4 MB/s) under TCG, from
# the disk or the cache alike, and slower still when its reads miss, so
# for it a stop is a second with next to no reads (0.05 MB/s: a dozen).
stop_mb_s=1
[ "$batch_kind" = fio ] && stop_mb_s=0.05
mem_total_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
mem_total=$((mem_total_kb * 1024))

# --- guest set-up -------------------------------------------------------------------
{
    echo "{\"kernel\":\"$(uname -r)\",\"debian_version\":\"$(cat /etc/debian_version 2>/dev/null)\",\"systemd\":\"$(systemctl --version | head -n1)\","
    echo "\"mem_total\":$mem_total,\"lru_gen\":\"$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null)\","
    echo "\"nproc\":$(nproc),\"scenario\":\"$scenario\",\"duration\":$duration,\"warmup\":$warmup,"
    echo "\"rounds\":$rounds,\"order\":\"$order\","
    echo "\"kv_size\":\"$kv_size\",\"kv_args\":\"$kv_args\",\"reuse_size\":\"$reuse_size\",\"stream_size\":\"$stream_size\","
    echo "\"mc_memory\":$mc_memory,\"mc_fill\":\"$mc_fill\",\"mc_rate\":$mc_rate,\"fio_size\":\"$fio_size\",\"anon_size\":\"$anon_size\",\"batch_kind\":\"$batch_kind\",\"burst_size\":\"$burst_size\",\"burst_every\":$burst_every,\"burst_hold\":$burst_hold,"
    echo "\"mc_conns\":$mc_conns,\"mc_probe_rate\":$mc_probe_rate,\"mc_probe_conns\":$mc_probe_conns,\"invalid_gap_s\":$invalid_gap,"
    echo "\"memprotd_policy\":\"$mpd_policy_files\",\"protocol\":\"${BENCH_PROTOCOL:-}\","
    echo "\"zram_size\":\"$zram_size\",\"swappiness\":$(cat /proc/sys/vm/swappiness),\"phase_at\":${BENCH_PHASE_AT:-null},"
    echo "\"mem_available_kb\":$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo),"
    # The kernel command line (tools/bench-effect --append) and the clocksource.
    echo "\"cmdline\":\"$(sed 's/[\\"]/\\&/g' /proc/cmdline)\","
    echo "\"clocksource\":\"$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)\","
    echo "\"cpu_erms\":$(grep -qw erms /proc/cpuinfo && echo true || echo false),"
    # rep_good: the kernel copies and zeroes pages with rep movsq/stosq
    # (clearcpuid=rep_good turns it off)
    echo "\"cpu_rep_good\":$(grep -qw rep_good /proc/cpuinfo && echo true || echo false),"
    echo "\"tainted\":$(cat /proc/sys/kernel/tainted),"
    # The harness (sampler, stall watch) and the memprotd it starts run here.
    echo "\"harness_cgroup\":\"$(cut -d: -f3 /proc/self/cgroup)\"}"
} | tr -d '\n' > "$out/guest.json"
echo >> "$out/guest.json"
# BENCH_KALLSYMS=1: the guest's kernel symbols, to name the addresses a host
# side sampler read from QEMU's monitor (tools/vm/run-scenario,
# MEMPROTD_VM_MONITOR) while the guest stalled.
[ "${BENCH_KALLSYMS:-0}" = 1 ] && cp /proc/kallsyms "$out/kallsyms"
log "guest: $(cat "$out/guest.json")"

# A fresh zram swap for each run. swapoff reads every swapped page back and
# can fail or leave the device busy for a moment: each step is tried up to
# 5 times a second apart, with swapoff's error and the memory picture logged.
swap_reset() {
    local try err
    for try in 1 2 3 4 5; do
        [ "$(wc -l < /proc/swaps)" -le 1 ] && break
        err=$(swapoff -a 2>&1) && break
        log "swapoff failed (try $try): ${err:-no message}; $(grep -E '^(MemFree|MemAvailable|SwapTotal|SwapFree):' /proc/meminfo | tr -s ' \n' ' ')"
        sleep 1
    done
    if [ -e /sys/block/zram0 ]; then
        for try in 1 2 3 4 5; do
            echo 1 2>/dev/null > /sys/block/zram0/reset && break
            log "zram0 reset failed (try $try): $(cat /proc/swaps | tr -s ' \n' ' ')"
            sleep 1
        done
    else
        modprobe zram num_devices=1 || die "no zram module"
    fi
    # lz4 if the kernel has it (cheaper under emulation), else the default.
    grep -qw lz4 /sys/block/zram0/comp_algorithm && echo lz4 > /sys/block/zram0/comp_algorithm
    echo "$zram_size" > /sys/block/zram0/disksize || die "cannot size zram0"
    mkswap -q /dev/zram0 >/dev/null || die "mkswap /dev/zram0 failed"
    swapon -p 100 /dev/zram0 || die "swapon /dev/zram0 failed"
}

size_kb() { echo $(( $("$bin/cacheread" --print-size "$1") / 1024 )); }
# Batch job files live on ext4 on a small RAM disk (brd), as in the seeds'
# set-up, and are sparse by default: reads of a hole fill the page cache
# with zeroed pages without any device I/O, so a "file larger than RAM"
# costs no space, and a miss costs a page allocation and a zero-fill (in the
# seeds a copy from the RAM disk) instead of an emulated virtio request
# (a few hundred IOPS under TCG). BENCH_REUSE_BACKING=brd puts real data for
# the reused working set on the RAM disk instead; brd pages are charged to
# no cgroup and take RAM away from both slices.
reuse_backing=${BENCH_REUSE_BACKING:-sparse}
brd_kb=65536
case $scenario in reuse*|phase-reuse|phase-mmap) is_reuse=1 ;; *) is_reuse=0 ;; esac
if [ "$is_reuse" = 1 ] && [ "$reuse_backing" = brd ]; then
    brd_kb=$(( $(size_kb "$reuse_size") * 11 / 10 + 24576 ))
fi
modprobe brd rd_nr=1 rd_size="$brd_kb" max_part=0 || die "modprobe brd failed"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/ram0 || die "mkfs.ext4 /dev/ram0 failed"
mkdir -p "$data"
mount -t ext4 -o noatime /dev/ram0 "$data" || die "cannot mount /dev/ram0"
# fio's files for the memcached scenarios, made once per boot: two of SIZE
# (fio's own names for --name=batch --numjobs=2) in DIR on the guest's disk.
fio_layout() {  # dir size
    local need_kb avail_kb
    mkdir -p "$1"
    need_kb=$(( 2 * $(size_kb "$2") ))
    avail_kb=$(df -Pk "$1" | awk 'NR == 2 {print $4}')
    [ "$avail_kb" -gt "$need_kb" ] || die "$1: ${avail_kb} KiB free, fio needs ${need_kb} KiB (DISK_SIZE in tools/vm/build-image)"
    fio --name=batch --rw=randread --ioengine=psync --bs=4k --size="$2" --numjobs=2 --directory="$1" \
        --create_only=1 > "$out/fio-layout.txt" 2>&1 || die "fio could not lay out its files in $1: $(tail -n3 "$out/fio-layout.txt")"
    sync
}
batch_files=()
case $scenario in
    stream|stream-zipf|stream-warm|phase-free|phase-cold)
        "$bin/cacheread" --create "$stream_size" --sparse "$data/stream.dat" >/dev/null
        batch_files=("$data/stream.dat") ;;
    memcached|memcached-zipf|burst|burst-trim)
        fio_layout "$fio_dir" "$fio_size"
        fio_layout "$fio_dir/small" 8M
        batch_files=("$fio_dir"/batch.*) ;;
    anon-batch) ;;  # anonbatch allocates its memory itself
    reuse|reuse-zipf|reuse-warm|phase-reuse|reuse-mmap|phase-mmap)
        sparse_flag=--sparse
        [ "$reuse_backing" = brd ] && sparse_flag=
        "$bin/cacheread" --create "$reuse_size" $sparse_flag "$data/ws.dat" >/dev/null \
            || die "cannot create $data/ws.dat ($reuse_size)"
        batch_files=("$data/ws.dat") ;;
    *) die "unknown scenario $scenario" ;;
esac
case $scenario in
    reuse-zipf|stream-zipf) kv_args="$kv_args --dist zipf --theta ${BENCH_ZIPF_THETA:-0.8}" ;;
    reuse-warm|stream-warm|reuse-mmap) kv_args="$kv_args --dist zipf --theta ${BENCH_WARM_THETA:-0.99} --layout clustered" ;;
    phase-free) kv_args="$kv_args --shrink-mode free" ;;
    phase-cold|phase-reuse|phase-mmap) kv_args="$kv_args --shrink-mode cold" ;;
    memcached-zipf) kv_args="$kv_args --dist zipf --theta ${BENCH_WARM_THETA:-0.99}" ;;
esac
batch_args=()
case $scenario in *-mmap) batch_args=(--mmap) ;; esac
phase=0
case $scenario in phase-*) phase=1 ;; esac
# When the table halves (seconds into the batch run): halfway by default.
phase_at=${BENCH_PHASE_AT:-$((duration / 2))}
[ "${#batch_files[@]}" = 0 ] || log "batch files: ${batch_files[*]} ($(du -sh --apparent-size "${batch_files[@]}" | cut -f1), on disk $(du -sh "${batch_files[@]}" | cut -f1))"

# --- helpers ------------------------------------------------------------------------
read1() { local v=; read -r v < "$1" 2>/dev/null; echo "${v:-0}"; }
# read_keys FILE ARRAY: FILE's "key rest-of-line" lines into the associative
# array ARRAY (emptied first; missing file: left empty). The file is read
# whole, front to back, by mapfile: the kernel regenerates a cgroup or /proc
# file on every read, and bash's `while read` seeks back after each line,
# so while counters change a line can start at a shifted offset and lose
# its key. Never read a counter file with `while read`.
read_keys() {
    local -n _rk=$2
    local _lines=() _l _k _v
    _rk=()
    mapfile -t _lines < "$1" 2>/dev/null || return 0
    for _l in "${_lines[@]}"; do
        _k=${_l%%[[:space:]]*}
        [ -n "$_k" ] || continue
        _v=${_l#"$_k"}
        _rk[$_k]=${_v#"${_v%%[![:space:]]*}"}
    done
}
# psi_totals FILE SOME FULL: the total= (µs) of a PSI file's some and full
# lines into the variables named SOME and FULL (0 where absent).
psi_totals() {
    local -n _some=$2 _full=$3
    local -A _psi=()
    read_keys "$1" _psi
    _some=${_psi[some]:-total=0} _full=${_psi[full]:-total=0}
    _some=${_some##*total=} _full=${_full##*total=}
}
# Counters of one slice as a JSON object.
counters() {
    local d=$cg/$1 some=0 full=0 cpu=0
    local -A st=() cs=() ev=()
    if [ -d "$d" ]; then
        read_keys "$d/memory.stat" st
        psi_totals "$d/memory.pressure" some full
        # the slice's CPU time, µs (cgroup v2 keeps usage_usec without the cpu controller)
        read_keys "$d/cpu.stat" cs
        cpu=${cs[usage_usec]:-0}
        read_keys "$d/memory.events" ev
    fi
    local low_ev=${ev[low]:-0} high_ev=${ev[high]:-0} oom=${ev[oom_kill]:-0}
    printf '{"current":%s,"low":%s,"min":%s,"swap":%s,"anon":%s,"file":%s,"psi_some_us":%s,"psi_full_us":%s,' \
        "$(read1 "$d/memory.current")" "$(read1 "$d/memory.low")" "$(read1 "$d/memory.min")" \
        "$(read1 "$d/memory.swap.current")" "${st[anon]:-0}" "${st[file]:-0}" "$some" "$full"
    printf '"refault_anon":%s,"refault_file":%s,"activate_anon":%s,"activate_file":%s,"pgmajfault":%s,"pgsteal":%s,"events_low":%s,"events_high":%s,"oom_kill":%s,"cpu_usec":%s}' \
        "${st[workingset_refault_anon]:-0}" "${st[workingset_refault_file]:-0}" \
        "${st[workingset_activate_anon]:-0}" "${st[workingset_activate_file]:-0}" \
        "${st[pgmajfault]:-0}" "${st[pgsteal]:-0}" "$low_ev" "$high_ev" "$oom" "$cpu"
}
# kvload's scheduling, summed over its threads: time on a CPU (its own
# work and the kernel's on its behalf: faults, zram, direct reclaim) and
# waiting on a run queue behind whatever else runs (the batch job, kswapd,
# kworkers, memprotd), from /proc/PID/task/TID/schedstat in ns, and its
# (in)voluntary context switches. With the pid and the thread count, so
# the analysis can tell a kvload that exited or lost a thread in between.
kv_sched() {
    local pid t a b _ k v st run=0 rq=0 vcs=0 nvcs=0 threads=0
    pid=$(systemctl show -p MainPID --value bench-kv.service 2>/dev/null)
    if [ -n "$pid" ] && [ "$pid" != 0 ]; then
        for t in /proc/"$pid"/task/*; do
            { read -r a b _ < "$t/schedstat"; } 2>/dev/null || continue
            st=$(cat "$t/status" 2>/dev/null) || continue
            threads=$((threads + 1)) run=$((run + a)) rq=$((rq + b))
            while read -r k v; do
                case $k in
                    voluntary_ctxt_switches:) vcs=$((vcs + v)) ;;
                    nonvoluntary_ctxt_switches:) nvcs=$((nvcs + v)) ;;
                esac
            done <<< "$st"
        done
    fi
    printf '{"pid":%s,"threads":%s,"run_ns":%s,"wait_ns":%s,"vcs":%s,"nvcs":%s}' \
        "${pid:-0}" "$threads" "$run" "$rq" "$vcs" "$nvcs"
}
snapshot() {  # label
    local swpin swpout mpd_ticks=null
    swpin=$(awk '/^pswpin / {print $2}' /proc/vmstat)
    swpout=$(awk '/^pswpout / {print $2}' /proc/vmstat)
    # memprotd's own CPU time (utime + stime, clock ticks), when it runs.
    if [ -n "${mpd_pid:-}" ] && [ -r "/proc/$mpd_pid/stat" ]; then
        mpd_ticks=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$mpd_pid/stat")
    fi
    # Guest-wide context switches and TLB shootdown IPIs (x86's "TLB:" row
    # of /proc/interrupts, summed over the CPUs).
    printf '{"at":"%s","ts":%s,"workload":%s,"batch":%s,"pswpin":%s,"pswpout":%s,"mem_available_kb":%s,"memprotd_cpu_ticks":%s,"kv_sched":%s,"ctxt":%s,"tlb_shootdowns":%s}\n' \
        "$1" "$(date +%s.%N)" "$(counters workload.slice)" "$(counters batch.slice)" "$swpin" "$swpout" \
        "$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)" "${mpd_ticks:-null}" "$(kv_sched)" \
        "$(awk '$1 == "ctxt" {print $2}' /proc/stat)" \
        "$(awk '$1 == "TLB:" {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i} END {print s + 0}' /proc/interrupts)"
}
swap_owners() {  # the cgroups holding swap (pswpout is guest-wide), largest first
    local f v
    for f in "$cg"/*/memory.swap.current "$cg"/*/*/memory.swap.current "$cg"/*/*/*/memory.swap.current; do
        [ -r "$f" ] || continue
        v=$(cat "$f")
        [ "$v" -gt 0 ] && printf '%s %s\n' "$v" "${f#"$cg"/}"
    done | sort -rn | head -n 20
}
sampler() {  # per-second slice state while a run is going (builtins and read_keys only)
    local sl d psi cpu low_ev sl_psi_full allocstall k
    while :; do
        printf '{"ts":%s' "$(date +%s.%N)"
        for sl in workload batch; do
            d=$cg/$sl.slice
            [ -d "$d" ] || continue
            # each slice its own arrays, filled afresh from this second's files
            local -A s=() cs=() ev=()
            read_keys "$d/memory.stat" s
            # per-second counters for the figures per unit of work (analysis.unit_stats)
            psi_totals "$d/memory.pressure" psi sl_psi_full
            read_keys "$d/cpu.stat" cs
            cpu=${cs[usage_usec]:-0}
            # memory.events' low: reclaim that took pages from the slice
            # while it was within memory.low (hierarchical, as memprotd reads it)
            read_keys "$d/memory.events" ev
            low_ev=${ev[low]:-0}
            printf ',"%s":{"current":%s,"low":%s,"min":%s,"anon":%s,"file":%s,"swap":%s,"psi_some_us":%s,"pgmajfault":%s,"refault_anon":%s,"cpu_usec":%s,"events_low":%s,"psi_full_us":%s}' "$sl" \
                "$(read1 "$d/memory.current")" "$(read1 "$d/memory.low")" "$(read1 "$d/memory.min")" \
                "${s[anon]:-0}" "${s[file]:-0}" "$(read1 "$d/memory.swap.current")" \
                "$psi" "${s[pgmajfault]:-0}" "${s[workingset_refault_anon]:-0}" "$cpu" "$low_ev" "$sl_psi_full"
        done
        # Host-wide reclaim and CPU: when this loop stalls, the gap and these
        # counters around it show who reclaimed and how much CPU the kernel took.
        local -A vm=() mi=()
        read_keys /proc/vmstat vm
        allocstall=0
        for k in "${!vm[@]}"; do
            case $k in allocstall_*) allocstall=$((allocstall + vm[$k])) ;; esac
        done
        local cpu_line psi_some psi_full
        read -r cpu_line < /proc/stat
        psi_totals /proc/pressure/memory psi_some psi_full
        printf ',"vm":{"allocstall":%s,"pgscan_direct":%s,"pgscan_kswapd":%s,"pgsteal_direct":%s,"pgsteal_kswapd":%s,"pgmajfault":%s,"refault_file":%s,"refault_anon":%s,"pswpin":%s}' \
            "$allocstall" "${vm[pgscan_direct]:-0}" "${vm[pgscan_kswapd]:-0}" "${vm[pgsteal_direct]:-0}" \
            "${vm[pgsteal_kswapd]:-0}" "${vm[pgmajfault]:-0}" "${vm[workingset_refault_file]:-0}" "${vm[workingset_refault_anon]:-0}" "${vm[pswpin]:-0}"
        # cpu: user nice system idle iowait irq softirq steal (USER_HZ ticks)
        set -- $cpu_line
        printf ',"cpu":[%s,%s,%s,%s,%s,%s,%s,%s],"psi_mem_us":{"some":%s,"full":%s}' \
            "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${psi_some:-0}" "${psi_full:-0}"
        # I/O PSI tells a batch job waiting on the disk from one waiting on
        # memory; zram's RAM (mm_stat's mem_used_total) is charged to no
        # cgroup, so it is the part of the guest's memory no slice shows.
        local io_some io_full zram_used=0 free_kb
        psi_totals /proc/pressure/io io_some io_full
        [ -r /sys/block/zram0/mm_stat ] && read -r _ _ zram_used _ < /sys/block/zram0/mm_stat
        read_keys /proc/meminfo mi
        free_kb=${mi[MemFree:]:-0} free_kb=${free_kb%% *}
        printf ',"psi_io_us":{"some":%s},"zram_used":%s,"mem_free_kb":%s}\n' "${io_some:-0}" "${zram_used:-0}" "$free_kb"
        sleep 1
    done
}
set_low() {  # slice low min
    systemctl set-property --runtime "$1" MemoryLow="$2" MemoryMin="$3" || log "set-property $1 failed"
}
stop_all() {
    systemctl stop bench-burst.service bench-batch.service bench-kv.service 2>/dev/null
    systemctl stop bench-mc.service 2>/dev/null  # after its client
    systemctl reset-failed bench-burst.service bench-batch.service bench-kv.service bench-mc.service 2>/dev/null
    if [ -n "${mpd_pid:-}" ]; then
        mpd_cpu_line "$mpd_pid" stop >> "$mpd_cpu_file"
        kill -TERM "$mpd_pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$mpd_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$mpd_pid" 2>/dev/null
        wait "$mpd_pid" 2>/dev/null
        mpd_pid=
    fi
    if [ -n "${sampler_pid:-}" ]; then
        kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null; sampler_pid=
    fi
    if [ -n "${watch_pid:-}" ]; then
        kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null; watch_pid=
    fi
}
reset_state() {
    stop_all
    for s in workload.slice batch.slice system.slice user.slice; do
        systemctl set-property --runtime "$s" MemoryLow=0 MemoryMin=0 2>/dev/null
    done
    swap_reset
    sync
    echo 3 > /proc/sys/vm/drop_caches
    echo 1 > /proc/sys/vm/compact_memory 2>/dev/null
    sleep 2
}
wait_ready() {  # file timeout
    local i
    for i in $(seq 1 $(( $2 * 5 ))); do
        grep -q '"event":"ready"' "$1" 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}
# Wait until workload.slice's MemoryLow has not changed for 20 s (memprotd
# grows protection by at most ~5% of the budget per 10 s); at most $1 s.
wait_settled() {
    local max=$1 pid=$2 last=-1 same=0 t=0 v
    while [ "$t" -lt "$max" ]; do
        kill -0 "$pid" 2>/dev/null || { echo "$t"; return 1; }
        v=$(read1 $cg/workload.slice/memory.low)
        if [ "$v" = "$last" ] && [ "$v" != 0 ]; then same=$((same + 2)); else same=0; last=$v; fi
        [ "$same" -ge 20 ] && { echo "$t"; return 0; }
        sleep 2; t=$((t + 2))
    done
    echo "$t"
    return 1
}

# Mean MB/s of the batch job's per-second lines from its 4th second on;
# "stalled" below stop_mb_s (a working cacheread reads tens of MB/s here).
# fio writes its per-second log when it ends, so for fio this check and
# stall_watch see nothing during the run; run_invalid reads it after.
batch_stalled() {
    awk -v lim="$stop_mb_s" -F'"mb_s":' '/"t":/ { split($2, a, /[,}]/); n++; if (n > 3) { s += a[1]; m++ } }
        END { exit !(m > 0 && s / m < lim) }' "$1"
}
guest_stalls() { dmesg | grep -cE 'rcu.*stall|soft lockup|hung_task|blocked for more than'; }
# Longest run of consecutive seconds under 1 MB/s after the batch job's
# first 19 (before that, batch_stalled and the early check look), as
# "seconds first-ts last-ts" (the stretch's own timestamps).
batch_longest_stop() {
    awk -v lim="$stop_mb_s" -F'"mb_s":' '/"t":/ { split($2, a, /[,}]/); split($1, b, /"ts":/); split(b[2], c, ","); n++
            if (n <= 19) next
            if (a[1] < lim) { if (!z) s = c[1] - 1; z++; if (z > m) { m = z; f = s; l = c[1] } } else z = 0 }
        END { printf "%d %.3f %.3f\n", m, f, l }' "$1"
}
# Memory PSI "some" over [from, to] as % of that time, from the sampler's
# lines around it (its "psi_mem_us" is /proc/pressure/memory's total). The
# sampler takes a line's timestamp first and reads PSI after the slice
# files, so a line's PSI was read between its own timestamp and the next
# line's. The window therefore starts at the line before the last one at or
# before "from" (whose PSI was surely read by then) and ends at the first
# line at or after "to" (whose PSI may be read later still: the window errs
# towards counting pressure, so towards a valid run; with no line at or
# before "from", or none at or after "to", it prints 100). 20261125-043657
# is why: the sampler stalled in the line that opens its 60 s gap, between
# its timestamp and its PSI read, and that line carries 28 s of PSI accrued
# inside the gap.
sampler_psi_pct() {  # file from to
    awk -v from="$2" -v to="$3" -F'"ts":' 'index($0, "\"psi_mem_us\"") == 0 { next }  # a line cut short
        { split($2, a, ","); t = a[1] + 0
            split($0, b, /"psi_mem_us":\{"some":/); split(b[2], c, ","); p = c[1] + 0
            if (t <= from) { if (tp) { t0 = tp; p0 = pp } else { t0 = t; p0 = p } }
            else if (t >= to && !t1) { t1 = t; p1 = p }
            tp = t; pp = p }
        END { if (t0 && t1 > t0) printf "%d\n", 100 * (p1 - p0) / 1e6 / (t1 - t0); else print 100 }' "$1"
}
# Longest gap in whole seconds between two lines of the sampler, which
# writes one a second: "seconds from-ts to-ts" (the two lines' timestamps,
# in full, so that sampler_psi_pct finds the same two lines).
sampler_longest_gap() {
    awk -F'"ts":' '{ split($2, a, ","); t = a[1] + 0
            if (p && t - p > m) { m = t - p; f = p; l = t }; p = t }
        END { printf "%d %.17g %.17g\n", m, f, l }' "$1"
}
# Prints why a finished run is invalid (exit 0), or nothing (exit 1): the
# kernel reported a stall during it, or the batch job read next to nothing
# from its start while its cgroup saw no memory pressure at all (the TCG
# pathology above; $3 = 1 when seen in its first seconds). A workload that
# stops under memory pressure is a result, not an invalid run: kvload
# stalls of several seconds under static-250M are what that policy does.
# The guest can also stall without the kernel reporting it (20261124-233745's
# 04-memprotd.stalled1: the batch job read nothing for 42 s, memory PSI 6%).
# So a batch job stopped for 30 s in a row, or a sampler gap of 40 s,
# invalidates a run too, when memory PSI "some" over it was under 10% (a
# stop under memory pressure is a result: 20261125-043657's 46 s stop and
# 60 s gap had 43-44%).
# Valid runs so far, apart from 043657, reach a 17 s stop and a 22 s gap
# (reuse-mmap under none and static-250M, with PSI 38% and 15%); the two
# known stalls 24-42 s and 30-37 s with PSI 2-6%, one of them (24 s, 30 s)
# under these lengths and caught by the kernel's report only.
run_invalid() {  # dir stalls-before early-stall
    local n psi stop from to gap
    n=$(( $(guest_stalls) - $2 ))
    if [ "$n" -gt 0 ]; then
        echo "the guest kernel reported $n stall(s): $(dmesg | grep -E 'rcu.*stall|soft lockup|hung_task|blocked for more than' | tail -n1)"
        return 0
    fi
    if [ -e "$1/batch.jsonl" ]; then
        read -r stop from to < <(batch_longest_stop "$1/batch.jsonl")
        if [ "$stop" -ge 30 ] && [ "$(sampler_psi_pct "$1/slices.jsonl" "$from" "$to")" -lt 10 ]; then
            echo "the batch job read under $stop_mb_s MB/s for $stop s in a row without memory pressure (a guest stall)"
            return 0
        fi
    fi
    read -r gap from to < <(sampler_longest_gap "$1/slices.jsonl")
    if [ "$gap" -ge "$invalid_gap" ] && psi=$(sampler_psi_pct "$1/slices.jsonl" "$from" "$to") && [ "$psi" -lt 10 ]; then
        echo "the harness's per-second sampler wrote nothing for $gap s, memory PSI $psi% (a guest stall)"
        return 0
    fi
    if [ "$3" = 1 ]; then
        psi=$(awk -F'"psi_some_us":' 'NR == 1 { split($3, a, ","); s = a[1] } END { split($3, a, ","); print a[1] - s }' "$1/counters.jsonl")
        if [ "${psi:-1}" -lt 100000 ]; then
            echo "the batch job read under $stop_mb_s MB/s from its start, without memory pressure (batch PSI some ${psi} µs)"
            return 0
        fi
    fi
    return 1
}
stall_diag() {  # file: what the reader waits on, five times a second apart
    local pid i
    pid=$(systemctl show -p MainPID --value bench-batch.service)
    for i in 1 2 3 4 5; do
        {
            echo "--- $(cut -d' ' -f1 /proc/uptime)s pid $pid"
            for t in /proc/"$pid"/task/*; do
                echo "task ${t##*/}: $(cut -d' ' -f3 "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
                cat "$t/stack" 2>/dev/null
            done
            echo "cpu: $(tr '\n' ' ' < /proc/pressure/cpu) io: $(tr '\n' ' ' < /proc/pressure/io)"
            grep -E '^(MemFree|Cached|Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' '; echo
            top -b -n1 | head -n 15
        } >> "$1" 2>&1
        sleep 1
    done
}

# Mid-run stall watch: the first time the batch job's last five seconds
# were all under 1 MB/s (after its first 19, and unless the early check
# already diagnosed a stall), what the reader and memprotd wait on goes to
# midrun-stall.txt. A diagnosis only; it costs a tail and an awk a second,
# and top and /proc reads for 5 s when it fires.
stall_watch() {  # dir
    local n=0
    while sleep 1; do
        n=$((n + 1))
        [ "$n" -gt 19 ] || continue
        [ -e "$1/stall-diag.txt" ] && return 0
        tail -n 5 "$1/batch.jsonl" 2>/dev/null | awk -v lim="$stop_mb_s" -F'"mb_s":' '/"t":/ { split($2, a, /[,}]/); m++; if (a[1] < lim) z++ }
            END { exit !(m == 5 && z == 5) }' || continue
        {
            echo "=== batch job under 1 MB/s for 5 s, $n s after its start"
            if [ -n "${mpd_pid:-}" ]; then
                echo "--- memprotd pid $mpd_pid: $(cut -d' ' -f3 /proc/"$mpd_pid"/stat 2>/dev/null) wchan=$(cat /proc/"$mpd_pid"/wchan 2>/dev/null)"
                cat /proc/"$mpd_pid"/stack 2>/dev/null
            fi
            grep -A6 -E '^memcg +[0-9]+ /(batch|workload)\.slice' /sys/kernel/debug/lru_gen 2>/dev/null
        } >> "$1/midrun-stall.txt" 2>&1
        stall_diag "$1/midrun-stall.txt"
        return 0
    done
}

# memcached for the memcached scenarios (bench-mc, workload.slice), filled
# with mc_fill of 4 KiB values once it listens; sets mc_keys.
start_memcached() {  # run dir
    systemd-run --quiet --unit=bench-mc --slice=workload.slice -p StandardOutput="file:$1/memcached.log" \
        memcached -m "$mc_memory" -U 0 -t 2 -l 127.0.0.1 -p 11211 -u nobody || die "systemd-run memcached failed"
    for _ in $(seq 1 150); do
        (exec 3<>/dev/tcp/127.0.0.1/11211) 2>/dev/null && break
        sleep 0.2
    done
    "$bin/mcload" --fill "$mc_fill" --value 4096 --fill-only > "$1/fill.jsonl" 2> "$1/fill.err" \
        || die "mcload could not fill memcached: $(cat "$1/fill.err")"
    mc_keys=$(sed -n 's/.*"keys":\([0-9]*\).*/\1/p' "$1/fill.jsonl")
    log "memcached filled: $(cat "$1/fill.jsonl"); workload.slice $(( $(read1 $cg/workload.slice/memory.current) >> 20 )) MiB"
}
# The latency-critical workload as unit bench-kv, writing kv.jsonl: kvload
# (workload.slice), or mcload (system.slice, so that workload.slice holds
# memcached's memory only) driving memcached.
start_workload() {  # run dir
    local cmd slice=workload.slice
    if [ "$is_mc" = 1 ]; then
        start_memcached "$1"
        cmd=("$bin/mcload" --keys "$mc_keys" --value 4096 --rate "$mc_rate" --conns "$mc_conns"
             --probe-rate "$mc_probe_rate" --probe-conns "$mc_probe_conns" --duration 0)
        slice=system.slice
    else
        cmd=("$bin/kvload" --size "$kv_size" --duration 0)
    fi
    # shellcheck disable=SC2206
    cmd+=($kv_args)
    systemd-run --quiet --unit=bench-kv --slice="$slice" -p StandardOutput="file:$1/kv.jsonl" \
        -p StandardError="file:$1/kv.err" "${cmd[@]}" || die "systemd-run ${cmd[0]} failed"
}
# The batch job as unit bench-batch in batch.slice for $duration s:
# cacheread or anonbatch writing batch.jsonl, or fio writing its per-second
# bandwidth logs (fio_to_jsonl makes batch.jsonl of them when it ends).
# cpu-ref: the same job over files small enough to stay cached, or over
# 8 MiB of memory — the same competition for the (emulated) CPUs, no memory
# pressure.
start_batch() {  # run dir, policy
    if [ "$batch_kind" = anon ]; then
        local size=$anon_size
        [ "$2" = cpu-ref ] && size=8M
        systemd-run --quiet --unit=bench-batch --slice=batch.slice -p StandardOutput="file:$1/batch.jsonl" \
            -p StandardError="file:$1/batch.err" "$bin/anonbatch" --size "$size" --duration "$duration" \
            || die "systemd-run anonbatch failed"
        return 0
    fi
    if [ "$batch_kind" = fio ]; then
        local dir=$fio_dir size=$fio_size
        [ "$2" = cpu-ref ] && dir=$fio_dir/small size=8M
        systemd-run --quiet --unit=bench-batch --slice=batch.slice -p StandardOutput="file:$1/fio.txt" \
            -p StandardError="file:$1/batch.err" \
            fio --name=batch --rw=randread --ioengine=psync --bs=4k --size="$size" --numjobs=2 --directory="$dir" \
            --time_based --runtime="$duration" --write_bw_log="$1/fio" --log_avg_msec=1000 \
            || die "systemd-run fio failed"
        return 0
    fi
    local files=("${batch_files[@]}")
    [ "$2" = cpu-ref ] && files=("$data/small.dat")
    systemd-run --quiet --unit=bench-batch --slice=batch.slice -p StandardOutput="file:$1/batch.jsonl" \
        -p StandardError="file:$1/batch.err" "$bin/cacheread" --duration "$duration" "${batch_args[@]}" "${files[@]}" \
        || die "systemd-run cacheread failed"
}
# The burst scenario's spikes as unit bench-burst in workload.slice for the
# batch run, the first 10 s in (after the cache fill the figures skip),
# writing burst.jsonl. In every run, references included: they are the
# workload's own.
start_bursts() {  # run dir
    systemd-run --quiet --unit=bench-burst --slice=workload.slice -p StandardOutput="file:$1/burst.jsonl" \
        -p StandardError="file:$1/burst.err" "$bin/burster" --size "$burst_size" --every "$burst_every" \
        --hold "$burst_hold" --delay 10 --duration "$duration" || die "systemd-run burster failed"
}
# fio's bandwidth logs (fio_bw.N.log, one per job: "msec, KiB/s, dir, bs,
# offset", an average a second) as batch.jsonl: a line a second with both
# jobs summed, keyed as cacheread's (t, ts, iops, mb_s), and a summary with
# the reads. fio's clock starts with its job, taken as the unit's start
# (start_ts); a second with no log entry (no read completed) is 0 MB/s.
fio_to_jsonl() {  # run dir, start_ts
    cat "$1"/fio_bw*.log 2>/dev/null | awk -F', *' -v t0="$2" '
        NF >= 2 { s = int(($1 + 500) / 1000); if (s < 1) s = 1; kb[s] += $2; if (s > n) n = s }
        END { for (i = 1; i <= n; i++) { tot += kb[i]
                printf "{\"prog\":\"fio\",\"t\":%d,\"ts\":%.3f,\"iops\":%d,\"mb_s\":%.2f}\n", i, t0 + i, kb[i] / 4, kb[i] / 1024 }
            if (n) printf "{\"prog\":\"fio\",\"summary\":true,\"seconds\":%d,\"reads\":%d,\"mb_s\":%.2f}\n", n, tot / 4, tot / 1024 / n }' \
        > "$1/batch.jsonl"
    [ -s "$1/batch.jsonl" ] || log "fio wrote no bandwidth log: $(tail -n3 "$1/batch.err" 2>/dev/null)"
}

mpd_pid=
sampler_pid=
watch_pid=
trap 'stop_all' EXIT

# memprotd's policies: memprotd, memprotd-NAME (a named setting, below) and
# either with :K=V,... (extra [Daemon] settings).
is_mpd() { case ${1%%:*} in memprotd|memprotd-*) return 0 ;; esac; return 1; }
# The binary memprotd's policy $1 runs: BENCH_MEMPROTD_ALT for memprotd-alt,
# else BENCH_MEMPROTD (the one place either is read).
mpd_bin_of() {
    if [ "${1%%:*}" = memprotd-alt ]; then echo "${BENCH_MEMPROTD_ALT:-}"; else echo "${BENCH_MEMPROTD:-}"; fi
}
# memprotd's configuration for policy $2 in dir $1: memprotd.conf's defaults
# (no file), per slice the example's [Match] and, with
# BENCH_MEMPROTD_POLICY=weights, its Weight= only (the shipped defaults plus
# Weight=, as a user who copies the examples and keeps the weights);
# memprotd-window30m adds WorkingSetWindow=30min to workload.slice,
# memprotd-notrim TrimCheapCache=no; memprotd-alt is memprotd's settings
# (another binary: mpd_bin_of); memprotd-dry-run+static-min-75 is
# memprotd's settings in Mode=dry-run (it samples, ticks, logs and records;
# it writes no protection and ages nothing) beside static-min-75's floor
# (static_floor).
write_mpd_config() {  # dir policy
    local f name
    mkdir -p "$1/policy.d"
    for f in "$MEMPROTD_SOURCE_ROOT"/units/policy.d/*.example; do
        name=$(basename "$f" .example)
        if [ "$mpd_policy_files" = examples ]; then
            cp "$f" "$1/policy.d/$name"
        else
            awk '/^\[/ || /^Slice=/ || /^Weight=/ { sub(/[ \t]*#.*/, ""); print }' "$f" > "$1/policy.d/$name"
        fi
    done
    case ${2%%:*} in
        memprotd|memprotd-alt) ;;
        memprotd-window30m) printf 'WorkingSetWindow=30min\n' >> "$1/policy.d/50-workload.conf" ;;
        memprotd-notrim)
            mkdir -p "$1/memprotd.conf.d"
            printf '[Daemon]\nTrimCheapCache=no\n' > "$1/memprotd.conf.d/50-notrim.conf" ;;
        memprotd-dry-run+static-min-75)
            mkdir -p "$1/memprotd.conf.d"
            printf '[Daemon]\nMode=dry-run\n' > "$1/memprotd.conf.d/50-dry-run.conf" ;;
        *) die "policy $2: unknown memprotd setting (memprotd, memprotd-window30m, memprotd-notrim, memprotd-alt, memprotd-dry-run+static-min-75)" ;;
    esac
}
# memprotd's CPU time (clock ticks) now, as a JSON line with the time and a label.
mpd_cpu_line() {  # pid label
    [ -r "/proc/$1/stat" ] || return 0
    printf '{"label":"%s","ts":%s,"ticks":%s,"hz":%s}\n' "$2" "$(date +%s.%N)" \
        "$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat")" "$(getconf CLK_TCK)"
}
# The static protection policy $1 sets on workload.slice, if it is one.
static_floor() {  # policy
    case $1 in
        static-75) set_low workload.slice $((mem_total * 75 / 100)) 0 ;;
        static-250M) set_low workload.slice 250M 0 ;;
        static-min-75|memprotd-dry-run+static-min-75) set_low workload.slice 0 $((mem_total * 75 / 100)) ;;
    esac
}
# One run: policy alone|cpu-ref|none|static-75|static-250M|static-min-75|memprotd[-NAME][:K=V,...].
run_one() {
    local policy=$1 run=$2
    local d=$out/$run
    mkdir -p "$d"
    log "run $run: policy $policy"
    reset_state
    echo "{\"policy\":\"$policy\",\"run\":\"$run\",\"start_ts\":$(date +%s.%N)}" > "$d/meta.json"
    local settle=0 lockups0
    # Soft lockups = the host starved the emulated CPUs (a noisy run).
    lockups0=$(dmesg | grep -c 'soft lockup')
    local stalls0
    stalls0=$(guest_stalls)
    # memprotd:K=V,K=V is memprotd with extra [Daemon] settings, to set
    # engine variants side by side in one boot (memprotd:Budget=70%).
    local base=${policy%%:*} variant= mpd=0
    [ "$base" != "$policy" ] && variant=${policy#*:}
    is_mpd "$policy" && mpd=1
    local daemon_extra="${BENCH_MEMPROTD_DAEMON:-}${variant:+ ${variant//,/ }}"
    daemon_extra=${daemon_extra# }
    if [ "$mpd" = 1 ]; then
        local conf=/run/memprotd-bench/conf
        rm -rf /run/memprotd-bench; mkdir -p /run/memprotd-bench/state
        write_mpd_config "$conf" "$policy"
        # Extra [Daemon] settings for an experiment, e.g.
        # BENCH_MEMPROTD_DAEMON="WorkingSetAging=no" (space-separated).
        if [ -n "$daemon_extra" ]; then
            log "memprotd: extra [Daemon] settings: $daemon_extra"
            mkdir -p "$conf/memprotd.conf.d"
            printf '[Daemon]\n%s\n' "${daemon_extra// /$'\n'}" > "$conf/memprotd.conf.d/90-bench.conf"
        fi
        cp -r "$conf" "$d/memprotd-config"  # the result records what it ran with
        # The bus policy that lets root own org.memprotd1 (as `meson
        # install` would put it); dbus-daemon has to re-read its config.
        if [ -r "$MEMPROTD_SOURCE_ROOT/dbus/org.memprotd1.conf" ] && [ ! -e /etc/dbus-1/system.d/org.memprotd1.conf ]; then
            cp "$MEMPROTD_SOURCE_ROOT/dbus/org.memprotd1.conf" /etc/dbus-1/system.d/
            busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus ReloadConfig >/dev/null \
                || log "dbus ReloadConfig failed"
            sleep 1
        fi
        # In a scope (not a service) so it logs to a file; the environment of
        # the scenario unit would send it to the journal. As root it locks
        # its own pages in RAM as the service does (units/memprotd.service.in),
        # so its CPU figures are the service's.
        # Its trace (the engine's inputs, docs/trace.md) is kept with the
        # run, for replaying other settings on the same inputs.
        local record=() mpd_exe
        mpd_exe=$(mpd_bin_of "$policy")
        log "memprotd: $mpd_exe"
        "$mpd_exe" --help 2>&1 | grep -q -- --record && record=(--record "$d/trace.jsonl")
        # Its CPU over its whole life (memprotd-cpu.jsonl): 0 at the start,
        # then after the start-up (BENCH_MPD_STARTUP_S: under TCG the first
        # start in a boot also pays code translation) and at the stop.
        mpd_cpu_file=$d/memprotd-cpu.jsonl
        printf '{"label":"start","ts":%s,"ticks":0,"hz":%s}\n' "$(date +%s.%N)" "$(getconf CLK_TCK)" > "$mpd_cpu_file"
        systemd-run --scope --quiet \
            env -u INVOCATION_ID -u JOURNAL_STREAM -u NOTIFY_SOCKET \
            "$mpd_exe" --config-dir "$conf" --runtime-dir /run/memprotd-bench/state \
            --log-level "${BENCH_MEMPROTD_LOG_LEVEL:-info}" "${record[@]}" \
            > "$d/memprotd.log" 2>&1 &
        mpd_pid=$!
        sleep 1
        kill -0 "$mpd_pid" 2>/dev/null || { log "memprotd exited at once:"; cat "$d/memprotd.log"; mpd_pid=; }
        [ -n "$mpd_pid" ] && { sleep "$((${BENCH_MPD_STARTUP_S:-20} - 1))"; mpd_cpu_line "$mpd_pid" startup >> "$mpd_cpu_file"; } &
    fi
    start_workload "$d"
    static_floor "$policy"
    wait_ready "$d/kv.jsonl" 180 || die "kvload not ready after 180 s"
    if [ "$mpd" = 1 ] && [ -n "$mpd_pid" ] && [ "$base" = memprotd-dry-run+static-min-75 ]; then
        # It writes nothing to settle: past its start-up, as the others are.
        settle=${BENCH_MPD_STARTUP_S:-20}
        sleep "$settle"
    elif [ "$mpd" = 1 ] && [ -n "$mpd_pid" ]; then
        settle=$(wait_settled "$settle_max" "$mpd_pid") || log "memprotd did not settle within ${settle_max}s"
        log "memprotd settled after ${settle}s: workload.slice MemoryLow=$(read1 $cg/workload.slice/memory.low)"
    fi
    sleep "$warmup"
    sampler > "$d/slices.jsonl" &
    sampler_pid=$!
    snapshot start > "$d/counters.jsonl"
    local batch_start mpd_lines0=0
    batch_start=$(date +%s.%N)
    [ "$mpd" = 1 ] && mpd_lines0=$(wc -l < "$d/memprotd.log")
    [ "$is_burst" = 1 ] && start_bursts "$d"
    if [ "$policy" != alone ]; then
        start_batch "$d" "$policy"
        stall_watch "$d" &
        watch_pid=$!
    fi
    local shrink_ts=null
    # The guest sometimes stops making progress for part of a run: the batch
    # job reads next to nothing (≈0 MB/s, no reclaim, no PSI), or every
    # process waits while a vCPU is stuck in the kernel (an RCU stall in
    # dmesg). Seen in about 1 run in 8 under TCG, any policy. Such a run
    # says nothing about the policy: keep what the kernel says about the
    # reader and let the caller run it again (see run_invalid).
    stalled=0
    local early_stall=0
    if [ "$policy" != alone ]; then
        local waited=0
        if [ "$phase" = 1 ] && [ "$phase_at" -lt 14 ]; then waited=0; else sleep 14; waited=14; fi
        if [ "$waited" = 14 ] && batch_stalled "$d/batch.jsonl"; then
            early_stall=1
            stall_diag "$d/stall-diag.txt"
            log "run $run: batch job stalled (under 1 MB/s in its first seconds)"
        fi
        phase_at_left=$((phase_at - waited))
        duration_left=$((duration - waited))
    else
        phase_at_left=$phase_at
        duration_left=$duration
    fi
    if [ "$phase" = 1 ]; then
        sleep "$phase_at_left"
        shrink_ts=$(date +%s.%N)
        systemctl kill -s USR1 --kill-who=main bench-kv.service
        sleep $((duration - phase_at))
    else
        sleep "$duration_left"
    fi
    # the batch job ends on its own; give it a moment to print its summary
    # (fio: to write its logs)
    for _ in $(seq 1 150); do systemctl is-active -q bench-batch.service || break; sleep 0.2; done
    local batch_end
    batch_end=$(date +%s.%N)
    [ "$batch_kind" = fio ] && [ "$policy" != alone ] && fio_to_jsonl "$d" "$batch_start"
    snapshot end >> "$d/counters.jsonl"
    swap_owners > "$d/swap.txt"
    systemctl stop bench-kv.service  # SIGTERM: kvload prints its summary
    local writes=null writes_batch=null mpd_failed=null
    if [ "$mpd" = 1 ] && { [ -z "$mpd_pid" ] || ! kill -0 "$mpd_pid" 2>/dev/null; }; then
        mpd_failed="\"$(tail -n1 "$d/memprotd.log" | tr -d '"\\' | cut -c1-200)\""
        log "memprotd is not running: $mpd_failed"
    fi
    if [ "$mpd" = 1 ]; then
        # One log line per unit and tick that was written (SetUnitProperties
        # call setting MemoryLow and MemoryMin); "would set" = dry run.
        local mpd_lines1
        mpd_lines1=$(wc -l < "$d/memprotd.log")
        # The daemon's own account (aging write times among it), as busctl
        # prints a string: {"type":"s","data":["<Dump's JSON>"]}.
        busctl --json=short call org.memprotd1 /org/memprotd1 org.memprotd1.Manager Dump \
            > "$d/dump.json" 2>/dev/null || rm -f "$d/dump.json"
        writes_batch=$(sed -n "$((mpd_lines0 + 1)),${mpd_lines1}p" "$d/memprotd.log" | grep -v 'would set' | grep -c ': MemoryLow .* → ')
        stop_all
        writes=$(grep -v 'would set' "$d/memprotd.log" | grep -c ': MemoryLow .* → ')
    fi
    stop_all
    printf '{"policy":"%s","run":"%s","batch_start_ts":%s,"batch_end_ts":%s,"shrink_ts":%s,"settle_s":%s,"memprotd_writes":%s,"memprotd_writes_batch":%s,"memprotd_failed":%s,"memprotd_daemon":"%s","soft_lockups":%s}\n' \
        "$policy" "$run" "$batch_start" "$batch_end" "$shrink_ts" "${settle:-0}" "$writes" "$writes_batch" "$mpd_failed" \
        "$([ "$mpd" = 1 ] && printf '%s' "$daemon_extra" | tr -d '"\\')" \
        "$(( $(dmesg | grep -c 'soft lockup') - lockups0 ))" > "$d/meta.json"
    local why
    if why=$(run_invalid "$d" "$stalls0" "$early_stall"); then
        stalled=1
        echo "$why" > "$d/invalid.txt"
        log "run $run: INVALID: $why"
    fi
    log "run $run done: kv $(tail -n1 "$d/kv.jsonl" 2>/dev/null)"
    [ "$policy" != alone ] && log "run $run done: batch $(tail -n1 "$d/batch.jsonl" 2>/dev/null)"
    return 0
}

"$bin/cacheread" --create 16M --sparse "$data/small.dat" >/dev/null
# BENCH_DEADLINE: the guest uptime (s) by which every run must be done (the
# host's timeout, less QEMU's start and the shutdown); 0 = none. A run made
# again after a stall must leave time for the first runs still to come, or
# it is not made: a lost re-run costs one round of one policy, a timeout
# every run after it.
deadline=${BENCH_DEADLINE:-0}
# The longest run so far, s, of memprotd's policies and of the others:
# memprotd's runs also wait for it to settle (up to settle_max), so until
# one has run, theirs is taken as the others' plus settle_max.
run_len=0 mpd_len=0
runs_left=0 mpd_left=0  # first runs still to come
for p in ${BENCH_REFS-alone cpu-ref}; do runs_left=$((runs_left + 1)); done
for p in $policies; do
    if is_mpd "$p"; then mpd_left=$((mpd_left + rounds)); else runs_left=$((runs_left + rounds)); fi
done
uptime_s() { local u; read -r u _ < /proc/uptime; echo "${u%.*}"; }
timed_run() {  # policy name
    local t0 took
    t0=$(uptime_s)
    run_one "$1" "$2"
    took=$(( $(uptime_s) - t0 ))
    if is_mpd "$1"; then
        [ "$took" -gt "$mpd_len" ] && mpd_len=$took
    else
        [ "$took" -gt "$run_len" ] && run_len=$took
    fi
    return 0
}
# Seconds the runs still to come need, the one about to be made again first.
time_needed() {  # policy
    local m=$mpd_len
    [ "$m" -gt 0 ] || m=$((run_len + settle_max))
    local again=$run_len
    is_mpd "$1" && again=$m
    echo $(( again + runs_left * run_len + mpd_left * m ))
}
# One run of a policy, made again (up to twice) if the guest stalled.
attempt() {  # policy name
    if is_mpd "$1"; then mpd_left=$((mpd_left - 1)); else runs_left=$((runs_left - 1)); fi
    timed_run "$1" "$2"
    local try need now
    for try in 1 2; do
        [ "$stalled" = 1 ] || break
        mv "$out/$2" "$out/$2.stalled$try"  # kept for the diagnosis, not analysed
        need=$(time_needed "$1") now=$(uptime_s)
        if [ "$deadline" -gt 0 ] && [ $((now + need)) -gt "$deadline" ]; then
            log "run $2: no time to make it again (uptime ${now}s, deadline ${deadline}s, $((runs_left + mpd_left)) run(s) to come, ${need}s needed): not counted"
            echo "$(cat "$out/$2.stalled$try/invalid.txt"); not made again: no time left" > "$out/$2.stalled$try/invalid.txt"
            return 0
        fi
        log "run $2: again (try $((try + 1)))"
        timed_run "$1" "$2"
    done
    return 0
}
# The policies in round $1's order (see BENCH_ORDER). A run's place in the
# boot moves its figures (2026-11-25-7: four memprotd runs in a row, each
# slower than the one before, 0.87x by the fourth), so comparing policies
# needs each in every place.
round_order() {  # round
    case $order in
        reverse)
            if [ $(($1 % 2)) = 0 ]; then echo "$policies" | tr ' ' '\n' | tac | tr '\n' ' '; else echo "$policies"; fi ;;
        latin)
            # Williams: row 0 is 0, 1, n-1, 2, n-2, ...; row k adds k mod n.
            # An odd n needs the n rows mirrored as well for every ordered
            # pair of neighbours to occur once.
            echo "$policies" | awk -v r="$1" '{ n = NF; lo = 1; hi = n - 1; s[0] = 0
                for (i = 1; i < n; i++) s[i] = (i % 2) ? lo++ : hi--
                k = (r - 1) % (n % 2 ? 2 * n : n); m = k >= n; k %= n
                for (i = 0; i < n; i++) printf "%s ", $((s[m ? n - 1 - i : i] + k) % n + 1); print "" }' ;;
        shuffle:*)
            # One random stream from the seed, round r taking the draws
            # after those of rounds 1..r-1 (mawk folds seeds of 2^31-1
            # and more into one, so the seed is reduced first).
            echo "$policies" | tr ' ' '\n' | awk -v seed="${order#shuffle:}" -v r="$1" \
                'NF { a[++n] = $0 } END { srand(seed % 2147483646 + 1); for (i = 0; i < (r - 1) * n; i++) rand()
                    for (i = 1; i <= n; i++) printf "%.17g\t%s\n", rand(), a[i] }' | sort -g | cut -f2 | tr '\n' ' ' ;;
    esac
}
case $order in
    reverse|latin) ;;
    shuffle:*) [[ ${order#shuffle:} =~ ^[0-9]+$ ]] || die "BENCH_ORDER=$order: the seed must be a number" ;;
    *) die "BENCH_ORDER=$order: expected reverse, latin or shuffle:SEED" ;;
esac
n=0
for ref in ${BENCH_REFS-alone cpu-ref}; do
    attempt "$ref" "$(printf '%02d' $n)-$ref"
done
for r in $(seq 1 "$rounds"); do
    list=$(round_order "$r")
    log "round $r of $rounds ($order): $list"
    for p in $list; do
        n=$((n + 1))
        name=$(printf '%02d-%s' "$n" "$p")
        exe=$(mpd_bin_of "$p")
        if is_mpd "$p" && { [ -z "$exe" ] || [ ! -x "$exe" ]; }; then
            log "memprotd not built (binary '$exe'): policy $p skipped"
            mkdir -p "$out/$name"
            echo "{\"policy\":\"$p\",\"run\":\"$name\",\"skipped\":\"memprotd not built\"}" > "$out/$name/meta.json"
            mpd_left=$((mpd_left - 1))
            continue
        fi
        attempt "$p" "$name"
    done
done
log "all runs done"
exit 0
