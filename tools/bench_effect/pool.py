# SPDX-License-Identifier: LGPL-2.1-or-later
"""Pooling the rounds of several results of one guest (--pool): every run
keeps the index of the boot it came from, rounds pair runs within one boot
only (stats.rounds_of), and the means, intervals and verdicts are taken
again over all rounds of all boots. The sources keep their raw archives;
the pooled result names them and leaves the runs' per-second series (and
so the chart) to them."""

import os

from . import protocol
from .analysis import evaluate_targets, policy_means
from .report import load_result, repo_path

# What defines a scenario's experiment: results that differ in one of these
# are not rounds of the same thing and are not pooled.
SETTINGS = ("kernel", "nproc", "mem_total", "lru_gen", "swappiness", "zram_size", "cmdline", "duration",
            "warmup", "kv_size", "kv_args", "phase_at", "reuse_size", "stream_size", "fio_size", "mc_fill",
            "mc_memory", "mc_rate", "mc_conns", "mc_probe_rate", "mc_probe_conns", "invalid_gap_s", "memprotd_policy",
            "protocol")
# MemTotal of one guest size is not a constant: the kernel's reserved memory
# moves it by a page or so between boots of the same image and kernel. Boots
# within this much of each other ran the same guest.
MEM_TOTAL_SLACK = 1 << 20
# Per-scenario lists of set-aside runs, prefixed with their boot when pooled.
RUN_LISTS = ("stalled_runs", "recounted_runs", "invalid_counted_runs")


def same_setting(key, a, b):
    """Whether two boots' values of one of SETTINGS are the same experiment's."""
    if key == "mem_total" and isinstance(a, int) and isinstance(b, int):
        return abs(a - b) <= MEM_TOTAL_SLACK
    return a == b


def check_settings(sc, parts):
    """SystemExit naming the first setting in which the scenario's results differ."""
    (p0, r0), *rest = parts
    g0 = r0["scenarios"][sc].get("guest") or {}
    for p, r in rest:
        g = r["scenarios"][sc].get("guest") or {}
        for k in SETTINGS:
            if not same_setting(k, g0.get(k), g.get(k)):
                raise SystemExit(f"bench-effect: --pool: {sc}: {k} is {g0.get(k)!r} in {p0} but {g.get(k)!r} "
                                 f"in {p}; only rounds of the same experiment are pooled")


# What must be equal in every result pooled: the protocol version, memprotd's
# source commit, its binaries (two builds side by side: --memprotd-alt) and
# its configuration (other builds or settings are not rounds of the same
# experiment).
SAME_META = ("protocol", "memprotd_commit", "memprotd_binary", "memprotd_alt", "memprotd_config",
             "memprotd_config_by_policy")


def check_meta(parts):
    """SystemExit naming the first of SAME_META in which the results differ;
    under a protocol also a source that is itself pooled, and more boots
    of a scenario than the protocol runs (nothing is added after it)."""
    (p0, r0), *rest = parts
    for p, r in rest:
        for k in SAME_META:
            if r["meta"].get(k) != r0["meta"].get(k):
                raise SystemExit(f"bench-effect: --pool: {k} differs between {p0} and {p}; only results of the "
                                 "same build, configuration and protocol are pooled")
    version = r0["meta"].get("protocol")
    if not version:
        return
    for p, r in parts:
        if r["meta"].get("pooled_from"):
            raise SystemExit(f"bench-effect: --pool: {p} is pooled already; a protocol result pools its boots once")
    for sc in dict.fromkeys(sc for _, r in parts for sc in r.get("scenarios", {})):
        boots = sum(1 for _, r in parts if sc in r.get("scenarios", {}))
        want = protocol.scenario(version, sc).boots
        if boots > want:
            raise SystemExit(f"bench-effect: --pool: {boots} boots of {sc}, protocol {version} runs {want}; a boot "
                             "beyond them is a new protocol version's")


def pooled_scenario(sc, parts):
    """One scenario's runs from every result that has it, each run tagged
    with its boot b (parts: (b, result) pairs)."""
    out = {"guest": dict(parts[0][1]["scenarios"][sc].get("guest") or {}), "runs": [], "stalled_stops": {}}
    out.update({k: [] for k in RUN_LISTS})
    for b, res in parts:
        v = res["scenarios"][sc]
        # per-second series stay with the source (its JSON and chart)
        out["runs"] += [{k: x for k, x in dict(r, boot=b).items() if k != "series"} for r in v.get("runs", [])]
        for k in RUN_LISTS:
            out[k] += [f"boot {b + 1}: {x}" for x in v.get(k, [])]
        out["stalled_stops"].update({f"boot {b + 1}: {k}": x for k, x in v.get("stalled_stops", {}).items()})
    out["guest"]["rounds"] = sum((res["scenarios"][sc].get("guest") or {}).get("rounds") or 0 for _, res in parts)
    out["policies"] = policy_means(out["runs"])
    return out


def pool_results(paths, date):
    """The result pooling the runs of the results at `paths` (JSON files of one
    kernel); a scenario in several of them gets the rounds of all."""
    if len(paths) < 2:
        raise SystemExit("bench-effect: --pool needs two or more results, comma-separated")
    real = [os.path.realpath(p) for p in paths]
    for i, p in enumerate(paths):
        if real.index(real[i]) != i:
            raise SystemExit(f"bench-effect: --pool: {p} is given twice; its rounds would count twice")
    parts = [(p, load_result(p, "--pool")) for p in paths]
    check_meta(parts)
    kernels = {r["meta"].get("kernel") for _, r in parts}
    if len(kernels) > 1:
        raise SystemExit(f"bench-effect: --pool: the results are of different kernels ({', '.join(map(str, kernels))})")
    meta = dict(parts[0][1]["meta"], date=date, raw=None, raw_bytes=None,
                pooled_from=[repo_path(os.path.abspath(p)) for p in paths],
                memprotd_version=", ".join(dict.fromkeys(str(r["meta"].get("memprotd_version")) for _, r in parts)),
                rounds=sum(r["meta"].get("rounds") or 1 for _, r in parts))
    scenarios = {}
    for sc in dict.fromkeys(sc for _, r in parts for sc in r.get("scenarios", {})):
        having = [(b, p, r) for b, (p, r) in enumerate(parts) if sc in r.get("scenarios", {})]
        check_settings(sc, [(p, r) for _, p, r in having])
        scenarios[sc] = pooled_scenario(sc, [(b, r) for b, _, r in having])
    result = {"meta": meta, "scenarios": scenarios}
    result["targets"] = evaluate_targets(scenarios, meta.get("protocol"))
    return result
