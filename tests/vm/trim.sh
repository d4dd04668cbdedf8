# SPDX-License-Identifier: LGPL-2.1-or-later
# Trimming cheap cache (TrimCheapCache=auto, engine step 7) on a real kernel:
# workload.slice keeps a 300 MiB table and every 20 s allocates 150 MiB at
# once (a spike), holds it 10 s and frees it; batch.slice streams a sparse
# 4 GiB file, whose cache fills the rest of the 1 GiB guest. The spikes make
# workload.slice's burst, MemFree stays under it, and memprotd trims
# batch.slice's single-use cache with lru-gen (MGLRU's debugfs eviction),
# never below its demand: the status, the journal and the plan say so.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
set -u

install_with_example_policies

systemd-run --quiet --slice=workload.slice --unit=table python3 -c '
import random, time
b = bytearray(b"x" * (300 << 20))
n = len(b) >> 12
while True:
    for _ in range(1000):
        b[random.randrange(n) << 12] = 1
    time.sleep(0.01)
'
truncate -s 4G /var/tmp/stream.dat
systemd-run --quiet --slice=batch.slice --unit=stream \
    sh -c 'while :; do cat /var/tmp/stream.dat > /dev/null; done'
sleep 10
systemctl enable --now memprotd
check "memprotd is active" wait_for 30 systemctl is-active --quiet memprotd
check "memprotctl status names the mechanism: lru-gen" sh -c 'memprotctl status | grep -q "^Trim:     lru-gen"'

since=$(date '+%Y-%m-%d %H:%M:%S')
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
trimmed() { memprotctl dump | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["trimming"]["trims"] == 0)'; }
check "batch.slice's cache trimmed within 120 s" wait_for 120 trimmed
memprotctl status | grep '^Trim:'
check "the journal says why" \
    sh -c "journalctl -u memprotd --since '$since' -o cat | grep -q 'of cheap cache (lru-gen): MemFree .* is below the .* the protected slices. bursts need'"
check "no trim failed" sh -c 'memprotctl dump | python3 -c "import json, sys; t = json.load(sys.stdin)[\"trimming\"]; sys.exit(t[\"failed\"] != 0)"'

# Every plan while the spikes go on: a trim never takes a slice below its
# demand, and only batch.slice (the one with cheap cache) is trimmed.
cat > /tmp/check-plan.py <<'PY'
import json, subprocess, sys, time
seen = 0
for _ in range(30):
    plan = json.loads(subprocess.run(["memprotctl", "plan", "--json"], capture_output=True, text=True).stdout)
    for s in plan["slices"]:
        if s["trim"]:
            seen += 1
            if s["current"] - s["trim"] < s["demand"] or s["trim"] > s["trimmable"] or s["unit"] != "batch.slice":
                print(f"bad trim: {s['unit']} current {s['current']} trim {s['trim']} demand {s['demand']}")
                sys.exit(1)
    time.sleep(2)
print(f"{seen} trimmed slice(s) seen in 30 plans")
sys.exit(0 if seen else 2)
PY
check "trims never below demand, batch.slice only, seen in a minute of plans" python3 /tmp/check-plan.py
python3 /tmp/check-plan.py || true
memprotctl explain batch.slice || true
journalctl -u spikes -o cat --no-pager | tail -n 5
systemctl stop spikes.service stream.service table.service 2>/dev/null || true
finish
