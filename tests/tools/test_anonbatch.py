#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""anonbatch (bench/effect/anonbatch.cc), the anon-batch scenario's batch
job: over 8 MiB for 3 s it prints one line a second with the keys the
benchmark's analysis and the guest script's stop rule read (t counting up
from 1, mb_s = iops × 4 KiB), at least its fill's 2,048 pages in all, and a
summary whose pages are the seconds' sum at most; a bad argument is one
clear error and exit status 2 (effect::die), and its memory is resident
(VmRSS of the area) while it runs.

Environment: ANONBATCH (the binary)."""

import json
import os
import subprocess
import sys
import time

ANONBATCH = os.environ["ANONBATCH"]
PAGES = (8 << 20) // 4096
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


proc = subprocess.Popen([ANONBATCH, "--size", "8M", "--duration", "3"], stdout=subprocess.PIPE, text=True)
# The largest VmRSS while it runs, sampled every 10 ms (a fixed moment could
# come before a loaded machine let it fill).
rss = 0
while proc.poll() is None:
    try:
        rss = max(rss, rss_kb(proc.pid))
    except (OSError, StopIteration):  # exited between poll() and the read
        break
    time.sleep(0.01)
out, _ = proc.communicate(timeout=60)
check(proc.returncode == 0, f"exit status 0 (got {proc.returncode})")
lines = [json.loads(x) for x in out.splitlines() if x.strip()]
seconds = [x for x in lines if "t" in x]
summary = [x for x in lines if x.get("summary")]
check([x["t"] for x in seconds] == [1, 2, 3], f"one line a second, t 1..3 (got {[x.get('t') for x in seconds]})")
check(all({"prog", "t", "ts", "iops", "mb_s"} <= set(x) and x["prog"] == "anonbatch" for x in seconds),
      "each second has prog, t, ts, iops, mb_s")
check(all(abs(x["mb_s"] - x["iops"] * 4096 / 1048576) < 0.01 for x in seconds), "mb_s is iops × 4 KiB")
total = sum(x["iops"] for x in seconds)
check(total >= PAGES, f"the fill's {PAGES} pages and more were counted (got {total})")
check(len(summary) == 1 and summary[0]["pages"] >= total, f"a summary counting every page ({summary})")
check(rss >= 8 * 1024 * 9 // 10, f"its 8 MiB are resident while it runs (largest VmRSS {rss} KiB)")

bad = subprocess.run([ANONBATCH, "--size", "0"], capture_output=True, text=True)
check(bad.returncode == 2 and "anonbatch" in bad.stderr and bad.stdout == "",
      f"--size 0: exit 2 and an error naming the program (got {bad.returncode}, {bad.stderr.strip()!r})")
unknown = subprocess.run([ANONBATCH, "--sise", "8M"], capture_output=True, text=True)
check(unknown.returncode == 2 and "--sise" in unknown.stderr,
      f"an unknown argument is named (got {unknown.returncode}, {unknown.stderr.strip()!r})")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
