# SPDX-License-Identifier: LGPL-2.1-or-later
"""Intervals and verdicts for the targets: a seeded paired bootstrap (plain
Python, deterministic) over boots, then rounds within each boot drawn, and
the rule that says "met" or "missed" only when the whole interval lies on
one side of the goal."""

import random

BOOT_SEED = 29          # the bootstrap's seed: the same runs give the same interval
BOOT_RESAMPLES = 2000
CI_LEVEL = 0.95
MIN_ROUNDS = 2          # fewer complete rounds: no interval


def rounds_of(runs, policies):
    """Per round, {policy: run}: within one boot (a run's "boot", in pooled
    results; else all runs are of one), the k-th counted (not skipped) run of
    each policy is its round k. Only rounds in which every one of `policies`
    has a run are returned."""
    out = []
    for boot in dict.fromkeys(r.get("boot") for r in runs):
        by = {p: [r for r in runs if r.get("boot") == boot and r.get("policy") == p and not r.get("skipped")]
              for p in policies}
        n = min((len(v) for v in by.values()), default=0)
        out += [{p: by[p][k] for p in policies} for k in range(n)]
    return out


def ratio_of_means(rows, num, den):
    """mean(num) / den(rows) over rows (one per round); num maps a row to a
    figure, den maps the rows to the denominator. None if a figure is missing
    or the denominator is 0."""
    xs = [num(r) for r in rows]
    d = den(rows)
    if not xs or any(x is None for x in xs) or d is None or d == 0:
        return None
    return sum(xs) / len(xs) / d


def boot_of(row):
    """The boot a round (row: {policy: run}) was made in (None: one boot)."""
    return next(iter(row.values())).get("boot") if row else None


def resample(rows, rng):
    """One bootstrap draw of rows: with one boot, its rounds drawn with
    replacement; with several, the boots drawn with replacement, then each
    drawn boot's rounds drawn with replacement within it (two levels, so the
    interval holds the boot-to-boot spread as well as the rounds')."""
    boots = list(dict.fromkeys(boot_of(r) for r in rows))
    if len(boots) < 2:
        return [rows[rng.randrange(len(rows))] for _ in rows]
    by = {b: [r for r in rows if boot_of(r) == b] for b in boots}
    out = []
    for _ in boots:
        mine = by[boots[rng.randrange(len(boots))]]
        out += [mine[rng.randrange(len(mine))] for _ in mine]
    return out


def bootstrap_ci(rows, num, den, seed=BOOT_SEED, resamples=BOOT_RESAMPLES, level=CI_LEVEL):
    """The percentile interval [low, high] of ratio_of_means over rows
    resampled (resample: whole rounds, so each round's policies stay paired;
    boots first when rows come from several); None with fewer than
    MIN_ROUNDS rows or a missing figure."""
    if len(rows) < MIN_ROUNDS or ratio_of_means(rows, num, den) is None:
        return None
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        v = ratio_of_means(resample(rows, rng), num, den)
        if v is not None:
            stats.append(v)
    if len(stats) < resamples // 2:
        return None
    stats.sort()
    tail = (1 - level) / 2
    lo = stats[int(tail * (len(stats) - 1))]
    hi = stats[int(round((1 - tail) * (len(stats) - 1)))]
    return [lo, hi]


def verdict(ci, op, goal):
    """"met" when the whole interval is on the goal's side (>= goal: low >=
    goal; <= goal: high <= goal), "missed" when it is wholly on the other,
    else (straddling, or no interval) "not shown"."""
    if ci is None:
        return "not shown"
    lo, hi = ci
    if op == ">=":
        return "met" if lo >= goal else "missed" if hi < goal else "not shown"
    if op == "<=":
        return "met" if hi <= goal else "missed" if lo > goal else "not shown"
    raise ValueError(f"goal operator {op!r}: expected >= or <=")
