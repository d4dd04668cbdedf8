#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""tools/bench_effect's analysis and report over a small run
(tests/data/bench-effect/run): the figures, targets and Markdown must be
what tools/bench-effect wrote for it (expected.json, expected.md). A change
that moves them on purpose rewrites both with
`tools/bench-effect --analyze tests/data/bench-effect/run --out DIR --no-readme`
(DIR/*.json and .md, the chart set to null). Then the rules of issue 29: the
rounds' order, the bootstrap interval, the verdicts, results never
overwritten, raw archives named relative to the source tree."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest

sys.dont_write_bytecode = True
SRC = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tools"))

from bench_effect import analysis, cli, common, pool, protocol, raw, report, stats, vm  # noqa: E402

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
        mem = got["phase-mmap [after the change]: kvload ops/s memprotd / better static"]
        self.assertAlmostEqual(mem["value"], 1.1106, places=4)
        self.assertTrue(mem["pass"])
        # one round: no interval, so no verdict either way
        self.assertIsNone(mem["ci95"])
        self.assertEqual(mem["verdict"], "not shown")

    def test_whole_result(self):
        self.assertEqual(normal(self.result), self.expected)

    def test_markdown(self):
        with open(os.path.join(DATA, "expected.md")) as f:
            self.assertEqual(report.markdown(self.result) + "\n", f.read())

    def test_markdown_names_both_builds_of_a_pilot(self):
        two = json.loads(json.dumps(self.result))
        two["meta"].update(memprotd_binary="/a/memprotd", memprotd_alt={"binary": "/b/memprotd", "version": "v2"})
        self.assertIn("Two builds: memprotd ran `/a/memprotd`, memprotd-alt `/b/memprotd` (v2).",
                      report.markdown(two))


def guest_round_order(items, r):
    """Round r's order as tests/vm/bench-effect.sh's round_order (latin) computes it."""
    with open(os.path.join(SRC, "tests", "vm", "bench-effect.sh")) as f:
        text = f.read()
    fn = text[text.index("round_order() {"):text.index("\n}\n", text.index("round_order() {")) + 3]
    out = subprocess.run(["bash", "-c", f"order=latin; policies='{' '.join(items)}'\n{fn}\nround_order {r}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


class RoundOrder(unittest.TestCase):
    def test_references_rotate_with_the_policies(self):
        items = common.rotation(common.POLICIES)
        self.assertEqual(items[:2], ["alone", "cpu-ref"])
        n = len(items)
        rows = [common.latin_round(items, r) for r in range(1, common.square_rounds(n) + 1)]
        for place in range(n):
            # each item, references included, once in each place over a full square
            self.assertEqual(sorted(row[place] for row in rows), sorted(items))
        self.assertNotEqual(rows[1][0], "alone")

    def test_odd_count_takes_two_squares_and_balances_places(self):
        items = ["a", "b", "c"]
        rows = [common.latin_round(items, r) for r in range(1, common.square_rounds(3) + 1)]
        self.assertEqual(len(rows), 6)
        for place in range(3):
            self.assertEqual(sorted(row[place] for row in rows), sorted(items * 2))

    def test_python_order_is_the_guest_scripts(self):
        for items in (common.rotation(common.POLICIES), ["alone", "cpu-ref", "none", "memprotd", "static-75"]):
            for r in range(1, common.square_rounds(len(items)) + 2):
                self.assertEqual(common.latin_round(items, r), guest_round_order(items, r), (items, r))

    def test_estimate_counts_references_and_settling(self):
        one = common.estimate_s(["stream:60"], ["none"], 1, 60, 8, settle_s=0)
        self.assertEqual(one, common.BOOT_S + 3 * (60 + 8 + common.RUN_OVERHEAD_S))
        mpd = common.estimate_s(["stream:60"], ["memprotd"], 2, 60, 8, settle_s=100)
        self.assertEqual(mpd, common.BOOT_S + 6 * (60 + 8 + common.RUN_OVERHEAD_S) + 2 * 100)


def rows_of(pairs):
    """Rounds of two policies' figures: [(num, den), ...] → rows as stats takes them."""
    return [{"memprotd": {"window": {"x": a}}, "none": {"window": {"x": b}}} for a, b in pairs]


def num(r):
    return r["memprotd"]["window"]["x"]


def den(rows):
    return sum(r["none"]["window"]["x"] for r in rows) / len(rows)


def guest_functions(*names):
    """The named functions of tests/vm/bench-effect.sh, as bash source."""
    with open(os.path.join(SRC, "tests", "vm", "bench-effect.sh")) as f:
        text = f.read()
    out = []
    for name in names:
        start = text.index(f"\n{name}() {{") + 1
        out.append(text[start:text.index("\n}\n", start) + 3])
    return "\n".join(out)


def fake_slice(root, name, stat, pressure_total, cpu_usec, low):
    d = os.path.join(root, name)
    os.makedirs(d)
    files = {"memory.stat": "".join(f"{k} {v}\n" for k, v in stat.items()),
             "memory.pressure": f"some avg10=0.00 avg60=0.00 avg300=0.00 total={pressure_total}\n"
                                f"full avg10=0.00 avg60=0.00 avg300=0.00 total={pressure_total // 2}\n",
             "cpu.stat": f"usage_usec {cpu_usec}\nuser_usec 1\nsystem_usec 2\n",
             "memory.events": f"low {low}\nhigh 3\nmax 0\noom 0\noom_kill 1\n",
             "memory.current": "450000000\n", "memory.low": "0\n", "memory.min": "0\n",
             "memory.swap.current": "4096\n"}
    for f, content in files.items():
        with open(os.path.join(d, f), "w") as fh:
            fh.write(content)


class GuestSampler(unittest.TestCase):
    """The guest's sampler and run counters on a fake cgroup tree: each slice
    its own counters, every key read (tests/vm/bench-effect.sh)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cg = self.tmp.name
        # batch.slice's memory.stat has no pgmajfault line: it must read 0,
        # not the value of the slice read before it
        fake_slice(self.cg, "workload.slice", {"anon": 440401920, "file": 1024, "pgmajfault": 1013338,
                                               "workingset_refault_anon": 77, "workingset_refault_file": 5,
                                               "workingset_activate_anon": 6, "workingset_activate_file": 7,
                                               "pgsteal": 8}, 123456, 9000000, 880)
        fake_slice(self.cg, "batch.slice", {"anon": 629145600, "file": 2048}, 654321, 31000000, 0)

    def tearDown(self):
        self.tmp.cleanup()

    def bash(self, body):
        script = f"set -u\ncg={self.cg}\n{guest_functions('read1', 'read_keys', 'psi_totals', 'counters', 'sampler')}\n{body}"
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout

    def sample(self):
        # one pass of the loop: its sleep ends the shell
        return json.loads(self.bash("sleep() { exit 0; }\nsampler"))

    def test_each_slice_reads_its_own_counters(self):
        s = self.sample()
        w, b = s["workload"], s["batch"]
        self.assertEqual((w["pgmajfault"], w["refault_anon"], w["anon"]), (1013338, 77, 440401920))
        self.assertEqual((b["pgmajfault"], b["refault_anon"], b["anon"], b["file"]), (0, 0, 629145600, 2048))
        self.assertEqual((w["psi_some_us"], w["psi_full_us"], w["cpu_usec"], w["events_low"]),
                         (123456, 61728, 9000000, 880))
        self.assertEqual((b["psi_some_us"], b["psi_full_us"], b["cpu_usec"], b["events_low"]),
                         (654321, 327160, 31000000, 0))
        self.assertEqual((w["current"], w["swap"]), (450000000, 4096))

    def test_run_counters_read_every_key(self):
        c = json.loads(self.bash("counters workload.slice"))
        self.assertEqual((c["pgmajfault"], c["refault_anon"], c["refault_file"], c["activate_anon"],
                          c["activate_file"], c["pgsteal"]), (1013338, 77, 5, 6, 7, 8))
        self.assertEqual((c["psi_some_us"], c["psi_full_us"], c["cpu_usec"]), (123456, 61728, 9000000))
        self.assertEqual((c["events_low"], c["events_high"], c["oom_kill"]), (880, 3, 1))
        b = json.loads(self.bash("counters batch.slice"))
        self.assertEqual((b["pgmajfault"], b["anon"], b["cpu_usec"]), (0, 629145600, 31000000))

    def test_guest_wide_part_reads_this_hosts_proc(self):
        def io_some():
            with open("/proc/pressure/io") as f:
                return int(f.readline().rsplit("total=", 1)[1])
        has_psi = os.path.exists("/proc/pressure/io")
        before = io_some() if has_psi else 0
        s = self.sample()
        if has_psi:
            # a counter: between the reads before and after the sample
            self.assertLessEqual(before, s["psi_io_us"]["some"])
            self.assertLessEqual(s["psi_io_us"]["some"], io_some())
        with open("/proc/meminfo") as f:
            free_kb = next(int(line.split()[1]) for line in f if line.startswith("MemFree:"))
        # free memory moves between the two reads; it is read, not 0
        self.assertGreater(s["mem_free_kb"], 0)
        self.assertLess(abs(s["mem_free_kb"] - free_kb), free_kb // 2 + 1)
        with open("/proc/vmstat") as f:
            vmstat = dict(line.split() for line in f)
        self.assertGreaterEqual(s["vm"]["pgmajfault"], 1)
        self.assertLessEqual(s["vm"]["pgmajfault"], int(vmstat["pgmajfault"]))
        self.assertEqual(len(s["cpu"]), 8)

    def test_no_counter_file_is_read_line_by_line(self):
        with open(os.path.join(SRC, "tests", "vm", "bench-effect.sh")) as f:
            text = f.read()
        for bad in ('done < "$d/', "done < /proc/", "done < /sys/"):
            self.assertFalse(bad in text, f"bench-effect.sh reads a kernel file with `while read` ({bad!r})")


class Bootstrap(unittest.TestCase):
    def test_constant_paired_ratio_gives_a_point_interval(self):
        rows = rows_of([(1.7 * b, b) for b in (100, 140, 90, 260, 75)])
        lo, hi = stats.bootstrap_ci(rows, num, den)
        self.assertAlmostEqual(lo, 1.7, places=12)
        self.assertAlmostEqual(hi, 1.7, places=12)

    def test_interval_holds_the_point_and_is_deterministic(self):
        rows = rows_of([(150, 100), (120, 110), (200, 105), (90, 95)])
        ci = stats.bootstrap_ci(rows, num, den)
        self.assertEqual(ci, stats.bootstrap_ci(rows, num, den))
        point = stats.ratio_of_means(rows, num, den)
        self.assertLess(ci[0], point)
        self.assertGreater(ci[1], point)

    def test_one_round_has_no_interval(self):
        self.assertIsNone(stats.bootstrap_ci(rows_of([(150, 100)]), num, den))

    def test_rounds_pair_the_kth_runs_and_need_every_policy(self):
        runs = [{"policy": "none", "run": "01"}, {"policy": "memprotd", "run": "02"},
                {"policy": "memprotd", "run": "03", "skipped": "memprotd not built"},
                {"policy": "none", "run": "04"}]
        rounds = stats.rounds_of(runs, ["memprotd", "none"])
        self.assertEqual([(r["memprotd"]["run"], r["none"]["run"]) for r in rounds], [("02", "01")])

    def test_rounds_pair_runs_of_one_boot_only(self):
        runs = [{"policy": "memprotd", "run": "01", "boot": 0}, {"policy": "memprotd", "run": "02", "boot": 0},
                {"policy": "none", "run": "03", "boot": 0},
                {"policy": "none", "run": "01", "boot": 1}, {"policy": "memprotd", "run": "02", "boot": 1}]
        rounds = stats.rounds_of(runs, ["memprotd", "none"])
        self.assertEqual([(r["memprotd"]["boot"], r["memprotd"]["run"], r["none"]["boot"], r["none"]["run"])
                          for r in rounds], [(0, "01", 0, "03"), (1, "02", 1, "01")])


class Pool(unittest.TestCase):
    """--pool: several results of one kernel as one, rounds paired within a boot."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        with open(os.path.join(DATA, "expected.json")) as f:
            self.base = json.load(f)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, res):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            json.dump(res, f)
        return path

    def test_the_same_rounds_twice_give_the_same_ratios_over_twice_the_rounds(self):
        a, b = self.write("a.json", self.base), self.write("b.json", self.base)
        pooled = pool.pool_results([a, b], "2026-11-26")
        self.assertEqual(pooled["meta"]["pooled_from"], [a, b])
        self.assertIsNone(pooled["meta"]["raw"])
        runs = pooled["scenarios"]["reuse-mmap"]["runs"]
        self.assertEqual(len(runs), 2 * len(self.base["scenarios"]["reuse-mmap"]["runs"]))
        self.assertEqual({r["boot"] for r in runs}, {0, 1})
        self.assertFalse(any("series" in r for r in runs))  # the sources keep them
        compared = 0
        for t0, t in zip(self.base["targets"], pooled["targets"], strict=True):
            self.assertEqual(t["target"], t0["target"])
            if t0["value"] is not None and t0["rounds"]:
                self.assertAlmostEqual(t["value"], t0["value"])
                self.assertEqual(t["rounds"], 2 * t0["rounds"])
                compared += 1
        self.assertGreater(compared, 5)

    def test_rounds_of_another_boot_count_in_the_ratio_and_give_an_interval(self):
        other = json.loads(json.dumps(self.base))
        for r in other["scenarios"]["reuse-mmap"]["runs"]:  # a second boot: memprotd a bit faster
            if r.get("policy") == "memprotd" and "window" in r:
                r["window"]["kv_ops_s"] *= 1.1
        pooled = pool.pool_results([self.write("a.json", self.base), self.write("b.json", other)], "2026-11-26")
        name = "reuse-mmap [whole run]: kvload ops/s memprotd / none"
        t0 = next(t for t in self.base["targets"] if t["target"] == name)
        t = next(t for t in pooled["targets"] if t["target"] == name)
        self.assertGreater(t["value"], t0["value"])
        self.assertLess(t["value"], t0["value"] * 1.1)
        self.assertEqual((t0["rounds"], t0["ci95"], t["rounds"]), (1, None, 2))
        self.assertLess(t["ci95"][0], t["ci95"][1])

    def test_pool_with_a_taken_name_fails_and_leaves_it(self):
        a, b = self.write("a.json", self.base), self.write("b.json", self.base)
        out = os.path.join(self.tmp.name, "out")
        os.makedirs(out)
        with open(os.path.join(out, "taken.json"), "w") as f:
            f.write("{}")
        r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "bench-effect"), "--pool", f"{a},{b}",
                            "--out", out, "--name", "taken"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("not overwritten", r.stdout + r.stderr)
        self.assertEqual(sorted(os.listdir(out)), ["taken.json"])

    def test_a_different_experiment_is_not_pooled(self):
        other = json.loads(json.dumps(self.base))
        other["scenarios"]["reuse-mmap"]["guest"]["duration"] = 999
        with self.assertRaisesRegex(SystemExit, "reuse-mmap: duration is .* but 999"):
            pool.pool_results([self.write("a.json", self.base), self.write("b.json", other)], "2026-11-26")

    def test_a_page_of_mem_total_is_the_same_guest_a_different_size_is_not(self):
        mem = self.base["scenarios"]["reuse-mmap"]["guest"]["mem_total"]
        page = json.loads(json.dumps(self.base))
        page["scenarios"]["reuse-mmap"]["guest"]["mem_total"] = mem + 4096
        pooled = pool.pool_results([self.write("a.json", self.base), self.write("b.json", page)], "2026-11-26")
        self.assertEqual({r["boot"] for r in pooled["scenarios"]["reuse-mmap"]["runs"]}, {0, 1})
        bigger = json.loads(json.dumps(self.base))
        bigger["scenarios"]["reuse-mmap"]["guest"]["mem_total"] = mem + (64 << 20)
        with self.assertRaisesRegex(SystemExit, "reuse-mmap: mem_total is"):
            pool.pool_results([self.write("a.json", self.base), self.write("c.json", bigger)], "2026-11-26")

    def test_different_kernels_are_not_pooled(self):
        other = json.loads(json.dumps(self.base))
        other["meta"]["kernel"] = "6.12.57+deb13-amd64"
        with self.assertRaisesRegex(SystemExit, "different kernels"):
            pool.pool_results([self.write("a.json", self.base), self.write("b.json", other)], "2026-11-26")

    def test_another_commit_or_configuration_is_not_pooled(self):
        for key, value in (("memprotd_commit", "abc"), ("memprotd_config", {"policy.d/50-workload.conf": "x"}),
                           ("protocol", "1"), ("memprotd_alt", {"binary": "/b/memprotd", "version": "x"})):
            other = json.loads(json.dumps(self.base))
            other["meta"][key] = value
            with self.subTest(key=key), self.assertRaisesRegex(SystemExit, f"{key} differs"):
                pool.pool_results([self.write("a.json", self.base), self.write("b.json", other)], "2026-11-26")

    def test_a_protocol_pools_no_more_boots_than_it_runs(self):
        boot = json.loads(json.dumps(self.base))
        boot["meta"]["protocol"] = "1"
        paths = [self.write(f"{i}.json", boot) for i in range(4)]
        with self.assertRaisesRegex(SystemExit, "4 boots of (phase|reuse)-mmap, protocol 1 runs 3"):
            pool.pool_results(paths, "2026-11-26")
        pooled = pool.pool_results(paths[:3], "2026-11-26")
        self.assertTrue(all(t["boots"] == 3 for t in pooled["targets"]))
        self.assertEqual(pool.pool_results(paths[:2], "2026-11-26")["targets"][0]["verdict"],
                         "pending (2 of 3 boots)")
        with self.assertRaisesRegex(SystemExit, "pooled already"):
            pool.pool_results([self.write("p.json", pooled), paths[3]], "2026-11-26")

    def test_a_result_given_twice_is_an_error(self):
        a = self.write("a.json", self.base)
        with self.assertRaisesRegex(SystemExit, "given twice"):
            pool.pool_results([a, os.path.join(self.tmp.name, ".", "a.json")], "2026-11-26")

    def test_a_pooled_result_has_no_chart_to_draw(self):
        pooled = pool.pool_results([self.write("a.json", self.base), self.write("b.json", self.base)], "2026-11-26")
        with open(os.path.join(self.tmp.name, "p.json"), "w") as f:
            json.dump(pooled, f)
        with self.assertRaisesRegex(SystemExit, "no per-second series .*a.json"):
            report.draw_chart(os.path.join(self.tmp.name, "p.json"), self.tmp.name, self.tmp.name)

    def test_one_result_is_an_error(self):
        with self.assertRaisesRegex(SystemExit, "two or more"):
            pool.pool_results([self.write("a.json", self.base)], "2026-11-26")


class Prune(unittest.TestCase):
    @staticmethod
    def prune(readme, metas):
        """Writes results NAME.json ({"meta": META}, older first) with a raw
        archive each and a README.md citing `readme`, prunes to 0 and
        returns the archives left."""
        with tempfile.TemporaryDirectory() as src:
            out = os.path.join(src, "bench", "effect", "results")
            os.makedirs(out)
            with open(os.path.join(src, "README.md"), "w") as f:
                f.write(readme)
            for i, (name, meta) in enumerate(metas.items()):
                with open(os.path.join(out, name + ".json"), "w") as f:
                    json.dump({"meta": meta}, f)
                os.utime(os.path.join(out, name + ".json"), (1000 + i, 1000 + i))
                with open(os.path.join(out, name + ".raw.tar.xz"), "w") as f:
                    f.write("x")
            with open(os.devnull, "w") as null:
                stdout, sys.stdout = sys.stdout, null
                try:
                    raw.prune_raw(out, 0, src)
                finally:
                    sys.stdout = stdout
            return sorted(f for f in os.listdir(out) if f.endswith(".xz"))

    def test_cited_results_and_their_sources_keep_their_archives(self):
        metas = {name: ({"pooled_from": ["bench/effect/results/2026-01-01.json"]} if "pooled" in name else {})
                 for name in ("2026-01-01", "2026-01-02", "2026-01-03-pooled", "2026-01-04")}
        self.assertEqual(self.prune("see results/2026-01-03-pooled.json\n", metas),
                         ["2026-01-01.raw.tar.xz", "2026-01-03-pooled.raw.tar.xz"])

    def test_protocol_results_keep_their_archives_and_a_name_is_cited_whole(self):
        names = ("p2-y-6.1-b1", "p9-x-6.1", "p9-x-6.1-b1", "p9-x-6.12", "p9-x-6.12-b1", "p9-x-6.12-b2")
        metas = {name: ({"protocol": 2} if name.startswith("p2-") else {}) for name in names}
        self.assertEqual(self.prune("see [x](results/p9-x-6.12-b1.md) and p9-x-6.12.\n", metas),
                         ["p2-y-6.1-b1.raw.tar.xz", "p9-x-6.12-b1.raw.tar.xz", "p9-x-6.12.raw.tar.xz"])


class Verdict(unittest.TestCase):
    def test_at_least_goal(self):
        self.assertEqual(stats.verdict([1.6, 1.9], ">=", 1.5), "met")
        self.assertEqual(stats.verdict([1.5, 1.9], ">=", 1.5), "met")
        self.assertEqual(stats.verdict([1.4, 1.6], ">=", 1.5), "not shown")
        self.assertEqual(stats.verdict([1.0, 1.4], ">=", 1.5), "missed")

    def test_at_most_goal(self):
        self.assertEqual(stats.verdict([0.3, 0.4], "<=", 0.5), "met")
        self.assertEqual(stats.verdict([0.4, 0.6], "<=", 0.5), "not shown")
        self.assertEqual(stats.verdict([0.6, 0.9], "<=", 0.5), "missed")

    def test_no_interval_is_not_shown(self):
        self.assertEqual(stats.verdict(None, ">=", 1.5), "not shown")

    def test_bad_operator_is_an_error(self):
        with self.assertRaises(ValueError):
            stats.verdict([1, 2], "==", 1)


def synthetic_scenario(ratio, rounds=3):
    """A reuse-mmap scenario of `rounds` rounds in which memprotd's kvload
    ops/s is `ratio` × none's in every round (the host's speed drifting)."""
    runs = []
    for k in range(rounds):
        base = 1000 * (1 + 0.3 * k)
        for pol, ops in (("none", base), ("memprotd", ratio * base), ("static-75", base), ("cpu-ref", base)):
            runs.append({"policy": pol, "run": f"{len(runs):02d}-{pol}",
                         "window": {"kv_ops_s": ops, "kv_p99_us": 10.0, "batch_mb_s": 5.0}})
    return {"runs": runs, "policies": analysis.policy_means(runs)}


def booted_scenario(ratios):
    """A memcached scenario with one boot per entry of ratios (a list per
    boot of memprotd's ops/s ÷ static-75's, one per round)."""
    runs = []
    for b, per_round in enumerate(ratios):
        for k, ratio in enumerate(per_round):
            for pol, ops in (("none", 1000), ("static-75", 1000), ("memprotd", 1000 * ratio), ("cpu-ref", 1000)):
                runs.append({"policy": pol, "run": f"{len(runs):02d}-{pol}", "boot": b,
                             "window": {"kv_ops_s": ops}, "life": {"memprotd_cpu_pct": 0.2 + 0.01 * k}})
    return {"runs": runs, "policies": analysis.policy_means(runs)}


class TwoLevelBootstrap(unittest.TestCase):
    def ops_target(self, sc):
        got = {t["target"]: t for t in analysis.evaluate_targets({"memcached": sc}, protocol_version="1")}
        return got["memcached [whole run]: kvload ops/s memprotd / better static"]

    def test_boot_to_boot_spread_widens_the_interval(self):
        same = self.ops_target(booted_scenario([[1.0, 1.02, 0.98, 1.0]] * 3))
        apart = self.ops_target(booted_scenario([[0.9, 0.92, 0.88, 0.9], [1.0, 1.02, 0.98, 1.0],
                                                 [1.1, 1.12, 1.08, 1.1]]))
        self.assertLess(same["ci95"][1] - same["ci95"][0], 0.05)
        self.assertGreater(apart["ci95"][1] - apart["ci95"][0], 0.1)
        self.assertEqual((same["verdict"], apart["verdict"]), ("met", "not shown"))

    def test_a_resample_draws_whole_boots_then_rounds_within_them(self):
        rows = [{"p": {"boot": b, "k": k}} for b in range(3) for k in range(4)]
        draw = stats.resample(rows, __import__("random").Random(1))
        self.assertEqual(len(draw), 12)
        for i in range(0, 12, 4):  # each block of 4 comes from one boot
            self.assertEqual(len({r["p"]["boot"] for r in draw[i:i + 4]}), 1)

    def test_fewer_boots_than_the_protocol_gives_no_verdict(self):
        t = self.ops_target(booted_scenario([[1.2, 1.2, 1.2, 1.2]]))
        self.assertEqual((t["verdict"], t["primary"], t["boots"]), ("pending (1 of 3 boots)", True, 1))

    def test_daemon_cpu_is_an_absolute_target(self):
        got = {t["target"]: t for t in analysis.evaluate_targets({"memcached": booted_scenario([[1.0] * 4] * 3)},
                                                                 protocol_version="1")}
        t = got["memcached [life]: memprotd CPU % of a vCPU after start-up memprotd"]
        self.assertAlmostEqual(t["value"], 0.215)
        self.assertEqual((t["goal"], t["verdict"]), ("<= 0.5", "met"))


class ProtocolTwo(unittest.TestCase):
    """Version 2's anon-batch: memprotd against none, the better of
    static-75 and static-min-75, and the hard floor for the batch job."""

    def targets(self):
        runs = []
        for b in range(3):
            for k in range(4):
                for pol, ops, batch in (("none", 800, 100.0), ("static-75", 900, 100.0),
                                        ("static-min-75", 1500, 10.0), ("memprotd", 1450, 9.0)):
                    runs.append({"policy": pol, "run": f"{len(runs):02d}-{pol}", "boot": b,
                                 "window": {"kv_ops_s": ops, "batch_mb_per_cpu_s": batch},
                                 "life": {"memprotd_cpu_pct": 0.3}})
        sc = {"runs": runs, "policies": analysis.policy_means(runs)}
        return {t["target"]: t for t in analysis.evaluate_targets({"anon-batch": sc}, protocol_version="2")}

    def test_the_better_static_is_the_hard_floor_when_it_does_better(self):
        got = self.targets()
        t = got["anon-batch [whole run]: kvload ops/s memprotd / better static"]
        self.assertAlmostEqual(t["value"], 1450 / 1500)
        self.assertEqual((t["goal"], t["verdict"], t["primary"]), (">= 0.95", "met", True))
        self.assertEqual(got["anon-batch [whole run]: kvload ops/s memprotd / none"]["verdict"], "met")
        batch = got["anon-batch [whole run]: batch MB per CPU s memprotd / static-min-75"]
        self.assertEqual((round(batch["value"], 3), batch["verdict"]), (0.9, "missed"))

    def test_it_runs_four_policies_without_a_reference_and_pins_the_batch_job(self):
        sc = protocol.scenario("2", "anon-batch")
        self.assertEqual((sc.policies, sc.refs, sc.rounds, sc.boots), (
            ("none", "static-75", "static-min-75", "memprotd"), (), 4, 3))
        self.assertIn(("BENCH_ANON_SIZE", "600M"), sc.env)
        self.assertEqual(protocol.scenario("2", "memcached-zipf"), protocol.scenario("1", "memcached-zipf"))
        with self.assertRaises(SystemExit):
            protocol.scenario("2", "burst")


class ProtocolThree(unittest.TestCase):
    """Version 3 judges EscalateAhead=yes beside the default on 6.12."""

    def targets(self, scenario, ahead_ops):
        runs = []
        for b in range(3):
            for k in range(4):
                for pol in protocol.scenario("3", scenario).policies:
                    ops = {"none": 1000, protocol.AHEAD: ahead_ops}.get(pol, 1500)
                    runs.append({"policy": pol, "run": f"{len(runs):02d}-{pol}", "boot": b,
                                 "window": {"kv_ops_s": ops * (1 + 0.01 * k), "batch_mb_s": 10.0},
                                 "life": {"memprotd_cpu_pct": 0.3}})
        sc = {"runs": runs, "policies": analysis.policy_means(runs)}
        return {t["target"]: t for t in analysis.evaluate_targets({scenario: sc}, protocol_version="3")}

    def test_the_candidate_is_judged_against_the_floor_and_against_memprotd(self):
        got = self.targets("anon-batch", 1400)
        t = got[f"anon-batch [whole run]: kvload ops/s {protocol.AHEAD} / static-min-75"]
        self.assertAlmostEqual(t["value"], 1400 / 1500)
        self.assertEqual((t["verdict"], t["primary"]), ("missed", True))
        self.assertEqual(got["anon-batch [whole run]: kvload ops/s memprotd / static-min-75"]["verdict"], "met")
        t = got[f"anon-batch [whole run]: kvload ops/s {protocol.AHEAD} / memprotd"]
        self.assertEqual((t["goal"], t["verdict"]), (">= 1.0", "missed"))
        zipf = self.targets("memcached-zipf", 1300)
        t = zipf[f"memcached-zipf [whole run]: kvload ops/s {protocol.AHEAD} / memprotd"]
        self.assertEqual((round(t["value"], 3), t["goal"], t["verdict"]), (round(1300 / 1500, 3), ">= 0.9", "missed"))
        cpu = zipf[f"memcached-zipf [life]: memprotd CPU % of a vCPU after start-up {protocol.AHEAD}"]
        self.assertEqual(cpu["verdict"], "met")

    def test_it_runs_four_items_on_debian_13_only(self):
        for name in ("anon-batch", "memcached-zipf"):
            sc = protocol.scenario("3", name)
            self.assertEqual((len(sc.policies), sc.refs, sc.rounds, sc.boots, sc.releases),
                             (4, (), 4, 3, (13,)))
            self.assertIn(protocol.AHEAD, sc.policies)
        self.assertEqual(protocol.scenario("2", "anon-batch").releases, (12, 13))

    def test_a_boot_on_the_wrong_kernel_is_refused(self):
        out = subprocess.run([sys.executable, os.path.join(SRC, "tools", "bench-effect"), "--protocol", "3",
                              "--scenarios", "anon-batch"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 2)
        self.assertIn("runs anon-batch on Debian 13 only (--release), not 12", out.stderr)


class Targets(unittest.TestCase):
    def target(self, ratio, name):
        got = {t["target"]: t for t in analysis.evaluate_targets({"reuse-mmap": synthetic_scenario(ratio)})}
        return got[f"reuse-mmap [whole run]: {name}"]

    def test_interval_above_the_goal_is_met(self):
        t = self.target(1.8, "kvload ops/s memprotd / none")
        self.assertAlmostEqual(t["ci95"][0], 1.8)
        self.assertAlmostEqual(t["ci95"][1], 1.8)
        self.assertEqual((t["verdict"], t["rounds"]), ("met", 3))

    def test_interval_below_the_goal_is_missed(self):
        self.assertEqual(self.target(1.2, "kvload ops/s memprotd / none")["verdict"], "missed")

    def test_unharmed_is_against_cpu_ref(self):
        t = self.target(0.9, "kvload ops/s memprotd / cpu-ref")
        self.assertEqual((t["goal"], t["verdict"]), (">= 0.85", "met"))

    def test_a_zero_denominator_gives_no_ratio_and_says_so(self):
        sc = synthetic_scenario(1.0)
        for r in sc["runs"]:
            r["window"]["kv_majflt_per_kop"] = 0.0
        sc["policies"] = analysis.policy_means(sc["runs"])
        got = {t["target"]: t for t in analysis.evaluate_targets({"reuse-mmap": sc})}
        t = got["reuse-mmap [whole run]: kvload major faults per 1,000 ops memprotd / none"]
        self.assertEqual((t["value"], t["ci95"], t["verdict"]), (None, None, "not shown"))
        self.assertEqual(t["note"], "none is 0: no ratio (memprotd: 0)")

    def test_a_policy_not_run_gives_no_ratio_and_says_which(self):
        sc = synthetic_scenario(1.0)
        sc["runs"] = [r for r in sc["runs"] if r["policy"] != "none"]
        sc["policies"] = analysis.policy_means(sc["runs"])
        got = {t["target"]: t for t in analysis.evaluate_targets({"reuse-mmap": sc})}
        t = got["reuse-mmap [whole run]: kvload major faults per 1,000 ops memprotd / none"]
        self.assertEqual((t["value"], t["verdict"], t["note"]), (None, "not shown", "not run: none"))
        self.assertEqual(report.target_cell(t), "– (not run: none)")

    def test_a_few_stalled_seconds_move_the_mean_p99_and_not_the_median(self):
        # 2 of 20 seconds in which the emulated guest stalled 200 ms
        kv = [{"t": i, "ts": 100.5 + i, "ops_s": 300, "p50_us": 1000.0, "p99_us": 5000.0, "p999_us": 6000.0}
              for i in range(18)]
        kv += [{"t": 18 + i, "ts": 118.5 + i, "ops_s": 300, "p50_us": 1000.0, "p99_us": 200000.0,
                "p999_us": 210000.0} for i in range(2)]
        w = analysis.window_stats(kv, [], 100, 200)
        self.assertEqual(w["seconds"], 20)
        self.assertAlmostEqual(w["kv_p99_us"], 24500.0)
        self.assertEqual(w["kv_p99_med_us"], 5000.0)

    def test_memcached_judges_both_p99_figures_against_the_better_static(self):
        names = [(t.figure, t.den, t.goal) for t in analysis.target_specs("memcached-zipf")]
        self.assertIn(("kv_p99_us", analysis.STATICS, 1.1), names)
        self.assertIn(("kv_p99_med_us", analysis.STATICS, 1.1), names)

    def test_a_stall_sets_the_probe_p99_of_the_window(self):
        # 1,000 probe operations at 1-2 ms, then a 5 s stall delays 20 of them by seconds
        kv = [{"t": i, "ts": 100.5 + i, "ops_s": 300, "p50_us": 1.0, "p99_us": 2.0, "p999_us": 3.0,
               "probe_hist": [[1_000_000, 50], [2_000_000, 50]], "probe_errors": 0} for i in range(10)]
        w = analysis.window_stats(kv, [], 100, 200)
        self.assertEqual((w["probe_ops"], w["kv_p99_run_us"], w["kv_p50_run_us"]), (1000, 2000.0, 1000.0))
        kv[3]["probe_hist"] = [[1_000_000, 30], [2_000_000, 50], [4_000_000_000, 20]]
        w = analysis.window_stats(kv, [], 100, 200)
        self.assertEqual(w["kv_p99_run_us"], 4_000_000.0)
        self.assertAlmostEqual(w["kv_p99_us"], 2.0)  # the closed loop's per-second figure does not see it

    def test_memprotd_cpu_after_start_up(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "memprotd-cpu.jsonl"), "w") as f:
                f.write('{"label":"start","ts":100.0,"ticks":0,"hz":100}\n'
                        '{"label":"startup","ts":120.0,"ticks":150,"hz":100}\n'
                        '{"label":"stop","ts":320.0,"ticks":250,"hz":100}\n')
            life = analysis.memprotd_life(d)
        self.assertEqual((life["memprotd_startup_cpu_s"], life["memprotd_life_s"]), (1.5, 220.0))
        self.assertAlmostEqual(life["memprotd_cpu_pct"], 0.5)  # 1 s of CPU over 200 s

    def test_low_events_are_counted_over_the_window_only(self):
        lines = [{"ts": 100.0 + i, "workload": {"events_low": 5 * i}} for i in range(30)]
        self.assertEqual(analysis.low_events(lines, 110, 120), 50)
        self.assertIsNone(analysis.low_events([{"ts": 110.0, "workload": {}}] * 3, 100, 200))
        w = analysis.window_stats([], [], 110, 120, lines)
        self.assertEqual(w["kv_low_events"], 50)

    def test_anon_batch_runs_memcached_beside_anonbatch_against_either_static(self):
        self.assertEqual([common.uses_memcached(s) for s in ("memcached-zipf", "anon-batch", "reuse-mmap")],
                         [True, True, False])
        self.assertEqual([common.batch_prog(s) for s in ("memcached", "anon-batch", "phase-mmap")],
                         ["fio", "anonbatch", "cacheread"])
        self.assertIn("static-min-75", analysis.STATICS)
        specs = {(t.figure, t.den) for t in analysis.target_specs("anon-batch")}
        self.assertIn(("kv_p99_run_us", analysis.STATICS), specs)
        self.assertIn(("batch_mb_per_cpu_s", "static-min-75"), specs)
        self.assertIn(("kv_ops_s", "none"), specs)
        self.assertEqual(common.ordered(["memprotd", "static-min-75", "none", "cpu-ref"]),
                         ["cpu-ref", "none", "static-min-75", "memprotd"])

    def test_bursts_are_judged_from_their_start_to_their_end(self):
        # the sampler's workload PSI full: 100 ms a second from 110 s on
        lines = [{"ts": 100.0 + i, "workload": {"psi_full_us": max(0, i - 10) * 100_000}} for i in range(60)]
        bursts = [{"prog": "burster", "burst": 1, "ts": 112.2, "touched_ts": 113.0, "end_ts": 122.5, "touch_ms": 800.0},
                  {"prog": "burster", "burst": 2, "ts": 132.2, "touched_ts": 132.4, "end_ts": 142.5, "touch_ms": 200.0},
                  {"prog": "burster", "burst": 3, "ts": 190.0, "touched_ts": 190.1, "end_ts": 200.0, "touch_ms": 1.0},
                  {"prog": "burster", "summary": True, "bursts": 3}]
        kv = [{"t": i, "ts": 100.5 + i, "ops_s": 10, "probe_hist": [[1_000_000 if i < 30 else 9_000_000, 10]]}
              for i in range(60)]
        w = analysis.burst_stats(kv, lines, bursts, 110, 160)
        self.assertEqual(w["bursts"], 2, "a burst starting after the window is not counted")
        self.assertAlmostEqual(w["burst_touch_ms"], 500.0)
        self.assertEqual(w["burst_touch_max_ms"], 800.0)
        # from the line at 112 to the one at 123 (1,100 ms), from 132 to 143 (1,100 ms)
        self.assertAlmostEqual(w["burst_full_ms"], 1100.0)
        self.assertEqual(w["kv_p99_burst_us"], 9000.0, "the second burst's seconds are slow")
        self.assertEqual(analysis.burst_stats(kv, lines, [], 110, 160), {})
        specs = {(t.figure, t.den) for t in analysis.target_specs("burst-trim")}
        self.assertEqual(specs, {("burst_full_ms", "memprotd-notrim")})
        self.assertIn(("kv_p99_burst_us", analysis.STATICS), {(t.figure, t.den) for t in analysis.target_specs("burst")})
        self.assertEqual((common.uses_memcached("burst-trim"), common.batch_prog("burst")), (True, "fio"))

    def test_the_better_static_may_be_the_memory_min_one(self):
        sc = synthetic_scenario(1.0)
        for r in [dict(r) for r in sc["runs"] if r["policy"] == "static-75"]:
            r["policy"], r["run"] = "static-min-75", r["run"] + "-min"
            r["window"] = dict(r["window"], kv_ops_s=r["window"]["kv_ops_s"] * 2)
            sc["runs"].append(r)
        sc["policies"] = analysis.policy_means(sc["runs"])
        got = {t["target"]: t for t in analysis.evaluate_targets({"reuse-mmap": sc})}
        t = got["reuse-mmap [whole run]: kvload ops/s memprotd / better static"]
        self.assertAlmostEqual(t["value"], 0.5)

    def test_every_window_of_a_phase_scenario(self):
        sc = synthetic_scenario(1.0)
        for r in sc["runs"]:
            for w in ("window_after", "window_late", "window_all"):
                r[w] = dict(r["window"])
        sc["policies"] = analysis.policy_means(sc["runs"])
        wins = {t["window"] for t in analysis.evaluate_targets({"phase-mmap": sc})}
        self.assertEqual(wins, {"window", "window_after", "window_late", "window_all"})


class Progress(unittest.TestCase):
    CONSOLE = [
        "[  OK  ] Started bench-kv.service",
        'bench-effect[phase-mmap]: 903.93s: run 05-none done: kv {"prog":"kvload","summary":true}',
        "bench-effect[phase-mmap]: 904.02s: run 05-none done: batch {\"prog\":\"cacheread\"}",
        "bench-effect[phase-mmap]: 904.14s: run 06-static-75: policy static-75",
        'bench-effect[phase-mmap]: 1100.00s: run 06-static-75 done: kv {"prog":"kvload"}\r',
    ]

    def test_one_message_per_run_done(self):
        msgs, done = vm.progress_lines(self.CONSOLE, "phase-mmap", 12, 4, 100.0, 1300.0)
        self.assertEqual(done, 6)
        self.assertEqual(msgs, ["scenario phase-mmap: run 05-none done (5/12, 1200s)",
                                "scenario phase-mmap: run 06-static-75 done (6/12, 1200s)"])

    def test_a_run_made_again_is_counted_once(self):
        lines = [self.CONSOLE[4],
                 "bench-effect[phase-mmap]: 1101.00s: run 06-static-75: again (try 2)",
                 'bench-effect[phase-mmap]: 1300.00s: run 06-static-75 done: kv {"prog":"kvload"}']
        msgs, done = vm.progress_lines(lines, "phase-mmap", 12, 5, 100.0, 1400.0)
        self.assertEqual(done, 6)
        self.assertEqual(msgs, ["scenario phase-mmap: run 06-static-75 done (6/12, 1300s)",
                                "scenario phase-mmap: run 06-static-75 set aside (invalid), made again "
                                "(try 2; 5/12, 1300s)",
                                "scenario phase-mmap: run 06-static-75 done (6/12, 1300s)"])

    def test_follows_a_console_written_after_the_start(self):
        # The console appears after the follower starts; what it holds when
        # stop is set is logged by the read after stop, whatever the timing.
        with tempfile.TemporaryDirectory() as d:
            console = os.path.join(d, "console.log")
            stop = threading.Event()
            logged = []
            old_log, vm.log = vm.log, logged.append
            try:
                t = threading.Thread(target=vm.follow_progress, args=(console, "s", 2, stop, 0.0))
                t.start()
                with open(console, "w") as f:
                    f.write(self.CONSOLE[1] + "\n" + self.CONSOLE[4] + "\n")
                stop.set()
                t.join()
            finally:
                vm.log = old_log
        self.assertEqual([m.split(" (")[0] for m in logged], ["scenario s: run 05-none done",
                                                              "scenario s: run 06-static-75 done"])

    def test_a_line_split_across_reads_is_logged_once_whole(self):
        with tempfile.TemporaryDirectory() as d:
            console = os.path.join(d, "console.log")
            cursor = vm.ConsoleCursor()
            with open(console, "w") as f:
                f.write(self.CONSOLE[1] + "\n" + self.CONSOLE[4][:30])
            first = vm.read_progress(console, "s", 2, 0.0, cursor)
            with open(console, "a") as f:
                f.write(self.CONSOLE[4][30:] + "\n")
            second = vm.read_progress(console, "s", 2, 0.0, cursor)
            third = vm.read_progress(console, "s", 2, 0.0, cursor)
        self.assertEqual([m.split(" (")[0] for m in first], ["scenario s: run 05-none done"])
        self.assertEqual([m.split(" (")[0] for m in second], ["scenario s: run 06-static-75 done"])
        self.assertEqual(third, [])
        self.assertEqual(cursor.done, 2)


class Results(unittest.TestCase):
    def test_a_named_result_is_never_overwritten(self):
        with tempfile.TemporaryDirectory() as out:
            open(os.path.join(out, "x.json"), "w").close()
            with self.assertRaises(FileExistsError):
                report.result_base(out, "x", "2026-11-26")
            with self.assertRaises(FileExistsError):
                report.write_result({}, os.path.join(out, "x"))

    def test_an_unnamed_result_takes_the_next_free_name(self):
        with tempfile.TemporaryDirectory() as out:
            for name in ("2026-11-26", "2026-11-26-2"):
                open(os.path.join(out, name + ".json"), "w").close()
            self.assertEqual(report.result_base(out, None, "2026-11-26"), os.path.join(out, "2026-11-26-3"))

    def test_analyze_with_a_taken_name_fails_and_leaves_it(self):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "taken.json")
            with open(path, "w") as f:
                f.write("{}")
            r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "bench-effect"), "--analyze", RUN,
                                "--out", out, "--name", "taken", "--no-readme"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("not overwritten", r.stdout)
            with open(path) as f:
                self.assertEqual(f.read(), "{}")
            self.assertEqual(sorted(os.listdir(out)), ["taken.json"])

    def test_meta_raw_is_the_archive_relative_to_the_source_tree(self):
        with tempfile.TemporaryDirectory() as root:
            out = os.path.join(root, "results")
            saved = report.SRC
            report.SRC = root  # the "source tree" for repo_path
            try:
                args = argparse.Namespace(out=out, name="r", analyze=RUN, no_readme=True)
                common.PHASE_SETTLE_S = 5
                with open(os.devnull, "w") as null:
                    stdout, sys.stdout = sys.stdout, null
                    try:
                        rc = cli.finish(args, RUN, cli.recorded(RUN))
                    finally:
                        sys.stdout = stdout
            finally:
                report.SRC = saved
            self.assertEqual(rc, 0)
            with open(os.path.join(out, "r.json")) as f:
                meta = json.load(f)["meta"]
            self.assertFalse(os.path.isabs(meta["raw"]))
            self.assertTrue(meta["raw"].startswith("results/r.raw.tar"), meta["raw"])
            self.assertEqual(meta["raw_bytes"], os.path.getsize(os.path.join(root, meta["raw"])))
            with tarfile.open(os.path.join(root, meta["raw"])) as tar:
                self.assertIn("run/reuse-mmap/02-none/kv.jsonl", tar.getnames())

    def test_the_header_names_the_run_of_memcached_scenarios_rightly(self):
        meta = {"date": "2026-11-30", "kv_size": "384M", "warmup": 8, "duration": 150}
        mc = "\n".join(report.header_markdown(meta, ["anon-batch", "memcached-zipf"]))
        self.assertIn("Each run: the workload alone for 8 s, then the batch job beside it for 150 s", mc)
        self.assertNotIn("cacheread", mc)
        kv = "\n".join(report.header_markdown(meta, ["phase-mmap"]))
        self.assertIn("Each run: kvload (384M table, uniform keys, 90% gets) alone for 8 s, then cacheread", kv)

    def test_repo_path_outside_the_tree_stays_absolute(self):
        self.assertEqual(report.repo_path(os.path.join(SRC, "bench", "x")), os.path.join("bench", "x"))
        self.assertEqual(report.repo_path("/elsewhere/x"), "/elsewhere/x")


class Compare(unittest.TestCase):
    def test_two_results_side_by_side(self):
        a = {"meta": {"date": "d1", "release": 12, "kernel": "6.1.0"}, "scenarios": {},
             "targets": [{"target": "s [whole run]: t", "scenario": "s", "goal": ">= 1", "value": 1.5,
                          "ci95": [1.2, 1.8], "verdict": "met"}]}
        b = {"meta": {"date": "d2", "kernel": "6.12.5"}, "scenarios": {},
             "targets": [{"target": "s [whole run]: t", "scenario": "s", "goal": ">= 1", "value": 0.9,
                          "ci95": [0.5, 1.1], "verdict": "not shown"}]}
        md = report.compare_markdown(a, b)
        self.assertIn("Debian 12, kernel 6.1.0", md)
        self.assertIn("Debian 13, kernel 6.12.5", md)
        self.assertIn("| s [whole run]: t | >= 1 | 1.50 [1.20, 1.80] met | 0.90 [0.50, 1.10] not shown |", md)


    def write(self, d, name, res):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(res, f)
        return path

    def result(self, date, kernel, sc, value):
        return {"meta": {"date": date, "kernel": kernel}, "scenarios": {sc: {"policies": {}}},
                "targets": [{"target": f"{sc} [whole run]: t", "scenario": sc, "goal": ">= 1", "value": value,
                             "ci95": [value - 0.1, value + 0.1], "verdict": "met"}]}

    def test_one_side_may_join_several_results_of_one_kernel(self):
        with tempfile.TemporaryDirectory() as d:
            a1 = self.write(d, "a1.json", self.result("d1", "6.1.0", "stream", 1.5))
            a2 = self.write(d, "a2.json", self.result("d2", "6.1.0", "memcached", 1.25))
            res = report.load_results(f"{a1},{a2}")
        self.assertEqual(set(res["scenarios"]), {"stream", "memcached"})
        self.assertEqual([t["value"] for t in res["targets"]], [1.5, 1.25])
        self.assertEqual(res["meta"]["date"], "d1, d2")

    def test_a_scenario_in_two_results_of_one_side_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            a1 = self.write(d, "a1.json", self.result("d1", "6.1.0", "stream", 1.5))
            a2 = self.write(d, "a2.json", self.result("d2", "6.1.0", "stream", 1.25))
            with self.assertRaisesRegex(SystemExit, "scenario stream is in both .*a1.json and .*a2.json"):
                report.load_results(f"{a1},{a2}")

    def test_one_side_of_two_kernels_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            a1 = self.write(d, "a1.json", self.result("d1", "6.1.0", "stream", 1.5))
            b1 = self.write(d, "b1.json", self.result("d2", "6.12.5", "memcached", 1.25))
            with self.assertRaisesRegex(SystemExit, "mixes kernels"):
                report.load_results(f"{a1},{b1}")


class Arguments(unittest.TestCase):
    def test_a_relative_build_root_becomes_absolute(self):
        argv = sys.argv
        try:
            sys.argv = ["bench-effect", "--build-root", "build-x", "--no-readme"]
            args = cli.parse_args()
        finally:
            sys.argv = argv
        self.assertEqual(args.build_root, os.path.join(os.getcwd(), "build-x"))

    def parse(self, *argv):
        old = sys.argv
        try:
            sys.argv = ["bench-effect", *argv]
            with contextlib.redirect_stderr(io.StringIO()) as err:
                return cli.parse_args(), ""
        except SystemExit:
            return None, err.getvalue()
        finally:
            sys.argv = old

    def test_a_second_binary_goes_with_its_policy(self):
        for pols in ("memprotd memprotd-alt", "memprotd memprotd-alt:EscalateAhead=yes"):
            args, err = self.parse("--policies", pols, "--memprotd-alt", "/x/memprotd")
            self.assertEqual(args and args.memprotd_alt, "/x/memprotd", err)
        for argv in (["--policies", "memprotd memprotd-alt"], ["--policies", "memprotd", "--memprotd-alt", "/x"],
                     ["--policies", "memprotd-alt:EscalateAhead=yes"],
                     ["--policies", "memprotd memprotd-alt", "--memprotd-alt", ""]):
            args, err = self.parse(*argv)
            self.assertIsNone(args, argv)
            self.assertIn("--memprotd-alt PATH and the policy memprotd-alt go together", err)

    def test_a_protocol_boot_takes_no_second_binary(self):
        args, err = self.parse("--protocol", "3", "--scenarios", "anon-batch", "--release", "13",
                               "--memprotd-alt", "/x/memprotd")
        self.assertIsNone(args)
        self.assertIn("fixes --memprotd-alt", err)


class GuestMemprotdPolicies(unittest.TestCase):
    """memprotd-alt runs the second binary with memprotd's own settings."""

    def bash(self, body):
        script = (f"set -u\nMEMPROTD_SOURCE_ROOT={SRC}\nmpd_policy_files=weights\n"
                  f"die() {{ echo \"$*\" >&2; exit 1; }}\n"
                  f"{guest_functions('mpd_bin_of', 'write_mpd_config')}\n{body}")
        env = dict(os.environ, BENCH_MEMPROTD="/a/memprotd", BENCH_MEMPROTD_ALT="/b/memprotd-alt")
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)

    def test_each_policy_runs_its_binary(self):
        # called as run_one calls it: from a function with a local of the
        # script's own name for the binary (which once emptied memprotd's)
        r = self.bash("pick() { local memprotd_bin memprotd_alt_bin; mpd_bin_of $1; }\n"
                      "for p in memprotd memprotd-alt memprotd-notrim memprotd:EscalateAhead=yes "
                      "memprotd-alt:EscalateAhead=yes; do pick $p; done")
        self.assertEqual(r.stdout.split(), ["/a/memprotd", "/b/memprotd-alt", "/a/memprotd", "/a/memprotd",
                                            "/b/memprotd-alt"])

    def test_the_second_binary_has_memprotds_settings(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.bash(f"write_mpd_config {d}/a memprotd && write_mpd_config {d}/b memprotd-alt && "
                          f"diff -r {d}/a {d}/b && ls {d}/b/policy.d")
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            self.assertIn("50-workload.conf", r.stdout)

    def test_the_dry_run_observer_has_memprotds_settings_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.bash(f"write_mpd_config {d}/a memprotd && "
                          f"write_mpd_config {d}/b memprotd-dry-run+static-min-75 && "
                          f"diff -r -x memprotd.conf.d {d}/a {d}/b && cat {d}/b/memprotd.conf.d/*.conf && "
                          f"! [ -e {d}/a/memprotd.conf.d ]")
            self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
            self.assertEqual(r.stdout.split(), ["[Daemon]", "Mode=dry-run"])

    def test_the_observer_runs_beside_static_min_75s_floor(self):
        r = subprocess.run(["bash", "-c", "set -u\nmem_total=1000\nset_low() { echo \"$*\"; }\n"
                            f"{guest_functions('static_floor')}\n"
                            "for p in none memprotd static-75 static-min-75 memprotd-dry-run+static-min-75; do "
                            "echo \"$p: $(static_floor $p)\"; done"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(),
                         ["none: ", "memprotd: ", "static-75: workload.slice 750 0",
                          "static-min-75: workload.slice 0 750",
                          "memprotd-dry-run+static-min-75: workload.slice 0 750"])


class PolicyNames(unittest.TestCase):
    """One home for what a policy's name says (common.base_policy,
    common.runs_memprotd), as the guest script's is_mpd reads it."""

    POLICIES = ["none", "static-75", "static-min-75", "memprotd", "memprotd:Budget=70%", "memprotd-notrim",
                "memprotd-alt:EscalateAhead=yes", "memprotd-dry-run+static-min-75", "alone", "cpu-ref"]

    def test_base_names(self):
        self.assertEqual(common.base_policy("memprotd:Budget=70%,EscalateAhead=yes"), "memprotd")
        self.assertEqual(common.base_policy("static-min-75"), "static-min-75")

    def test_runs_memprotd_agrees_with_the_guest(self):
        with open(os.path.join(SRC, "tests", "vm", "bench-effect.sh")) as f:
            script = next(line for line in f if line.startswith("is_mpd() {"))  # a one-line function
        script += "for p in " + " ".join(f"'{p}'" for p in self.POLICIES) + "; do is_mpd \"$p\" && echo 1 || echo 0; done"
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        guest = [x == "1" for x in r.stdout.split()]
        self.assertEqual(guest, [common.runs_memprotd(p) for p in self.POLICIES])
        self.assertEqual(guest, [False, False, False, True, True, True, True, True, False, False])


class FindMemprotd(unittest.TestCase):
    """A Debian 13 guest takes only the build root's own memprotd: a Debian 12
    build elsewhere in the tree would not run there."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.src, self.old_src = self.tmp.name, vm.SRC
        vm.SRC = self.src
        self.addCleanup(setattr, vm, "SRC", self.old_src)
        other = os.path.join(self.src, "build-other", "daemon")
        os.makedirs(other)
        with open(os.path.join(other, "memprotd"), "w") as f:
            f.write("#!/bin/sh\necho memprotd 0.0-other\n")
        os.chmod(os.path.join(other, "memprotd"), 0o755)
        self.bins = os.path.join(self.src, "bins")
        os.makedirs(self.bins)

    def test_debian_12_falls_back_to_another_build(self):
        dest, found, ver = vm.find_memprotd(os.path.join(self.src, "build-empty"), None, self.bins, 12)
        self.assertEqual(found, os.path.join(self.src, "build-other", "daemon", "memprotd"))
        self.assertEqual(ver, "memprotd 0.0-other")
        self.assertTrue(os.path.exists(dest))

    def test_a_second_binary_is_copied_under_its_own_name(self):
        explicit = os.path.join(self.src, "build-other", "daemon", "memprotd")
        dest, found, ver = vm.find_memprotd(os.path.join(self.src, "build-empty"), explicit, self.bins, 12,
                                            name="memprotd-alt")
        self.assertEqual((dest, found, ver), (os.path.join(self.bins, "memprotd-alt"), explicit, "memprotd 0.0-other"))
        self.assertFalse(os.path.exists(os.path.join(self.bins, "memprotd")))

    def test_debian_13_never_takes_another_build(self):
        self.assertEqual(vm.find_memprotd(os.path.join(self.src, "build-empty"), None, self.bins, 13),
                         (None, None, None))
        self.assertFalse(os.path.exists(os.path.join(self.bins, "memprotd")))

    def test_debian_13_runs_builds_in_its_root(self):
        self.assertEqual(vm.in_release(12), [])
        self.assertEqual(vm.in_release(None), [])
        self.assertEqual(vm.in_release(13), [os.path.join(self.src, "tools", "vm", "in-root")])


if __name__ == "__main__":
    unittest.main(verbosity=2)
