#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""tools/bench_effect's analysis and report over a small run
(tests/data/bench-effect/run): the figures, targets and Markdown must be
what the unsplit tools/bench-effect wrote for it (expected.json, expected.md).
A change that moves them on purpose rewrites both with
`tools/bench-effect --analyze tests/data/bench-effect/run --out DIR --no-readme`."""

import json
import os
import sys
import unittest

sys.dont_write_bytecode = True
SRC = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))

from bench_effect import analysis, common, report  # noqa: E402

DATA = os.path.join(SRC, "tests", "data", "bench-effect")
RUN = os.path.join(DATA, "run")


def normal(x):
    """JSON's view of x (tuples become lists, keys strings)."""
    return json.loads(json.dumps(x))


class BenchEffectFixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(DATA, "expected.json")) as f:
            cls.expected = json.load(f)
        meta = cls.expected["meta"]
        common.PHASE_SETTLE_S = meta["phase_settle_s"]
        cls.result = report.build_result(analysis.analyze(RUN), meta["date"], meta["raw"], meta["memprotd_version"],
                                         meta["cpu"], meta["accel"], meta["jit_every"])
        cls.result["chart"] = None  # no gnuplot in the test; expected.json has none either

    def test_scenarios_and_runs(self):
        self.assertEqual(list(self.result["scenarios"]), ["phase-mmap", "reuse-mmap"])
        ph = self.result["scenarios"]["phase-mmap"]
        self.assertEqual([r["run"] for r in ph["runs"]], ["01-alone", "02-none", "03-memprotd", "04-static-75"])
        self.assertEqual(len(ph["stalled_runs"]), 1)
        self.assertTrue(ph["stalled_runs"][0].startswith("03-memprotd.stalled1 (the batch job read under 1 MB/s"))
        self.assertEqual(ph["stalled_stops"]["03-memprotd.stalled1"][0]["seconds"], 8)

    def test_windows(self):
        for sc, v in self.expected["scenarios"].items():
            for pol, p in v["policies"].items():
                with self.subTest(scenario=sc, policy=pol):
                    self.assertEqual(normal(self.result["scenarios"][sc]["policies"][pol]), p)

    def test_targets(self):
        got = {t["target"]: t for t in normal(self.result["targets"])}
        self.assertEqual(list(got), [t["target"] for t in self.expected["targets"]])
        for t in self.expected["targets"]:
            with self.subTest(target=t["target"]):
                self.assertEqual(got[t["target"]], t)
        mem = got["phase-mmap: kvload ops/s memprotd / better static"]
        self.assertAlmostEqual(mem["value"], 1.1106, places=4)
        self.assertTrue(mem["pass"])

    def test_whole_result(self):
        self.assertEqual(normal(self.result), self.expected)

    def test_markdown(self):
        with open(os.path.join(DATA, "expected.md")) as f:
            self.assertEqual(report.markdown(self.result) + "\n", f.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
