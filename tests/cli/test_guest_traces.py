#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Regression tests on real inputs: traces memprotd recorded in the test
guest (tests/data/traces/README.md says where each comes from) replayed with
`memprotctl simulate --replay`, and what the engine must do on them.

Environment: MEMPROTCTL (the binary), TRACES_DIR (tests/data/traces)."""
import json
import os
import subprocess
import sys
import unittest

# The guest's own check of a trace's trims (tests/vm/lib.sh check_replay).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vm"))
import replay_check  # noqa: E402

MIB = 1 << 20
CTL = os.environ.get("MEMPROTCTL", "memprotctl")
TRACES = os.environ.get("TRACES_DIR", os.path.join(os.path.dirname(__file__), "..", "data", "traces"))


def replay(trace, config, *extra):
    out = subprocess.run([CTL, "simulate", "--replay", os.path.join(TRACES, trace), "--config-dir",
                          os.path.join(TRACES, config), *extra], capture_output=True, text=True, check=True)
    return out.stdout


def replay_json(trace, config):
    return json.loads(replay(trace, config, "--json"))


def slice_of(sample, unit):
    for s in sample["slices"]:
        if s["unit"] == unit:
            return s
    return None


def series(result, unit, field):
    """(time, value) of one slice's field over the samples it is in."""
    return [(smp["time"], s[field]) for smp in result["samples"] if (s := slice_of(smp, unit))]


class Common:
    """Checks every trace must pass, with the configuration it was recorded under."""
    trace = config = None

    @classmethod
    def setUpClass(cls):
        cls.result = replay_json(cls.trace, cls.config)

    def test_replay_is_deterministic(self):
        self.assertEqual(replay(self.trace, self.config, "--json"), replay(self.trace, self.config, "--json"))
        self.assertEqual(replay(self.trace, self.config), replay(self.trace, self.config))

    def test_written_protection_stays_within_the_budget_at_every_sample(self):
        for smp in self.result["samples"]:
            top = sum(s["written_memory_low"] for s in smp["slices"] if s["parent"] is None)
            self.assertLessEqual(top, smp["budget"], f"at {smp['time']} s")


class PhaseChange(Common, unittest.TestCase):
    """kvload's 385 MiB table in workload.slice beside cacheread's reused
    mmap'd file set in batch.slice; 30 s into the batch run the table halves
    (its upper half stays resident, untouched), kernel 6.1."""
    trace = "phase-6.1.jsonl"
    config = "bench"
    PHASE_AT = 30  # seconds into the batch run (tools/bench-effect --phase-at)

    def change_time(self):
        """The batch run starts when batch.slice first holds 100 MiB."""
        start = next(t for t, cur in series(self.result, "batch.slice", "current") if cur >= 100 * MIB)
        return start + self.PHASE_AT

    def test_the_table_is_protected_until_the_change(self):
        change = self.change_time()
        anon = dict(series(self.result, "workload.slice", "anon"))
        before = [(t, v) for t, v in series(self.result, "workload.slice", "written_memory_low") if 5 <= t < change]
        self.assertGreater(len(before), 5)
        for t, v in before:
            self.assertGreaterEqual(v, anon[t] * 95 // 100, f"at {t} s")

    def test_the_protection_of_the_cold_half_is_released_within_100_s(self):
        change = self.change_time()
        low = series(self.result, "workload.slice", "written_memory_low")
        held = max(v for t, v in low if t < change)
        released = next((t for t, v in low if t >= change and v <= held * 6 // 10), None)
        self.assertIsNotNone(released, "still protecting the cold half at the end of the trace")
        self.assertLessEqual(released - change, 100, f"released {released - change:.0f} s after the change")


class WritesAsRecorded:
    """For traces recorded by the engine as it is now: under the
    configuration it ran with, the engine replayed on the recorded inputs
    makes the daemon's writes, i.e. after each sample the MemoryLow= and
    MemoryMin= the next sample recorded (systemd's, in enforce mode). An
    engine change that moves a trace's decisions calls for a new recording
    (README.md)."""
    min_compared = 50

    def test_the_replay_writes_what_the_daemon_wrote(self):
        with open(os.path.join(TRACES, self.trace)) as f:
            recorded = [json.loads(line) for line in f][1:]
        compared = 0
        for smp, nxt in zip(self.result["samples"], recorded[1:]):
            after = {c["unit"]: (c.get("low", 0), c.get("min", 0)) for c in nxt["cgroups"]}
            for s in smp["slices"]:
                if s["unit"] in after:
                    self.assertEqual((s["written_memory_low"], s["written_memory_min"]), after[s["unit"]],
                                     f"{s['unit']} at {smp['time']} s: (MemoryLow, MemoryMin)")
                    compared += 1
        self.assertGreater(compared, self.min_compared)


class TrimsAsRecorded:
    """For traces of a daemon that trimmed cheap cache: every trim it made
    after a sample's tick ("trims_made") the replay plans at that sample, for
    at least the bytes made; and the replay plans none for a slice that must
    never be trimmed (`untrimmed`)."""
    untrimmed = None  # each class names them

    def test_the_replay_plans_every_trim_the_daemon_made(self):
        with open(os.path.join(TRACES, self.trace)) as f:
            recorded = [json.loads(line) for line in f][1:]
        made, wrong = replay_check.trim_mismatches(recorded, self.result["samples"])
        self.assertEqual(wrong, [])
        self.assertGreater(made, 0, "the daemon made no trim in this trace")

    def test_the_replay_never_trims_the_protected(self):
        self.assertTrue(self.untrimmed, "the class names no slice that must stay untrimmed")
        for smp in self.result["samples"]:
            for unit in self.untrimmed:
                s = slice_of(smp, unit)
                self.assertEqual(s["trim"] if s else 0, 0, f"{unit} at {smp['time']} s")


class PhaseChangeByThisEngine(WritesAsRecorded, Common, unittest.TestCase):
    """The same scenario recorded again by the engine as it is now (an
    engine change that moves a trace's decisions calls for a new recording,
    README.md; recorded again after cold anon was lent spare room, engine
    step 5). Its cold half left the working set 55 s after the change; the
    room lent to it that tick came back at once (422 -> 398 MiB), the rest
    was held 30 s, and the protection was at the table's remaining 212 MiB
    96 s after the change. When the batch run ended, its freed room was lent
    to the table's cold 17 MiB (232 MiB)."""
    trace = "phase-6.1-2.jsonl"
    config = "bench"


class Memcached(Common, unittest.TestCase):
    """memcached (380 MiB of values, 300 ops/s) in workload.slice beside fio's
    buffered random reads over 1.6 GiB in batch.slice, kernel 6.1."""
    trace = "memcached-6.1.jsonl"
    config = "bench-cache"
    # Not replayed against the daemon's writes: at its last sample 15 anon
    # pages of fio's came back from swap, and the engine that recorded it
    # took fio's 360 MiB of page cache for warm (fixed since).

    def test_the_table_stays_protected(self):
        settled = [(t, v) for t, v in series(self.result, "workload.slice", "written_memory_low") if t >= 30]
        anon = dict(series(self.result, "workload.slice", "anon"))
        self.assertTrue(settled)
        for t, v in settled:
            self.assertGreaterEqual(v, anon[t] * 95 // 100, f"at {t} s: the table's protection fell below its size")

    def test_the_streamer_is_not_protected(self):
        late = [(t, v) for t, v in series(self.result, "batch.slice", "written_memory_low") if t >= 120]
        self.assertTrue(late)
        for t, v in late:
            self.assertLessEqual(v, 32 * MIB, f"at {t} s: fio's single-use page cache protected")


class RandomReader612(Common, unittest.TestCase):
    """kvload's 385 MiB table in workload.slice beside cacheread's uniformly
    random pread over a 4 GiB file in batch.slice, kernel 6.12. The kernel
    activates nearly every refault of the reader (its pages enter the oldest
    MGLRU generation and never leave it), but restores almost none: a page
    read once is worth no protection. Recorded by an engine that took the
    activations for reuse and protected batch.slice at 192 MiB."""
    trace = "stream-6.12.jsonl"
    config = "bench"

    def test_the_random_reader_is_not_protected(self):
        late = [(t, v) for t, v in series(self.result, "batch.slice", "written_memory_low") if t >= 30]
        self.assertGreater(len(late), 5)
        for t, v in late:
            self.assertLessEqual(v, 32 * MIB, f"at {t} s: the reader's page cache protected")

    def test_the_table_stays_protected(self):
        anon = dict(series(self.result, "workload.slice", "anon"))
        settled = [(t, v) for t, v in series(self.result, "workload.slice", "written_memory_low") if t >= 10]
        self.assertTrue(settled)
        for t, v in settled:
            self.assertGreaterEqual(v, anon[t] * 95 // 100, f"at {t} s: the table's protection fell below its size")


class Escalation612(WritesAsRecorded, Common, unittest.TestCase):
    """tests/vm/escalation.sh's guest (Debian 13, kernel 6.12): a 420 MiB
    anonymous working set touched at random in workload.slice beside
    stress-ng keeping 720 MiB in batch.slice, zram swap. MemoryLow= is only
    a deferral under MGLRU there: low events while within it move the
    working set under MemoryMin=."""
    trace = "escalation-6.12.jsonl"
    config = "bench"
    min_compared = 15  # a short trace: 6 samples, MemoryMin= from the fifth

    def test_memory_min_holds_the_working_set_within_three_quarters_of_the_budget(self):
        escalated = [(smp["time"], s["written_memory_min"], smp["budget"], s["anon"]) for smp in self.result["samples"]
                     if (s := slice_of(smp, "workload.slice")) and s["written_memory_min"] > 0]
        self.assertTrue(escalated, "workload.slice never got MemoryMin=")
        for t, v, budget, anon in escalated:
            self.assertLessEqual(v, budget * 3 // 4, f"at {t} s")
            self.assertGreaterEqual(v, anon * 9 // 10, f"at {t} s: the working set held")


class Trim612(WritesAsRecorded, TrimsAsRecorded, Common, unittest.TestCase):
    """tests/vm/trim.sh's guest (Debian 13, kernel 6.12): workload.slice's
    300 MiB table and its 150 MiB spikes every 20 s beside batch.slice
    streaming a sparse 4 GiB file; the daemon trims batch.slice's single-use
    cache with lru-gen and records the trims it made."""
    trace = "trim-6.12.jsonl"
    config = "bench-trim"  # bench with TrimCheapCache=auto, as the guest ran
    min_compared = 20
    untrimmed = ("workload.slice",)


if __name__ == "__main__":
    missing = [c.trace for c in Common.__subclasses__() if not os.path.exists(os.path.join(TRACES, c.trace))]
    if missing:
        sys.exit(f"missing traces in {TRACES}: {missing}")
    unittest.main()
