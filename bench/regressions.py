"""Regression detectors side by side on simulated nightly histories (a benchmark script, not a test).

    .venv/bin/python bench/regressions.py [--histories 400] [--peer-histories 200] [--seed 0]
    make bench-regressions   # the same, with Apache Otava installed in its own venv first

Noise model (every parameter is a flag). A host runs one benchmark's figure under test and, as
its night-factor peers, the F figures of the other benchmarks (default 20: five benchmarks x four
GPU counts). A figure's repeat on night t is

    level x night_t x (1 + e),   e ~ N(0, cv_cell)       (per cell)
    night_t = 1 + N(0, cv_night), times (1 - U(0.15, 0.40)) on an outlier night

The night effect is shared by every cell of the night, repeats and reruns alike (machine state,
thermals, a noisy neighbour); cv_night^2 = night_share x CV^2 and cv_cell^2 = the rest, for a
total CV of 2 % or 5 %. Outlier nights (2 % or 3 % of nights) hit the whole host. A change
hits one figure: steps of 5, 10 and 20 % at night 30, a 10 % improvement, a drift of 0.5 % a
night from night 30 on.

Detectors:
  - ours: scalebench.analysis.regress.judge on the median of `repeats` cells a night, the host's night
    factor divided out; a figure the DAG finds off (raw, before the factor) is rerun `reruns`
    times the same night, and the reruns confirm (alert tonight) or clear the flag; without
    reruns the next night confirms.
  - conbench-style lookback z-score: the night's value against the mean and standard deviation
    of the last 30 nights, alert at z <= -threshold.
  - Apache Otava (its own venv): E-divisive change points with its t-test, default p-value
    (0.001) and window (50), run each night on the history so far; a regression change point
    within the last two nights is an alert.
Peers get the same cell budget as ours: ceil(our cell-minutes per figure per night) repeats.
Cell-minutes per figure per night are counted as multiples of one cell: repeats + reruns.
One seed prints one table.

Then the fewer-peers study (`--only-spread` alone): the figure under test on a host with 5, 2 or
1 other benchmarks (1, 2 or 3 GPU hosts for six rows), whose GPU counts share a benchmark-level
night and which change on their own (`Fleet`), under each night factor: none, the median of the
other benchmarks' figures, one voice per benchmark with restarts at announced changes, and the
host probe (`--probe-repeats` cells a host night of a fixed workload).

Then the image-change study (`--only-images` alone): histories in which a new image arrives every
`--image-every` nights (fingerprints of their own) and most do nothing, while the step of the
change (10 %, or a 10 % improvement) arrives with one of them at night 30. Detectors: ours with
the same-night A/B (a flagged figure on a new image runs `ab_pairs` pairs of the previous and the
new image on the host that night, more while the A/B says "unknown"), ours with plain reruns
against the baseline, and the old rule (every image change restarts the baseline).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalebench.analysis import lifecycle, regress  # noqa: E402  (the A/B rule swapped in for the "before" rows)
from scalebench.analysis.regress import (FINGERPRINT_KEYS, Gates, Series, SeriesKey, judge, night_factors,  # noqa: E402
                                         wants_ab, wants_rerun)

KEY = SeriesKey("sim", 2, "images_per_s")
D0 = dt.date(2026, 1, 1)
STEP_AT = 30
NIGHTS = 60
OTAVA_PY = os.environ.get("SCALEBENCH_OTAVA_PYTHON", str(ROOT / ".state" / "otava-venv" / "bin" / "python"))
TARGET = "f0"


@dataclass(frozen=True)
class Noise:
    cv: float
    outliers: float
    night_share: float = 0.4
    figures: int = 20

    @property
    def cv_night(self) -> float:
        return self.cv * math.sqrt(self.night_share)

    @property
    def cv_cell(self) -> float:
        return self.cv * math.sqrt(1 - self.night_share)


@dataclass(frozen=True)
class Change:
    name: str
    step: float = 0.0        # 0.1: 10 % worse from STEP_AT on (negative: better)
    drift: float = 0.0       # per night, from STEP_AT on

    def level(self, night: int) -> float:
        if night < STEP_AT:
            return 1.0
        return (1 - self.step) * (1 - self.drift * (night - STEP_AT + 1))


STEADY = Change("steady")
CHANGES = [Change("step 5%", 0.05), Change("step 10%", 0.10), Change("step 20%", 0.20),
           Change("improvement 10%", -0.10), Change("drift 0.5%/night", drift=0.005)]


class Host:
    """One simulated history: the night factors and a figure's cells, drawn on demand."""

    def __init__(self, rng: random.Random, noise: Noise, change: Change):
        self.rng, self.noise, self.change = rng, noise, change
        self.night = []
        for _ in range(NIGHTS):
            f = 1 + rng.gauss(0, noise.cv_night)
            if rng.random() < noise.outliers:
                f *= 1 - rng.uniform(0.15, 0.40)
            self.night.append(f)

    def cells(self, night: int, n: int, target: bool = True) -> list[float]:
        lvl = self.change.level(night) if target else 1.0
        return [1000 * lvl * self.night[night] * (1 + self.rng.gauss(0, self.noise.cv_cell)) for _ in range(n)]

    def nightly(self, repeats: int, target: bool = True) -> list[float]:
        return [statistics.median(self.cells(t, repeats, target)) for t in range(NIGHTS)]


def dates(values: list[float]) -> list[tuple[dt.date, float]]:
    return [(D0 + dt.timedelta(days=i), v) for i, v in enumerate(values)]


def ours(host: Host, repeats: int, reruns: int, gates: Gates, use_factor: bool = True) -> tuple[list, float]:
    """(judgements, reruns per night): the pipeline as the DAG and the report run it."""
    mine = host.nightly(repeats)
    raw = judge(Series(KEY, dates(mine)), gates)
    rerun = {j.night: host.cells((j.night - D0).days, reruns) for j in raw if reruns and wants_rerun(j, gates)}
    factors = {}
    if use_factor:
        values = {TARGET: dict(dates(mine))}
        for i in range(1, host.noise.figures + 1):
            values[f"f{i}"] = dict(dates(host.nightly(repeats, target=False)))
        factors = night_factors(values, gates.window, only=[TARGET])[TARGET]
    js = judge(Series(KEY, dates(mine), reruns=rerun, factors=factors), gates)
    return js, reruns * len(rerun) / NIGHTS


def zscore(values: list[float], threshold: float, lookback: int = 30, min_history: int = 5) -> list[bool | None]:
    out: list[bool | None] = []
    for t, v in enumerate(values):
        prior = values[max(0, t - lookback):t]
        if len(prior) < min_history:
            out.append(None)
            continue
        sd = statistics.stdev(prior)
        out.append(sd > 0 and (v - statistics.fmean(prior)) / sd <= -threshold)
    return out


def otava(histories: list[list[float]], nights: list[list[int]]) -> list[list[bool]]:
    """Per history and asked night t: did Otava report a regression change point in the last two
    nights, on the history up to t (run in Otava's own venv)."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "in.json", Path(d) / "out.json"
        src.write_text(json.dumps({"histories": histories, "nights": nights}))
        subprocess.run([OTAVA_PY, str(ROOT / "bench" / "otava_peer.py"), str(src), str(dst)], check=True)
        return json.loads(dst.read_text())


@dataclass
class Figures:
    first: float | None = None        # share of changes alerted on the first night of the change
    detected: float | None = None     # share of changes alerted within two nights of the change
    nights: float | None = None       # median nights from the change to the first alert (alerted ones)
    false_per_1000: float | None = None
    cost: float | None = None         # cells per figure per night

    def cells(self) -> list[str]:
        return ["–" if self.first is None else f"{self.first:6.1%}",
                "–" if self.detected is None else f"{self.detected:6.1%}",
                "–" if self.nights is None else f"{self.nights:4.1f}",
                "–" if self.false_per_1000 is None else f"{self.false_per_1000:5.2f}",
                "–" if self.cost is None else f"{self.cost:4.2f}"]


def first_alert(flags: list[bool | None]) -> int | None:
    return next((t - STEP_AT + 1 for t in range(STEP_AT, NIGHTS) if flags[t]), None)


def score(per_history: list[list[bool | None]], change: Change, within: int = 2) -> Figures:
    """Detection within `within` nights and nights to detection of a change; for no change (or an
    improvement), false alarms per 1000 comparisons over every judged night."""
    if change.step <= 0 and not change.drift:
        judged = sum(f is not None for fl in per_history for f in fl)
        return Figures(false_per_1000=1000 * sum(bool(f) for fl in per_history for f in fl) / max(judged, 1))
    firsts = [first_alert(fl) for fl in per_history]
    hit = [n for n in firsts if n is not None]
    judged = sum(f is not None for fl in per_history for f in fl[:STEP_AT])
    false = sum(bool(f) for fl in per_history for f in fl[:STEP_AT])
    return Figures(first=sum(n <= 1 for n in hit) / len(firsts), detected=sum(n <= within for n in hit) / len(firsts),
                   nights=statistics.median(hit) if hit else None,
                   false_per_1000=1000 * false / max(judged, 1))


def run_ours(noise: Noise, change: Change, n: int, seed: int, repeats: int, reruns: int, gates: Gates,
             use_factor: bool = True) -> Figures:
    rng = random.Random(seed)
    flags, spent = [], []
    for _ in range(n):
        js, rr = ours(Host(rng, noise, change), repeats, reruns, gates, use_factor)
        flags.append([None if j.baseline is None else j.alert for j in js])
        spent.append(rr)
    f = score(flags, change)
    f.cost = repeats + statistics.fmean(spent)
    return f


def peer_histories(noise: Noise, change: Change, n: int, seed: int, repeats: int) -> list[list[float]]:
    rng = random.Random(seed)
    return [Host(rng, noise, change).nightly(repeats) for _ in range(n)]


def run_zscore(hist: list[list[float]], change: Change, threshold: float, repeats: int) -> Figures:
    f = score([zscore(h, threshold) for h in hist], change)
    f.cost = float(repeats)
    return f


def run_otava(hist: list[list[float]], change: Change, repeats: int) -> Figures:
    res = otava(hist, [list(range(5, NIGHTS))] * len(hist))  # every night with 5 before it, as ours
    flags = [[None] * 5 + r for r in res]
    f = score(flags, change)
    f.cost = float(repeats)
    return f


def cheapest(noise: Noise, n: int, seed: int, gates: Gates) -> tuple[int, int, Figures, Figures]:
    """The cheapest (repeats, reruns) whose 10 % step detection and false alarms meet the goal
    (within two nights at CV 5 %, the first night at CV 2 %), on `n` histories."""
    within = 1 if noise.cv <= 0.02 else 2
    tried = []
    for repeats in (1, 2, 3, 4):
        for reruns in (0, 3, 5, 8):
            steady = run_ours(noise, STEADY, n, seed, repeats, reruns, gates)
            step = run_ours(noise, CHANGES[1], n, seed + 1, repeats, reruns, gates)
            det = step.first if within == 1 else step.detected
            cost = steady.cost
            tried.append((cost, repeats, reruns, det, steady.false_per_1000, step, steady))
            print(f"    repeats {repeats}, reruns {reruns}: cost {cost:4.2f}, 10% steps within {within} night(s) "
                  f"{det:6.1%}, false alarms {steady.false_per_1000:5.2f}/1000", flush=True)
            if det >= 0.95 and steady.false_per_1000 <= 1.0:
                break  # more reruns at these repeats only cost more
        if tried[-1][3] >= 0.95 and tried[-1][4] <= 1.0:
            break  # more repeats cost a whole cell a night more than these reruns
    ok = [t for t in tried if t[3] >= 0.95 and t[4] <= 1.0]
    best = min(ok or tried, key=lambda t: (t[0], -t[3]))
    return best[1], best[2], best[5], best[6]


# -- fewer peers per host: correlated peer groups with their own changes, and the host probe ----------
# which night factor the target is divided by: none; "figures", the rule before the host probe (the
# median of the other benchmarks' figures); "groups", one voice per other benchmark with restarts
# at announced changes (and a neutral voice beside two); "probe", the host probe where it ran,
# else "groups" (scalebench.analysis.history.build_series today)
FACTORS = ("none", "figures", "groups", "probe")
GPU_COUNTS = 4


@dataclass(frozen=True)
class Fleet:
    """A host's night as benchmarks spread over hosts see it: `peers` other benchmarks of
    GPU_COUNTS figures each; a share of each peer cell's variance is its benchmark's own night
    (`bench_share`: a code path, a data loader, shared by its GPU counts, so its figures move
    together; the figure under test keeps the table's noise model); a peer benchmark has
    its own change (a step of 5-20 %, better or worse, at a random night) with probability
    `peer_change`; the probe is `probe_repeats` cells of one fixed benchmark (pinned image)."""
    peers: int
    peer_change: float = 0.3
    bench_share: float = 0.2
    probe_repeats: int = 2
    announced: float = 0.8   # share of peer changes that come with a new image or config (fingerprinted)


class SpreadHost(Host):
    def __init__(self, rng: random.Random, noise: Noise, change: Change, fleet: Fleet):
        super().__init__(rng, noise, change)
        self.fleet = fleet
        cv_bench = noise.cv * math.sqrt(fleet.bench_share)
        self.cv_rest = noise.cv * math.sqrt(max(1 - noise.night_share - fleet.bench_share, 0.0))
        self.bench = {b: [rng.gauss(0, cv_bench) for _ in range(NIGHTS)] for b in range(fleet.peers + 2)}
        self.steps, self.restarts = {}, {}
        for b in range(1, fleet.peers + 1):
            if rng.random() < fleet.peer_change:
                self.steps[b] = (rng.randrange(10, NIGHTS), rng.choice((-1, 1)) * rng.uniform(0.05, 0.20))
                if rng.random() < fleet.announced:
                    self.restarts[b] = {D0 + dt.timedelta(days=self.steps[b][0])}

    def cell(self, b: int, night: int, lvl: float) -> float:
        if b == 0:  # the figure under test: the noise model of the table above (night + cell)
            return 1000 * lvl * self.night[night] * (1 + self.rng.gauss(0, self.noise.cv_cell))
        if b == self.fleet.peers + 1:  # the probe: a fixed short workload, no code path of its own to vary
            return 1000 * lvl * self.night[night] * (1 + self.rng.gauss(0, self.noise.cv_cell))
        return 1000 * lvl * self.night[night] * (1 + self.bench[b][night]) * (1 + self.rng.gauss(0, self.cv_rest))

    def series(self, b: int, repeats: int) -> list[float]:
        """Benchmark b's figure (0: the target, peers 1..P, P+1: the probe), median of its repeats."""
        out = []
        for t in range(NIGHTS):
            lvl = self.change.level(t) if b == 0 else 1.0
            if b in self.steps and t >= self.steps[b][0]:
                lvl *= 1 - self.steps[b][1]
            out.append(statistics.median(self.cell(b, t, lvl) for _ in range(repeats)))
        return out


def spread_factors(host: SpreadHost, mine: list[float], repeats: int, how: str, window: int) -> dict:
    if how == "none":
        return {}
    values = {TARGET: dict(dates(mine))}
    groups, restarts = {TARGET: "target"}, {}
    for b in range(1, host.fleet.peers + 1):
        for g in range(GPU_COUNTS):
            values[f"b{b}g{g}"], groups[f"b{b}g{g}"] = dict(dates(host.series(b, repeats))), f"b{b}"
            restarts[f"b{b}g{g}"] = host.restarts.get(b, set())
    if host.fleet.probe_repeats:
        values["probe"] = dict(dates(host.series(host.fleet.peers + 1, host.fleet.probe_repeats)))
        groups["probe"] = "probe"
    if how == "figures":  # the rule before: every other benchmark's figure, no probe, no restarts
        values.pop("probe", None)
        return night_factors(values, window, only=[TARGET], groups=groups)[TARGET]
    if how == "groups":
        values.pop("probe", None)
    return night_factors(values, window, only=[TARGET], groups=groups, by_group=True, restarts=restarts,
                         probe="probe" if how == "probe" else None)[TARGET]


def run_spread(noise: Noise, change: Change, fleet: Fleet, how: str, n: int, seed: int, repeats: int, reruns: int,
               gates: Gates) -> Figures:
    rng = random.Random(seed)
    flags, spent = [], []
    for _ in range(n):
        host = SpreadHost(rng, noise, change, fleet)
        mine = host.series(0, repeats)
        raw = judge(Series(KEY, dates(mine)), gates)
        rerun = {j.night: [host.cell(0, (j.night - D0).days, change.level((j.night - D0).days)) for _ in range(reruns)]
                 for j in raw if reruns and wants_rerun(j, gates)}
        js = judge(Series(KEY, dates(mine), reruns=rerun, factors=spread_factors(host, mine, repeats, how, gates.window)),
                   gates)
        flags.append([None if j.baseline is None else j.alert for j in js])
        spent.append(reruns * len(rerun) / NIGHTS)
    f = score(flags, change)
    f.cost = repeats + statistics.fmean(spent)
    return f


def spread_study(args, g: Gates) -> None:
    """The goals at CV 5 % for a benchmark whose host has 5, 2 or 1 peer benchmarks (1, 2 or 3 GPU
    hosts for the six rows), under each night factor, at the table's repeats and reruns for CV 5 %."""
    repeats, reruns = args.spread_repeats, args.spread_reruns
    print(f"\nfewer peers per host: {repeats} repeats, {reruns} reruns; peer benchmarks change on their own "
          f"(p {args.peer_change:g} per history, 5-20 %, either way, {Fleet(1).announced:.0%} of them with a new "
          f"image or config); {args.bench_share:.0%} of a peer's variance is its benchmark's own night; the probe: "
          f"{args.probe_repeats} cells a host night; {args.spread_histories} histories per row")
    print(f"{'CV':>3} {'outl':>4} {'hosts':>5} {'peers':>5} {'factor':<8} {'10% within 2':>12} {'false/1000':>10} "
          f"{'probe cells/host night':>22}  goals")
    for outliers in (float(x) for x in args.outliers.split(",")):
        for hosts, peers in ((1, 5), (2, 2), (3, 1)):
            fleet = Fleet(peers, args.peer_change, args.bench_share, args.probe_repeats)
            noise = Noise(0.05, outliers, args.night_share)
            for how in FACTORS:
                step = run_spread(noise, CHANGES[1], fleet, how, args.spread_histories, args.seed + 11, repeats, reruns, g)
                steady = run_spread(noise, STEADY, fleet, how, args.spread_histories, args.seed + 13, repeats, reruns, g)
                met = step.detected >= 0.95 and steady.false_per_1000 <= 1.0
                probe = args.probe_repeats if how == "probe" else 0
                print(f"{0.05:>3.0%} {outliers:>4.0%} {hosts:>5} {peers:>5} {how:<8} {step.detected:>12.1%} "
                      f"{steady.false_per_1000:>10.2f} {probe:>22}  {'met' if met else 'NOT met'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=400)
    ap.add_argument("--peer-histories", type=int, default=150, help="Otava runs once per night per history: slower")
    ap.add_argument("--search-histories", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--night-share", type=float, default=0.4, help="share of the variance that is the night's")
    ap.add_argument("--figures", type=int, default=20, help="the other benchmarks' figures per host night (the night "
                                                            "factor's peers)")
    ap.add_argument("--outliers", default="0.02,0.03")
    ap.add_argument("--spread-histories", type=int, default=400, help="histories per row of the fewer-peers study")
    ap.add_argument("--peer-change", type=float, default=0.3, help="chance a peer benchmark changes in a history")
    ap.add_argument("--bench-share", type=float, default=0.2, help="share of the variance that is a benchmark's own night")
    ap.add_argument("--probe-repeats", type=int, default=24, help="probe cells per host night")
    ap.add_argument("--spread-repeats", type=int, default=4, help="nightly repeats in the fewer-peers study")
    ap.add_argument("--spread-reruns", type=int, default=8, help="same-night reruns in the fewer-peers study")
    ap.add_argument("--only-spread", action="store_true", help="only the fewer-peers study")
    ap.add_argument("--image-histories", type=int, default=400, help="histories per row of the image-change study")
    ap.add_argument("--image-every", type=int, default=7, help="nights between new images in the image-change study")
    ap.add_argument("--only-images", action="store_true", help="only the image-change study")
    ap.add_argument("--power-table", type=Path, help="only write the detection-power table (JSON) `scalebench plan` "
                                                      "reads, to this path")
    ap.add_argument("--power-histories", type=int, default=100, help="histories per row of the power table")
    args = ap.parse_args()
    if args.power_table:
        return power_table(args, Gates())
    if args.only_spread:
        return spread_study(args, Gates())
    if args.only_images:
        image_study(args, Gates())
        return
    g = Gates()
    have_otava = Path(OTAVA_PY).exists()
    print(f"noise: night effect {args.night_share:.0%} of the variance (shared by every cell of the night), "
          f"cell noise the rest; outlier nights hit the whole host, 15-40 % slower; {args.figures} peer figures "
          "of other benchmarks per host night")
    print(f"ours: >= {g.magnitude:.0%} worse AND robust z >= {g.z} (baseline {g.window} nights), rerun when raw "
          f">= {g.rerun_magnitude:.0%} AND z >= {g.rerun_z}; reruns confirm by one-sided Mann-Whitney U at "
          f"{g.rerun_alpha}; else {g.confirm} flagged nights")
    if not have_otava:
        print(f"Apache Otava: no venv at {OTAVA_PY} (make bench-regressions makes it); its rows are skipped")
    t0 = time.perf_counter()
    head = (f"{'CV':>3} {'outl':>4} {'detector':<34} {'change':<17} {'night 1':>8} {'within 2':>8} {'nights':>6} "
            f"{'false/1000':>10} {'cells':>5}")
    rows = []
    for outliers in (float(x) for x in args.outliers.split(",")):
        for cv in (0.02, 0.05):
            noise = Noise(cv, outliers, args.night_share, args.figures)
            print(f"\nCV {cv:.0%}, outlier nights {outliers:.0%}: searching the cheapest repeats x reruns "
                  f"({args.search_histories} histories each)", flush=True)
            r, k, _, _ = cheapest(noise, args.search_histories, args.seed + 100, g)
            budget = None
            detectors = [(f"ours ({r} repeats, {k} reruns)", "ours", dict(repeats=r, reruns=k)),
                         ("ours without the night factor", "ours", dict(repeats=r, reruns=k, use_factor=False))]
            for change in [STEADY, *CHANGES]:
                for i, (label, _kind, kw) in enumerate(detectors):
                    f = run_ours(noise, change, args.histories, args.seed + 7 * len(rows), gates=g, **kw)
                    if change is STEADY and i == 0:
                        budget = max(1, math.ceil(f.cost - 1e-9))
                    rows.append((cv, outliers, label, change.name, f))
                hist = peer_histories(noise, change, args.histories, args.seed + 7 * len(rows), budget)
                for thr in (3.0, 5.0):
                    rows.append((cv, outliers, f"z-score |z|>={thr:g} ({budget} repeats)", change.name,
                                 run_zscore(hist, change, thr, budget)))
                if have_otava:
                    rows.append((cv, outliers, f"Apache Otava ({budget} repeats)", change.name,
                                 run_otava(hist[:args.peer_histories], change, budget)))
                print("  " + change.name + " done", flush=True)
    print("\n" + head)
    for cv, outliers, label, change, f in rows:
        print(f"{cv:>3.0%} {outliers:>4.0%} {label:<34} {change:<17} " + " ".join(
            c.rjust(w) for c, w in zip(f.cells(), (8, 8, 6, 10, 5))))
    print(f"\n'night 1' / 'within 2': share of changes alerted on their first night / within two nights; "
          f"'nights': median nights to the first "
          f"alert; 'false/1000': alerts per 1000 judged nights without a change (before the change, or all "
          f"nights of steady and improved histories); 'cells': cell-minutes per figure per night, in cells. "
          f"{args.histories} histories per row ({args.peer_histories} for Otava), {time.perf_counter() - t0:.0f} s")
    goals(rows)
    spread_study(args, g)
    image_study(args, g)


# -- the detection-power table `scalebench plan` reads (src/scalebench/analysis/detection_power.json) ---------
POWER_CVS = (0.01, 0.02, 0.03, 0.05, 0.08)
POWER_PEERS = (4, 20)
POWER_REPEATS = (1, 2, 3, 4)
POWER_RERUNS = (0, 3, 5, 8)


def residual_cv(noise: Noise, repeats: int, n: int, seed: int, window: int) -> float:
    """The median, over steady histories, of a figure's CV after the night factor: what
    `scalebench plan` measures on a stored history, so the table is looked up by the same quantity."""
    rng, out = random.Random(seed), []
    for _ in range(n):
        host = Host(rng, noise, STEADY)
        mine = dates(host.nightly(repeats))
        values = {TARGET: dict(mine)} | {f"f{i}": dict(dates(host.nightly(repeats, target=False)))
                                         for i in range(1, noise.figures + 1)}
        factors = night_factors(values, window, only=[TARGET])[TARGET]
        resid = [v / factors.get(d, 1.0) for d, v in mine]
        out.append(statistics.stdev(resid) / statistics.fmean(resid))
    return statistics.median(out)


def power_table(args, g: Gates) -> None:
    """Detection power of ours by (CV, peers, repeats, reruns) at 2 % outlier nights: a 10 % step
    caught on its first night and within two, false alarms per 1000 steady nights, cells a night."""
    t0, rows = time.perf_counter(), []
    for cv in POWER_CVS:
        for peers in POWER_PEERS:
            noise = Noise(cv, 0.02, args.night_share, peers)
            for repeats in POWER_REPEATS:
                resid = residual_cv(noise, repeats, 30, args.seed + 3, g.window)
                for reruns in POWER_RERUNS:
                    seed = args.seed + 11 * len(rows)
                    steady = run_ours(noise, STEADY, args.power_histories, seed, repeats, reruns, g)
                    step = run_ours(noise, CHANGES[1], args.power_histories, seed + 1, repeats, reruns, g)
                    rows.append({"cv": cv, "peers": peers, "repeats": repeats, "reruns": reruns,
                                 "residual_cv": round(resid, 5), "first_night": round(step.first, 4),
                                 "within_two": round(step.detected, 4),
                                 "false_per_1000": round(steady.false_per_1000, 3), "cells": round(steady.cost, 3)})
                    print(f"CV {cv:.0%} peers {peers:2d} repeats {repeats} reruns {reruns}: after the factor "
                          f"{resid:.2%}, 10% steps {step.first:6.1%} / {step.detected:6.1%}, false "
                          f"{steady.false_per_1000:5.2f}/1000, {steady.cost:4.2f} cells", flush=True)
    doc = {"generated_by": f"bench/regressions.py --power-table --power-histories {args.power_histories} "
                           f"--seed {args.seed}",
           "model": {"outlier_nights": 0.02, "night_share": args.night_share, "step": 0.10, "nights": NIGHTS,
                     "histories_per_row": args.power_histories},
           "goals": {"within_two": 0.95, "false_per_1000": 1.0}, "rows": rows,
           "seconds": round(time.perf_counter() - t0)}
    args.power_table.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(rows)} rows -> {args.power_table} in {doc['seconds']} s")


IMAGE_CHANGES = [Change("steady"), Change("step 10%", 0.10), Change("improvement 10%", -0.10)]


def image_prints(every: int) -> dict[dt.date, dict]:
    """A new image every `every` nights, one of them at STEP_AT (where a change lands, if any)."""
    out, k = {}, 0
    for t in range(NIGHTS):
        if t and (t - STEP_AT) % every == 0:
            k += 1
        out[D0 + dt.timedelta(days=t)] = {"image": f"sim:{k}", "image_digest": f"sha256:{k:064d}"}
    return out


def previous_level(host: Host, t: int, every: int) -> float:
    """The A/B's previous image (the one before tonight's, as image_prints changes them) at its
    level: an A/B on the new image's second night still compares with the image before it."""
    started = t - (t - STEP_AT) % every  # the current image's first night (image_prints' rule)
    return host.change.level(max(0, started - 1))


class PointEstimateAB(regress.ABTest):
    """The A/B's rule before equivalence (kept here to print beside today's): "same" when the
    median change is within half the magnitude gate, or within it once the pairs reached their cap."""

    @property
    def verdict(self) -> str:
        g = self.gates or Gates()
        if min(len(self.a), len(self.b)) < g.ab_min_pairs:
            return "unknown"
        ma = statistics.median(self.a)
        change = -self.direction * (statistics.median(self.b) - ma) / abs(ma) if ma else 0.0
        if self.p(True) <= g.ab_alpha and change >= g.magnitude:
            return "worse"
        if self.p(False) <= g.ab_alpha and -change >= g.magnitude:
            return "better"
        capped = min(len(self.a), len(self.b)) >= g.ab_max_pairs
        return "same" if abs(change) < g.magnitude / (1 if capped else 2) else "unknown"


@contextlib.contextmanager
def ab_rule(mode: str):
    """judge() with the A/B rule a mode names: "ab-point" swaps in the point-estimate rule."""
    if mode != "ab-point":
        yield
        return
    saved, regress.ABTest, lifecycle.ABTest = regress.ABTest, PointEstimateAB, PointEstimateAB  # type: ignore[misc]
    try:
        yield
    finally:
        regress.ABTest = lifecycle.ABTest = saved  # type: ignore[misc]


def ours_images(host: Host, repeats: int, reruns: int, gates: Gates, mode: str, every: int, pairs: int
                ) -> tuple[list, float]:
    with ab_rule(mode):
        return _ours_images(host, repeats, reruns, gates, "ab" if mode == "ab-point" else mode, every, pairs)


def _ours_images(host: Host, repeats: int, reruns: int, gates: Gates, mode: str, every: int, pairs: int
                 ) -> tuple[list, float]:
    """The pipeline over a history with image changes: `mode` "ab" (A/B of the previous and the new
    image when a flag came with one), "reruns" (plain reruns only) or "reset" (the old rule: an
    image change restarts the baseline)."""
    g = gates if mode != "reset" else Gates(environment=FINGERPRINT_KEYS)
    mine, prints = host.nightly(repeats), image_prints(every)
    raw = judge(Series(KEY, dates(mine), fingerprints=prints), g)
    rerun, previous, spent = {}, {}, 0
    for j in raw:
        t = (j.night - D0).days
        if mode == "ab" and wants_ab(j, g):
            before = previous_level(host, t, every)
            previous[j.night] = [1000 * before * host.night[t] * (1 + host.rng.gauss(0, host.noise.cv_cell))
                                 for _ in range(pairs)]
            rerun[j.night] = host.cells(t, pairs)
        elif reruns and wants_rerun(j, g):
            rerun[j.night] = host.cells(t, reruns)
    values = {TARGET: dict(dates(mine))}
    for i in range(1, host.noise.figures + 1):
        values[f"f{i}"] = dict(dates(host.nightly(repeats, target=False)))
    factors = night_factors(values, g.window, only=[TARGET])[TARGET]
    series = Series(KEY, dates(mine), reruns=rerun, factors=factors, fingerprints=prints, previous=previous)
    js = judge(series, g)
    for j in js:  # an A/B that says "unknown" adds pairs up to the cap, as the DAG's second round
        if j.ab is not None and j.ab.wants_pairs():
            t, more = (j.night - D0).days, j.ab.wants_pairs()
            before = previous_level(host, t, every)
            previous[j.night] += [1000 * before * host.night[t] * (1 + host.rng.gauss(0, host.noise.cv_cell))
                                  for _ in range(more)]
            rerun[j.night] += host.cells(t, more)
    js = judge(series, g)
    spent = sum(len(v) for v in rerun.values()) + sum(len(v) for v in previous.values())
    return js, spent / NIGHTS


def image_study(args, g: Gates) -> list:
    print(f"\nimage changes: a new image every {args.image_every} nights (most do nothing); the change arrives "
          f"with the image of night {STEP_AT}; A/B of {g.ab_min_pairs} pairs (up to {g.ab_max_pairs})")
    head = (f"{'CV':>3} {'outl':>4} {'detector':<34} {'change':<17} {'night 1':>8} {'within 2':>8} {'nights':>6} "
            f"{'false/1000':>10} {'cells':>5} {'A/B same':>8}")
    rows, same = [], {}
    for cv, (repeats, reruns) in ((0.02, (1, 3)), (0.05, (3, 8)), (0.10, (3, 8))):
        noise = Noise(cv, 0.02, args.night_share, args.figures)
        for mode, label in (("ab", f"ours + A/B ({repeats} rep., {reruns} reruns)"),
                            ("ab-point", "ours + point-estimate A/B (before)"),
                            ("reruns", f"ours, reruns only ({repeats}, {reruns})"),
                            ("reset", "old: an image change restarts")):
            for change in IMAGE_CHANGES:
                rng = random.Random(args.seed + 11 * len(rows))
                flags, spent, called_same, ran = [], [], 0, 0
                for _ in range(args.image_histories):
                    js, rr = ours_images(Host(rng, noise, change), repeats, reruns, g, mode, args.image_every,
                                         g.ab_min_pairs)
                    flags.append([None if j.baseline is None or j.changed_with else j.alert for j in js])
                    spent.append(rr)
                    ab = js[STEP_AT].ab if len(js) > STEP_AT else None  # the A/B of the changed image's night
                    if ab is not None:
                        ran += 1
                        called_same += ab.verdict == "same"
                f = score(flags, change)
                f.cost = repeats + statistics.fmean(spent)
                rows.append((cv, 0.02, label, f"{change.name} at image", f))
                same[len(rows) - 1] = f"{called_same / ran:6.1%}" if ran else "–"
        print(f"  CV {cv:.0%} done", flush=True)
    print("\n" + head)
    for i, (cv, outliers, label, change, f) in enumerate(rows):
        print(f"{cv:>3.0%} {outliers:>4.0%} {label:<34} {change:<17} " + " ".join(
            c.rjust(w) for c, w in zip([*f.cells(), same[i]], (8, 8, 6, 10, 5, 8))))
    print("\nimage-change goals (10% steps at an image change; false alarms from the steady histories, whose "
          "images change and do nothing):")
    for cv in (0.02, 0.05, 0.10):
        mine = {(label.split(" (")[0], change): f for c, _, label, change, f in rows if c == cv}
        step, steady = mine[("ours + A/B", "step 10% at image")], mine[("ours + A/B", "steady at image")]
        old = mine[("old: an image change restarts", "step 10% at image")]
        met = step.detected >= 0.95 and steady.false_per_1000 <= 1.0
        print(f"  CV {cv:.0%}: with the A/B {step.first:.1%} caught on the first night, {step.detected:.1%} within "
              f"two (goal >= 95%), {steady.false_per_1000:.2f} false alarms per 1000 (goal <= 1): "
              f"{'met' if met else 'NOT met'}; the old rule caught {old.detected:.1%} within two nights")
    return rows


def goals(rows: list) -> None:
    """Per noise level: the issue's goals for ours, and ours against each peer at the same budget."""
    print("\ngoals (10% steps; false alarms from the steady histories):")
    for cv, outliers in sorted({(r[0], r[1]) for r in rows}):
        mine = {(label.split(" (")[0], change): f for c, o, label, change, f in rows if (c, o) == (cv, outliers)}
        ours, steady = mine[("ours", "step 10%")], mine[("ours", "steady")]
        det = ours.first if cv <= 0.02 else ours.detected
        when = "the first night" if cv <= 0.02 else "two nights"
        met = det >= 0.95 and steady.false_per_1000 <= 1.0
        line = (f"  CV {cv:.0%}, outlier nights {outliers:.0%}: {det:.1%} detected within {when} (goal >= 95%), "
                f"{steady.false_per_1000:.2f} false alarms per 1000 (goal <= 1) at {steady.cost:.2f} cells: "
                f"{'met' if met else 'NOT met'}")
        peers = sorted({name for name, _ in mine if name not in ("ours", "ours without the night factor")})
        beats = []
        for name in peers:
            p, ps = mine[(name, "step 10%")], mine[(name, "steady")]
            pdet = p.first if cv <= 0.02 else p.detected
            better = det > pdet and steady.false_per_1000 < ps.false_per_1000
            beats.append(f"{name}: {pdet:.1%}, {ps.false_per_1000:.2f}/1000 -> ours {'better' if better else 'NOT better'}")
        print(line + "\n    " + "\n    ".join(beats))


if __name__ == "__main__":
    main()
