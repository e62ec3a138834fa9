"""Regression detector figures on simulated nightly histories (a benchmark script, not a test).

    .venv/bin/python bench/regressions.py [--histories 2000] [--seed 0]

For night-to-night CVs of 2 % and 5 %, with occasional outlier nights (2 % and 3 % of
nights, 15-40 % worse), it prints:
  - detection: the share of 10 % (and 5 %) step regressions alerted within two nights of the step;
  - false alarms per 1000 comparisons on histories without a step.
"""
from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalebench.regress import Gates, Series, SeriesKey, judge  # noqa: E402

KEY = SeriesKey("sim", 2, "images_per_s")
D0 = dt.date(2026, 1, 1)
NIGHTS_BEFORE, NIGHTS_AFTER = 30, 2


def history(rng: random.Random, cv: float, step: float, outliers: float, nights: int) -> list[float]:
    out = []
    for i in range(nights):
        v = 1000 * (1 + rng.gauss(0, cv))
        if i >= NIGHTS_BEFORE and step:
            v *= 1 - step
        if rng.random() < outliers:
            v *= 1 - rng.uniform(0.15, 0.40)
        out.append(v)
    return out


def run(cv: float, step: float, n: int, seed: int, gates: Gates, outliers: float = 0.03) -> tuple[float, float]:
    """(detection rate within two nights, false alarms per 1000 comparisons)."""
    rng = random.Random(seed)
    detected = false = comparisons = 0
    for _ in range(n):
        if step:
            values = history(rng, cv, step, outliers, NIGHTS_BEFORE + NIGHTS_AFTER)
            js = judge(Series(KEY, [(D0 + dt.timedelta(days=i), v) for i, v in enumerate(values)]), gates)
            detected += any(j.alert for j in js[NIGHTS_BEFORE:])
            false += sum(j.alert for j in js[:NIGHTS_BEFORE])
            comparisons += sum(j.baseline is not None for j in js[:NIGHTS_BEFORE])
        else:
            values = history(rng, cv, 0.0, outliers, 60)
            js = judge(Series(KEY, [(D0 + dt.timedelta(days=i), v) for i, v in enumerate(values)]), gates)
            false += sum(j.alert for j in js)
            comparisons += sum(j.baseline is not None for j in js)
    return detected / n if step else float("nan"), 1000 * false / max(comparisons, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    g = Gates()
    print(f"gates: >= {g.magnitude:.0%} worse AND robust z >= {g.z}, baseline {g.window} nights (min {g.min_history}), "
          f"alert after {g.confirm} consecutive flagged nights; outlier nights are 15-40 % worse")
    t = time.perf_counter()
    for outliers in (0.02, 0.03):
        for cv in (0.02, 0.05):
            _, fa = run(cv, 0.0, args.histories, args.seed, g, outliers)
            d10, fa10 = run(cv, 0.10, args.histories, args.seed + 1, g, outliers)
            d5, _ = run(cv, 0.05, args.histories, args.seed + 2, g, outliers)
            print(f"CV {cv:.0%}, outlier nights {outliers:.0%}: 10% steps detected within 2 nights {d10:6.1%} | "
                  f"5% steps {d5:6.1%} | false alarms per 1000 comparisons {fa:.2f} (steady), {fa10:.2f} (before steps)")
    print(f"({args.histories} histories per figure, {time.perf_counter() - t:.1f}s)")


if __name__ == "__main__":
    main()
