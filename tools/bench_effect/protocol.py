# SPDX-License-Identifier: LGPL-2.1-or-later
"""The protocols of bench/effect/PROTOCOL.md as data: per version and
scenario the guest settings, the policies, rounds per boot and boots, and
the targets with their one primary statistic each. `tools/bench-effect
--protocol V` runs one boot of one scenario with exactly these settings and
records the version; the targets of a result that carries one are these and
no others. A version is never edited once a result cites it: a change is a
new version (PROTOCOL.md says why)."""

from dataclasses import dataclass, field, replace

# The figures' denominators: a policy, STATICS (the better of the listed
# statics, per the protocol), or None (an absolute figure).


@dataclass(frozen=True)
class Target:
    figure: str          # a key of a run's window (analysis.window_stats) or of its "life"
    num: str             # the policy judged
    den: object          # a policy, a tuple of statics ("the better static"), or None (absolute)
    op: str              # ">=" or "<="
    goal: float
    primary: bool = True
    windows: tuple = ()  # () = every window of the scenario
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    duration: int
    warmup: int
    policies: tuple
    refs: tuple
    rounds: int          # per boot: a full Williams square of policies + refs
    boots: int
    env: tuple           # (K, V) pairs for the guest script
    targets: tuple = field(default_factory=tuple)
    releases: tuple = (12, 13)  # the guest's Debian releases (kernels) it runs on


# Settings every protocol scenario runs with: the invalid-run rule's sampler
# gap, memprotd's shipped defaults plus Weight= per slice, its start-up span.
COMMON_ENV = (("BENCH_INVALID_GAP", "5"), ("BENCH_MEMPROTD_POLICY", "weights"), ("BENCH_MPD_STARTUP_S", "20"))
MC_ENV = (("BENCH_MC_RATE", "0"), ("BENCH_MC_CONNS", "4"), ("BENCH_MC_PROBE_RATE", "100"),
          ("BENCH_MC_PROBE_CONNS", "4"))
MC_STATICS = ("static-75",)
KV_STATICS = ("static-75",)
LIFE = ("life",)


def cpu_target(num):
    """memprotd's CPU over its life after start-up, an absolute target."""
    return Target("memprotd_cpu_pct", num, None, "<=", 0.5, windows=LIFE,
                  note="% of one vCPU over memprotd's life after its start-up")


CPU_TARGET = cpu_target("memprotd")


def memcached_targets(num="memprotd", cpu_ref=True):
    """The memcached scenarios' targets of policy num (version 1's with the
    defaults); cpu_ref=False leaves out the one against cpu-ref."""
    return (
        Target("kv_ops_s", num, MC_STATICS, ">=", 0.95),
    ) + ((Target("kv_ops_s", num, "cpu-ref", ">=", 0.85),) if cpu_ref else ()) + (
        Target("kv_p99_run_us", num, MC_STATICS, "<=", 1.1),
        Target("kv_refault_anon_per_kop", num, "none", "<=", 0.1),
        Target("batch_mb_s", num, "none", ">=", 0.9),
        cpu_target(num),
        Target("batch_mb_per_cpu_s", num, "none", ">=", 0.9, primary=False),
        Target("kv_stall_ms_per_kop", num, "none", "<=", 0.5, primary=False),
        Target("swapin_per_kop", num, MC_STATICS, "<=", 1.1, primary=False),
        Target("kv_p99_med_us", num, MC_STATICS, "<=", 1.1, primary=False),
    )


def kvload_targets(reuse):
    out = (
        Target("kv_stall_ms_per_kop", "memprotd", "none", "<=", 0.5),
        Target("kv_majflt_per_kop", "memprotd", "none", "<=", 0.5),
        Target("kv_ops_s", "memprotd", "cpu-ref", ">=", 0.85),
        Target("kv_ops_s", "memprotd", KV_STATICS, ">=", 0.95),
        CPU_TARGET,
    )
    if reuse:
        return out + (Target("kv_ops_s", "memprotd", "none", ">=", 1.5),
                      Target("kv_p99_us", "memprotd", "none", "<=", 0.5),
                      Target("batch_mb_s", "memprotd", "none", ">=", 0.8))
    return out + (Target("batch_mb_s", "memprotd", "static-75", ">=", 1.2, windows=("window_after",),
                         note="the issue's goal is after the change"),)


def v1():
    mc = dict(duration=150, warmup=8, policies=("none", "static-75", "memprotd"), refs=("cpu-ref",),
              rounds=4, boots=3, env=COMMON_ENV + MC_ENV, targets=memcached_targets())
    kv = dict(warmup=8, policies=("none", "static-75", "memprotd"), refs=("cpu-ref",), rounds=4, boots=3,
              env=COMMON_ENV)
    return {
        "memcached": Scenario(**mc),
        "memcached-zipf": Scenario(**mc),
        "phase-mmap": Scenario(duration=150, targets=kvload_targets(False), **kv),
        "reuse-mmap": Scenario(duration=60, targets=kvload_targets(True), **kv),
    }


ANON_STATICS = ("static-75", "static-min-75")


def anon_batch_targets(num="memprotd", better=ANON_STATICS):
    """anon-batch's targets of policy num, `better` being the better static
    (version 2's with the defaults)."""
    return (
        Target("kv_ops_s", num, "none", ">=", 1.2),
        Target("kv_ops_s", num, better, ">=", 0.95),
        Target("kv_refault_anon_per_kop", num, "none", "<=", 0.1),
        Target("batch_mb_per_cpu_s", num, "static-min-75", ">=", 0.95,
               note="anonbatch's MB of pages touched per batch.slice CPU s"),
        cpu_target(num),
        Target("kv_p99_run_us", num, better, "<=", 1.1, primary=False),
        Target("kv_stall_ms_per_kop", num, "none", "<=", 0.5, primary=False),
        Target("swapin_per_kop", num, better, "<=", 1.1, primary=False),
    )


def v2():
    return {
        "anon-batch": Scenario(duration=150, warmup=8, policies=("none", "static-75", "static-min-75", "memprotd"),
                               refs=(), rounds=4, boots=3,
                               env=COMMON_ENV + MC_ENV + (("BENCH_ANON_SIZE", "600M"),),
                               targets=anon_batch_targets()),
        "memcached-zipf": v1()["memcached-zipf"],
    }


# Version 3's candidate default: escalation ahead of reclaim where memory.low
# only defers (PROTOCOL.md, version 3, says when it becomes the default).
AHEAD = "memprotd:EscalateAhead=yes"


def v3_anon_batch_targets():
    """Version 2's anon-batch targets for memprotd and for the candidate, the
    better static being the hard floor (version 2 measured static-75 no
    better than none on 6.12), and the candidate's ops/s against memprotd's."""
    return anon_batch_targets("memprotd", "static-min-75") + anon_batch_targets(AHEAD, "static-min-75") + (
        Target("kv_ops_s", AHEAD, "memprotd", ">=", 1.0),)


def v3_zipf_targets():
    """Version 1's memcached targets but cpu-ref's, for memprotd and for the
    candidate, and the candidate against memprotd within stated margins:
    where the kernel keeps memcached alone, holding it ahead must not cost."""
    return memcached_targets("memprotd", cpu_ref=False) + memcached_targets(AHEAD, cpu_ref=False) + (
        Target("kv_ops_s", AHEAD, "memprotd", ">=", 0.90),
        Target("kv_p99_run_us", AHEAD, "memprotd", "<=", 1.15),
        Target("batch_mb_s", AHEAD, "memprotd", ">=", 0.85),
    )


def v3():
    """Version 2's anon-batch and version 1's memcached-zipf (their load and
    settings), each with the candidate in place of one policy, on 6.12 only."""
    return {
        "anon-batch": replace(v2()["anon-batch"], policies=("none", "static-min-75", "memprotd", AHEAD),
                              targets=v3_anon_batch_targets(), releases=(13,)),
        "memcached-zipf": replace(v1()["memcached-zipf"], policies=("none", "static-75", "memprotd", AHEAD),
                                  refs=(), targets=v3_zipf_targets(), releases=(13,)),
    }


PROTOCOLS = {"1": v1(), "2": v2(), "3": v3()}


def get(version):
    """The protocol `version` (SystemExit naming the known ones if unknown)."""
    if version not in PROTOCOLS:
        raise SystemExit(f"bench-effect: protocol {version!r} is not defined "
                         f"(bench/effect/PROTOCOL.md; known: {', '.join(PROTOCOLS)})")
    return PROTOCOLS[version]


def scenario(version, name):
    """The protocol's settings of scenario `name` (SystemExit if it has none)."""
    p = get(version)
    if name not in p:
        raise SystemExit(f"bench-effect: protocol {version} has no scenario {name!r} (it has: {', '.join(p)})")
    return p[name]
