# SPDX-License-Identifier: LGPL-2.1-or-later
# What trimming does to a hot set (Debian 13, kernel 6.12; issue 40's
# "measure both"): the set-up of trim.sh (workload.slice keeps a 300 MiB
# table and spikes 150 MiB every 20 s; batch.slice streams a sparse 4 GiB
# file) plus, in batch.slice, a 64 MiB file that a service of its own
# re-reads every 5 s: cache that is not cheap. For the shipped default and
# for TrimCheapCache=lru-gen and reclaim, memprotd is restarted, trims (but
# with the default) are awaited, and the hot file's refaults over 60 s are
# counted (its service's workingset_refault_file). The default (trimming
# off) must leave the hot file within 2% of its pages. With either
# mechanism the trim watch counts each service's file refaults beyond its
# own rate before the trim: the hot file may be trimmed once, then the
# slice is held, so it costs at most one re-read (its pages) in the 60 s.
# A guest check, not a measurement under the protocol: one boot, settings in
# a fixed order.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_with_example_policies

start_table 300 0.01
head -c $((64 << 20)) /dev/urandom > /var/tmp/hot.dat
hot_pages=$(( (64 << 20) / 4096 ))
# Written here, the file's pages would be charged to this script's cgroup:
# dropped, they are the hot service's from its first read.
sync; echo 1 > /proc/sys/vm/drop_caches
start_streamer
systemd-run --quiet --slice=batch.slice --unit=hot \
    sh -c 'while :; do cat /var/tmp/hot.dat > /dev/null; sleep 5; done'
sleep 10
start_spikes

hot_refaults() {
    awk '$1 == "workingset_refault_file" { print $2 }' /sys/fs/cgroup/batch.slice/hot.service/memory.stat
}
loads_running() {  # is-active of several units succeeds when one is active: one at a time
    local u
    for u in table spikes stream hot; do systemctl is-active --quiet "$u.service" || return 1; done
}
trim_count() { memprotctl status | sed -n 's/^Trim: .*: \([0-9]*\) trim(s),.*/\1/p'; }
trimmed() { [ "$(trim_count)" -gt 0 ]; }
number() { [[ $1 =~ ^[0-9]+$ ]]; }
# measure SETTING: restarts memprotd with TrimCheapCache=SETTING (default:
# none set), waits for its first trim (with the default: checks that
# trimming is off), then prints the hot file's refaults in 60 s; -1 when
# that could not be measured.
measure() {
    mkdir -p /etc/memprotd/memprotd.conf.d
    rm -f /etc/memprotd/memprotd.conf.d/70-trim.conf
    [ "$1" = default ] || printf '[Daemon]\nTrimCheapCache=%s\n' "$1" > /etc/memprotd/memprotd.conf.d/70-trim.conf
    local since
    since=$(date '+%Y-%m-%d %H:%M:%S')
    systemctl restart memprotd
    wait_for 30 systemctl is-active --quiet memprotd || { echo "memprotd not active with $1" >&2; echo -1; return; }
    if [ "$1" = default ]; then
        wait_for 10 sh -c 'memprotctl status | grep -q "^Trim:     off ("' ||
            { echo "trimming not off by default" >&2; echo -1; return; }
        sleep 20
    else
        wait_for 150 trimmed || { echo "no trim within 150 s with $1" >&2; echo -1; return; }
    fi
    local r0 r1 t0
    r0=$(hot_refaults) t0=$(trim_count)
    sleep 60
    r1=$(hot_refaults)
    if ! loads_running || ! number "$r0" || ! number "$r1"; then
        echo "with $1 a load stopped or hot.service's memory.stat is gone" >&2
        systemctl --no-pager status table spikes stream hot >&2 || true
        echo -1
        return
    fi
    local made=0
    number "$t0" && made=$(( $(trim_count) - t0 ))
    echo "TrimCheapCache=$1: $(memprotctl status | grep '^Trim:'); $made trim(s) in the 60 s" >&2
    journalctl -u memprotd --since "$since" --no-pager -o cat | grep 'came back' | sed 's/^/  held: /' >&2 || true
    echo $(( r1 - r0 ))
}

systemctl enable --now memprotd
declare -A refaults
for setting in default lru-gen reclaim; do
    refaults[$setting]=$(measure "$setting")
done
echo "hot file ($hot_pages pages) refaults in 60 s: shipped default (off) ${refaults[default]}," \
    "lru-gen ${refaults[lru-gen]}, reclaim ${refaults[reclaim]}"
for setting in default lru-gen reclaim; do
    check "measured with TrimCheapCache=$setting" test "${refaults[$setting]}" -ge 0
done
check "the shipped default leaves the hot file within 2% of its pages ($(( hot_pages / 50 )))" \
    sh -c "[ ${refaults[default]} -ge 0 ] && [ ${refaults[default]} -le $(( hot_pages / 50 )) ]"
for setting in lru-gen reclaim; do
    check "TrimCheapCache=$setting costs the hot file at most one re-read ($hot_pages pages)" \
        sh -c "[ ${refaults[$setting]} -ge 0 ] && [ ${refaults[$setting]} -le $hot_pages ]"
done
rm -f /etc/memprotd/memprotd.conf.d/70-trim.conf
systemctl stop spikes.service stream.service table.service hot.service 2>/dev/null || true
finish
