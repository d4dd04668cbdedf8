#!/usr/bin/env python3
# memprotctl simulate and check-config, run as a user runs them: as a
# subprocess on the example host in tests/data/demo and on broken inputs.
import json
import os
import shutil
import subprocess
import tempfile
import unittest

CTL = os.environ["MEMPROTCTL"]
DEMO = os.environ["DEMO_DIR"]
GiB = 1 << 30
MiB = 1 << 20


def run(*args):
    p = subprocess.run([CTL, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def simulate(*extra):
    return run("simulate", "--root", f"{DEMO}/cgroup", "--proc-root", f"{DEMO}/proc",
               "--config-dir", f"{DEMO}/config", *extra)


class Simulate(unittest.TestCase):
    def test_json_has_the_documented_fields(self):
        rc, out, err = simulate("--json")
        self.assertEqual(rc, 0, err)
        plan = json.loads(out)
        self.assertEqual(plan["memory_total"], 16 * GiB)
        self.assertEqual(plan["budget"], int(16 * GiB * 0.6))
        units = [s["unit"] for s in plan["slices"]]
        self.assertEqual(units, ["batch.slice", "system.slice", "user.slice", "workload.slice",
                                 "workload-db.slice", "workload-web.slice"])
        for s in plan["slices"]:
            for key in ("unit", "cgroup", "current", "cheap_cache", "working_set", "demand", "weight",
                        "memory_low", "memory_min", "next_memory_low", "next_memory_min"):
                self.assertIn(key, s)
            for key in ("current", "cheap_cache", "working_set", "demand", "memory_low", "memory_min"):
                self.assertIsInstance(s[key], int, key)

    def test_cache_heavy_batch_gets_less_than_the_anon_workload(self):
        plan = json.loads(simulate("--json")[1])
        by = {s["unit"]: s for s in plan["slices"]}
        batch, work = by["batch.slice"], by["workload.slice"]
        self.assertGreater(batch["cheap_cache"], 4 * GiB)
        self.assertLess(batch["memory_low"], GiB)
        self.assertGreater(work["memory_low"], 7 * GiB)
        self.assertEqual(work["memory_min"], 256 * MiB)  # Floor=256M
        top = [s for s in plan["slices"] if s["parent"] is None]
        self.assertLessEqual(sum(s["memory_low"] for s in top), plan["budget"])
        kids = [s for s in plan["slices"] if s["parent"] == "workload.slice"]
        self.assertLessEqual(sum(s["memory_low"] for s in kids), work["memory_low"])

    def test_first_sample_protects_anon_at_once_and_later_samples_converge(self):
        one = json.loads(simulate("--json")[1])
        many = json.loads(simulate("--json", "--samples", "80", "--interval", "5s", "--no-wait")[1])
        w1 = next(s for s in one["slices"] if s["unit"] == "workload.slice")
        wn = next(s for s in many["slices"] if s["unit"] == "workload.slice")
        # The anon working set (prompt_demand) at once, the rest rate limited.
        self.assertLess(w1["prompt_demand"], w1["memory_low"])
        self.assertGreaterEqual(w1["next_memory_low"], w1["prompt_demand"] - 2 * MiB)
        self.assertLess(w1["next_memory_low"], w1["memory_low"])
        self.assertIn("grown at once", w1["damping"])
        self.assertFalse(wn["write"])
        # Converged: within the deadband, max(min(64 MiB, 1% of RAM), 2% of the target).
        self.assertLessEqual(abs(wn["current_memory_low"] - wn["memory_low"]),
                             max(64 * MiB, wn["memory_low"] // 50))
        self.assertEqual(many["writes"], [])

    def test_interval_option_reaches_the_engine(self):
        # Beyond its anon working set, a slice grows at the rate limit (5% of
        # the budget per 10 s), so a longer first --interval allows a longer
        # first step. Default policy (an empty config directory).
        with tempfile.TemporaryDirectory() as empty:
            def first_step(interval):
                plan = json.loads(run("simulate", "--root", f"{DEMO}/cgroup", "--proc-root", f"{DEMO}/proc",
                                      "--config-dir", empty, "--json", "--interval", interval)[1])
                b = next(s for s in plan["slices"] if s["unit"] == "batch.slice")
                self.assertTrue(b["write"])
                return b["next_memory_low"] - b["current_memory_low"], b
            short, b = first_step("2s")
            long, _ = first_step("10s")
        self.assertLess(b["prompt_demand"], b["memory_low"])
        self.assertGreaterEqual(short, b["prompt_demand"] - 2 * MiB)
        self.assertGreater(long, short + 100 * MiB)

    def test_table_names_every_slice_with_sizes(self):
        rc, out, err = simulate()
        self.assertEqual(rc, 0, err)
        for unit in ("batch.slice", "system.slice", "user.slice", "workload.slice", "workload-db.slice"):
            self.assertIn(unit, out)
        self.assertIn("budget 9.6G", out)
        self.assertNotIn("\033[", out, "no colour when not on a terminal")

    def test_explain_says_why(self):
        rc, out, _ = simulate("--explain")
        self.assertEqual(rc, 0)
        self.assertIn("cheap cache 5.2G", out)
        self.assertIn("policy from", out)

    def test_kubepods_is_left_to_kubelet_unless_a_policy_names_it(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(f"{DEMO}/cgroup", f"{d}/cgroup")
            shutil.copytree(f"{d}/cgroup/batch.slice", f"{d}/cgroup/kubepods.slice")
            shutil.copytree(f"{DEMO}/config", f"{d}/config")
            tree = ["--root", f"{d}/cgroup", "--proc-root", f"{DEMO}/proc", "--config-dir", f"{d}/config"]
            rc, out, err = run("simulate", *tree, "--explain", "kubepods.slice")
            self.assertEqual(rc, 0, err)
            self.assertIn("kubepods.slice is not managed: kubelet owns memory.min and memory.low", out)
            self.assertIn("names kubepods.slice exactly", out)
            self.assertIn("note: kubepods.slice is not managed", out)
            plan = json.loads(run("simulate", *tree, "--json")[1])
            self.assertNotIn("kubepods.slice", [s["unit"] for s in plan["slices"]])

            with open(f"{d}/config/policy.d/70-kube.conf", "w") as f:
                f.write("[Match]\nSlice=kubepods.slice\n[Protection]\nWeight=100\n")
            plan = json.loads(run("simulate", *tree, "--json")[1])
            self.assertIn("kubepods.slice", [s["unit"] for s in plan["slices"]])
            self.assertEqual(plan["notes"], [])

    def test_memory_total_overrides_meminfo(self):
        plan = json.loads(simulate("--json", "--memory-total", "32G")[1])
        self.assertEqual(plan["memory_total"], 32 * GiB)

    def test_missing_root_is_a_one_line_error(self):
        rc, out, err = run("simulate", "--root", "/nonexistent/cgroup", "--proc-root", f"{DEMO}/proc",
                           "--memory-total", "1G")
        self.assertNotEqual(rc, 0)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("/nonexistent/cgroup", err)

    def test_tree_without_memory_controller_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(f"{DEMO}/cgroup", f"{d}/cgroup")
            with open(f"{d}/cgroup/cgroup.controllers", "w") as f:
                f.write("cpu io pids\n")
            rc, _, err = run("simulate", "--root", f"{d}/cgroup", "--proc-root", f"{DEMO}/proc",
                               "--memory-total", "1G")
            self.assertNotEqual(rc, 0)
            self.assertIn("memory", err)

    def test_bad_option_values_are_usage_errors(self):
        self.assertEqual(simulate("--memory-total", "lots")[0], 2)
        self.assertEqual(simulate("--interval", "soon")[0], 2)
        self.assertEqual(simulate("--interval", "2h")[0], 2)  # Interval= allows at most 1h
        self.assertEqual(simulate("--samples", "0")[0], 2)

    def test_garbage_memory_stat_is_reported_and_the_rest_simulated(self):
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(f"{DEMO}/cgroup", f"{d}/cgroup")
            with open(f"{d}/cgroup/batch.slice/memory.stat", "w") as f:
                f.write("anon 12\nfile banana\n")
            rc, out, err = run("simulate", "--root", f"{d}/cgroup", "--proc-root", f"{DEMO}/proc",
                               "--config-dir", f"{DEMO}/config", "--json")
            self.assertEqual(rc, 0, err)
            self.assertIn("batch.slice/memory.stat:2", err)
            self.assertIn("workload.slice", [s["unit"] for s in json.loads(out)["slices"]])

    def test_tree_without_cgroup2_says_why(self):
        # Neither in the mount table nor with cgroup.controllers: a v1 or
        # hybrid host. (The live host is simulated in the guests: tests/vm.)
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(f"{DEMO}/cgroup", f"{d}/cgroup")
            os.remove(f"{d}/cgroup/cgroup.controllers")
            rc, out, err = run("simulate", "--root", f"{d}/cgroup", "--proc-root", f"{DEMO}/proc")
            self.assertEqual(rc, 1)
            self.assertEqual(out, "")
            self.assertIn(f"cgroup v2 is not mounted at {d}/cgroup", err)
            self.assertIn("systemd.unified_cgroup_hierarchy=1", err)


class CheckConfig(unittest.TestCase):
    def test_valid_config_prints_the_effective_policy(self):
        rc, out, err = run("check-config", "--config-dir", f"{DEMO}/config")
        self.assertEqual(rc, 0, err)
        self.assertIn("Configuration is valid", out)
        self.assertIn("workload.slice", out)
        self.assertIn("Budget=60%", out)

    def test_json_lists_policies_in_order(self):
        rc, out, _ = run("check-config", "--config-dir", f"{DEMO}/config", "--json")
        self.assertEqual(rc, 0)
        j = json.loads(out)
        self.assertEqual(j["errors"], [])
        files = [os.path.basename(p["file"]) for p in j["policies"]]
        self.assertEqual(files, sorted(files))

    def test_every_error_is_reported_with_file_line_and_key(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(f"{d}/policy.d")
            with open(f"{d}/memprotd.conf", "w") as f:
                f.write("[Daemon]\nInterval=5q\nBudget=80%\nColour=blue\n")
            with open(f"{d}/policy.d/10-x.conf", "w") as f:
                f.write("[Match]\nSlice=x.slice\n[Protection]\nMinProtection=2G\nMaxProtection=1G\nWeight=heavy\n")
            rc, out, err = run("check-config", "--config-dir", d)
            self.assertEqual(rc, 1)
            self.assertIn(f"{d}/memprotd.conf:2: Interval", err)
            self.assertIn(f"{d}/memprotd.conf:4: Colour", err)
            self.assertIn(f"{d}/policy.d/10-x.conf:6: Weight", err)
            self.assertIn("MinProtection", err)
            self.assertGreaterEqual(len(err.strip().splitlines()), 4)

    def test_simulate_refuses_a_broken_config(self):
        with tempfile.TemporaryDirectory() as d:
            with open(f"{d}/memprotd.conf", "w") as f:
                f.write("[Daemon]\nHeadroom=lots\n")
            rc, out, err = simulate_with(d)
            self.assertEqual(rc, 1)
            self.assertIn("memprotd.conf:2: Headroom", err)
            self.assertEqual(out, "")


def simulate_with(config_dir):
    return run("simulate", "--root", f"{DEMO}/cgroup", "--proc-root", f"{DEMO}/proc",
               "--config-dir", config_dir)


class Help(unittest.TestCase):
    def test_every_verb_has_help(self):
        for verb in ([], ["simulate"], ["check-config"]):
            rc, out, _ = run(*verb, "--help")
            self.assertEqual(rc, 0)
            self.assertIn("Usage", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
