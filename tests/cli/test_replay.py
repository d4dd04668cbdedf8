#!/usr/bin/env python3
# memprotctl record and simulate --replay (docs/trace.md), run as a user runs
# them: on the example host in tests/data/demo and a generated multi-slice tree.
import json
import os
import subprocess
import tempfile
import unittest

CTL = os.environ["MEMPROTCTL"]
MAKE_FAKE_TREE = os.environ["MAKE_FAKE_TREE"]
DEMO = os.environ["DEMO_DIR"]
DEMO_TREE = ["--root", f"{DEMO}/cgroup", "--proc-root", f"{DEMO}/proc"]
SLICE_FIELDS = ("unit", "cgroup", "parent", "current", "cheap_cache", "working_set", "demand", "weight",
                "memory_low", "memory_min", "current_memory_low", "next_memory_low", "write", "damping",
                "written_memory_low", "written_memory_min")


def run(*args):
    p = subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class RecordReplay(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, name, *extra, tree=DEMO_TREE):
        path = os.path.join(self.dir, name)
        rc, out, err = run("record", *tree, "--no-wait", "--interval", "5s", "-o", path, *extra)
        self.assertEqual(rc, 0, err)
        return path

    def replay(self, path, *extra, config=f"{DEMO}/config"):
        return run("simulate", "--replay", path, "--config-dir", config, *extra)

    def replay_json(self, path, *extra, **kw):
        rc, out, err = self.replay(path, "--json", *extra, **kw)
        self.assertEqual(rc, 0, err)
        return out

    def test_trace_is_json_lines_with_a_versioned_header(self):
        path = self.record("t.jsonl", "--samples", "3")
        with open(path) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[0]["memprotd_trace"], 1)
        for key in ("memprotd_version", "kernel_release", "source", "interval_us"):
            self.assertIn(key, lines[0])
        self.assertEqual([s["time_us"] for s in lines[1:]], [0, 5_000_000, 10_000_000])
        cg = lines[1]["cgroups"][0]
        for key in ("unit", "path", "current", "low", "min", "swap", "stat", "events"):
            self.assertIn(key, cg)
        self.assertEqual(lines[1]["meminfo"]["mem_total"], 16 << 30)

    def test_same_trace_and_config_give_byte_identical_output(self):
        path = self.record("t.jsonl", "--samples", "5")
        self.assertEqual(self.replay_json(path), self.replay_json(path))
        self.assertEqual(self.replay(path)[1], self.replay(path)[1])

    def test_json_has_one_entry_per_sample_with_the_written_values(self):
        path = self.record("t.jsonl", "--samples", "5")
        r = json.loads(self.replay_json(path))
        for key in ("budget", "memory_total", "slices", "samples", "trace"):
            self.assertIn(key, r)
        self.assertEqual([s["time"] for s in r["samples"]], [0, 5, 10, 15, 20])
        for s in r["samples"]:
            self.assertEqual(len(s["slices"]), 6)
            for sl in s["slices"]:
                for key in SLICE_FIELDS:
                    self.assertIn(key, sl)
                # In force after the sample's writes: the new value when written, else the old one.
                self.assertEqual(sl["written_memory_low"],
                                 sl["next_memory_low"] if sl["write"] else sl["current_memory_low"])
        first = {s["unit"]: s for s in r["samples"][0]["slices"]}
        self.assertEqual(first["system.slice"]["current_memory_low"], 256 << 20,
                         "starts from the protections recorded in the first sample")
        second = {s["unit"]: s for s in r["samples"][1]["slices"]}
        for unit, s in second.items():
            self.assertEqual(s["current_memory_low"], first[unit]["written_memory_low"],
                             "each sample starts from the previous one's writes")

    def test_replay_ends_where_simulate_ends_on_the_same_tree(self):
        path = self.record("t.jsonl", "--samples", "5")
        replayed = json.loads(self.replay_json(path))
        rc, out, err = run("simulate", *DEMO_TREE, "--config-dir", f"{DEMO}/config", "--samples", "5",
                           "--interval", "5s", "--no-wait", "--json")
        self.assertEqual(rc, 0, err)
        simulated = json.loads(out)
        self.assertEqual(replayed["slices"], simulated["slices"])
        self.assertEqual(replayed["budget"], simulated["budget"])

    def test_append_continues_the_times_of_the_trace(self):
        whole = self.record("whole.jsonl", "--samples", "5")
        parts = self.record("parts.jsonl", "--samples", "2")
        self.record("parts.jsonl", "--samples", "3", "--append")
        with open(parts) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 6, "one header, five samples")
        self.assertEqual([json.loads(l)["time_us"] for l in lines[1:]], [0, 5_000_000, 10_000_000, 15_000_000,
                                                                         20_000_000])
        self.assertEqual(self.replay_json(parts), self.replay_json(whole))

    def test_the_files_of_a_rotated_trace_replay_when_put_together(self):
        whole = self.record("whole.jsonl", "--samples", "5")
        older = self.record("older.jsonl", "--samples", "2")
        newer = self.record("newer.jsonl", "--samples", "5")
        with open(newer) as f:
            lines = f.read().splitlines(keepends=True)
        joined = os.path.join(self.dir, "joined.jsonl")
        with open(older) as a, open(joined, "w") as out:  # newer's header, then its last three samples
            out.write(a.read() + lines[0] + "".join(lines[3:]))
        self.assertEqual(self.replay_json(joined), self.replay_json(whole))
        with open(joined, "a") as out:
            out.write(lines[0].replace('"interval_us":5000000', '"interval_us":1000000'))
        rc, out, err = self.replay(joined)
        self.assertNotEqual(rc, 0)
        self.assertIn("joined.jsonl:8: memprotd_trace:", err)

    def test_append_keeps_the_traces_interval(self):
        path = self.record("t.jsonl", "--samples", "2")
        rc, _, err = run("record", *DEMO_TREE, "--no-wait", "-o", path, "--append")  # no --interval: the trace's
        self.assertEqual(rc, 0, err)
        with open(path) as f:
            self.assertEqual([json.loads(l)["time_us"] for l in f.read().splitlines()[1:]],
                             [0, 5_000_000, 10_000_000])
        rc, _, err = run("record", *DEMO_TREE, "--no-wait", "-o", path, "--append", "--interval", "1s")
        self.assertNotEqual(rc, 0)
        self.assertIn("t.jsonl:1: interval_us: the trace's interval is 5s", err)

    def test_append_to_a_missing_trace_fails(self):
        rc, _, err = run("record", *DEMO_TREE, "--no-wait", "-o", os.path.join(self.dir, "none"), "--append")
        self.assertNotEqual(rc, 0)
        self.assertIn("none", err)

    def test_another_configuration_gives_another_replay(self):
        path = self.record("t.jsonl", "--samples", "3")
        empty = os.path.join(self.dir, "empty-config")
        os.mkdir(empty)
        demo = json.loads(self.replay_json(path))
        default = json.loads(self.replay_json(path, config=empty))
        weights = {s["unit"]: s["weight"] for s in default["slices"]}
        self.assertEqual(set(weights.values()), {100})
        self.assertNotEqual([s["memory_low"] for s in demo["slices"]],
                            [s["memory_low"] for s in default["slices"]])
        self.assertGreater(demo["budget"], 0)
        self.assertNotEqual(demo["budget"], default["budget"])  # Budget=60% in the demo, 70% by default

    def test_written_protection_stays_within_the_budget_at_every_sample(self):
        host = os.path.join(self.dir, "host")
        subprocess.run([MAKE_FAKE_TREE, host, "60", "11"], check=True, timeout=60)
        path = self.record("t.jsonl", "--samples", "12",
                           tree=["--root", f"{host}/cgroup", "--proc-root", f"{host}/proc"])
        r = json.loads(self.replay_json(path, config=self.dir))  # the default policy
        self.assertEqual(len(r["samples"]), 12)
        for s in r["samples"]:
            top = [sl for sl in s["slices"] if sl["parent"] is None]
            self.assertGreater(len(top), 10)
            self.assertLessEqual(sum(sl["written_memory_low"] for sl in top), s["budget"], s["time"])
            for parent in top:
                kids = [sl for sl in s["slices"] if sl["parent"] == parent["unit"]]
                self.assertLessEqual(sum(sl["written_memory_low"] for sl in kids),
                                     max(parent["written_memory_low"], sum(k["written_memory_min"] for k in kids)))

    def test_timeline_says_when_and_why_protection_changed(self):
        path = self.record("t.jsonl", "--samples", "3")
        rc, out, err = self.replay(path)
        self.assertEqual(rc, 0, err)
        self.assertIn("0.0s  workload.slice: MemoryLow 0B → 7.7G, MemoryMin 0B → 256M  (demand;", out)
        self.assertIn("5.0s  workload.slice: MemoryLow 7.7G →", out)
        self.assertIn("After the last sample:", out)

    def test_explain_unit_follows_one_slice(self):
        path = self.record("t.jsonl", "--samples", "3")
        rc, out, err = self.replay(path, "--explain", "batch.slice")
        self.assertEqual(rc, 0, err)
        self.assertIn("batch.slice: MemoryLow 0B → 130M", out)
        self.assertNotIn("workload.slice: MemoryLow", out)
        self.assertIn("cheap cache 5.2G", out)
        rc, out, err = self.replay(path, "--explain")
        self.assertEqual(rc, 0, err)
        self.assertIn("workload.slice: MemoryLow 0B →", out, "every slice's changes")
        self.assertEqual(out.count("  cheap cache "), 6, "every slice explained at the end")
        rc, out, err = self.replay(path, "--explain", "nosuch.slice")
        self.assertNotEqual(rc, 0)
        self.assertEqual(out, "")
        self.assertIn("nosuch.slice", err)

    def test_replay_excludes_the_tree_options(self):
        path = self.record("t.jsonl")
        for extra in (["--root", DEMO], ["--samples", "3"], ["--no-wait"], ["--memory-total", "1G"]):
            self.assertEqual(self.replay(path, *extra)[0], 2, extra)

    def test_memory_total_is_recorded_and_used(self):
        path = self.record("t.jsonl", "--memory-total", "32G")
        self.assertEqual(json.loads(self.replay_json(path))["memory_total"], 32 << 30)

    def broken(self, mutate):
        path = self.record("t.jsonl", "--samples", "4")
        with open(path) as f:
            lines = f.read().splitlines(keepends=True)
        with open(path, "w") as f:
            f.write(mutate(lines))
        rc, out, err = self.replay(path, "--json")
        self.assertNotEqual(rc, 0)
        self.assertEqual(out, "", "nothing on stdout on an error")
        return err

    def test_a_setting_the_daemon_ran_with_and_the_replay_lacks_is_a_warning(self):
        # The header of a daemon's trace states its engine settings; a replay
        # under others says so on stderr and replays all the same.
        path = self.record("t.jsonl", "--samples", "3")
        plain_rc, plain_out, plain_err = self.replay(path, "--json")
        self.assertEqual((plain_rc, plain_err), (0, ""))
        with open(path) as f:
            lines = f.readlines()
        header = json.loads(lines[0])
        self.assertNotIn("engine_config", header, "memprotctl record runs no daemon")
        header["engine_config"] = {"Budget": "60%", "EscalateAhead": "yes"}
        with open(path, "w") as f:
            f.write(json.dumps(header) + "\n" + "".join(lines[1:]))
        rc, out, err = self.replay(path, "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.splitlines(), [
            f"warning: {path}:1: engine_config: the daemon ran with EscalateAhead=yes, this replay with "
            "EscalateAhead=no (state EscalateAhead=yes in --config-dir to replay what the daemon did)"])
        replayed = json.loads(out)
        self.assertEqual(replayed["trace"]["engine_config"], {"Budget": "60%", "EscalateAhead": "yes"})
        del replayed["trace"]["engine_config"]
        self.assertEqual(replayed, json.loads(plain_out), "the warning changes nothing replayed")

    def test_truncated_last_line_is_an_error_naming_the_line(self):
        err = self.broken(lambda ls: "".join(ls[:-1]) + ls[-1][:100])
        self.assertIn("t.jsonl:5:", err)
        self.assertIn("truncated", err)

    def test_bad_json_is_an_error_naming_the_line_and_byte(self):
        err = self.broken(lambda ls: "".join(ls[:2]) + ls[2][:50] + "\n" + "".join(ls[3:]))
        self.assertIn("t.jsonl:3:", err)
        self.assertIn("not JSON (at byte", err)

    def test_missing_field_is_an_error_naming_the_line_and_key(self):
        err = self.broken(lambda ls: "".join(ls[:3]) + ls[3].replace('"current":', '"kurrent":', 1) + "".join(ls[4:]))
        self.assertIn("t.jsonl:4: current: missing", err)

    def test_a_newer_format_is_refused(self):
        err = self.broken(lambda ls: ls[0].replace('"memprotd_trace":1', '"memprotd_trace":2') + "".join(ls[1:]))
        self.assertIn("t.jsonl:1:", err)
        self.assertIn("newer", err)

    def test_samples_out_of_time_order_are_refused(self):
        err = self.broken(lambda ls: "".join(ls[:3]) + ls[4] + ls[3])
        self.assertIn("t.jsonl:5: time_us: samples out of time order", err)  # 15 s on line 4, then 10 s

    def test_record_on_a_missing_tree_fails(self):
        rc, out, err = run("record", "--root", "/nonexistent/cgroup", "--proc-root", f"{DEMO}/proc",
                           "--memory-total", "1G", "--no-wait", "-o", os.path.join(self.dir, "x"))
        self.assertNotEqual(rc, 0)
        self.assertIn("/nonexistent/cgroup", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
