# SPDX-License-Identifier: LGPL-2.1-or-later
# Trimming cheap cache (TrimCheapCache=auto, engine step 7) on a real kernel:
# workload.slice keeps a 300 MiB table and every 20 s allocates 150 MiB at
# once (a spike), holds it 10 s and frees it; batch.slice streams a sparse
# 4 GiB file, whose cache fills the rest of the 1 GiB guest. The spikes make
# workload.slice's burst, MemFree stays under it, and memprotd trims
# batch.slice's single-use cache with lru-gen (MGLRU's debugfs eviction),
# and never workload.slice's memory: the status, the journal and explain say so.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_with_example_policies
record_trace trim
# Off by default (memprotd.conf(5)): turned on here as a user would.
printf '[Daemon]\nTrimCheapCache=auto\n' > /etc/memprotd/memprotd.conf.d/70-trim.conf

start_table 300 0.01
start_streamer
sleep 10
systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
check "memprotctl status names the mechanism: lru-gen" sh -c 'memprotctl status | grep -q "^Trim:     lru-gen"'

since=$(date '+%Y-%m-%d %H:%M:%S')
start_spikes
# memprotctl status's line: "Trim:     lru-gen (TrimCheapCache=auto): N trim(s), ..., F failed".
trim_count() { memprotctl status | sed -n 's/^Trim: .*: \([0-9]*\) trim(s),.*/\1/p'; }
trim_failed() { memprotctl status | sed -n 's/^Trim: .* \([0-9]*\) failed.*/\1/p'; }
trimmed() { [ "$(trim_count)" -gt 0 ]; }
check "batch.slice's cache trimmed within 120 s" wait_for 120 trimmed
memprotctl status | grep '^Trim:'
check "the journal says why" \
    sh -c "journalctl -u memprotd --since '$since' -o cat | grep -q 'trimming cheap cache (lru-gen): MemFree is below what the protected slices. bursts need'"
check "no trim failed" test "$(trim_failed)" = 0

# A minute of plans while the spikes go on: batch.slice (the slice with
# cheap cache) is trimmed, workload.slice (anon and the spikes) never.
batch_trims=0 workload_trims=0
for _ in $(seq 1 30); do
    memprotctl explain batch.slice | grep -q '^  trims ' && batch_trims=$((batch_trims + 1))
    memprotctl explain workload.slice | grep -q '^  trims ' && workload_trims=$((workload_trims + 1))
    sleep 2
done
echo "plans with a trim in a minute: batch.slice $batch_trims, workload.slice $workload_trims"
check "batch.slice trimmed in the plans" test "$batch_trims" -gt 0
check "workload.slice never trimmed" test "$workload_trims" = 0
memprotctl status | grep "^Trim:" || true
memprotctl explain batch.slice || true
journalctl -u spikes -o cat --no-pager | tail -n 5
check_replay batch.slice trim trims
systemctl stop spikes.service stream.service table.service 2>/dev/null || true
finish
