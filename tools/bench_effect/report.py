# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a result is written as: the result JSON, the Markdown tables, the
gnuplot chart, and the table in bench/effect/README.md."""

import json
import os
import shutil
import subprocess

from . import common
from .analysis import UNIT_KEYS, evaluate_targets, policy_means, ratio, scenario_windows, window_label
from .common import JIT_EVERY_DEFAULT, LATE_S, PROBE_SLOW, RAMP_S, SRC, STOP_MIN_S, log, ordered, stop_mb_s

def fmt(x, nd=0):
    if x is None:
        return "–"
    return f"{x:,.{nd}f}"


def fr(x):
    return "–" if x is None else f"{x:.2f}×"

# --- output -------------------------------------------------------------------------
def markdown(result):
    """The result as Markdown: the guest and method, per scenario its
    tables (scenario_markdown), then the targets."""
    L = header_markdown(result["meta"], list(result["scenarios"]))
    jit_every = result["meta"].get("jit_every") or JIT_EVERY_DEFAULT
    for sc, v in result["scenarios"].items():
        L += scenario_markdown(sc, v, jit_every)
    L += targets_table(result["targets"])
    if result.get("chart"):
        L.append(f"![ops/s, p99 and batch MB/s over time per policy]({os.path.basename(result['chart'])})")
        L.append("")
    return "\n".join(L)


def header_markdown(meta, scenarios=()):
    """The result's title, guest, rounds and method lines. The run's
    workload and batch job are named here for kvload scenarios; memcached
    scenarios name theirs in their own section (scenario_markdown)."""
    L = []
    L.append(f"## Effectiveness benchmark, {meta['date']}")
    L.append("")
    L.append(f"Guest: kernel {meta.get('kernel', '?')}, {meta.get('systemd', '?')}, MemTotal "
             f"{meta.get('mem_total_mb', 0):.0f} MiB, {meta.get('nproc', '?')} vCPUs, MGLRU {meta.get('lru_gen', '?')}, "
             f"QEMU TCG (emulated{', -cpu ' + meta['cpu'] if meta.get('cpu') else ''}"
             f"{', -accel ' + meta['accel'] if meta.get('accel') not in (None, 'tcg') else ''}). Swap: zram ({meta.get('zram_size', '?')}, lz4). "
             f"memprotd: {meta.get('memprotd_version') or 'not built'}.")
    if meta.get("memprotd_alt"):
        L.append(f"Two builds: memprotd ran `{meta.get('memprotd_binary')}`, memprotd-alt "
                 f"`{meta['memprotd_alt'].get('binary')}` ({meta['memprotd_alt'].get('version')}).")
    if meta.get("cmdline") or meta.get("clocksource"):
        L.append(f"Guest kernel command line: `{meta.get('cmdline') or '?'}`; "
                 f"clocksource {meta.get('clocksource') or '?'}.")
    if (meta.get("rounds") or 1) > 1:
        L.append(f"{meta['rounds']} rounds, the policies' order per round: {meta.get('order', 'reverse')} "
                 "(see the run names for the order each round had).")
    if meta.get("pooled_from"):
        L.append(f"Pooled from {len(meta['pooled_from'])} results, one boot each (a run's `boot` in the JSON; "
                 f"raw runs beside each): {', '.join(f'{i + 1}. `{p}`' for i, p in enumerate(meta['pooled_from']))}. "
                 "A round pairs the policies' runs of one boot; the intervals are over the rounds of all boots.")
    if scenarios and all(common.uses_memcached(sc) for sc in scenarios):
        run = (f"the workload alone for {meta.get('warmup')} s, then the batch job beside it for "
               f"{meta.get('duration')} s (each scenario names both)")
    else:
        run = (f"kvload ({meta.get('kv_size')} table, uniform keys, 90% gets) alone for "
               f"{meta.get('warmup')} s, then cacheread for {meta.get('duration')} s")
    L.append(f"Each run: {run}; figures are means over the batch "
             f"run minus its first {RAMP_S} s (phase scenarios: after the change = from {common.PHASE_SETTLE_S} s after "
             "the table was halved to the end). p50 = median of per-second p50s, p99 = mean of per-second p99s. "
             "Ratios are within this run only.")
    L.append("")
    return L


def scenario_markdown(sc, v, jit_every):
    """One scenario: its set-up, a table per window, its counters, kvload's
    CPU and the batch job's stops."""
    L = []
    pols = v["policies"]
    L.append(f"### {sc}")
    L.append("")
    g = v.get("guest") or {}
    if common.uses_memcached(sc) and "mc_rate" in g:
        batch = f"fio randread, 2 × {g['fio_size']} on the guest's disk"
        if common.batch_prog(sc) == "anonbatch":
            batch = f"anonbatch, {g.get('anon_size')} of anonymous memory touched at random"
        if sc.startswith("burst"):
            batch += (f"; every {g.get('burst_every')} s from 10 s in, burster in workload.slice allocates and "
                      f"touches {g.get('burst_size')}, holds it {g.get('burst_hold')} s and frees it")
        L.append(f"Workload: Debian's memcached (-m {g['mc_memory']}, {g['mc_fill']} of 4 KiB values) driven by "
                 f"mcload {mc_load_text(g)} ({'zipf' if sc.endswith('zipf') else 'uniform'} "
                 f"keys; \"kvload\" below is mcload); batch: {batch}.")
        L.append("")
    L += life_markdown(v.get("policies", {}))
    L.append(SCENARIO_TEXT.get(sc, ""))
    L.append("")
    g = v.get("guest", {})
    detail = f"Batch run {g.get('duration')} s"
    if sc.startswith("phase"):
        at = g.get("phase_at") if g.get("phase_at") is not None else (g.get("duration") or 0) // 2
        detail += f"; the table is halved {at} s into it"
    L.append(detail + ".")
    L.append("")
    for win in scenario_windows(sc):
        L += window_markdown(sc, pols, win)
    L.append("Kernel counters over the whole batch run (workload.slice unless noted):")
    L.append("")
    if v.get("recounted_runs"):
        L.append("Runs the guest script made again under an earlier, wider rule (a workload idle for "
                 "seconds), counted here like further rounds, since under memory pressure that is the "
                 "policy's result: " + "; ".join(v["recounted_runs"]) + ".")
        L.append("")
    if v.get("stalled_runs"):
        L.append("Runs set aside because the guest stalled (kept in the raw results, not counted; "
                 "each made again unless it says otherwise): "
                 + "; ".join(v["stalled_runs"]) + ".")
        L.append("")
    if v.get("invalid_counted_runs"):
        L.append("Runs invalid on their third try too, counted (no valid run of that round is left): "
                 + "; ".join(v["invalid_counted_runs"]) + ".")
        L.append("")
    L.append("| policy | PSI some ms | PSI full ms | refault anon | refault file | majflt | memory.events low "
             "| batch refault file (per read; evictions per read) | pswpin | pswpout | end MemoryLow MiB | end current MiB | memprotd writes (during batch) "
             "| memprotd CPU s (during batch) | guest soft lockups | kvload 0-op s per run (runs with ≥ 5) | longest sampler gap s |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pol in ordered(pols):
        p = pols.get(pol)
        if not p or p.get("skipped") or "counters" not in p:
            continue
        c, b = p["counters"]["workload"], p["counters"]["batch"]
        mw = "–" if p.get("memprotd_writes") is None else \
            f"{p['memprotd_writes']:.0f} ({p.get('memprotd_writes_batch') or 0:.0f})"
        L.append(f"| {pol} | {fmt(c['psi_some_ms'])} | {fmt(c['psi_full_ms'])} | {fmt(c['refault_anon'])} "
                 f"| {fmt(c['refault_file'])} | {fmt(c['pgmajfault'])} | {fmt(c['events_low'])} "
                 f"| {fmt(b['refault_file'])} ({fmt(b.get('refault_file_per_read'), 2)}; "
                 f"{fmt(b.get('pgsteal_per_read'), 2)}) | {fmt(p['counters']['pswpin'])} | {fmt(p['counters']['pswpout'])} "
                 f"| {fmt(c['end_low_mb'])} | {fmt(c['end_current_mb'])} | {mw} "
                 f"| {'–' if p.get('memprotd_cpu_s') is None else format(p['memprotd_cpu_s'], '.2f')} "
                 f"| {p.get('soft_lockups', 0)} "
                 f"| {fmt(p.get('kv_stall_s'))} ({p.get('kv_stall_runs', 0)}) | {fmt(p.get('sampler_gap_s'))} |")
    L.append("")
    L += sched_markdown(pols, jit_every)
    L += stops_markdown(sc, v, jit_every)
    return L


def mc_load_text(g):
    """How mcload drove memcached (the guest's settings)."""
    if g.get("mc_rate") == 0:
        probe = f", and a probe at {g['mc_probe_rate']} ops/s over {g.get('mc_probe_conns', 1)} connection(s), " \
            "open loop, latency from each probe's due time" if g.get("mc_probe_rate") else ""
        return f"closed loop over {g.get('mc_conns', 4)} connections{probe}"
    return f"at {g['mc_rate']} ops/s, open loop"


def life_markdown(pols):
    """memprotd's CPU over its whole life, per memprotd policy that recorded it."""
    rows = [(pol, p["life"]) for pol, p in pols.items() if isinstance(p, dict) and p.get("life")]
    if not rows:
        return []
    L = ["memprotd's CPU over its life (per policy the mean over its runs; start-up: its first "
         "seconds, under TCG also code translation):", "",
         "| policy | life s | start-up s | start-up CPU s | after start-up, % of a vCPU |", "|---|---:|---:|---:|---:|"]
    for pol, x in rows:
        L.append(f"| {pol} | {fmt(x.get('memprotd_life_s'))} | {fmt(x.get('memprotd_startup_s'))} "
                 f"| {fmt(x.get('memprotd_startup_cpu_s'), 2)} | {fmt(x.get('memprotd_cpu_pct'), 2)} |")
    return L + [""]


def window_markdown(sc, pols, win):
    """The policies' kvload and batch figures over window win, then per unit of work."""
    L = []
    if not any(win in p for p in pols.values()):
        return []  # a result from before this window existed
    if sc.startswith("phase"):
        L.append(window_label(sc, win).capitalize() + ":")
        L.append("")
    none = pols.get("none", {}).get(win, {})
    alone = pols.get("alone", {}).get(win, {})
    cref = pols.get("cpu-ref", {}).get(win, {})
    L.append("| policy | kv ops/s | ×none | ×alone | ×cpu-ref | ×own pre-batch | p50 µs | p99 µs | p99 median s µs | p99 ×none "
             "| p99 ×alone | p99 ×cpu-ref | batch MB/s | ×none |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pol in ordered(pols):
        p = pols.get(pol)
        if p is None:
            continue
        if p.get("skipped"):
            L.append(f"| {pol} | {p['skipped']} | | | | | | | | | | | | |")
            continue
        x = p.get(win, {})
        label = pol + (" (daemon NOT running: " + p["memprotd_failed"] + ")" if p.get("memprotd_failed") else "")
        bm = p.get("window", {}).get("batch_mb_s")
        if pol not in ("alone",) and bm is not None and bm < 1.0:
            # cacheread made (almost) no progress for the whole run:
            # seen a few times, unrelated to the policy (see README).
            label += " (batch job STALLED: run invalid)"
        L.append(f"| {label} | {fmt(x.get('kv_ops_s'))} | {fr(ratio(x.get('kv_ops_s'), none.get('kv_ops_s')))} "
                 f"| {fr(ratio(x.get('kv_ops_s'), alone.get('kv_ops_s')))} "
                 f"| {fr(ratio(x.get('kv_ops_s'), cref.get('kv_ops_s')))} "
                 f"| {fr(ratio(x.get('kv_ops_s'), p.get('pre', {}).get('kv_ops_s')))} | {fmt(x.get('kv_p50_us'), 2)} "
                 f"| {fmt(x.get('kv_p99_us'), 1)} | {fmt(x.get('kv_p99_med_us'), 1)} "
                 f"| {fr(ratio(x.get('kv_p99_us'), none.get('kv_p99_us')))} "
                 f"| {fr(ratio(x.get('kv_p99_us'), alone.get('kv_p99_us')))} "
                 f"| {fr(ratio(x.get('kv_p99_us'), cref.get('kv_p99_us')))} "
                 f"| {fmt(x.get('batch_mb_s'), 2) if pol != 'alone' else '–'} "
                 f"| {fr(ratio(x.get('batch_mb_s'), none.get('batch_mb_s'))) if pol != 'alone' else '–'} |")
    L.append("")
    L += unit_table(pols, win)
    return L


def sched_markdown(pols, jit_every):
    """kvload's CPU, the host's view and QEMU's translator, per policy (when measured)."""
    L = []
    with_sched = [pol for pol in ordered(pols) if (pols.get(pol) or {}).get("sched")]
    if not with_sched:
        return L
    L.append("kvload's CPU from the start to the end of the batch run (ramp and, in phase "
             "scenarios, both phases included; schedstat and status of its threads; % of one vCPU, "
             "which under TCG includes time the host did not run it) and the guest's context "
             "switches and TLB shootdowns:")
    L.append("")
    with_host = any("vcpu_host_wait_pct" in pols[pol]["sched"] for pol in with_sched)
    with_probe = any("host_probe_us" in pols[pol]["sched"] for pol in with_sched)
    L.append("| policy | kvload on a CPU % | waiting for a CPU % | kvload ops per CPU s | ÷ alone "
             "| involuntary switches/s | voluntary switches/s | guest context switches/s | TLB shootdowns/s |"
             + (" vCPUs on a host CPU % | vCPUs waiting for a host CPU % | ops per host-run CPU s ÷ alone |"
                if with_host else "")
             + (" host probe µs, median | mean | slow probe s % |" if with_probe else ""))
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if with_host else "")
             + ("---:|---:|---:|" if with_probe else ""))
    alone = (pols.get("alone") or {}).get("sched") or {}
    for pol in with_sched:
        x = pols[pol]["sched"]
        L.append(f"| {pol} | {fmt(x.get('kv_cpu_pct'), 1)} | {fmt(x.get('kv_wait_pct'), 1)} "
                 f"| {fmt(x.get('kv_ops_per_cpu_s'))} "
                 f"| {fr(ratio(x.get('kv_ops_per_cpu_s'), alone.get('kv_ops_per_cpu_s')))} "
                 f"| {fmt(x.get('kv_nvcs_s'), 1)} | {fmt(x.get('kv_vcs_s'), 1)} "
                 f"| {fmt(x.get('ctxt_s'))} | {fmt(x.get('tlb_shootdowns_s'), 1)} |"
                 + (f" {fmt(x.get('vcpu_host_run_pct'), 1)} | {fmt(x.get('vcpu_host_wait_pct'), 1)} "
                    f"| {fr(ratio(x.get('kv_ops_per_host_cpu_s'), alone.get('kv_ops_per_host_cpu_s')))} |"
                    if with_host else "")
                 + (f" {fmt(x.get('host_probe_us'))} | {fmt(x.get('host_probe_mean_us'))} "
                    f"| {fmt(x.get('host_probe_slow_pct'), 1)} |" if with_probe else ""))
    if with_host:
        L.append("")
        L.append(("The columns from \"vCPUs on a host CPU\" on are" if with_probe else
                  "The last three columns are")
                 + " from the host (`host-qemu.jsonl`): the schedstat of QEMU's two vCPU threads, % of the "
                 "run's time each (mean of the two). A vCPU thread the host does not run while the guest "
                 "has work for it is time the guest still counts as on a CPU; "
                 + ("\"ops per host-run CPU s\"" if with_probe else "the last column")
                 + " divides kvload's operations by its CPU time multiplied by the share of the vCPUs' "
                 "busy time the host ran them (an estimate: both vCPUs' share, not kvload's own)."
                 + (" The host probe is the host CPU time of a fixed loop the sampler runs once a second "
                    "(larger = slower; it counts time a hypervisor took from the host too, and it shares "
                    "the host's CPUs with QEMU): its median and mean over the batch run, and the share of "
                    f"seconds it took over {PROBE_SLOW}× the boot's median (per policy: the mean over "
                    "its runs)." if with_probe else ""))
    L.append("")
    with_jit = [pol for pol in with_sched if pols[pol]["sched"].get("tb_invalidate_s") is not None]
    if with_jit:
        L.append(f"QEMU's translator over the batch run (its monitor's `info jit`, read every {jit_every} s; "
                 "per policy the mean over its runs): TB flushes (all translated code discarded, every "
                 "vCPU halted meanwhile), TB invalidations (a guest page's translations dropped when the "
                 "page is written) and the guest's partial TLB flushes, and the code buffer's use at the end:")
        L.append("")
        L.append("| policy | TB flushes | TB invalidations/s | TLB flushes/s | code buffer used % |")
        L.append("|---|---:|---:|---:|---:|")
        for pol in with_jit:
            x = pols[pol]["sched"]
            L.append(f"| {pol} | {fmt(x.get('tb_flushes'), 1)} | {fmt(x.get('tb_invalidate_s'))} "
                     f"| {fmt(x.get('tlb_flush_s'))} | {fmt(x.get('code_used_pct'), 1)} |")
        L.append("")
    return L


def stops_markdown(sc, v, jit_every):
    """The batch job's stops (set-aside runs' too)."""
    L = []
    stops = [(r["run"], False, x) for r in v.get("runs", []) for x in r.get("batch_stops") or []] \
        + [(name, True, x) for name, xs in (v.get("stalled_stops") or {}).items() for x in xs]
    if not stops:
        return L
    with_host = any("vcpu_host_run_pct" in x for _, _, x in stops)
    lim = stop_mb_s(common.batch_prog(sc))
    L.append(f"The batch job's stops ({STOP_MIN_S} s or more in a row under {lim:g} MB/s; seconds from the "
             "batch run's start), with the guest's memory and I/O pressure (PSI \"some\", % of the "
             "stop, from the sampler's lines around it)"
             + (" and what the host did meanwhile: its vCPU threads' % of the time on a host CPU (mean "
                "of the two) and the host probe's mean ÷ the boot's median (1 = the host's usual speed)"
                if with_host else "") + ":")
    L.append("")
    with_jit = any("tb_flushes" in x for _, _, x in stops)
    L.append("| run | from s | seconds | memory PSI % | I/O PSI % |"
             + (" vCPUs on a host CPU % | host probe ÷ median |" if with_host else "")
             + (" QEMU s | TB flushes | TB invalidations/s | TLB flushes/s |" if with_jit else ""))
    L.append("|---|---:|---:|---:|---:|" + ("---:|---:|" if with_host else "")
             + ("---:|---:|---:|---:|" if with_jit else ""))
    for run, aside, x in stops:
        L.append(f"| {run}{' (set aside)' if aside else ''} | {fmt(x['from_s'])} | {x['seconds']} "
                 f"| {fmt(x.get('mem_psi_pct'))} | {fmt(x.get('io_psi_pct'))} |"
                 + (f" {fmt(x.get('vcpu_host_run_pct'))} | {fmt(x.get('host_probe_x_median'), 2)} |"
                    if with_host else "")
                 + (f" {fmt(x.get('jit_s'))} | {x.get('tb_flushes', '–')} | {fmt(x.get('tb_invalidate_s'))} "
                    f"| {fmt(x.get('tlb_flush_s'))} |" if with_jit else ""))
    L.append("")
    if with_jit:
        L.append("The last four columns are QEMU's translator (its monitor's `info jit`, read every "
                 f"{jit_every} s), from the reading before the stop to the one after it (\"QEMU s\" "
                 "apart): a TB flush discards all translated code and halts every vCPU meanwhile; an "
                 "invalidation drops one guest page's translations when the page is written. The "
                 "per-run rates are under \"QEMU's translator\" below the host table.")
        L.append("")
    return L

def unit_table(pols, win):
    """Figures per unit of work over window win (analysis.unit_stats), with
    each ÷ none; nothing when no policy has them."""
    rows = [pol for pol in ordered(pols) if any((pols[pol].get(win) or {}).get(k) is not None for k in UNIT_KEYS)]
    if not rows:
        return []
    none = (pols.get("none") or {}).get(win) or {}
    L = ["Per unit of work (workload.slice's memory PSI \"some\", major faults and anon refaults, and the "
         "guest's swap-ins, per 1,000 workload operations; the batch job's MB read per CPU second of batch.slice):",
         "", "| policy | stall ms/kop | ×none | majflt/kop | ×none | anon refaults/kop | ×none | swap-ins/kop "
         "| ×none | batch MB per CPU s | ×none |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for pol in rows:
        x = pols[pol].get(win) or {}
        cells = [f"{fmt(x.get(k), 2)} | {fr(ratio(x.get(k), none.get(k)))}" for k in UNIT_KEYS]
        L.append(f"| {pol} | " + " | ".join(cells) + " |")
    return L + [""]


def fci(ci):
    return "–" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def targets_table(targets):
    """The targets with their point value, 95% interval and verdict
    (stats.verdict: met or missed only when the whole interval is on one
    side of the goal)."""
    L = ["### Targets", "",
         "Measured: the ratio of the policies' means over their runs; 95% interval: a seeded bootstrap over "
         "rounds (each round's runs kept together); the verdict is met or missed only when the whole interval "
         "lies on one side of the goal (single round: no interval, not shown).", "",
         "| target | measured | 95% interval | goal | verdict | rounds | note |", "|---|---:|---:|---:|---|---:|---|"]
    if any("primary" in t for t in targets):
        L[2:2] = ["Judged by its protocol (bench/effect/PROTOCOL.md): the primary targets first; a secondary "
                  "figure is marked so and decides nothing. The interval resamples boots, then rounds within "
                  "each; no verdict before all the protocol's boots are in.", ""]
    for t in sorted(targets, key=lambda t: not t.get("primary", True)):
        v = "–" if t["value"] is None else f"{t['value']:.2f}"
        verdict = t.get("verdict", "not shown")
        name = t["target"] + (" (secondary)" if t.get("primary") is False else "")
        L.append(f"| {name} | {v} | {fci(t.get('ci95'))} | {t['goal']} "
                 f"| {'MISSED' if verdict == 'missed' else verdict} | {t.get('rounds', '–')} | {t.get('note', '')} |")
    return L + [""]


SCENARIO_TEXT = {
    "stream": "Steady mix with the single-use streamer: cacheread over a sparse file far larger than RAM.",
    "reuse": "Steady mix with a reused file working set: cacheread over a (sparse) file that does "
             "not fit beside kvload, so the kernel must trade anon against file refaults.",
    "reuse-zipf": "As `reuse`, with zipf (θ 0.8) keys in kvload: part of its table is cold, so the kernel has "
                  "anon pages it can swap out to make room for the file working set.",
    "stream-zipf": "As `stream`, with zipf (θ 0.8) keys in kvload.",
    "phase-free": "Phase change: halfway through the batch run kvload halves its key range and frees the "
                  "upper half of its table (MADV_DONTNEED); streamer as in `stream`.",
    "phase-cold": "Phase change: halfway through kvload halves its key range; the upper half stays resident "
                  "but cold (an application that does not give memory back); streamer as in `stream`.",
    "reuse-warm": "As `reuse`, with zipf (θ 0.99) keys clustered by rank in kvload: a hot head and a warm "
                  "tail whose pages are read every 10-40 s, less often than the batch job re-reads its "
                  "files, so reclaim by recency alone takes the tail (a latency-critical cache's typical shape).",
    "stream-warm": "As `stream`, with kvload's keys as in `reuse-warm`.",
    "phase-reuse": "Phase change beside the reused file working set: kvload (uniform keys) halves its key "
                   "range; the upper half stays resident but cold, so the memory it holds should flow to the "
                   "batch job, whose files do not fit.",
    "reuse-mmap": "As `reuse-warm`, with the batch job reading its reused set through a shared mapping "
                  "(an index or column store): mapped pages are not cheap cache, MGLRU ages them like anon, "
                  "so reclaim weighs them against kvload's warm tail, which it swaps to zram.",
    "phase-mmap": "As `phase-reuse`, with the batch job reading through a shared mapping as in `reuse-mmap`.",
    "burst": "memcached and fio as in `memcached`, with request spikes: on a schedule workload.slice "
             "allocates memory at once, holds it and frees it (size and times in the workload line above). "
             "Memory free at once makes a spike quick; memory that reclaim must first take from fio's cache "
             "stalls it. memprotd-notrim is memprotd without trimming.",
    "burst-trim": "As `burst`, with memprotd and memprotd-notrim only: what trimming cheap cache does for the "
                  "bursts, paired within a boot.",
    "anon-batch": "memcached beside a batch job whose working set is anonymous memory it keeps touching: "
                  "memory both need, none of it cheap cache, so only protection can say which matters. Under "
                  "MGLRU (6.3 on) memory.low only defers reclaim (a `low` event each time); memory.min holds.",
}


def chart(result, png, tmpdir):
    """gnuplot: one column per scenario, rows ops/s, p99, batch MB/s, workload MemoryLow."""
    if not shutil.which("gnuplot"):
        log("gnuplot not installed (apt-get install -y gnuplot-nox): no chart")
        return None
    scs = list(result["scenarios"].keys())
    if not scs:
        return None
    os.makedirs(tmpdir, exist_ok=True)
    colors = {"alone": "#888888", "cpu-ref": "#9467bd", "none": "#d62728", "static-75": "#1f77b4", "static-250M": "#2ca02c",
              "static-min-75": "#17becf", "memprotd": "#ff7f0e"}
    # Variants (memprotd:Budget=80%) each get their own colour, in the order ordered() lists them.
    palette = ["#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#aec7e8"]
    variants = ordered({r["policy"] for sc in scs for r in result["scenarios"][sc]["runs"]} - set(colors))
    for i, v in enumerate(variants):
        colors[v] = palette[i % len(palette)]
    rows = [("kvload ops/s", "kv", 1), ("kvload p99 (µs)", "kv", 2), ("batch MB/s", "batch", 1),
            ("workload.slice MemoryLow (MiB)", "slices", 1)]
    g = [f"set terminal pngcairo size {420 * len(scs) + 80},{250 * len(rows) + 60} font 'sans,9'",
         f"set output '{png}'", f"set multiplot layout {len(rows)},{len(scs)} title "
         f"'memprotd effectiveness {result['meta']['date']} (kernel {result['meta'].get('kernel', '?')}, TCG guest)'",
         "set key top right font ',7'", "set grid", "set xlabel 'seconds since batch start' font ',8'"]
    for ri, (title, series, col) in enumerate(rows):
        for sc in scs:
            runs = result["scenarios"][sc]["runs"]
            plots = []
            titled = set()  # one legend entry per policy, however many rounds
            for r in runs:
                if r.get("skipped") or "series" not in r:
                    continue
                if series == "batch" and r["policy"] == "alone":
                    continue
                data = r["series"][series]
                if not data:
                    continue
                f = os.path.join(tmpdir, f"{sc}-{r['run']}-{series}.dat")
                with open(f, "w") as fh:
                    for row in data:
                        fh.write(" ".join(str(x) for x in row) + "\n")
                key = "notitle" if r["policy"] in titled else f"title '{r['policy']}'"
                titled.add(r["policy"])
                plots.append(f"'{f}' using 1:{col + 1} with lines lw 1.3 lc rgb '{colors[r['policy']]}' {key}")
            g.append(f"set title '{sc}: {title}' font ',9'")
            if title.startswith("kvload p99"):
                g.append("set logscale y")
            else:
                g.append("unset logscale y")
            sh = next((r["series"].get("shrink_t") for r in runs if r.get("series", {}).get("shrink_t")), None)
            g.append("unset arrow")
            if sh:
                g.append(f"set arrow from {sh}, graph 0 to {sh}, graph 1 nohead dt 2 lc rgb '#444444'")
            g.append(f"set xrange [-15:*]")
            g.append("plot " + ", ".join(plots) if plots else "set multiplot next")
    g.append("unset multiplot")
    gp = os.path.join(tmpdir, "chart.gp")
    with open(gp, "w") as fh:
        fh.write("\n".join(g) + "\n")
    r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"gnuplot failed: {r.stderr.strip()[:500]}")
        return None
    return png


def update_readme(base, result):
    """Points bench/effect/README.md's "latest" line (between its markers)
    at the result written as BASE (.json, .md): a link, its protocol and
    kernel; the tables stay in the result's own Markdown."""
    path = os.path.join(SRC, "bench", "effect", "README.md")
    begin, end = "<!-- bench-effect: latest begin -->", "<!-- bench-effect: latest end -->"
    try:
        text = open(path).read()
    except FileNotFoundError:
        return
    if begin not in text or end not in text:
        return
    meta, name = result["meta"], os.path.basename(base)
    line = (f"Latest result: [{name}](results/{name}.md) ({meta.get('date')}, kernel {meta.get('kernel')}, "
            + (f"protocol {meta['protocol']}" if meta.get("protocol") else "no protocol") + ")")
    text = text[:text.index(begin) + len(begin)] + "\n" + line + "\n" + text[text.index(end):]
    with open(path, "w") as fh:
        fh.write(text)
    log(f"updated {path}")


def memprotd_configs(scenarios):
    """policy → the configuration its runs had (file → text), for every
    memprotd policy whose runs recorded one. SystemExit if one policy's runs
    differ (they would not be rounds of one thing)."""
    out = {}
    for sc, v in scenarios.items():
        for r in v["runs"]:
            if r.get("memprotd_config") is None:
                continue
            have = out.setdefault(r["policy"], r["memprotd_config"])
            if have != r["memprotd_config"]:
                raise SystemExit(f"bench-effect: {sc}: {r['run']} ran memprotd with another configuration than "
                                 f"the policy's first run")
    return out


def protocol_meta(scenarios, commit):
    """meta's protocol (the guest's BENCH_PROTOCOL, None without), memprotd's
    source commit and its configuration (file → text of policy memprotd;
    the other memprotd policies' under memprotd_config_by_policy)."""
    g0 = next(iter(scenarios.values()))["guest"]
    configs = memprotd_configs(scenarios)
    out = {"protocol": g0.get("protocol") or None, "memprotd_commit": commit,
           "memprotd_config": configs.get("memprotd")}
    if set(configs) - {"memprotd"}:
        out["memprotd_config_by_policy"] = configs
    return out


def build_result(scenarios, date, stamp_dir, memprotd_ver, guest_cpu, guest_accel, jit_every, release=None,
                 commit=None):
    """The result (without its chart) from analysis.analyze's scenarios.
    release: the guest's Debian release as asked for (tools/bench-effect
    --release), else as the guest reported it, else None. commit: the source
    commit memprotd was built from (run.json)."""
    g0 = next(iter(scenarios.values()))["guest"]
    result = {
        "meta": {"date": date, "release": guest_release(release, g0), "kernel": g0.get("kernel"),
                 "debian_version": g0.get("debian_version"), "systemd": g0.get("systemd"),
                 "mem_total_mb": g0.get("mem_total", 0) / 2**20, "nproc": g0.get("nproc"), "lru_gen": g0.get("lru_gen"),
                 "duration": g0.get("duration"), "warmup": g0.get("warmup"), "kv_size": g0.get("kv_size"),
                 "rounds": g0.get("rounds"), "order": g0.get("order", "reverse"),
                 "zram_size": g0.get("zram_size"), "memprotd_version": memprotd_ver, "raw": repo_path(stamp_dir),
                 "cmdline": g0.get("cmdline"), "clocksource": g0.get("clocksource"), "cpu": guest_cpu,
                 "accel": guest_accel, "jit_every": jit_every,
                 "ramp_s": RAMP_S, "phase_settle_s": common.PHASE_SETTLE_S},
        "scenarios": {},
    }
    for sc, v in scenarios.items():
        result["scenarios"][sc] = {"guest": v["guest"], "policies": policy_means(v["runs"]), "runs": v["runs"],
                                   "stalled_runs": v.get("stalled_runs", []),
                                   "stalled_stops": v.get("stalled_stops", {}),
                                   "recounted_runs": v.get("recounted_runs", []),
                                   "invalid_counted_runs": v.get("invalid_counted_runs", [])}
    pm = protocol_meta(scenarios, commit)
    if pm["protocol"] or pm["memprotd_config"] or commit:
        result["meta"].update(pm)
    result["targets"] = evaluate_targets(result["scenarios"], pm["protocol"])
    return result


def guest_release(asked, guest):
    """The guest's Debian release (12 or 13): as asked, else from its
    /etc/debian_version (guest.json from 2026-11-26 on), else from its
    kernel (KERNEL_RELEASE), else None."""
    if asked:
        return int(asked)
    v = str(guest.get("debian_version") or "")
    if v.split(".")[0].isdigit():
        return int(v.split(".")[0])
    kernel = str(guest.get("kernel") or "")
    return next((rel for prefix, rel in KERNEL_RELEASE if kernel.startswith(prefix)), None)


# Debian's kernels by release (the guests tools/vm/build-image makes)
KERNEL_RELEASE = (("6.1.", 12), ("6.12.", 13))


def repo_path(path):
    """PATH relative to the work tree it lies in (results are committed: no
    machine's absolute paths in them): this source tree, or the tree that
    --out points into (a protocol boot runs from a pinned worktree and
    writes into the main tree's results); other paths as given."""
    if not path or not os.path.isabs(path):
        return path
    if path.startswith(SRC + os.sep):
        return os.path.relpath(path, SRC)
    try:
        top = subprocess.run(["git", "-C", os.path.dirname(path), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return path
    return os.path.relpath(path, top) if top and path.startswith(top + os.sep) else path


def result_base(out, name, date):
    """OUT/NAME without a suffix: OUT/NAME when named (FileExistsError if
    OUT/NAME.json exists), else the first free of OUT/DATE, OUT/DATE-2, ...
    A result is never overwritten."""
    if name:
        base = os.path.join(out, name)
        if os.path.exists(base + ".json"):
            raise FileExistsError(f"{base}.json exists; results are not overwritten (choose another --name)")
        return base
    base, n = os.path.join(out, date), 2
    while os.path.exists(base + ".json"):
        base = os.path.join(out, f"{date}-{n}")
        n += 1
    return base


def write_result(result, base):
    """BASE.json and .md (result_base gives BASE); returns the Markdown.
    No chart: charts are drawn from the JSON on demand (draw_chart) and not
    kept with the results."""
    if os.path.exists(base + ".json"):
        raise FileExistsError(f"{base}.json exists; results are not overwritten")
    os.makedirs(os.path.dirname(base) or ".", exist_ok=True)
    result["chart"] = None
    md_text = markdown(result)
    with open(base + ".json", "x") as fh:
        json.dump(result, fh, indent=1)
    with open(base + ".md", "w") as fh:
        fh.write(md_text + "\n")
    log(f"wrote {base}.json, {base}.md")
    return md_text


def draw_chart(path, out_dir, tmpdir):
    """The chart (ops/s, p99 and batch MB/s over time per policy) of the
    result at path, drawn from its per-second series into OUT_DIR/NAME.png;
    returns the PNG's path. SystemExit when the result has no series (a
    pooled result: its sources have them)."""
    result = load_result(path, "--chart")
    if not any(r.get("series") for v in result.get("scenarios", {}).values() for r in v.get("runs", [])):
        raise SystemExit(f"bench-effect: --chart: {path} has no per-second series (a pooled result? chart its "
                         f"sources: {', '.join(result['meta'].get('pooled_from') or []) or 'none named'})")
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + ".png")
    got = chart(result, png, tmpdir)
    if not got:
        raise SystemExit("bench-effect: --chart: no chart drawn (gnuplot missing? tools/install-deps --bench)")
    return got


# --- two results side by side (--compare) ----------------------------------------------
def load_result(path, option="--compare"):
    try:
        with open(path) as fh:
            res = json.load(fh)
    except (OSError, ValueError) as e:
        raise SystemExit(f"bench-effect: {option} {path}: {e}")
    if not isinstance(res, dict) or "meta" not in res or "targets" not in res:
        raise SystemExit(f"bench-effect: {option} {path}: not a bench-effect result (no meta or targets)")
    return res


def load_results(spec):
    """A comma-separated list of results of one guest (e.g. the default
    scenarios and memcached, run in separate boots) → one result: their
    scenarios and targets together; a scenario in two of them is an error
    (each result's intervals are its own; --pool makes one result of them)."""
    paths = [p for p in spec.split(",") if p]
    parts = [load_result(p) for p in paths]
    if not parts:
        raise SystemExit(f"bench-effect: --compare {spec!r}: no result")
    merged = {"meta": dict(parts[0]["meta"]), "scenarios": {}, "targets": []}
    seen = {}
    for path, res in zip(paths, parts):
        scs = set(res.get("scenarios", {})) | {target_scenario(t) for t in res["targets"]}
        dup = sorted(scs & set(seen))
        if dup:
            raise SystemExit(f"bench-effect: --compare: scenario {dup[0]} is in both {seen[dup[0]]} and {path}; "
                             "give each scenario's result once (--pool joins the rounds of both)")
        seen.update({sc: path for sc in scs})
        merged["scenarios"].update(res.get("scenarios", {}))
        merged["targets"] += res["targets"]
    dates = sorted({r["meta"].get("date") for r in parts if r["meta"].get("date")})
    merged["meta"]["date"] = ", ".join(dates)
    kernels = {r["meta"].get("kernel") for r in parts}
    if len(kernels) > 1:
        raise SystemExit(f"bench-effect: --compare {spec}: one side mixes kernels ({', '.join(map(str, kernels))})")
    return merged


def result_label(res, path_hint=""):
    m = res["meta"]
    release = guest_release(m.get("release"), m)
    rel = f"Debian {release}, " if release else ""
    return f"{rel}kernel {m.get('kernel') or '?'} ({m.get('date')}{path_hint})"


def target_scenario(t):
    """A target's scenario (older results name it only in the target's text)."""
    return t.get("scenario") or t["target"].split(":")[0].split(" [")[0]


def target_cell(t):
    if t is None:
        return "–"
    if t.get("value") is None:
        return f"– ({t['note']})" if t.get("note") else "– (no ratio)"
    v = f"{t['value']:.2f}"
    if "verdict" not in t:
        return f"{v} (a result from before intervals)"
    return f"{v} {fci(t.get('ci95'))} {'MISSED' if t['verdict'] == 'missed' else t['verdict']}"


def compare_markdown(a, b):
    """Per scenario either result has: its targets with both results' value,
    95% interval and verdict, and the policies' kvload ops/s, p99 and batch
    MB/s over the scenario's whole-run window."""
    la, lb = result_label(a), result_label(b)
    L = [f"## Effectiveness benchmark: {la} and {lb}", ""]
    scs = list(dict.fromkeys([sc for r in (a, b) for sc in r.get("scenarios", {})]
                             + [target_scenario(t) for r in (a, b) for t in r["targets"]]))
    for sc in scs:
        L += [f"### {sc}", "", f"| target | goal | A: {la} | B: {lb} |", "|---|---:|---|---|"]
        ta = {t["target"]: t for t in a["targets"] if target_scenario(t) == sc}
        tb = {t["target"]: t for t in b["targets"] if target_scenario(t) == sc}
        for name in dict.fromkeys(list(ta) + list(tb)):
            goal = (ta.get(name) or tb.get(name))["goal"]
            L.append(f"| {name} | {goal} | {target_cell(ta.get(name))} | {target_cell(tb.get(name))} |")
        L += [""] + compare_policies(sc, a, b) + [""]
    return "\n".join(L)


def compare_policies(sc, a, b):
    pa = a.get("scenarios", {}).get(sc, {}).get("policies", {})
    pb = b.get("scenarios", {}).get(sc, {}).get("policies", {})
    win = "window_all" if any("window_all" in p for p in list(pa.values()) + list(pb.values())) else "window"
    keys = (("kv_ops_s", 0), ("kv_p99_us", 1), ("batch_mb_s", 2))
    L = ["| policy | A kv ops/s | B kv ops/s | A p99 µs | B p99 µs | A batch MB/s | B batch MB/s |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    for pol in ordered(set(pa) | set(pb)):
        cells = []
        for k, nd in keys:
            for p in (pa, pb):
                cells.append(fmt(((p.get(pol) or {}).get(win) or {}).get(k), nd))
        L.append(f"| {pol} | " + " | ".join(cells) + " |")
    return L
