# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the parts of tools/bench-effect share: the policies and scenarios,
the guest's defaults, the windows the analysis cuts, and the log line."""

import os
import subprocess

# tools/ and the source tree (this package is tools/bench_effect)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.dirname(HERE)
POLICIES = ["none", "static-75", "static-250M", "memprotd"]
# Every policy the guest script knows, in the order results list them
# (static-min-75, MemoryMin= 75% of RAM on workload.slice, runs when named;
# memprotd-dry-run+static-min-75: that floor with memprotd beside it in
# Mode=dry-run, which writes no protection and ages nothing: what
# memprotd's presence costs).
KNOWN_POLICIES = ["none", "static-75", "static-250M", "static-min-75", "memprotd-dry-run+static-min-75",
                  "memprotd-notrim", "memprotd", "memprotd-alt"]
# alone: kvload only. cpu-ref: kvload beside the batch job reading a small
# cached file (same competition for the emulated CPUs, no memory pressure).
REFS = ["alone", "cpu-ref"]


DEFAULT_ROUNDS = 3


def base_policy(policy):
    """A policy's name without its extra [Daemon] settings:
    memprotd:Budget=70% is memprotd."""
    return policy.partition(":")[0]


def runs_memprotd(policy):
    """Whether the policy runs memprotd: memprotd, memprotd-NAME and either
    with :K=V (the guest script's is_mpd)."""
    return base_policy(policy).startswith("memprotd")


def rotation(policies, refs=REFS):
    """What each round orders: the references first, then the policies, each
    once (the references rotate with the policies, issue 29)."""
    return [r for r in refs if r not in policies] + list(policies)


def latin_round(items, r):
    """Round r's (1-based) order of items: row (r-1) of a Williams square, as
    tests/vm/bench-effect.sh's round_order (latin) computes it: row 0 is 0, 1,
    n-1, 2, n-2, ...; row k adds k mod n; an odd n takes 2n rows, the second n
    mirrored. Over a full square each item is in each place equally often."""
    n = len(items)
    if n == 0:
        return []
    base, lo, hi = [0], 1, n - 1
    for i in range(1, n):
        if i % 2:
            base.append(lo)
            lo += 1
        else:
            base.append(hi)
            hi -= 1
    k = (r - 1) % (2 * n if n % 2 else n)
    mirrored, k = k >= n, k % n
    return [items[(base[n - 1 - i if mirrored else i] + k) % n] for i in range(n)]


def square_rounds(n):
    """Rounds in a full Williams square of n items."""
    return 2 * n if n % 2 else n


# The wall time of a run beyond its warm-up and batch run, s (kvload's table
# populated and reset, the services started and stopped; memcached filled),
# and of a boot (QEMU's start, the guest's files, the shutdown): from the runs'
# meta.json start and batch timestamps of 2026-11-25 and 2026-11-26.
RUN_OVERHEAD_S = 30
MC_RUN_OVERHEAD_S = 50
BOOT_S = 150
SETTLE_MAX_S = 120  # tests/vm/bench-effect.sh's BENCH_SETTLE_MAX default
TIME_BUDGET_S = 2 * 3600


def estimate_s(scenarios, policies, rounds, duration, warmup, settle_s=SETTLE_MAX_S, refs=REFS):
    """Estimated wall time, s, of a run of tools/bench-effect: scenarios as
    NAME[:SECONDS], policies as given (references added), settle_s the mean
    time memprotd's runs wait for it to settle."""
    total = 0
    for spec in scenarios:
        sc, _, d = spec.partition(":")
        batch = int(d) if d else duration
        over = MC_RUN_OVERHEAD_S if uses_memcached(sc) else RUN_OVERHEAD_S
        runs = len(rotation(policies, refs)) * rounds
        mpd = sum(1 for p in policies if runs_memprotd(p)) * rounds
        total += BOOT_S + runs * (batch + warmup + over) + mpd * settle_s
    return total


def ordered(pols):
    """References, the standard policies, then variants (memprotd:Budget=70%) by name."""
    known = REFS + KNOWN_POLICIES
    return [p for p in known if p in pols] + sorted(p for p in pols if p not in known)


# NAME[:SECONDS]: a phase change needs longer runs (the working-set window is a
# minute, then protection shrinks by at most 10% of the budget a minute).
SCENARIOS = ["stream", "reuse-mmap", "phase-mmap:150"]
# Also known to the guest script, not run by default: the other kvload
# scenarios and memcached, memcached-zipf (Debian's memcached beside fio).
MORE_SCENARIOS = ["reuse", "reuse-zipf", "reuse-warm", "stream-zipf", "stream-warm", "phase-free", "phase-cold",
                  "phase-reuse", "memcached", "memcached-zipf", "anon-batch", "burst", "burst-trim"]


def uses_memcached(sc):
    """Whether scenario sc runs Debian's memcached (driven by mcload) as its
    workload: memcached, memcached-zipf, anon-batch, burst and burst-trim."""
    return sc.startswith(("memcached", "burst")) or sc == "anon-batch"


def batch_prog(sc):
    """The batch job of scenario sc, as its per-second lines name it."""
    if sc == "anon-batch":
        return "anonbatch"
    return "fio" if sc.startswith(("memcached", "burst")) else "cacheread"
def _fast_guest():
    """tools/vm/run-scenario's FAST_CPU and FAST_APPEND (their one home, with
    the reasons): the guest's CPU and clock, chosen so emulation does not
    distort what is measured. --cpu max --append "" gives the plain
    run-scenario guest."""
    out = subprocess.run([os.path.join(SRC, "tools", "vm", "run-scenario"), "--print-fast"], capture_output=True,
                         text=True, check=True).stdout
    fields = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return fields["cpu"], fields["append"]


GUEST_CPU, GUEST_APPEND = _fast_guest()
RAMP_S = 10       # seconds after the batch starts that are not measured (cache fill)
# What makes a run invalid (tests/vm/bench-effect.sh run_invalid); a run
# set aside for anything else is counted.
INVALID_REASONS = ("the guest kernel reported", "the batch job read under ",
                   "the harness's per-second sampler wrote nothing")
LATE_S = 60        # phase scenarios also report the last LATE_S seconds ("late")
BOOT_ALLOWANCE_S = 90  # of a scenario's timeout: QEMU start to guest uptime 0, and the shutdown
# Of a memcached scenario's timeout: fio's file layout once per boot, and
# memcached's start and fill in each run (allowances above what was seen
# on a loaded 2-core host: a layout of 20 s, fills of 4 to 153 s).
MC_LAYOUT_S = 300
MC_FILL_S = 240
PHASE_SETTLE_S = 5  # seconds after the phase change that are not measured (--phase-settle)
PROBE_SLOW = 1.3  # a probe "slow" when it takes more than this × the boot's median
STOP_MIN_S = 3    # a batch-job stop: this many seconds in a row under stop_mb_s(prog)
# cacheread reads tens of MB/s in the guest; fio (the memcached scenarios)
# about 4 MB/s (a syscall per 4 KiB under TCG), so for it a stop is a second
# with next to no reads (as tests/vm/bench-effect.sh's stop_mb_s).
STOP_MB_S = {"fio": 0.05}


def stop_mb_s(prog):
    """The MB/s under which a second of the batch job `prog` counts as stopped."""
    return STOP_MB_S.get(prog, 1.0)
JIT_EVERY_DEFAULT = 5  # what runs with translator samples but no --jit in run.json used


def log(msg):
    print(f"bench-effect: {msg}", flush=True)
