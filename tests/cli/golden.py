#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Golden outputs of `memprotctl simulate`: the plan (--json), the reasoning
(--explain) and the table on tests/data/demo and on seeded random trees
(make-fake-tree DIR N SEED) must stay byte-identical, so that a refactoring
that changes what the engine decides fails here. The tree's temporary path
is replaced by TREE, and the plan's timestamp_us (the host's monotonic
clock when simulate started) by 0, before comparing.

  golden.py            compare against tests/data/golden/
  golden.py --update   rewrite the saved outputs (after a deliberate change;
                       say why in the commit)
Environment: MEMPROTCTL, MAKE_FAKE_TREE, DEMO_DIR, GOLDEN_DIR (meson sets them).
"""
import difflib
import os
import re
import subprocess
import sys
import tempfile

CTL = os.environ["MEMPROTCTL"]
MAKE = os.environ["MAKE_FAKE_TREE"]
DEMO = os.environ["DEMO_DIR"]
GOLDEN = os.environ["GOLDEN_DIR"]

# name, tree (None: the demo host; else (slices, seed)), extra simulate args
SIM = ["--samples", "12", "--interval", "5s", "--no-wait"]
CASES = [
    ("demo", None, ["--samples", "60", "--interval", "5s", "--no-wait"]),
    ("random-1", (25, 1), SIM + ["--memory-total", "16G"]),
    ("random-2", (60, 2), SIM + ["--memory-total", "48G"]),
    ("random-3", (120, 3), SIM + ["--memory-total", "64G"]),
    ("random-4", (40, 4), SIM + ["--memory-total", "256G"]),
]
VIEWS = [("json", ["--json"]), ("explain", ["--explain"]), ("table", [])]


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"golden: {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


def outputs(tmp):
    for name, tree, extra in CASES:
        if tree is None:
            root, proc, where = f"{DEMO}/cgroup", f"{DEMO}/proc", DEMO
        else:
            where = os.path.join(tmp, name)
            run([MAKE, where, str(tree[0]), str(tree[1])])
            root, proc = f"{where}/cgroup", f"{where}/proc"
        for view, vargs in VIEWS:
            out = run([CTL, "simulate", "--root", root, "--proc-root", proc,
                       "--config-dir", f"{DEMO}/config"] + extra + vargs)
            out = re.sub(r'"timestamp_us": [0-9]+', '"timestamp_us": 0', out.replace(where, "TREE"))
            yield f"{name}.{view}", out


def main():
    update = sys.argv[1:] == ["--update"]
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, out in outputs(tmp):
            path = os.path.join(GOLDEN, key + ".out")
            if update:
                with open(path, "w") as f:
                    f.write(out)
                continue
            try:
                with open(path) as f:
                    want = f.read()
            except FileNotFoundError:
                failed.append(key)
                print(f"FAIL {key}: no saved output {path} (run with --update)")
                continue
            if out != want:
                failed.append(key)
                diff = difflib.unified_diff(want.splitlines(), out.splitlines(), "saved", "now", lineterm="", n=2)
                print(f"FAIL {key}: output differs from {path}:")
                print("\n".join(list(diff)[:60]))
            else:
                print(f"ok   {key} ({len(out)} bytes)")
    if update:
        print(f"golden: wrote {len(CASES) * len(VIEWS)} outputs to {GOLDEN}")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
