# SPDX-License-Identifier: LGPL-2.1-or-later
"""Effectiveness benchmark: does memprotd make a mixed workload faster?

Boots the test guest (tools/vm/run-scenario) once per scenario and runs
tests/vm/bench-effect.sh there: kvload (anon, workload.slice) beside cacheread
(page cache, batch.slice) under the policies none, static-75, static-250M and
memprotd, plus kvload alone as the reference. The scenarios memcached and
memcached-zipf (not run by default) put Debian's memcached, driven by mcload,
beside fio's buffered random reads instead. Then writes
bench/effect/results/<date>.json, <date>.md (tables, ratios, targets) and
<date>.png (ops/s, p99 and batch MB/s over time per policy), and puts the
table into bench/effect/README.md.

  tools/bench-effect [--build-root build-effect] [--scenarios "stream reuse-mmap phase-mmap:300"] [--phase-at 30]
                     [--policies "none static-75 static-250M memprotd"] [--duration 60]
                     [--warmup 8] [--rounds 1] [--order latin|reverse|shuffle[:SEED]]
                     [--memprotd PATH] [--memory MiB]
                     [--cpu MODEL] [--accel OPTIONS] [--append KERNEL_ARGS] [--jit SECONDS]
                     [--env K=V]... [--analyze RUN_DIR] [--no-readme]

A policy memprotd:K=V,K=V runs memprotd with extra [Daemon] settings (e.g.
--policies "static-75 memprotd memprotd:Budget=70%"), to compare engine
settings in one boot; the targets are read from the plain "memprotd" runs.

Compare policies only within one run: the guest is emulated (TCG) on a shared
machine; absolute numbers move from run to run.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import time

from . import common
from .analysis import analyze
from .common import GUEST_APPEND, GUEST_CPU, HERE, JIT_EVERY_DEFAULT, MORE_SCENARIOS, POLICIES, SCENARIOS, SRC, log
from .report import build_result, update_readme, write_result
from .vm import build_workloads, find_memprotd, run_scenarios


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-root", default=os.path.join(SRC, "build-effect"))
    ap.add_argument("--scenarios", default=" ".join(SCENARIOS),
                    help=f"NAME[:SECONDS]... (default: {' '.join(SCENARIOS)}; also "
                         f"{', '.join(MORE_SCENARIOS)})")
    ap.add_argument("--policies", default=" ".join(POLICIES))
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--order", default="latin", metavar="latin|reverse|shuffle[:SEED]",
                    help="each round's order of the policies (default latin: a Williams square, so that over as "
                         "many rounds as policies each runs once in each place; reverse: every other round "
                         "reversed; shuffle: random per round, the seed recorded in the result)")
    ap.add_argument("--memprotd", default=None, help="memprotd binary (default: BUILD/daemon/memprotd, "
                    "else the newest SRC/build*/daemon/memprotd)")
    ap.add_argument("--memory", type=int, default=None, help="guest RAM in MiB (run-scenario default 1024)")
    ap.add_argument("--env", action="append", default=[], help="extra K=V for the guest script (BENCH_*)")
    ap.add_argument("--cpu", default=GUEST_CPU, metavar="MODEL", help=f"QEMU -cpu for the guest (default: {GUEST_CPU})")
    ap.add_argument("--accel", default=None, metavar="OPTIONS",
                    help="QEMU -accel for the guest (run-scenario default: tcg; e.g. tcg,tb-size=2048 for a "
                         "larger translated-code buffer, MiB); recorded in the result")
    ap.add_argument("--jit", type=int, default=0, metavar="SECONDS",
                    help="read QEMU's translator counters (monitor `info jit`) every SECONDS s into "
                         "host-qemu.jsonl and report them (default 0: off; each read slows the guest for a "
                         "moment)")
    ap.add_argument("--append", default=GUEST_APPEND, metavar="KERNEL_ARGS",
                    help=f"extra guest kernel command line (default: '{GUEST_APPEND}'); recorded in the result")
    ap.add_argument("--analyze", default=None, help="only analyze this existing run directory")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "effect", "results"))
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--phase-at", type=int, default=30,
                    help="seconds into the batch run the phase scenarios halve the table (30)")
    ap.add_argument("--phase-settle", type=int, default=common.PHASE_SETTLE_S,
                    help="seconds after the phase change before the 'after' window starts")
    args = ap.parse_args()
    if args.order == "shuffle":
        args.order = f"shuffle:{int(time.time()) % 1_000_000}"
    if args.order not in ("latin", "reverse") and not re.fullmatch(r"shuffle:[0-9]+", args.order):
        ap.error(f"--order {args.order}: expected latin, reverse, shuffle or shuffle:SEED")
    n_pol = len(args.policies.split())
    square = n_pol if n_pol % 2 == 0 else 2 * n_pol
    if args.order == "latin" and args.rounds > 1 and args.rounds % square:
        log(f"warning: --order latin with {args.rounds} rounds of {n_pol} policies: a full square is "
            f"{square} rounds, so places are not balanced")
    common.PHASE_SETTLE_S = args.phase_settle
    args.build_root = os.path.abspath(args.build_root)
    # gnuplot for the chart, and to run: meson, QEMU and the guest's tools (a
    # fresh machine has none of them; nothing is installed when all are there).
    subprocess.run([os.path.join(HERE, "install-deps"), "--bench"] + ([] if args.analyze else ["--vm"]), check=True)

    memprotd_ver = memprotd_src = None
    guest_cpu, guest_accel, jit_every = args.cpu, args.accel or "tcg", args.jit or JIT_EVERY_DEFAULT
    if args.analyze:
        stamp_dir = os.path.abspath(args.analyze)
        try:
            run = json.load(open(os.path.join(stamp_dir, "run.json")))
            memprotd_ver = run.get("memprotd_version")
            guest_cpu = run.get("args", {}).get("cpu") or "max"  # runs before --cpu existed used max
            guest_accel = run.get("args", {}).get("accel") or "tcg"
            jit_every = run.get("args", {}).get("jit") or JIT_EVERY_DEFAULT
        except (OSError, ValueError):
            guest_cpu = guest_accel = None
    else:
        if not os.path.isdir(args.build_root):
            subprocess.run(["meson", "setup", args.build_root, "-Dtests=false", "-Dbenchmarks=false"], check=True,
                           cwd=SRC)
        bin_dir = build_workloads(args.build_root)
        memprotd, memprotd_src, memprotd_ver = None, None, None
        if any(p.partition(":")[0] == "memprotd" for p in args.policies.split()):
            # Build it in our tree when we can; fall back to another build.
            if not args.memprotd:
                subprocess.run(["ninja", "-C", args.build_root, "daemon/memprotd"], capture_output=True)
            memprotd, memprotd_src, memprotd_ver = find_memprotd(args.build_root, args.memprotd, bin_dir)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        stamp_dir = os.path.join(args.build_root, "bench-effect", "runs", stamp)
        os.makedirs(stamp_dir)
        with open(os.path.join(stamp_dir, "run.json"), "w") as fh:
            json.dump({"args": vars(args), "memprotd": memprotd_src, "memprotd_version": memprotd_ver}, fh)
        t0 = time.time()
        run_scenarios(args, bin_dir, memprotd, stamp_dir)
        log(f"all scenarios done in {(time.time() - t0) / 60:.1f} min; raw results in {stamp_dir}")

    scenarios = analyze(stamp_dir)
    if not scenarios:
        log("no results to analyze")
        return 1
    date = datetime.date.today().isoformat()
    result = build_result(scenarios, date, stamp_dir, memprotd_ver, guest_cpu, guest_accel, jit_every)
    _, md_text = write_result(result, args.out, date, stamp_dir, overwrite=bool(args.analyze))
    if not args.no_readme:
        update_readme(md_text, result)
    print(md_text)
    return 0

