#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writes the small run directory tests/tools/test_bench_effect.py analyses:
one boot of scenario phase-mmap with the runs alone, none and memprotd and one
run set aside (.stalled1), in the formats tests/vm/bench-effect.sh, kvload,
cacheread and tools/bench-effect's host sampler write, trimmed to the keys the
analysis reads. No raw run is kept in the repository (results before 2026-11-26
name a raw directory outside it), so this one is generated: deterministic, a
24 s batch run halved at 12 s. expected.json holds what tools/bench-effect
computes from it (first the unsplit script's; since issue 29 with the
figures per unit of work and the targets' intervals added).

  tests/data/bench-effect/make-fixture.py DIR
"""
import json
import os
import random
import sys

T0 = 1_764_000_000.0
DUR, WARM, SHRINK = 16, 3, 8


def w(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def run(d, policy, name, rng, base, t0, shrink, stalled=False):
    os.makedirs(d, exist_ok=True)
    t1 = t0 + DUR
    meta = [{"policy": policy, "run": name, "start_ts": t0 - WARM - 20},
            {"policy": policy, "run": name, "batch_start_ts": t0, "batch_end_ts": t1,
             "shrink_ts": t0 + shrink if shrink else None, "settle_s": 3 if policy == "memprotd" else 0,
             "memprotd_writes": 7 if policy == "memprotd" else None,
             "memprotd_writes_batch": 4 if policy == "memprotd" else None,
             "memprotd_failed": None, "soft_lockups": 1 if stalled else 0}]
    w(f"{d}/meta.json", meta)
    kv = [{"prog": "kvload", "event": "ready", "keys": 1000}]
    for i in range(-WARM - 1, DUR + 1):
        ops = 0 if (stalled and 5 <= i < 11) else int(base * (0.8 + 0.4 * rng.random()))
        kv.append({"t": i + WARM + 2, "ts": round(t0 + i + 1, 3), "ops_s": ops,
                   "p50_us": round(20 + 10 * rng.random(), 2), "p99_us": round(300 + 900 * rng.random(), 2),
                   "p999_us": round(2000 + 4000 * rng.random(), 2)})
    w(f"{d}/kv.jsonl", kv)
    if policy != "alone":
        b, reads = [], 0
        for i in range(0, DUR):
            mb = 0.2 if (stalled and 4 <= i < 12) or (i in (10, 11, 12) and policy == "none") \
                else round(5 + 20 * rng.random(), 2)
            iops = int(mb * 256)
            reads += iops
            b.append({"t": i + 1, "ts": round(t0 + i + 1, 3), "iops": iops, "mb_s": mb})
        b.append({"summary": True, "seconds": DUR, "reads": reads})
        w(f"{d}/batch.jsonl", b)
    sl, cpu, psi, io = [], [0] * 8, 0, 0
    for i in range(-3, DUR + 3):
        if i == 8 and policy == "none":
            continue  # a gap in the sampler
        cpu = [c + rng.randint(0, 120) for c in cpu]
        psi += rng.randint(0, 400000)
        io += rng.randint(0, 100000)
        low = (200 << 20) if policy == "memprotd" else 0
        sl.append({"ts": round(t0 + i + 0.3, 3),
                   "workload": {"current": (300 + i) << 20, "low": low, "min": 0},
                   "batch": {"current": (150 - i) << 20, "low": 0, "min": 0},
                   "cpu": cpu, "psi_mem_us": {"some": psi, "full": psi // 2}, "psi_io_us": {"some": io}})
    w(f"{d}/slices.jsonl", sl)

    def counters(k, ts):
        def sl_c(m):
            return {"psi_some_us": m * k * 1000, "psi_full_us": m * k * 400, "refault_anon": m * k * 30,
                    "refault_file": m * k * 50, "pgmajfault": m * k * 20, "events_low": k * (policy == "memprotd"),
                    "oom_kill": 0, "current": (300 << 20) + k * m, "low": 0, "min": 0, "swap": k * 4096,
                    "pgsteal": m * k * 70}
        return {"at": "end" if k else "start", "ts": ts, "workload": sl_c(3), "batch": sl_c(5),
                "pswpin": k * 111, "pswpout": k * 222, "memprotd_cpu_ticks": 40 + 9 * k if policy == "memprotd" else None,
                "kv_sched": {"pid": 42, "threads": 2, "run_ns": k * 15_000_000_000, "wait_ns": k * 2_000_000_000,
                             "vcs": k * 300, "nvcs": k * 900},
                "ctxt": k * 50000, "tlb_shootdowns": k * 7000}
    w(f"{d}/counters.jsonl", [counters(0, t0), counters(1, t1)])
    if policy == "memprotd":
        with open(f"{d}/dump.json", "w") as f:
            json.dump({"type": "s", "data": [json.dumps({"ticks": {"total": 30, "early": 2, "cpu_ms": 120}})]}, f)
    if stalled:
        with open(f"{d}/invalid.txt", "w") as f:
            f.write("the batch job read under 1 MB/s for 8 s with memory PSI under 10%\n")
    return t0


def boot(out, scenario, runs, rng, shrink):
    sc = os.path.join(out, scenario)
    os.makedirs(sc, exist_ok=True)
    with open(f"{sc}/guest.json", "w") as f:
        f.write(json.dumps({"kernel": "6.1.0-50-amd64", "systemd": "systemd 252 (252.39-1~deb12u2)",
                            "mem_total": 1005027328, "lru_gen": "0x0007", "nproc": 2, "scenario": scenario,
                            "duration": DUR, "warmup": WARM, "rounds": 1, "order": "latin", "kv_size": "384M",
                            "zram_size": "768M", "phase_at": shrink, "cmdline": "root=/dev/vda rw",
                            "clocksource": "tsc"}, separators=(",", ":")) + "\n")
    starts = []
    for i, (pol, name, base, stalled) in enumerate(runs):
        starts.append(run(os.path.join(sc, name), pol, name, rng, base, T0 + i * (DUR + WARM + 6), shrink, stalled))
    # QEMU's threads on the host, a sample a second over the boot.
    hq, run_ns, wait_ns = [], [0, 0, 0], [0, 0, 0]
    for i in range(int(min(starts)) - 10, int(max(starts)) + DUR + 10, 1):
        run_ns = [r + int(rng.random() * 9e8 * s) for r, s in zip(run_ns, (1, 0.9, 0.05))]
        wait_ns = [v + int(rng.random() * 2e8) for v in wait_ns]
        row = {"ts": float(i), "pid": 4242,
               "threads": {str(10 + j): ["qemu-system-x86", run_ns[j], wait_ns[j]] for j in range(3)},
               "probe_ns": 1_700_000 + rng.randint(0, 900_000)}
        if i % 5 == 0:
            row["jit"] = {"cmd_s": 0.1, "tb_count": i % 10000, "tb_flush": (i // 50) % 7,
                          "tb_invalidate": i * 3 % 100000, "tlb_partial": i * 11 % 100000,
                          "code_used": 1000 + i % 5000, "code_size": 100000}
        hq.append(row)
    w(f"{sc}/host-qemu.jsonl", hq)


def main(out):
    rng = random.Random(26)
    boot(out, "phase-mmap", (("alone", "01-alone", 9000, False), ("none", "02-none", 5000, False),
                             ("memprotd", "03-memprotd.stalled1", 6000, True),
                             ("memprotd", "03-memprotd", 7000, False), ("static-75", "04-static-75", 6500, False)),
         rng, SHRINK)
    boot(out, "reuse-mmap", (("cpu-ref", "01-cpu-ref", 8000, False), ("none", "02-none", 4000, False),
                             ("memprotd", "03-memprotd", 6500, False), ("static-75", "04-static-75", 6000, False)),
         rng, None)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump({"args": {"cpu": "max,erms=off,fsrm=off", "accel": None, "jit": 5},
                   "memprotd": None, "memprotd_version": "memprotd 0.1.0"}, f)


if __name__ == "__main__":
    main(sys.argv[1])
