# SPDX-License-Identifier: LGPL-2.1-or-later
"""Driving the guest: building the workloads, finding memprotd, booting the
guest once per scenario (tools/vm/run-scenario running tests/vm/bench-effect.sh)
and sampling QEMU's threads on the host meanwhile (host-qemu.jsonl)."""

import dataclasses
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

from .common import BOOT_ALLOWANCE_S, MC_FILL_S, MC_LAYOUT_S, SRC, log, rotation, runs_memprotd, uses_memcached

CXXFLAGS = ["-std=c++20", "-O2", "-g", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-Wshadow",
            "-Wold-style-cast", "-Wcast-align", "-Wdouble-promotion", "-Wformat=2", "-pthread"]


# --- building -----------------------------------------------------------------------
WORKLOADS = ("kvload", "cacheread", "mcload", "anonbatch", "burster")


def in_release(release):
    """The command prefix that runs a build or a binary for the guest's release:
    nothing for Debian 12 (this machine), tools/vm/in-root for Debian 13, whose
    binaries link against its own libraries (sdbus-c++ 2) and run only there."""
    return [os.path.join(SRC, "tools", "vm", "in-root")] if release == 13 else []


def build_workloads(build_root, release=None):
    """The workloads (WORKLOADS): the meson targets if the build has bench/effect
    (-Dbenchmarks=true), else compiled directly (same sources) into BUILD/bench-effect/bin.
    For Debian 13 both happen in its build root (tools/vm/in-root)."""
    pre = in_release(release)
    out = os.path.join(build_root, "bench-effect", "bin")
    os.makedirs(out, exist_ok=True)
    targets = subprocess.run([*pre, "ninja", "-C", build_root, "-t", "targets", "all"],
                             capture_output=True, text=True).stdout
    if "bench/effect/kvload:" in targets:
        subprocess.run([*pre, "ninja", "-C", build_root, *(f"bench/effect/{p}" for p in WORKLOADS)], check=True)
        for p in WORKLOADS:
            shutil.copy2(os.path.join(build_root, "bench", "effect", p), os.path.join(out, p))
        log("workloads built by meson (bench/effect)")
    else:
        cxx = os.environ.get("CXX", "c++")
        for p in WORKLOADS:
            src = os.path.join(SRC, "bench", "effect", p + ".cc")
            subprocess.run([*pre, cxx, *CXXFLAGS, src, "-o", os.path.join(out, p)], check=True)
        log(f"workloads compiled directly: {build_root} is configured without bench/effect (-Dbenchmarks=false)")
    return out


def find_memprotd(build_root, explicit, bin_dir, release=None, name="memprotd"):
    """A working memprotd binary, copied next to the workloads as NAME so that
    a rebuild during the run does not change it. None if there is none. For
    Debian 13 only the build root's own binary is taken, checked in the Debian
    13 root: a Debian 12 build from another directory would not run in that
    guest."""
    pre = in_release(release)
    cands = [explicit] if explicit else [os.path.join(build_root, "daemon", "memprotd")]
    if not explicit and release != 13:
        cands += sorted(glob.glob(os.path.join(SRC, "build*", "daemon", "memprotd")), key=os.path.getmtime,
                        reverse=True)
    for c in cands:
        if not c or not os.access(c, os.X_OK):
            continue
        r = subprocess.run([*pre, c, "--help"], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"{c} --help failed (rc {r.returncode}); not used")
            continue
        dest = os.path.join(bin_dir, name)
        if os.path.realpath(c) != os.path.realpath(dest):
            shutil.copy2(c, dest)
        ver = subprocess.run([*pre, dest, "--version"], capture_output=True, text=True).stdout.strip()
        log(f"{name}: {c} ({ver}, built {time.ctime(os.path.getmtime(c))})")
        return dest, c, ver
    log(f"{name} not built: its policies will be skipped")
    return None, None, None


# --- running ------------------------------------------------------------------------
def run_scenarios(args, bin_dir, memprotd, stamp_dir, memprotd_alt=None):
    # The references are policies of each round (BENCH_REFS empty), so that
    # they rotate through the places with the rest.
    policies = rotation(args.policies.split(), args.refs.split())
    for spec in args.scenarios.split():
        # NAME or NAME:SECONDS (this scenario's batch run length)
        sc, _, dur = spec.partition(":")
        duration = int(dur) if dur else args.duration
        n_runs = len(policies) * args.rounds
        # kvload populate + reset ~20 s, warmup, the batch, memprotd settling,
        # and two runs made again if the guest stalls (the full run of
        # 2026-11-25 had two in phase-mmap and lost memprotd's to the timeout).
        # memprotd's policies (memprotd, memprotd-notrim, ...) also wait for it to settle
        n_mpd = sum(1 for p in policies if runs_memprotd(p))
        timeout = 240 + (n_runs + 2) * (duration + args.warmup + 45) + (args.rounds * max(1, n_mpd) + 1) * 130
        if uses_memcached(sc):
            # fio lays out its files once (1.6 GiB through the emulated disk),
            # and each run starts and fills memcached (380 MiB over loopback).
            timeout += MC_LAYOUT_S + (n_runs + 2) * MC_FILL_S
        name = f"bench-effect-{sc}"
        cmd = [os.path.join(SRC, "tools", "vm", "run-scenario"), os.path.join(SRC, "tests", "vm", "bench-effect.sh"),
               "--build-root", args.build_root, "--name", name, "--timeout", str(timeout),
               "--env", f"BENCH_SCENARIO={sc}", "--env", f"BENCH_POLICIES={' '.join(policies)}",
               "--env", f"BENCH_ROUNDS={args.rounds}", "--env", f"BENCH_ORDER={args.order}",
               "--env", f"BENCH_DURATION={duration}",
               "--env", "BENCH_REFS=", "--env", f"BENCH_PHASE_AT={min(args.phase_at, duration - 10)}",
               "--env", f"BENCH_WARMUP={args.warmup}", "--env", f"BENCH_BIN={bin_dir}",
               # guest uptime by which the runs must end
               "--env", f"BENCH_DEADLINE={timeout - BOOT_ALLOWANCE_S}",
               "--env", f"BENCH_MEMPROTD={memprotd or ''}", "--env", f"BENCH_MEMPROTD_ALT={memprotd_alt or ''}"]
        if args.memory:
            cmd += ["--memory", str(args.memory)]
        if args.release:
            cmd += ["--release", str(args.release)]
        if args.append:
            cmd += ["--append", args.append]
        if args.cpu:
            cmd += ["--cpu", args.cpu]
        if args.accel:
            cmd += ["--accel", args.accel]
        for kv in args.env:
            cmd += ["--env", kv]
        log(f"scenario {sc}: booting the guest ({n_runs} runs, timeout {timeout}s)")
        t0 = time.time()
        os.makedirs(os.path.join(stamp_dir, sc), exist_ok=True)
        # QEMU's monitor, for the translator's counters (--jit; a unix
        # socket's path must be short, so not under the build root).
        mon_path = f"/tmp/bench-effect-{os.getpid()}-{sc}.monitor"
        env = dict(os.environ, MEMPROTD_VM_MONITOR=mon_path) if args.jit else None
        with open(os.path.join(stamp_dir, f"{sc}.log"), "w") as f, \
                open(os.path.join(stamp_dir, sc, "host-qemu.jsonl"), "w") as hf, \
                subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env) as proc:
            stop = threading.Event()
            monitor = Monitor(mon_path) if args.jit else None
            sampler = threading.Thread(target=sample_qemu, args=(proc.pid, hf, stop, monitor, args.jit),
                                       daemon=True)
            sampler.start()
            console = os.path.join(args.build_root, "meson-logs", "vm", name, "console.log")
            follower = threading.Thread(target=follow_progress, args=(console, sc, n_runs, stop, t0), daemon=True)
            follower.start()
            try:
                rc = proc.wait()
            finally:  # also on ^C: stop the guest, then the sampler, before hf closes
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                stop.set()
                sampler.join()
                follower.join()
                if monitor:
                    monitor.close()
                    if os.path.exists(mon_path):
                        os.unlink(mon_path)
        log(f"scenario {sc}: rc {rc} after {time.time() - t0:.0f}s (log {stamp_dir}/{sc}.log)")
        src = os.path.join(args.build_root, "meson-logs", "vm", name, "share", "result", "runs", sc)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(stamp_dir, sc), dirs_exist_ok=True)
        else:
            log(f"scenario {sc}: no results came back")
        # The guest's console (kernel messages: soft lockups and their
        # traces) is rewritten by the next boot; keep it with the runs.
        if os.path.exists(console):
            shutil.copy(console, os.path.join(stamp_dir, sc, "console.log"))


# --- progress ------------------------------------------------------------------------
RUN_DONE = re.compile(r"bench-effect\[[^\]]*\]: [0-9.]+s: run (\S+) done: kv ")
RUN_AGAIN = re.compile(r"bench-effect\[[^\]]*\]: [0-9.]+s: run (\S+): again \(try (\d+)\)")


def progress_lines(lines, sc, n_runs, done, t0, now):
    """The progress messages for the guest's console lines: one per run done
    (the guest script's "run NAME done: kv ..." line), and one when a run
    done is set aside and made again ("run NAME: again (try N)"), which
    takes it back from the count. done: runs counted so far; returns
    (messages, done)."""
    out = []
    for line in lines:
        m = RUN_DONE.search(line)
        if m:
            done += 1
            out.append(f"scenario {sc}: run {m.group(1)} done ({done}/{n_runs}, {now - t0:.0f}s)")
        m = RUN_AGAIN.search(line)
        if m:
            done = max(done - 1, 0)
            out.append(f"scenario {sc}: run {m.group(1)} set aside (invalid), made again (try {m.group(2)}; "
                       f"{done}/{n_runs}, {now - t0:.0f}s)")
    return out, done


@dataclasses.dataclass
class ConsoleCursor:
    """How far read_progress has read the guest's console: its inode, the byte
    offset, the partial last line, and how many runs are done."""
    ino: int | None = None
    pos: int = 0
    buf: str = ""
    done: int = 0


def follow_progress(console, sc, n_runs, stop, t0):
    """Until stop is set, and once more after: follow the guest's console
    (run-scenario creates it anew at each boot, so a new file is read from its
    start) and log each run as it ends. The read after stop logs what the
    console gained since the last poll."""
    cursor = ConsoleCursor()
    while True:
        stopping = stop.wait(2.0)
        for msg in read_progress(console, sc, n_runs, t0, cursor):
            log(msg)
        if stopping:
            return


def read_progress(console, sc, n_runs, t0, cursor):
    """The progress messages for the whole lines the console gained since the
    previous call with this cursor (advanced in place)."""
    try:
        st = os.stat(console)
        if st.st_mtime < t0:  # the previous boot's console, not yet replaced
            return []
        if st.st_ino != cursor.ino:
            cursor.ino, cursor.pos, cursor.buf = st.st_ino, 0, ""
        with open(console, "rb") as f:
            f.seek(cursor.pos)
            chunk = f.read().decode(errors="replace")
            cursor.pos = f.tell()
    except OSError:
        return []
    *lines, cursor.buf = (cursor.buf + chunk).split("\n")
    msgs, cursor.done = progress_lines(lines, sc, n_runs, cursor.done, t0, time.time())
    return msgs


# --- the emulator's threads on the host ---------------------------------------------
# Under TCG a vCPU is a host thread. When the host does not run it, the guest's
# clock goes on and the guest counts that time as its task's time on a CPU, so
# kvload's "ops per CPU second" falls with no change in the guest. Each
# second, QEMU's threads' schedstat (ns on a host CPU, ns waiting for one) and
# names go to host-qemu.jsonl; analysis takes the vCPU threads' waits over
# each batch run.
def qemu_pid(root):
    """The qemu-system process under root (run-scenario runs it under timeout)."""
    children = {}
    for st in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(st) as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(st.split("/")[2]), comm))
    todo = [root]
    while todo:
        for pid, comm in children.get(todo.pop(), []):
            if comm.startswith("qemu-system"):
                return pid
            todo.append(pid)
    return None


PROBE_N = 50_000  # a fixed piece of work, about 1.7 ms of one host CPU here


def host_probe_ns():
    """CPU time (ns) this thread takes for a fixed loop: the host CPU's speed as
    the host sees it. Under a hypervisor that does not report steal time (this
    machine's /proc/stat steal stays 0), time the host's own vCPU did not run, or
    ran slower beside a busy neighbour, counts as this thread's CPU time too, as
    it does for QEMU's vCPU threads."""
    t0 = time.thread_time_ns()
    x = 0
    for i in range(PROBE_N):
        x += i * i
    return time.thread_time_ns() - t0


# QEMU's translator, from its monitor every --jit samples: a "TB flush"
# throws away all translated code (the code buffer is full) and stops every
# vCPU meanwhile; an invalidation drops the translations of one guest page
# (written to, e.g. a page cache page reused); the TLB flushes are the guest's.
# `info jit` walks every translation in QEMU's main loop (0.1-0.4 s at a
# million of them) and the guest did up to about 10% less in the second it
# ran (20261125-154505), so it is off unless asked for.
JIT_FIELDS = {"TB count": "tb_count", "TB flush count": "tb_flush", "TB invalidate count": "tb_invalidate",
              "TLB full flushes": "tlb_full", "TLB partial flushes": "tlb_partial"}
JIT_LINE = re.compile(r"\s*(" + "|".join(map(re.escape, JIT_FIELDS)) + r")\s+(\d+)\s*$")


class Monitor:
    """QEMU's human monitor on a unix socket (run-scenario, MEMPROTD_VM_MONITOR)."""

    def __init__(self, path):
        self.path, self.sock = path, None

    def command(self, cmd):
        if self.sock is None:
            if not os.path.exists(self.path):
                return None
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(5)
            self.sock.connect(self.path)
            self._read()  # the banner
        self.sock.sendall(cmd.encode() + b"\n")
        return self._read()

    def _read(self):
        buf = b""
        while not buf.endswith(b"(qemu) "):
            chunk = self.sock.recv(65536)
            if not chunk:
                self.close()
                raise ConnectionError("QEMU's monitor closed")
            buf += chunk
        return buf.decode(errors="replace")

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def jit_stats(monitor):
    """The counters of `info jit` (JIT_FIELDS) and the code buffer's use, with the
    seconds the command took (it runs in QEMU's main loop)."""
    t0 = time.monotonic()
    text = monitor.command("info jit")
    if text is None:
        return None
    res = {"cmd_s": round(time.monotonic() - t0, 4)}
    for line in text.splitlines():
        m = JIT_LINE.match(line)
        if m:
            res[JIT_FIELDS[m[1]]] = int(m[2])
        m = re.match(r"\s*gen code size\s+(\d+)/(\d+)", line)
        if m:
            res["code_used"], res["code_size"] = int(m[1]), int(m[2])
    return res


def sample_qemu(root, out, stop, monitor=None, jit_every=0):
    pid, written, failed, n = None, 0, False, 0
    while not stop.wait(1.0):
        try:
            pid = pid or qemu_pid(root)
            if pid is None:
                continue
            threads = {}
            for task in glob.glob(f"/proc/{pid}/task/*"):
                try:
                    with open(f"{task}/comm") as f:
                        comm = f.read().strip()
                    with open(f"{task}/schedstat") as f:
                        run_ns, wait_ns, _ = f.read().split()
                except (OSError, ValueError):
                    continue
                threads[task.rsplit("/", 1)[1]] = [comm, int(run_ns), int(wait_ns)]
            if not threads:
                pid = None  # QEMU has exited (a second boot would be a new process)
                continue
            line = {"ts": round(time.time(), 3), "pid": pid, "threads": threads, "probe_ns": host_probe_ns()}
            n += 1
            if monitor and (n - 1) % jit_every == 0:  # the first sample, then every jit_every-th
                try:
                    jit = jit_stats(monitor)
                except OSError:  # not yet listening, or gone: try again next time
                    monitor.close()
                    jit = None
                if jit:
                    line["jit"] = jit
            out.write(json.dumps(line) + "\n")
            out.flush()
            written += 1
        except Exception as e:  # a sampler that dies must not go unnoticed, nor stop the boot
            if not failed:
                log(f"host sampler: {type(e).__name__}: {e} (host-qemu.jsonl may miss seconds)")
            failed = True
    if not written:
        log("host sampler: no sample of QEMU's threads was written (no host columns for this boot)")
