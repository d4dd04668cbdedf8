# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the parts of tools/bench-effect share: the policies and scenarios,
the guest's defaults, the windows the analysis cuts, and the log line."""

import os

# tools/ and the source tree (this package is tools/bench_effect)
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.dirname(HERE)
POLICIES = ["none", "static-75", "static-250M", "memprotd"]
# alone: kvload only. cpu-ref: kvload beside the batch job reading a small
# cached file (same competition for the emulated CPUs, no memory pressure).
REFS = ["alone", "cpu-ref"]


def ordered(pols):
    """References, the standard policies, then variants (memprotd:Budget=70%) by name."""
    known = REFS + POLICIES
    return [p for p in known if p in pols] + sorted(p for p in pols if p not in known)


# NAME[:SECONDS]: a phase change needs longer runs (the working-set window is a
# minute, then protection shrinks by at most 10% of the budget a minute).
SCENARIOS = ["stream", "reuse-mmap", "phase-mmap:300"]
# Also known to the guest script, not run by default: the other kvload
# scenarios and memcached, memcached-zipf (Debian's memcached beside fio).
MORE_SCENARIOS = ["reuse", "reuse-zipf", "reuse-warm", "stream-zipf", "stream-warm", "phase-free", "phase-cold",
                  "phase-reuse", "memcached", "memcached-zipf"]
# The guest's CPU and clock, chosen so emulation does not distort what is
# measured (bench/effect/README.md, "The emulated clock and page zeroing"):
# without ERMS/FSRM the kernel zeroes and copies pages with rep stosq/movsq or
# unrolled moves, which TCG runs many times faster than the byte-wise rep
# stosb/movsb; with the TSC clocksource clock_gettime() stays in the vDSO
# instead of a syscall and an emulated HPET read (kvload reads the clock twice
# per operation). init_on_alloc=0: Debian's kernel zeroes every page it
# allocates, page cache included, which TCG does at 12 µs a page (see
# bench/effect/README.md). --cpu max --append "" gives the plain run-scenario guest.
GUEST_CPU = "max,erms=off,fsrm=off"
GUEST_APPEND = "clocksource=tsc tsc=reliable init_on_alloc=0"
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
