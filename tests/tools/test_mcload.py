#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""mcload (bench/effect/mcload.cc) against a real memcached it starts itself
on a free loopback port: the fill stores every key, an open-loop run keeps
its rate with 90% gets and no misses, the lines carry the keys the
benchmark's analysis reads, and an unreachable server is one clear error
and exit status 1; a closed loop with an open-loop probe counts the
probe apart, at its own rate, with a histogram per second that sums to its
operations. memcached must be installed (tools/install-deps): a
missing one fails the test.

Environment: MCLOAD (the binary)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time

MCLOAD = os.environ["MCLOAD"]
VALUE = 4096
FILL = 8 << 20
KEYS = FILL // VALUE
RATE, CONNS, SECONDS = 500, 2, 3
# What kvload prints a second, which tools/bench_effect/analysis.py reads.
SECOND_KEYS = {"prog", "t", "ts", "ops_s", "reads", "writes", "p50_us", "p99_us", "p999_us", "max_us", "keys",
               "misses", "errors"}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_memcached(port):
    exe = shutil.which("memcached")
    if not exe:
        print("FAIL memcached is not installed (tools/install-deps installs it)")
        sys.exit(1)
    cmd = [exe, "-p", str(port), "-l", "127.0.0.1", "-m", "64", "-U", "0"]
    if os.geteuid() == 0:
        cmd += ["-u", "nobody"]  # memcached refuses to run as root without it
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                print(f"FAIL memcached exited at once: {proc.stderr.read()}")
                sys.exit(1)
            time.sleep(0.05)
    proc.kill()
    print(f"FAIL memcached did not listen on port {port} within 5 s")
    sys.exit(1)


def curr_items(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("STAT curr_items "):
            return int(line.split()[2])
    return None


def mcload(port, *args, timeout=60):
    p = subprocess.run([MCLOAD, "--server", f"127.0.0.1:{port}", *args], capture_output=True, text=True,
                       timeout=timeout)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    return p, lines


def check_fill(port):
    p, lines = mcload(port, "--fill", "8M", "--value", str(VALUE), "--fill-only")
    check(p.returncode == 0, f"fill exits 0 (got {p.returncode}; stderr {p.stderr.strip()!r})")
    ready = [r for r in lines if r.get("event") == "ready"]
    check(len(ready) == 1 and ready[0].get("keys") == KEYS, f"one ready line with keys={KEYS}: {ready}")
    check(len(lines) == 1, f"--fill-only prints the ready line only ({len(lines)} lines)")
    check(curr_items(port) == KEYS, f"memcached holds {KEYS} items after the fill (stats: {curr_items(port)})")


def check_run(port):
    p, lines = mcload(port, "--keys", str(KEYS), "--value", str(VALUE), "--rate", str(RATE),
                      "--conns", str(CONNS), "--duration", str(SECONDS))
    check(p.returncode == 0, f"run exits 0 (got {p.returncode}; stderr {p.stderr.strip()!r})")
    check(any(r.get("event") == "ready" and r.get("keys") == KEYS for r in lines), "the run prints a ready line")
    secs = [r for r in lines if "t" in r and "ops_s" in r]
    check(len(secs) >= SECONDS - 1, f"a line a second ({len(secs)} for {SECONDS} s)")
    for r in secs:
        missing = SECOND_KEYS - r.keys()
        check(not missing and r["prog"] == "mcload", f"second {r.get('t')} has every key (missing {missing})")
        check(r["ops_s"] > 0 and r["reads"] + r["writes"] == r["ops_s"],
              f"second {r.get('t')}: ops_s {r['ops_s']} > 0 and reads + writes")
        check(r["p50_us"] <= r["p99_us"] <= r["p999_us"] <= r["max_us"] + 1, f"second {r.get('t')}: quantiles ordered")
    ops = sum(r["ops_s"] for r in secs)
    reads = sum(r["reads"] for r in secs)
    check(sum(r["misses"] for r in secs) == 0, "no misses after the fill")
    check(sum(r["errors"] for r in secs) == 0, "no errors")
    check(ops > 0 and 0.85 <= reads / ops <= 0.95, f"reads are about 90% of operations ({reads} of {ops})")
    summary = [r for r in lines if r.get("summary")]
    check(len(summary) == 1, "one summary line")
    if summary:
        s = summary[0]
        check(0.7 * RATE <= s["ops_s"] <= 1.3 * RATE, f"open loop keeps --rate {RATE} (summary ops_s {s['ops_s']})")
        check(s["misses"] == 0 and s["errors"] == 0 and s["ops"] >= ops, f"summary counts: {s}")


PROBE_RATE = 200


def check_probe(port):
    """Closed loop (--rate 0) beside a probe at PROBE_RATE: ops_s counts the
    closed connections only, the probe keeps its rate, its histogram sums to
    its operations and its p99 is the histogram's."""
    p, lines = mcload(port, "--keys", str(KEYS), "--value", str(VALUE), "--rate", "0", "--conns", str(CONNS),
                      "--probe-rate", str(PROBE_RATE), "--probe-conns", "2", "--duration", str(SECONDS))
    check(p.returncode == 0, f"closed loop with a probe exits 0 (got {p.returncode}; stderr {p.stderr.strip()!r})")
    secs = [r for r in lines if "t" in r and "ops_s" in r]
    check(len(secs) >= SECONDS - 1, f"a line a second with a probe ({len(secs)})")
    for r in secs:
        hist = r.get("probe_hist") or []
        check(sum(c for _, c in hist) == r.get("probe_ops"),
              f"second {r.get('t')}: probe_hist sums to probe_ops ({r.get('probe_ops')})")
        check(all(a[0] < b[0] for a, b in zip(hist, hist[1:])), f"second {r.get('t')}: probe_hist ascending")
        check(r["reads"] + r["writes"] == r["ops_s"], f"second {r.get('t')}: ops_s excludes the probe")
    summary = [r for r in lines if r.get("summary")]
    check(len(summary) == 1, "one summary line with a probe")
    if summary:
        s = summary[0]
        check(0.7 * PROBE_RATE <= s["probe_ops"] / SECONDS <= 1.3 * PROBE_RATE,
              f"the probe keeps --probe-rate {PROBE_RATE} ({s['probe_ops']} in {SECONDS} s)")
        check(s["ops_s"] > PROBE_RATE, f"the closed loop runs as fast as the server answers ({s['ops_s']} ops/s)")
        check(s["probe_errors"] == 0 and s["probe_p50_us"] <= s["probe_p99_us"] <= s["probe_max_us"] + 1,
              f"probe summary: {s}")


def check_unreachable(port):
    p, lines = mcload(port, "--keys", "10", "--duration", "1", timeout=20)
    check(p.returncode == 1, f"an unreachable server: exit status 1 (got {p.returncode})")
    check(f"127.0.0.1:{port}" in p.stderr and p.stderr.count("\n") == 1,
          f"one error line naming the server: {p.stderr!r}")
    check(not lines, "nothing on stdout")


def main():
    port = free_port()
    mc = start_memcached(port)
    try:
        check_fill(port)
        check_run(port)
        check_probe(port)
    finally:
        mc.terminate()
        mc.wait(timeout=10)
    check_unreachable(free_port())
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
