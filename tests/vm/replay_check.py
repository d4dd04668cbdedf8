#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks of a guest's trace against its replay (`memprotctl simulate
--replay TRACE --json`), for tests/vm/lib.sh's check_replay:
  replay_check.py field REPLAY_JSON UNIT FIELD  some sample plans FIELD > 0 for UNIT
  replay_check.py trims TRACE REPLAY_JSON       the daemon made a trim, and each trim it
                                                made after a sample's tick the replay
                                                plans at that sample, for at least its bytes
Exit 0 when the check holds; what failed goes to stderr."""
import json
import sys


def slices(sample):
    return {s["unit"]: s for s in sample["slices"]}


def field(replay_json, unit, name):
    with open(replay_json) as f:
        r = json.load(f)
    values = [slices(smp)[unit].get(name, 0) for smp in r["samples"] if unit in slices(smp)]
    print(f"{unit} {name}: largest {max(values, default=0)} over {len(values)} samples", file=sys.stderr)
    return any(v > 0 for v in values)


def trim_mismatches(recorded, samples):
    """The trims the daemon made (each line's "trims_made", the header
    dropped) that the replay's samples do not plan for at least their bytes:
    (how many were made, a message per mismatch). Also used by
    tests/cli/test_guest_traces.py."""
    made, wrong = 0, []
    for smp, rec in zip(samples, recorded):
        for t in rec.get("trims_made", []):
            made += 1
            planned = slices(smp).get(t["unit"], {}).get("trim", 0)
            if planned < t["bytes"] or t["bytes"] <= 0:
                wrong.append(f"at {smp['time']} s: {t['unit']} trimmed by {t['bytes']}, the replay plans {planned}")
    return made, wrong


def trims(trace, replay_json):
    with open(trace) as f:
        recorded = [json.loads(line) for line in f][1:]
    with open(replay_json) as f:
        samples = json.load(f)["samples"]
    made, wrong = trim_mismatches(recorded, samples)
    for w in wrong:
        print(w, file=sys.stderr)
    print(f"{made} trim(s) made in the trace", file=sys.stderr)
    return not wrong and made > 0


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    sys.exit(0 if (field(*args) if what == "field" else trims(*args)) else 1)
