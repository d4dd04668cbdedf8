# SPDX-License-Identifier: LGPL-2.1-or-later
"""Effectiveness benchmark: does memprotd make a mixed workload faster?

Boots the test guest (tools/vm/run-scenario) once per scenario and runs
tests/vm/bench-effect.sh there: kvload (anon, workload.slice) beside cacheread
(page cache, batch.slice) under the policies none, static-75, static-250M and
memprotd, plus kvload alone as the reference. The scenarios memcached and
memcached-zipf (not run by default) put Debian's memcached, driven by mcload,
beside fio's buffered random reads instead; anon-batch puts it beside
anonbatch, a batch job of anonymous memory it keeps touching (with
--policies naming static-min-75, MemoryMin= 75% of RAM, beside static-75:
the better static is the better of the two). Then writes
bench/effect/results/<date>.json and <date>.md (tables, ratios, targets) and
the raw archive; --chart draws a result's chart (ops/s, p99 and batch MB/s
over time per policy) from its JSON when asked.

  tools/bench-effect [--build-root build-effect] [--scenarios "stream reuse-mmap phase-mmap:150"] [--phase-at 30]
                     [--policies "none static-75 static-250M memprotd"] [--duration 60]
                     [--warmup 8] [--rounds 3] [--order latin|reverse|shuffle[:SEED]]
                     [--release 12|13] [--memprotd PATH] [--memory MiB]
                     [--cpu MODEL] [--accel OPTIONS] [--append KERNEL_ARGS] [--jit SECONDS]
                     [--env K=V]... [--analyze RUN_DIR|ARCHIVE [--name NAME]] [--no-readme]
  tools/bench-effect --compare A.json[,A2.json] B.json[,B2.json]   (e.g. the Debian 12 and 13 guests side by side)
  tools/bench-effect --pool A.json,A2.json[,...] [--name NAME]   (one result from the rounds of several boots)
  tools/bench-effect --chart RESULT.json [--out DIR]   (draw a result's chart from its JSON; default DIR build-effect/charts)
  tools/bench-effect --prune N                 (keep the raw archives of the newest N results and of protocol and cited ones)
  tools/bench-effect --protocol 1 --scenarios memcached [--release 13]   (one boot of bench/effect/PROTOCOL.md v1)

The references (alone, cpu-ref) run in every round, in the rotated order
with the policies. Each run's raw files are kept beside its result as
OUT/NAME.raw.tar.xz (meta.raw).

A policy memprotd:K=V,K=V runs memprotd with extra [Daemon] settings (e.g.
--policies "static-75 memprotd memprotd:Budget=70%"), to compare engine
settings in one boot; the targets are read from the plain "memprotd" runs.

Compare policies only within one run: the guest is emulated (TCG) on a shared
machine; absolute numbers move from run to run.
"""

import argparse
import datetime
import sys
import glob
import json
import os
import re
import subprocess
import tempfile
import time

from . import common
from .analysis import analyze
from .common import (GUEST_APPEND, GUEST_CPU, HERE, JIT_EVERY_DEFAULT, MORE_SCENARIOS, POLICIES, REFS, SCENARIOS, SRC,
                     TIME_BUDGET_S, estimate_s, log, rotation, square_rounds)
from . import protocol
from .pool import pool_results
from .raw import prune_raw, raw_archive, unpacked
from .report import (build_result, compare_markdown, draw_chart, load_results, repo_path, result_base,
                     update_readme, write_result)
from .vm import build_workloads, find_memprotd, in_release, run_scenarios


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-root", default=None,
                    help="the build directory (default SRC/build-effect, for --release 13 SRC/build-effect-13: "
                         "a Debian 13 build is made in its build root and must not share a directory with a "
                         "Debian 12 one; it must lie inside the source tree)")
    ap.add_argument("--scenarios", default=" ".join(SCENARIOS),
                    help=f"NAME[:SECONDS]... (default: {' '.join(SCENARIOS)}; also "
                         f"{', '.join(MORE_SCENARIOS)})")
    ap.add_argument("--policies", default=" ".join(POLICIES),
                    help="the policies; the references (--refs) are added to every round")
    ap.add_argument("--refs", default=" ".join(REFS),
                    help="the reference runs added to every round (default: %(default)s; \"\" for none: "
                         "targets against a reference then read \"not shown\")")
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=common.DEFAULT_ROUNDS,
                    help=f"rounds of every policy and reference ({common.DEFAULT_ROUNDS}; one gives no interval)")
    ap.add_argument("--order", default="latin", metavar="latin|reverse|shuffle[:SEED]",
                    help="each round's order of the references and policies (default latin: a Williams square, "
                         "so that over as many rounds as places each runs once in each place; reverse: every "
                         "other round reversed; shuffle: random per round, the seed recorded in the result)")
    ap.add_argument("--release", type=int, choices=(12, 13), default=None,
                    help="the guest's Debian release (tools/vm/run-scenario --release; default 12, kernel 6.1; "
                         "13: kernel 6.12); recorded in the result")
    ap.add_argument("--memprotd", default=None, help="memprotd binary (default: BUILD/daemon/memprotd, "
                    "else the newest SRC/build*/daemon/memprotd)")
    ap.add_argument("--memprotd-alt", default=None, metavar="PATH",
                    help="a second memprotd binary, run by the policy memprotd-alt with memprotd's settings: two "
                         "builds side by side in one boot, for a pilot (for --release 13 a build made in its root, "
                         "inside the source tree); recorded in the result")
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
    ap.add_argument("--analyze", default=None, metavar="RUN",
                    help="only analyze this existing run (its directory, or its .raw.tar.xz); never overwrites "
                         "a result: the next free DATE-N, or --name")
    ap.add_argument("--name", default=None, help="the result's name in OUT (default: the date, then DATE-2, ...); "
                    "an error if OUT/NAME.json exists")
    ap.add_argument("--compare", nargs=2, default=None, metavar=("A.json[,A2.json...]", "B.json[,B2.json...]"),
                    help="print two guests' results side by side (Markdown, per scenario) and exit; a side "
                         "may list several results of one kernel, comma-separated, each scenario in one of them")
    ap.add_argument("--pool", default=None, metavar="A.json,A2.json[,...]",
                    help="write one result from the runs of several results of one kernel (more rounds of the "
                         "same experiment from other boots; a round pairs runs of one boot) and exit; the sources "
                         "keep their raw archives; never overwrites a result (--name, or the next free DATE-N)")
    ap.add_argument("--chart", default=None, metavar="RESULT.json",
                    help="draw the chart of a result from its JSON into --out (default SRC/build-effect/charts) "
                         "and exit")
    ap.add_argument("--prune", type=int, default=None, metavar="N",
                    help="delete the raw archives of all but the newest N results in OUT, sparing protocol results "
                         "and those the docs cite, and exit")
    ap.add_argument("--protocol", default=None, metavar="VERSION",
                    help="run one boot of one scenario exactly as bench/effect/PROTOCOL.md's VERSION fixes it "
                         "(policies, rounds, durations, guest settings); refuses the options it fixes and a "
                         "source tree with uncommitted changes; the result records the version and is judged "
                         "by its targets only")
    ap.add_argument("--out", default=None, help="where results go (default SRC/bench/effect/results; for --chart "
                    "SRC/build-effect/charts)")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--phase-at", type=int, default=30,
                    help="seconds into the batch run the phase scenarios halve the table (30)")
    ap.add_argument("--phase-settle", type=int, default=common.PHASE_SETTLE_S,
                    help="seconds after the phase change before the 'after' window starts")
    args = ap.parse_args()
    if args.out is None:
        args.out = os.path.join(SRC, "build-effect", "charts") if args.chart else \
            os.path.join(SRC, "bench", "effect", "results")
    if args.protocol:
        apply_protocol(ap, args)
    if args.build_root is None:
        args.build_root = os.path.join(SRC, "build-effect-13" if args.release == 13 else "build-effect")
    # the guest finds the workloads by this path (tools/vm/run-scenario's
    # mounts), not relative to the directory bench-effect was started in
    args.build_root = os.path.abspath(args.build_root)
    if args.release == 13 and not os.path.realpath(args.build_root).startswith(os.path.realpath(SRC) + os.sep):
        ap.error(f"--build-root {args.build_root}: with --release 13 it must lie inside {SRC} "
                 "(tools/vm/in-root mounts only the source tree)")
    if args.order == "shuffle":
        args.order = f"shuffle:{int(time.time()) % 1_000_000}"
    if args.order not in ("latin", "reverse") and not re.fullmatch(r"shuffle:[0-9]+", args.order):
        ap.error(f"--order {args.order}: expected latin, reverse, shuffle or shuffle:SEED")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: at least 1")
    alt_policy = any(common.base_policy(p) == "memprotd-alt" for p in args.policies.split())
    if bool(args.memprotd_alt) != alt_policy and not args.protocol:
        ap.error("--memprotd-alt PATH and the policy memprotd-alt go together: give both or neither")
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        ap.error(f"--name {args.name!r}: letters, digits, '.', '_' and '-' only")
    return args


# What a protocol fixes: given beside --protocol, an error.
PROTOCOL_FIXES = ("--policies", "--refs", "--duration", "--warmup", "--rounds", "--order", "--env", "--memprotd",
                  "--memprotd-alt",
                  "--cpu", "--append", "--accel", "--memory", "--phase-at", "--phase-settle", "--jit")


def source_commit():
    """The source tree's commit, with "-dirty" when tracked files differ from
    it (None outside git)."""
    try:
        head = subprocess.run(["git", "-C", SRC, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", SRC, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def apply_protocol(ap, args):
    """Sets args from the protocol's scenario (one scenario: one boot)."""
    given = [a.split("=")[0] for a in sys.argv[1:] if a.split("=")[0] in PROTOCOL_FIXES]
    if given:
        ap.error(f"--protocol {args.protocol} fixes {', '.join(dict.fromkeys(given))}; leave them out")
    if args.analyze or args.pool or args.compare or args.prune is not None:
        ap.error("--protocol runs a boot; --analyze, --pool, --compare and --prune read the protocol from results")
    names = args.scenarios.split()
    if len(names) != 1 or ":" in names[0]:
        ap.error("--protocol runs one scenario per boot: --scenarios NAME (no :SECONDS)")
    sc = protocol.scenario(args.protocol, names[0])
    release = args.release or 12
    if release not in sc.releases:
        ap.error(f"--protocol {args.protocol} runs {names[0]} on Debian {' and '.join(map(str, sc.releases))} "
                 f"only (--release), not {release}")
    commit = source_commit()
    if commit is None or commit.endswith("-dirty"):
        ap.error(f"--protocol: the source tree has uncommitted changes ({commit}); a protocol result names the "
                 "commit memprotd was built from")
    args.scenarios = f"{names[0]}:{sc.duration}"
    args.duration, args.warmup, args.rounds, args.order = sc.duration, sc.warmup, sc.rounds, "latin"
    args.policies, args.refs = " ".join(sc.policies), " ".join(sc.refs)
    args.env = [f"{k}={v}" for k, v in sc.env] + [f"BENCH_PROTOCOL={args.protocol}"]


def announce(args):
    """Logs the order's balance and the estimated wall time (issue 29: a full
    default run should take about two hours)."""
    items = rotation(args.policies.split(), args.refs.split())
    square = square_rounds(len(items))
    if args.order == "latin" and args.rounds % square:
        log(f"note: --order latin with {args.rounds} rounds of {len(items)} runs: a full square is {square} "
            "rounds, so the places are not all balanced")
    est = estimate_s(args.scenarios.split(), args.policies.split(), args.rounds, args.duration, args.warmup,
                     settle_history(args.out), args.refs.split())
    log(f"estimated wall time: {est / 3600:.1f} h ({len(items)} runs a round × {args.rounds} rounds × "
        f"{len(args.scenarios.split())} scenarios)")
    if est > TIME_BUDGET_S:
        log(f"note: over the {TIME_BUDGET_S / 3600:.0f} h budget; fewer rounds or shorter scenarios "
            "(NAME:SECONDS) make it shorter")


def settle_history(out):
    """The mean time memprotd's runs waited for it to settle in the newest
    result in OUT that has any (SETTLE_MAX_S without one)."""
    for path in sorted(glob.glob(os.path.join(out, "*.json")), key=os.path.getmtime, reverse=True):
        try:
            with open(path) as fh:
                res = json.load(fh)
        except (OSError, ValueError):
            continue
        s = [r["settle_s"] for v in res.get("scenarios", {}).values() for r in v.get("runs", [])
             if common.runs_memprotd(str(r.get("policy", ""))) and r.get("settle_s") is not None]
        if s:
            return sum(s) / len(s)
    return common.SETTLE_MAX_S


def run_guest(args):
    """Builds, boots and runs; returns the run directory and memprotd's version."""
    if not os.path.isdir(args.build_root):
        subprocess.run([*in_release(args.release), "meson", "setup", args.build_root, "-Dtests=false",
                        "-Dbenchmarks=false"], check=True,
                       cwd=SRC)
    bin_dir = build_workloads(args.build_root, args.release)
    memprotd, memprotd_src, memprotd_ver = None, None, None
    if any(common.runs_memprotd(p) for p in args.policies.split()):
        # Build it in our tree when we can; find_memprotd falls back to another
        # build of this machine's release (never for Debian 13).
        if not args.memprotd:
            built = subprocess.run([*in_release(args.release), "ninja", "-C", args.build_root, "daemon/memprotd"],
                                   capture_output=True, text=True)
            if args.protocol and built.returncode != 0:
                raise SystemExit(f"bench-effect: --protocol: memprotd does not build in {args.build_root} (a "
                                 f"protocol boot runs the commit's own build):\n{built.stdout[-2000:]}")
        # a protocol boot takes its build root's binary, built above from the commit it records
        explicit = os.path.join(args.build_root, "daemon", "memprotd") if args.protocol else args.memprotd
        memprotd, memprotd_src, memprotd_ver = find_memprotd(args.build_root, explicit, bin_dir, args.release)
        if args.protocol and memprotd is None:
            raise SystemExit(f"bench-effect: --protocol: no working memprotd in {args.build_root}")
    memprotd_alt, alt_src, alt_ver = None, None, None
    if args.memprotd_alt:
        memprotd_alt, alt_src, alt_ver = find_memprotd(args.build_root, args.memprotd_alt, bin_dir, args.release,
                                                       name="memprotd-alt")
        if memprotd_alt is None:
            raise SystemExit(f"bench-effect: --memprotd-alt {args.memprotd_alt}: not a working memprotd")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    stamp_dir = os.path.join(args.build_root, "bench-effect", "runs", stamp)
    os.makedirs(stamp_dir)
    with open(os.path.join(stamp_dir, "run.json"), "w") as fh:
        json.dump({"args": vars(args), "memprotd": memprotd_src and os.path.abspath(memprotd_src),
                   "memprotd_version": memprotd_ver, "memprotd_alt": alt_src and os.path.abspath(alt_src),
                   "memprotd_alt_version": alt_ver, "commit": source_commit()}, fh)
    t0 = time.time()
    run_scenarios(args, bin_dir, memprotd, stamp_dir, memprotd_alt)
    log(f"all scenarios done in {(time.time() - t0) / 60:.1f} min; raw results in {stamp_dir}")
    return stamp_dir, memprotd_ver


def recorded(stamp_dir):
    """What run.json of an existing run says: memprotd's version and binary,
    the second binary of memprotd-alt, and the guest's CPU, accel, translator
    sampling and release."""
    try:
        with open(os.path.join(stamp_dir, "run.json")) as fh:
            run = json.load(fh)
    except (OSError, ValueError):
        return {"memprotd_version": None, "cpu": None, "accel": None, "jit_every": JIT_EVERY_DEFAULT,
                "release": None, "commit": None, "memprotd_binary": None, "memprotd_alt": None}
    a = run.get("args", {})
    alt = {"binary": run["memprotd_alt"], "version": run.get("memprotd_alt_version")} \
        if run.get("memprotd_alt") else None
    return {"memprotd_version": run.get("memprotd_version"), "memprotd_binary": run.get("memprotd"),
            "memprotd_alt": alt,
            "cpu": a.get("cpu") or "max",  # runs before --cpu existed used max
            "accel": a.get("accel") or "tcg", "jit_every": a.get("jit") or JIT_EVERY_DEFAULT,
            "release": a.get("release"), "commit": run.get("commit")}


def main():
    args = parse_args()
    if args.compare:
        print(compare_markdown(*(load_results(p) for p in args.compare)))
        return 0
    if args.prune is not None:
        prune_raw(args.out, args.prune)
        return 0
    if args.chart:
        subprocess.run([os.path.join(HERE, "install-deps"), "--bench"], check=True)
        with tempfile.TemporaryDirectory(prefix="bench-effect-") as tmp:
            log(f"chart: {draw_chart(args.chart, args.out, tmp)}")
        return 0
    if args.pool:
        return pool(args)
    try:  # before hours of guest runs: a --name that is taken is an error now
        result_base(args.out, args.name, datetime.date.today().isoformat())
    except FileExistsError as e:
        log(f"error: {e}")
        return 2
    if not args.analyze:
        announce(args)
    # gnuplot for the chart, and to run: meson, QEMU and the guest's tools (a
    # fresh machine has none of them; nothing is installed when all are there).
    subprocess.run([os.path.join(HERE, "install-deps"), "--bench"] + ([] if args.analyze else ["--vm"]), check=True)
    with tempfile.TemporaryDirectory(prefix="bench-effect-") as tmp:
        if args.analyze:
            stamp_dir = unpacked(args.analyze, tmp)
            rec = recorded(stamp_dir)
        else:
            stamp_dir, ver = run_guest(args)
            rec = dict(recorded(stamp_dir), memprotd_version=ver)
        return finish(args, stamp_dir, rec)


def pool(args):
    """--pool: the pooled result's JSON and Markdown (the sources have the charts)."""
    date = datetime.date.today().isoformat()
    result = pool_results([p for p in args.pool.split(",") if p], date)
    try:
        base = result_base(args.out, args.name, date)
    except FileExistsError as e:
        log(f"error: {e}")
        return 2
    print(write_result(result, base))
    return 0


def finish(args, stamp_dir, rec):
    """Analyses the run, writes the result and its raw archive, and prints it."""
    scenarios = analyze(stamp_dir)
    if not scenarios:
        log("no results to analyze")
        return 1
    date = datetime.date.today().isoformat()
    result = build_result(scenarios, date, stamp_dir, rec["memprotd_version"], rec["cpu"], rec["accel"],
                          rec["jit_every"], rec["release"], rec["commit"])
    if rec["memprotd_alt"]:  # which build each memprotd policy ran (the commit names the scripts' tree)
        result["meta"].update(memprotd_binary=rec["memprotd_binary"], memprotd_alt=rec["memprotd_alt"])
    base = result_base(args.out, args.name, date)
    os.makedirs(args.out, exist_ok=True)
    archive = raw_archive(args.analyze, stamp_dir, base)
    result["meta"]["raw"] = repo_path(archive)
    result["meta"]["raw_bytes"] = os.path.getsize(archive)
    log(f"raw files: {archive} ({os.path.getsize(archive) / 2**20:.1f} MiB)")
    try:
        md_text = write_result(result, base)
    except BaseException:
        os.unlink(archive)  # no archive without its result
        raise
    if not args.no_readme:
        update_readme(base, result)
    print(md_text)
    return 0
