# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reading a run's raw files (one directory per boot and scenario, one per run
in it: meta.json, kv.jsonl, batch.jsonl, slices.jsonl, counters.jsonl,
dump.json; host-qemu.jsonl per boot) into figures: per run, per policy (the
mean over rounds), and the issue's targets."""

import json
import math
import os
import statistics

from . import common
from .stats import bootstrap_ci, ratio_of_means, rounds_of, verdict
from .common import INVALID_REASONS, LATE_S, PROBE_SLOW, RAMP_S, REFS, STOP_MIN_S
from . import protocol
from .protocol import Target

def vcpu_threads(samples):
    """tids of the vCPU threads: the two of the last QEMU process with the most time
    on a host CPU over the boot (run-scenario gives the guest 2 vCPUs and does not
    name QEMU's threads; the next, the main loop, had 4% of their time in a hand
    sample of 20261125-065542)."""
    pid = samples[-1]["pid"]
    most = {}
    for r in samples:
        if r["pid"] == pid:
            for t, v in r["threads"].items():
                most[t] = max(most.get(t, 0), v[1])
    return sorted(most, key=lambda t: -most[t])[:2]


def probe_median(samples):
    """The probe's median time (ns) over the boot of the last QEMU process (as
    vcpu_threads), or None. A second is slow over PROBE_SLOW × this."""
    pid = samples[-1]["pid"]
    boot = [r["probe_ns"] for r in samples if "probe_ns" in r and r["pid"] == pid]
    return statistics.median(boot) if boot else None


def host_vcpu_window(samples, vcpus, median, t0, t1):
    """Over [t0, t1]: the vCPU threads' mean % of the time on a host CPU and waiting
    for one (the host's run queue), and the share of a busy vCPU's time the host
    ran them. Time a vCPU thread sleeps on QEMU's own locks counts as neither,
    though the guest charges it to its task too: the share corrects for the
    host's scheduler only."""
    a = next((r for r in samples if r["ts"] >= t0), None)
    b = next((r for r in reversed(samples) if r["ts"] <= t1), None)
    if len(vcpus) != 2 or a is None or b is None or b["ts"] - a["ts"] < 10 or a["pid"] != b["pid"] \
            or any(t not in a["threads"] or t not in b["threads"] for t in vcpus):
        return None
    span = (b["ts"] - a["ts"]) * 1e9
    run = sum(b["threads"][t][1] - a["threads"][t][1] for t in vcpus)
    wait = sum(b["threads"][t][2] - a["threads"][t][2] for t in vcpus)
    res = {"vcpu_host_run_pct": 100 * run / span / len(vcpus),
           "vcpu_host_wait_pct": 100 * wait / span / len(vcpus),
           "vcpu_host_share": run / (run + wait) if run + wait > 0 else None}
    probes = [r["probe_ns"] for r in samples if "probe_ns" in r and t0 <= r["ts"] <= t1]
    if len(probes) >= 10 and median:
        slow_limit = PROBE_SLOW * median
        res["host_probe_us"] = statistics.median(probes) / 1e3
        res["host_probe_mean_us"] = statistics.fmean(probes) / 1e3
        res["host_probe_slow_pct"] = 100 * sum(v > slow_limit for v in probes) / len(probes)
    res.update(jit_span(samples, t0, t1, inside=True))
    return res


def jit_span(samples, t0, t1, inside=False):
    """QEMU's translator over [t0, t1] (Monitor samples, every few seconds): TB
    flushes, and TB invalidations and TLB flushes per second. Between the last
    sample at or before t0 and the first at or after t1 (a short stop), or with
    inside, the first and last samples within (a whole run). {} without them."""
    jit = [r for r in samples if "jit" in r]
    if inside:
        a = next((r for r in jit if r["ts"] >= t0), None)
        b = next((r for r in reversed(jit) if r["ts"] <= t1), None)
    else:
        a = next((r for r in reversed(jit) if r["ts"] <= t0), None)
        b = next((r for r in jit if r["ts"] >= t1), None)
    if a is None or b is None or b["ts"] <= a["ts"] or a["pid"] != b["pid"]:
        return {}
    secs = b["ts"] - a["ts"]
    ja, jb = a["jit"], b["jit"]
    def rate(k):
        return (jb[k] - ja[k]) / secs if k in ja and k in jb else None
    return {"jit_s": secs, "tb_flushes": jb.get("tb_flush", 0) - ja.get("tb_flush", 0),
            "tb_invalidate_s": rate("tb_invalidate"), "tlb_flush_s": rate("tlb_partial"),
            "code_used_pct": 100 * jb["code_used"] / jb["code_size"] if jb.get("code_size") else None}



def host_span(samples, vcpus, median, t0, t1):
    """What the host did over a short stretch [t0, t1] (a few seconds): the vCPU
    threads' mean % of the time on a host CPU, from the last sample at or before
    t0 to the first at or after t1, and the host probe's mean ÷ the boot's median
    over the samples in between. None without the host's samples."""
    a = next((r for r in reversed(samples) if r["ts"] <= t0), None)
    b = next((r for r in samples if r["ts"] >= t1), None)
    if len(vcpus) != 2 or a is None or b is None or b["ts"] <= a["ts"] or a["pid"] != b["pid"] \
            or any(t not in a["threads"] or t not in b["threads"] for t in vcpus):
        return None
    run = sum(b["threads"][t][1] - a["threads"][t][1] for t in vcpus)
    res = {"vcpu_host_run_pct": 100 * run / ((b["ts"] - a["ts"]) * 1e9) / len(vcpus)}
    probes = [r["probe_ns"] for r in samples if "probe_ns" in r and a["ts"] < r["ts"] <= b["ts"]]
    if probes and median:
        res["host_probe_x_median"] = statistics.fmean(probes) / median
    res.update(jit_span(samples, t0, t1))
    return res


# --- analysis -----------------------------------------------------------------------
def jsonl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except FileNotFoundError:
        pass
    return out


def mean(xs):
    return statistics.fmean(xs) if xs else None


def window_stats(kv, batch, lo, hi, slices=(), counters=()):
    k = [r for r in kv if "ops_s" in r and "t" in r and lo <= r["ts"] - 0.5 <= hi]
    b = [r for r in batch if "mb_s" in r and "t" in r and lo <= r["ts"] - 0.5 <= hi]
    res = {
        "seconds": len(k),
        "kv_ops_s": mean([r["ops_s"] for r in k]),
        # per-second quantiles: the median of p50s, the mean of p99s, and the
        # median of p99s (the typical second's tail: a few seconds in which
        # the emulated guest stalls for 100-300 ms, under every policy alike,
        # move the mean of p99s by milliseconds and not the median)
        "kv_p50_us": statistics.median([r["p50_us"] for r in k]) if k else None,
        "kv_p99_us": mean([r["p99_us"] for r in k]),
        "kv_p99_med_us": statistics.median([r["p99_us"] for r in k]) if k else None,
        "kv_p999_us": mean([r["p999_us"] for r in k]),
        "batch_mb_s": mean([r["mb_s"] for r in b]) if b else None,
    }
    res.update(unit_stats(kv, batch, slices, lo, hi) or unit_stats(kv, batch, counters, lo, hi, whole=True)
               or dict.fromkeys(UNIT_KEYS))
    if slices:
        res["kv_low_events"] = low_events(slices, lo, hi)
    if any("probe_hist" in r for r in k):
        res.update(probe_stats(k))
    return res


def hist_quantile(hist, q):
    """The q-quantile of a histogram {upper_ns: count}: the upper edge of the
    bucket holding the ceil(q * n)-th value, as mcload's Histogram::quantile
    takes it (None when empty)."""
    n = sum(hist.values())
    if not n:
        return None
    want, seen = math.ceil(q * n), 0
    for upper in sorted(hist):
        seen += hist[upper]
        if seen >= want:
            return upper
    return max(hist)


def probe_stats(seconds):
    """mcload's open-loop probe over a window (its per-second lines): the
    operations, and the p99 and p50 of all of them, from the seconds'
    histograms merged into one (latency from each operation's due time)."""
    hist = {}
    for r in seconds:
        for upper, count in r.get("probe_hist") or ():
            hist[upper] = hist.get(upper, 0) + count
    p99, p50 = hist_quantile(hist, 0.99), hist_quantile(hist, 0.5)
    return {"probe_ops": sum(hist.values()), "probe_errors": sum(r.get("probe_errors", 0) for r in seconds),
            "kv_p99_run_us": p99 / 1000 if p99 is not None else None,
            "kv_p50_run_us": p50 / 1000 if p50 is not None else None}


# Figures per unit of work (emulation-robust: a slower emulated CPU does
# fewer operations, and these scale with them): workload.slice's memory
# PSI "some" (ms), major faults and anon refaults, and the guest's swap-ins
# per 1,000 operations of the workload; the batch job's MB read per second
# of batch.slice's CPU time.
UNIT_KEYS = ("kv_stall_ms_per_kop", "kv_majflt_per_kop", "kv_refault_anon_per_kop", "swapin_per_kop",
             "batch_mb_per_cpu_s")


def unit_stats(kv, batch, samples, lo, hi, whole=False):
    """UNIT_KEYS between the first sample at or after lo and the last at or
    before hi (the per-second sampler's lines, which carry the slices'
    counters from 2026-11-26 on), or with whole, between the first and last
    sample whatever lo and hi (counters.jsonl: the whole batch run). None
    without two samples that carry the counters."""
    samples = [r for r in samples if "ts" in r and "psi_some_us" in r.get("workload", {})]
    if not whole:
        samples = [r for r in samples if lo <= r["ts"] <= hi]
    if len(samples) < 2 or samples[-1]["ts"] <= samples[0]["ts"]:
        return None
    a, z = samples[0], samples[-1]
    ops = sum(r["ops_s"] for r in kv if "ops_s" in r and "t" in r and a["ts"] < r["ts"] <= z["ts"])
    mb = sum(r["mb_s"] for r in batch if "mb_s" in r and "t" in r and a["ts"] < r["ts"] <= z["ts"])

    def per_kop(x, y):
        return 1000 * (y - x) / ops if ops and x is not None and y is not None else None
    wa, wz = a["workload"], z["workload"]
    swap_a = a.get("vm", a).get("pswpin")
    swap_z = z.get("vm", z).get("pswpin")
    cpu = (z.get("batch", {}).get("cpu_usec", 0) - a.get("batch", {}).get("cpu_usec", 0)) / 1e6 \
        if "cpu_usec" in a.get("batch", {}) and "cpu_usec" in z.get("batch", {}) else None
    return {"kv_stall_ms_per_kop": per_kop(wa["psi_some_us"] / 1000, wz["psi_some_us"] / 1000),
            "kv_majflt_per_kop": per_kop(wa.get("pgmajfault"), wz.get("pgmajfault")),
            "kv_refault_anon_per_kop": per_kop(wa.get("refault_anon"), wz.get("refault_anon")),
            "swapin_per_kop": per_kop(swap_a, swap_z),
            "batch_mb_per_cpu_s": mb / cpu if cpu else None}


def burst_stats(kv, samples, bursts, lo, hi):
    """The burst scenario's figures over the bursts (burster's lines) that
    start in [lo, hi], each burst from its start to its end (allocation,
    touch, hold, free): the mean time to touch its memory, workload.slice's
    memory PSI "full" (ms) per burst, from the sampler's last line at or
    before its start to its first at or after its end (an interval that
    errs towards counting more: the same for every policy), and the p99 of
    every probe operation in the seconds within a burst. {} without bursts."""
    bs = [b for b in bursts if "burst" in b and lo <= b["ts"] <= hi]
    if not bs:
        return {}
    lines = [r for r in samples if "ts" in r and "psi_full_us" in r.get("workload", {})]
    full = []
    for b in bs:
        a = next((r for r in reversed(lines) if r["ts"] <= b["ts"]), None)
        z = next((r for r in lines if r["ts"] >= b["end_ts"]), None)
        if a and z:
            full.append((z["workload"]["psi_full_us"] - a["workload"]["psi_full_us"]) / 1000)
    inside = [r for r in kv if "t" in r and any(b["ts"] <= r["ts"] - 0.5 <= b["end_ts"] for b in bs)]
    probe = probe_stats(inside) if any("probe_hist" in r for r in inside) else {}
    return {"bursts": len(bs), "burst_touch_ms": mean([b["touch_ms"] for b in bs]),
            "burst_touch_max_ms": max(b["touch_ms"] for b in bs),
            "burst_full_ms": mean(full), "kv_p99_burst_us": probe.get("kv_p99_run_us")}


def low_events(samples, lo, hi):
    """workload.slice's memory.events `low` count between the first and last
    of the sampler's lines in [lo, hi] (reclaim that took from it while it
    was within memory.low); None in runs whose sampler did not read it."""
    xs = [r["workload"]["events_low"] for r in samples
          if "ts" in r and lo <= r["ts"] <= hi and "events_low" in r.get("workload", {})]
    return xs[-1] - xs[0] if len(xs) >= 2 else None


def batch_stops(batch, slices, t0, t1, host):
    """The batch job's stops between t0 and t1 (its lines, the sampler's lines):
    STOP_MIN_S or more seconds in a row in which it read under stop_mb_s, each with
    the guest's memory and I/O PSI "some" over it (% of the time) and, with the
    host's samples, whether the host ran the vCPUs meanwhile and how fast
    (host_span). A stop while the host ran both vCPUs at its usual speed is the
    guest's own doing."""
    secs = [r for r in batch if "mb_s" in r and "t" in r and t0 <= r["ts"] - 0.5 <= t1]
    sampler = [r for r in slices if "ts" in r and "psi_mem_us" in r]
    lim = common.stop_mb_s(secs[0].get("prog")) if secs else 1.0
    stretches, cur = [], []
    for r in secs + [None]:
        if r is not None and r["mb_s"] < lim:
            cur.append(r)
            continue
        if len(cur) >= STOP_MIN_S:
            stretches.append(cur)
        cur = []
    out = []
    for c in stretches:
        # cacheread stamps a second when it reports it: the stop is the
        # second before its first line to its last line
        a_ts, b_ts = c[0]["ts"] - 1, c[-1]["ts"]
        stop = {"from_s": round(a_ts - t0, 1), "seconds": len(c)}
        # From the line before the last one at or before the stop (a line's
        # PSI is read after its timestamp, as late as the next line's: see
        # sampler_psi_pct in the guest script) to the first one after it.
        before = [r for r in sampler if r["ts"] <= a_ts]
        sa = before[-2] if len(before) >= 2 else None
        sb = next((r for r in sampler if r["ts"] >= b_ts), None)
        if sa and sb and sb["ts"] > sa["ts"]:
            span_us = (sb["ts"] - sa["ts"]) * 1e6
            stop["mem_psi_pct"] = 100 * (sb["psi_mem_us"]["some"] - sa["psi_mem_us"]["some"]) / span_us
            if "psi_io_us" in sa and "psi_io_us" in sb:
                stop["io_psi_pct"] = 100 * (sb["psi_io_us"]["some"] - sa["psi_io_us"]["some"]) / span_us
        if host:
            stop.update(host_span(*host, a_ts, b_ts) or {})
        out.append(stop)
    return out


def merged_jsonl(path):
    """One object from a file of JSON lines written a key or a few at a time
    (meta.json, guest.json)."""
    out = {}
    for m in jsonl(path):
        out.update(m)
    return out


def set_aside_stops(d, host):
    """batch_stops of a run set aside (not analysed otherwise)."""
    meta = merged_jsonl(os.path.join(d, "meta.json"))
    t0, t1 = meta.get("batch_start_ts"), meta.get("batch_end_ts")
    if t0 is None or t1 is None:
        return []
    return batch_stops(jsonl(os.path.join(d, "batch.jsonl")), jsonl(os.path.join(d, "slices.jsonl")), t0, t1, host)


# The windows a run's figures are taken over, each [lo, hi] in the guest's
# time: "window" from RAMP_S s after the batch starts to its end; in phase
# scenarios "window" ends at the change, and "window_after" (from
# PHASE_SETTLE_S s after it), "window_late" (the last LATE_S s of that) and
# "window_all" (the whole run, as "window" elsewhere) follow.
WINDOWS = {"window": "whole run", "window_all": "whole run", "window_after": "after the change",
           "window_late": f"last {LATE_S} s", "life": "life"}


def windows(t0, t1, shrink):
    if not shrink:
        return {"window": (t0 + RAMP_S, t1)}
    after = shrink + common.PHASE_SETTLE_S
    return {"window": (t0 + RAMP_S, shrink), "window_after": (after, t1),
            "window_late": (max(after, t1 - LATE_S), t1), "window_all": (t0 + RAMP_S, t1)}


def memprotd_life(d):
    """memprotd's CPU over its whole life from memprotd-cpu.jsonl (lines
    start, startup, stop): the start-up's CPU seconds and span, and the rest
    as % of one vCPU (the protocol's target). None without the file or a
    stop line."""
    at = {r.get("label"): r for r in jsonl(os.path.join(d, "memprotd-cpu.jsonl"))}
    start, up, stop = at.get("start"), at.get("startup"), at.get("stop")
    if not start or not stop or not up or stop["ts"] <= up["ts"]:
        return None
    hz = stop.get("hz") or 100
    rest_s = (stop["ticks"] - up["ticks"]) / hz
    return {"memprotd_startup_s": up["ts"] - start["ts"], "memprotd_startup_cpu_s": up["ticks"] / hz,
            "memprotd_life_s": stop["ts"] - start["ts"], "memprotd_cpu_s": stop["ticks"] / hz,
            "memprotd_cpu_pct": 100 * rest_s / (stop["ts"] - up["ts"])}


def memprotd_config(d):
    """The configuration memprotd ran with (memprotd-config/ in the run):
    path relative to its config dir → text; None without it."""
    top = os.path.join(d, "memprotd-config")
    if not os.path.isdir(top):
        return None
    out = {}
    for root, _, files in os.walk(top):
        for f in files:
            with open(os.path.join(root, f)) as fh:
                out[os.path.relpath(os.path.join(root, f), top)] = fh.read()
    return dict(sorted(out.items()))


def sampler_gap(slices, t0, t1):
    """The longest gap in the bench's own per-second sampler around the batch
    run, s, and the share of the guest's CPU time the kernel accounted in it
    (well under 100%: the emulated CPUs took no timer ticks, i.e. ran with
    interrupts off or not at all; None without CPU counters)."""
    samples = [r for r in slices if "ts" in r and t0 - 2 <= r["ts"] <= t1 + 2]
    gap, gap_ticks_pct = 0.0, None
    with_cpu = [r for r in samples if "cpu" in r]
    rate = None
    if len(with_cpu) >= 2 and with_cpu[-1]["ts"] > with_cpu[0]["ts"]:
        rate = (sum(with_cpu[-1]["cpu"]) - sum(with_cpu[0]["cpu"])) / (with_cpu[-1]["ts"] - with_cpu[0]["ts"])
    for a, b in zip(samples, samples[1:]):
        if b["ts"] - a["ts"] > gap:
            gap = b["ts"] - a["ts"]
            if rate and "cpu" in a and "cpu" in b:
                gap_ticks_pct = 100 * (sum(b["cpu"]) - sum(a["cpu"])) / gap / rate
            else:
                gap_ticks_pct = None
    return gap, gap_ticks_pct


def counter_deltas(s, e, batch):
    """Both slices' counter deltas between the snapshots s and e of the batch
    run (counters.jsonl), the guest's swap-ins and -outs, and the batch job's
    file refaults and evictions per page it read. On MGLRU, refaults count
    only when the shadow entry's generation is still the oldest (6.1), so
    working-set aging (more generations) lowers the count without changing
    the I/O: the evictions per read say that."""
    def delta(sl, k):
        return e[sl][k] - s[sl][k]
    out = {
        sl: {
            "psi_some_ms": delta(sl, "psi_some_us") / 1000, "psi_full_ms": delta(sl, "psi_full_us") / 1000,
            "refault_anon": delta(sl, "refault_anon"), "refault_file": delta(sl, "refault_file"),
            "pgmajfault": delta(sl, "pgmajfault"), "events_low": delta(sl, "events_low"),
            "oom_kill": delta(sl, "oom_kill"),
            "end_current_mb": e[sl]["current"] / 2**20, "end_low_mb": e[sl]["low"] / 2**20,
            "end_min_mb": e[sl]["min"] / 2**20, "end_swap_mb": e[sl]["swap"] / 2**20,
        } for sl in ("workload", "batch")}
    out["pswpin"] = e["pswpin"] - s["pswpin"]
    out["pswpout"] = e["pswpout"] - s["pswpout"]
    reads = next((r["reads"] for r in batch if r.get("summary") and "reads" in r), None) \
        or sum(r.get("iops", 0) for r in batch if "t" in r)
    b = out["batch"]
    b["refault_file_per_read"] = b["refault_file"] / reads if reads else None
    b["pgsteal_per_read"] = (e["batch"]["pgsteal"] - s["batch"]["pgsteal"]) / reads \
        if reads and "pgsteal" in e["batch"] else None
    return out


def kv_sched(s, e, kv, host):
    """kvload's CPU between the snapshots s and e: on a CPU and waiting for
    one (% of one vCPU), its switches, and its operations per second on a
    CPU (if they are as alone, what kvload lost beside the batch job was CPU
    time, not speed on the CPU); with the host's samples, its operations per
    second its vCPU really ran (its CPU time scaled by the share of the
    vCPUs' busy time the host ran them: an estimate, both vCPUs' mean). None
    unless the same kvload, with the same threads, was there at both ends."""
    ks, ke = s.get("kv_sched") or {}, e.get("kv_sched") or {}
    if not (ks.get("pid") and ks.get("pid") == ke.get("pid") and ks.get("threads") == ke.get("threads")
            and e["ts"] > s["ts"]):
        return None
    span = e["ts"] - s["ts"]
    run_s = (ke["run_ns"] - ks["run_ns"]) / 1e9
    ops = sum(r["ops_s"] for r in kv if "ops_s" in r and "t" in r and s["ts"] < r["ts"] <= e["ts"])
    out = {
        "kv_cpu_pct": 100 * run_s / span,
        "kv_wait_pct": 100 * (ke["wait_ns"] - ks["wait_ns"]) / 1e9 / span,
        "kv_ops_per_cpu_s": ops / run_s if run_s > 0 else None,
        "kv_nvcs_s": (ke["nvcs"] - ks["nvcs"]) / span, "kv_vcs_s": (ke["vcs"] - ks["vcs"]) / span,
        "ctxt_s": (e["ctxt"] - s["ctxt"]) / span,
        "tlb_shootdowns_s": (e["tlb_shootdowns"] - s["tlb_shootdowns"]) / span,
    }
    hw = host and host_vcpu_window(*host, s["ts"], e["ts"])
    if hw:
        out.update(hw)
        out["kv_ops_per_host_cpu_s"] = ops / (run_s * hw["vcpu_host_share"]) \
            if run_s > 0 and hw["vcpu_host_share"] else None
    return out


def counter_figures(counters, kv, batch, host):
    """From counters.jsonl (the batch run's first and last snapshot): the
    counter deltas, kvload's CPU and memprotd's CPU over the batch run (clock
    ticks of 10 ms); {} without two snapshots."""
    if len(counters) < 2:
        return {}
    s, e = counters[0], counters[-1]
    out = {"counters": counter_deltas(s, e, batch)}
    sched = kv_sched(s, e, kv, host)
    if sched is not None:
        out["sched"] = sched
    if s.get("memprotd_cpu_ticks") is not None and e.get("memprotd_cpu_ticks") is not None:
        out["memprotd_cpu_s"] = (e["memprotd_cpu_ticks"] - s["memprotd_cpu_ticks"]) / 100
    return out


def memprotd_dump_ticks(d):
    """What memprotd's Dump said at the end of the run (its whole life, not
    only the batch) of its ticks: how many, how many ran early, their CPU
    time; None without dump.json."""
    try:
        with open(os.path.join(d, "dump.json")) as f:
            dump = json.load(f)
        dump = dump["data"][0] if isinstance(dump, dict) and "data" in dump else dump
        dump = json.loads(dump) if isinstance(dump, str) else dump
        if isinstance(dump, dict) and isinstance(dump.get("ticks"), dict):
            return dump["ticks"]
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return None


def run_series(kv, batch, slices, t0, t1, shrink):
    """Per-second series relative to the batch start (for the chart and the JSON)."""
    return {
        "kv": [[round(r["ts"] - 0.5 - t0, 1), r["ops_s"], r["p99_us"]] for r in kv if "ops_s" in r and "t" in r],
        "batch": [[round(r["ts"] - 0.5 - t0, 1), r["mb_s"]] for r in batch if "mb_s" in r and "t" in r],
        "slices": [[round(r["ts"] - t0, 1), r.get("workload", {}).get("low", 0) >> 20,
                    r.get("workload", {}).get("current", 0) >> 20, r.get("batch", {}).get("current", 0) >> 20]
                   for r in slices],
        "shrink_t": round(shrink - t0, 1) if shrink else None,
        "duration": round(t1 - t0, 1),
    }


def analyze_run(d, host=None):
    """One run's figures from its directory d: per window (window_stats; the
    warm-up before the batch as "pre", kvload alone in the same run, an
    in-run baseline that cancels slow drift of the host's speed), stalls,
    the batch job's stops, counters, memprotd's account, life and
    configuration, and the per-second series."""
    meta = merged_jsonl(os.path.join(d, "meta.json"))
    if meta.get("skipped"):
        return {"policy": meta.get("policy"), "run": meta.get("run"), "skipped": meta["skipped"]}
    kv = jsonl(os.path.join(d, "kv.jsonl"))
    batch = jsonl(os.path.join(d, "batch.jsonl"))
    t0, t1 = meta.get("batch_start_ts"), meta.get("batch_end_ts")
    if t0 is None or t1 is None:
        return {"policy": meta.get("policy"), "run": meta.get("run"), "skipped": "incomplete run"}
    shrink = meta.get("shrink_ts")
    res = {"policy": meta["policy"], "run": meta["run"], "settle_s": meta.get("settle_s"),
           "memprotd_failed": meta.get("memprotd_failed"), "soft_lockups": meta.get("soft_lockups"),
           "memprotd_writes": meta.get("memprotd_writes"), "memprotd_writes_batch": meta.get("memprotd_writes_batch")}
    slices = jsonl(os.path.join(d, "slices.jsonl"))
    counters = jsonl(os.path.join(d, "counters.jsonl"))
    bursts = jsonl(os.path.join(d, "burst.jsonl"))
    res["pre"] = window_stats(kv, [], t0 - (meta.get("warmup") or 6), t0)
    for win, (lo, hi) in windows(t0, t1, shrink).items():
        # counters.jsonl spans the whole batch run: the fallback of the whole-run window only
        whole = win == ("window_all" if shrink else "window")
        res[win] = window_stats(kv, batch, lo, hi, slices, counters if whole else ())
        res[win].update(burst_stats(kv, slices, bursts, lo, hi))
    # seconds in which kvload completed nothing
    res["kv_stall_s"] = sum(1 for r in kv if "ops_s" in r and "t" in r and t0 <= r["ts"] - 0.5 <= t1
                            and r["ops_s"] == 0)
    res["sampler_gap_s"], res["sampler_gap_ticks_pct"] = sampler_gap(slices, t0, t1)
    res["batch_stops"] = batch_stops(batch, slices, t0, t1, host)
    res.update(counter_figures(counters, kv, batch, host))
    ticks, life, config = memprotd_dump_ticks(d), memprotd_life(d), memprotd_config(d)
    if ticks is not None:
        res["memprotd_ticks"] = ticks
    if life:
        res["life"] = life
    if config is not None:
        res["memprotd_config"] = config
    res["series"] = run_series(kv, batch, slices, t0, t1, shrink)
    return res


def analyze(stamp_dir):
    scenarios = {}
    for sc in sorted(os.listdir(stamp_dir)):
        p = os.path.join(stamp_dir, sc)
        if not os.path.isdir(p) or not os.path.exists(os.path.join(p, "guest.json")):
            continue
        guest = merged_jsonl(os.path.join(p, "guest.json"))
        dirs = [r for r in sorted(os.listdir(p)) if os.path.isdir(os.path.join(p, r))]
        # QEMU's threads on the host (boots from 2026-11-25-6 on)
        samples = [r for r in jsonl(os.path.join(p, "host-qemu.jsonl")) if r.get("threads")]
        host = (samples, vcpu_threads(samples), probe_median(samples)) if samples else None
        # A run whose batch job stalled was run again; the stalled one is kept
        # for diagnosis (stall-diag.txt) but says nothing about its policy.
        runs, stalled, recounted, last_invalid, stalled_stops = [], [], [], [], {}
        for r in dirs:
            try:
                with open(os.path.join(p, r, "invalid.txt")) as fh:
                    why = fh.read().strip()
            except OSError:
                why = None
            if ".stalled" not in r:
                runs.append(analyze_run(os.path.join(p, r), host))
                # Invalid on its third try too: counted, since no valid run
                # of that round is left, and listed.
                if why is not None:
                    last_invalid.append(f"{r} ({why})")
                continue
            why = why if why is not None else "stalled"
            if why.startswith(INVALID_REASONS):
                stalled.append(f"{r} ({why})")
                stalled_stops[r] = set_aside_stops(os.path.join(p, r), host)
            else:
                # Set aside by an earlier, wider rule (a workload idle for a
                # few seconds): under memory pressure that is a result, so the
                # run counts like another round.
                runs.append(analyze_run(os.path.join(p, r), host))
                recounted.append(f"{r} ({why})")
        scenarios[sc] = {"guest": guest, "runs": runs, "stalled_runs": stalled, "stalled_stops": stalled_stops,
                         "recounted_runs": recounted,
                         "invalid_counted_runs": last_invalid}
    return scenarios


def policy_means(runs):
    """Per policy: the mean over its runs (rounds) of each window figure."""
    by = {}
    for r in runs:
        if r.get("skipped"):
            by.setdefault(r["policy"], {"skipped": r["skipped"]})
            continue
        by.setdefault(r["policy"], {"runs": []})
        by[r["policy"]].setdefault("runs", []).append(r)
    out = {}
    for pol, v in by.items():
        rs = v.get("runs") or []
        if not rs:
            out[pol] = {"skipped": v.get("skipped", "no run")}
            continue
        agg = {"n": len(rs)}
        for w in ("pre", "window", "window_after", "window_late", "window_all", "life"):
            if any(w in r for r in rs):
                # every run's keys: a figure some runs lack (no burst in one) still averages over the rest
                keys = dict.fromkeys(k for r in rs for k in (r.get(w) or {}))
                agg[w] = {k: mean([(r.get(w) or {})[k] for r in rs if (r.get(w) or {}).get(k) is not None])
                          for k in keys}
        if "counters" in rs[0]:
            agg["counters"] = {sl: {k: mean([r["counters"][sl][k] for r in rs if r["counters"][sl].get(k) is not None])
                                    for k in rs[0]["counters"][sl]}
                               for sl in ("workload", "batch")}
            agg["counters"]["pswpin"] = mean([r["counters"]["pswpin"] for r in rs])
            agg["counters"]["pswpout"] = mean([r["counters"]["pswpout"] for r in rs])
        sched = [r["sched"] for r in rs if r.get("sched")]
        if sched:
            agg["sched"] = {k: mean([x[k] for x in sched if x.get(k) is not None])
                            for k in dict.fromkeys(k for x in sched for k in x)}
        agg["memprotd_writes"] = mean([r["memprotd_writes"] for r in rs if r.get("memprotd_writes") is not None])
        agg["memprotd_writes_batch"] = mean([r["memprotd_writes_batch"] for r in rs
                                             if r.get("memprotd_writes_batch") is not None])
        agg["memprotd_cpu_s"] = mean([r["memprotd_cpu_s"] for r in rs if r.get("memprotd_cpu_s") is not None])
        agg["memprotd_failed"] = next((r["memprotd_failed"] for r in rs if r.get("memprotd_failed")), None)
        agg["soft_lockups"] = sum(r.get("soft_lockups") or 0 for r in rs)
        agg["kv_stall_s"] = mean([r["kv_stall_s"] for r in rs if r.get("kv_stall_s") is not None])
        agg["sampler_gap_s"] = max((r.get("sampler_gap_s") or 0 for r in rs), default=None)
        agg["kv_stall_runs"] = sum(1 for r in rs if (r.get("kv_stall_s") or 0) >= 5)
        agg["settle_s"] = mean([r["settle_s"] for r in rs if r.get("settle_s") is not None])
        out[pol] = agg
    return out


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b

# --- targets ------------------------------------------------------------------------
# Figures where less is better: a "better static" is the lower of the two.
LOWER_IS_BETTER = ("kv_p99_us", "kv_p99_med_us", "kv_p50_us", "kv_p999_us", "kv_p99_run_us",
                   "kv_low_events", "burst_touch_ms", "burst_touch_max_ms", "burst_full_ms",
                   "kv_p99_burst_us") + UNIT_KEYS[:4]
STATICS = ("static-75", "static-250M", "static-min-75")
REF_UNHARMED = "cpu-ref"  # kvload "unharmed": ÷ cpu-ref (the batch job's CPU cannot be given back)


def scenario_windows(sc):
    return ["window_all", "window_after", "window_late", "window"] if sc.startswith("phase") else ["window"]


def window_label(sc, win):
    return "before the change" if win == "window" and sc.startswith("phase") else WINDOWS[win]


def target_specs(sc):
    """The targets of scenario sc in results without a protocol (issues 7,
    29, 30), each evaluated over every window of the scenario."""
    specs = []
    if sc.startswith("burst"):
        # issue 40: bursts stall less with trimming than without (burst-trim
        # pairs the two), memcached's latency during bursts no worse than under
        # the better static, fio unharmed
        specs = [("burst_full_ms", "memprotd-notrim", "<=", 0.5)] if sc == "burst-trim" else \
            [("kv_p99_burst_us", STATICS, "<=", 1.1), ("batch_mb_s", "none", ">=", 0.9)]
        return [Target(k, "memprotd", den, op, goal) for k, den, op, goal in specs]
    if sc == "anon-batch":
        # issue 40: memcached protected where the kernel alone swaps it, and
        # the batch job's work per CPU second no worse than beside a static
        # floor (memprotd holds the working set only, static-min-75 75%)
        specs = [("kv_ops_s", "none", ">=", 1.2), ("kv_ops_s", STATICS, ">=", 0.95),
                 ("kv_refault_anon_per_kop", "none", "<=", 0.1), ("kv_p99_run_us", STATICS, "<=", 1.1),
                 ("batch_mb_per_cpu_s", "static-min-75", ">=", 0.95)]
        return [Target(k, "memprotd", den, op, goal) for k, den, op, goal in specs]
    if sc.startswith("memcached"):
        specs = [("kv_refault_anon_per_kop", "none", "<=", 0.1), ("kv_ops_s", STATICS, ">=", 0.95),
                 ("kv_p99_us", STATICS, "<=", 1.1), ("kv_p99_med_us", STATICS, "<=", 1.1),
                 ("batch_mb_s", "none", ">=", 0.9), ("kv_ops_s", REF_UNHARMED, ">=", 0.85)]
        return [Target(k, "memprotd", den, op, goal) for k, den, op, goal in specs]
    if sc.startswith(("reuse", "phase")):  # the emulation-robust figures first
        specs += [("kv_stall_ms_per_kop", "none", "<=", 0.5), ("kv_majflt_per_kop", "none", "<=", 0.5)]
    specs += [("kv_ops_s", REF_UNHARMED, ">=", 0.85), ("kv_ops_s", STATICS, ">=", 0.95)]
    if sc.startswith("stream"):
        specs.append(("batch_mb_s", "none", ">=", 0.9))
    if sc.startswith("reuse"):
        specs += [("kv_ops_s", "none", ">=", 1.5), ("kv_p99_us", "none", "<=", 0.5), ("batch_mb_s", "none", ">=", 0.8)]
    out = [Target(k, "memprotd", den, op, goal) for k, den, op, goal in specs]
    if sc.startswith("phase"):
        out.append(Target("batch_mb_s", "memprotd", "static-75", ">=", 1.2, note="the issue's goal is after the change"))
    return out


FIGURE_NAMES = {"kv_ops_s": "kvload ops/s", "kv_p99_run_us": "p99 of every probe operation (due time)",
                "memprotd_cpu_pct": "memprotd CPU % of a vCPU after start-up", "kv_p99_us": "kvload p99", "kv_p99_med_us": "kvload p99 (median second)", "batch_mb_s": "batch MB/s",
                "kv_stall_ms_per_kop": "kvload memory stall ms per 1,000 ops",
                "kv_majflt_per_kop": "kvload major faults per 1,000 ops",
                "kv_refault_anon_per_kop": "kvload anon refaults per 1,000 ops",
                "swapin_per_kop": "swap-ins per 1,000 ops", "batch_mb_per_cpu_s": "batch MB per CPU s",
                "kv_low_events": "workload.slice memory.events low",
                "burst_full_ms": "workload.slice memory stall (full) ms per burst",
                "burst_touch_ms": "time to touch a burst's memory, ms",
                "kv_p99_burst_us": "p99 of the probe operations during bursts (due time)"}


def figure(run_or_policy, win, key):
    return (run_or_policy.get(win) or {}).get(key)


def denominator(den, key):
    """rows (round → {policy: run or policy means}) → the denominator's
    figure; for a tuple of statics the better static's mean; 1 for None (an
    absolute target)."""
    pick = min if key in LOWER_IS_BETTER else max
    pols = list(den) if isinstance(den, tuple) else [den]

    def f(rows, win):
        if den is None:
            return 1.0
        means = []
        for p in pols:
            xs = [figure(r[p], win, key) for r in rows if p in r]
            if xs and all(x is not None for x in xs):
                means.append(sum(xs) / len(xs))
        return pick(means) if means and (len(means) == len(pols) or isinstance(den, tuple)) else None
    return f


def target_value(v, rows, t, win, den_f):
    """The point value of target t in window win: the ratio of the policies'
    means; in results of several boots, over the paired rounds (as its
    interval), not over policy means that may span different boots."""
    pols = v.get("policies", {})
    if t.num not in pols or pols[t.num].get("skipped"):
        return None
    if any("boot" in r for r in v.get("runs", [])):
        return ratio_of_means(rows, lambda r: figure(r[t.num], win, t.figure), lambda rs: den_f(rs, win)) \
            if rows else None
    return ratio_of_means([pols[t.num]], lambda r: figure(r, win, t.figure), lambda rs: den_f([pols], win))


def evaluate_target(sc, v, win, t, boots_needed=None):
    """Target t over window win of scenario v: value, 95% interval, verdict.
    boots_needed (protocol results): fewer boots than that give no verdict
    yet ("pending")."""
    den_name = "better static" if isinstance(t.den, tuple) else t.den or "absolute"
    den_f = denominator(t.den, t.figure)
    pols = v.get("policies", {})
    dens = t.den if isinstance(t.den, tuple) else () if t.den is None else (t.den,)
    present = [p for p in dens if any(r.get("policy") == p and not r.get("skipped") for r in v.get("runs", []))]
    rows = rounds_of(v.get("runs", []), [t.num] + present) if present or t.den is None else []
    value = target_value(v, rows, t, win, den_f)
    ci = bootstrap_ci(rows, lambda r: figure(r[t.num], win, t.figure), lambda rs: den_f(rs, win)) \
        if value is not None else None
    num_mean = figure(pols[t.num], win, t.figure) if t.num in pols else None
    note = t.note
    if value is None and num_mean is not None and t.den is not None and den_f([pols], win) == 0:
        # e.g. no anon refault at all under none: there is no ratio to judge
        note = "; ".join(x for x in (note, f"{den_name} is 0: no ratio ({t.num}: {num_mean:.3g})") if x)
    missing = ([] if t.num in pols and not pols[t.num].get("skipped") else [t.num]) + \
        ([] if present or t.den is None else [den_name])
    if value is None and missing:
        note = "; ".join(x for x in (note, f"not run: {', '.join(missing)}") if x)
    label = f"{FIGURE_NAMES[t.figure]} {t.num}" + ("" if t.den is None else f" / {den_name}")
    out = {"target": f"{sc} [{window_label(sc, win)}]: {label}",
           "scenario": sc, "window": win, "figure": t.figure, "value": value, "goal": f"{t.op} {t.goal}",
           "pass": None if value is None else (value >= t.goal if t.op == ">=" else value <= t.goal),
           "ci95": ci, "verdict": verdict(ci, t.op, t.goal), "rounds": len(rows), "note": note}
    if boots_needed is not None:
        boots = len({r.get("boot") for r in v.get("runs", []) if not r.get("skipped")})
        out["primary"] = t.primary
        out["boots"] = boots
        if boots < boots_needed:
            out["verdict"] = f"pending ({boots} of {boots_needed} boots)"
    return out


def evaluate_targets(summary, protocol_version=None):
    """Every target of every scenario over every window (or the target's
    own windows), with the point value (the ratio of the policies' means;
    over several boots, over the paired rounds), a 95% interval (bootstrap
    over boots, then rounds) and a verdict (stats.verdict). With a protocol
    version, its targets, primary and secondary marked, and no verdict
    before all its boots are in."""
    out = []
    for sc, v in summary.items():
        if protocol_version:
            p = protocol.scenario(protocol_version, sc)
            specs, boots = p.targets, p.boots
        else:
            specs, boots = target_specs(sc), None
        for t in specs:
            for win in t.windows or scenario_windows(sc):
                out.append(evaluate_target(sc, v, win, t, boots))
    return out
