#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""tools/check-skips over a made-up meson test log: every kind of skip it
counts (meson's SKIP, GoogleTest, Python unittest with and without
verbosity, pytest) fails the check unless tests/allowed-skips.txt lists it,
and a log without skips passes."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(SRC, "tools", "check-skips")


def check(tests):
    """check-skips over a build whose testlog.json holds `tests`."""
    with tempfile.TemporaryDirectory() as build:
        os.makedirs(os.path.join(build, "meson-logs"))
        with open(os.path.join(build, "meson-logs", "testlog.json"), "w") as f:
            for t in tests:
                f.write(json.dumps(t) + "\n")
        return subprocess.run([sys.executable, TOOL, build], capture_output=True, text=True)


def log(name, stdout, result="OK"):
    return {"name": f"memprotd:cli / {name}", "result": result, "stdout": stdout}


class CheckSkips(unittest.TestCase):
    def assert_fails_naming(self, test, name):
        r = check([test])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"{name} skipped in", r.stderr)

    def test_no_skip_passes(self):
        r = check([log("a", "test_x (__main__.A.test_x) ... ok\n\nOK\n")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("suite cli: 0 skipped", r.stdout)

    def test_a_verbose_unittest_skip_fails(self):
        self.assert_fails_naming(log("a", "test_x (__main__.Live.test_x) ... skipped 'no host'\n\nOK (skipped=1)\n"),
                                 "Live.test_x")

    def test_a_quiet_unittest_skip_fails(self):
        self.assert_fails_naming(log("b", "s.\n----\nRan 2 tests\n\nOK (skipped=1)\n"), "an unnamed Python skip)")

    def test_a_pytest_skip_fails(self):
        self.assert_fails_naming(log("c", "tests/t.py::test_y SKIPPED (why)\n"), "test_y")

    def test_a_gtest_skip_fails_and_a_listed_one_passes(self):
        self.assert_fails_naming(log("d", "[  SKIPPED ] Foo.Bar (0 ms)\n"), "Foo.Bar")
        listed = "ConfigLoader.UnreadableFileWithoutPermissionIsReported"
        r = check([log("e", f"[  SKIPPED ] {listed} (0 ms)\n")])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_meson_skip_fails(self):
        self.assert_fails_naming(log("f", "", result="SKIP"), "f")


if __name__ == "__main__":
    unittest.main(verbosity=2)
