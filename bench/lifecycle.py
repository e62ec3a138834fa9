"""A regression's whole life, scored: every message the judge says on simulated histories whose
truth is known night by night (a benchmark script; tests/unit/analysis/test_lifecycle_bench.py
runs it small in CI with the goals below).

    .venv/bin/python bench/lifecycle.py [--histories 300] [--seed 0] [--markdown]

A history is one figure (throughput) over NIGHTS nights on one host. Image A runs until night
STEP_AT; then the scenario's images and levels (SCENARIOS). A night's value is the median of
`repeats` cells:

    cell = 1000 x level x night_t x (1 + e),  e ~ N(0, cv_cell)
    night_t = 1 + N(0, cv_night), times (1 - U(0.15, 0.40)) on an outlier night (2 %)

with cv_night^2 = 0.4 CV^2 and cv_cell^2 = 0.6 CV^2 (bench/regressions.py's model). The host's
night factor is the true night_t seen through 20 peer figures: night_t x (1 + N(0, cv_cell /
sqrt(20) x 1.25)), the spread of a median of 20. The benchmark DAG's part runs as it does at
night: each night is judged raw (no factor, scalebench.analysis.lifecycle.Judge), and a figure
that wants it gets an A/B of the previous and the new image (5 pairs, up to 8 while "unknown";
`wants_ab`) or plain reruns (`wants_rerun`: 3 at CV 2 %, 8 at CV 5 %); "without the A/B" the
previous image is gone and plain reruns run instead. The report's part judges the whole series
with the night factors (scalebench.analysis.regress.judge).

Scoring. Each scenario lists its true messages as (kind, first night, last night). A message is
said on a night whose judgement has that kind (a regression: the night the figure enters the
regressed state, or a later change is blamed for making it worse). Recall: a true message said
within 2 nights of its first night. Precision: said messages that fall inside a true window of
their kind. "No suspect" counts alerts that name no change on the nights of a regression a known
change caused (from its first night on).
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from scalebench.analysis.judge import Judge  # noqa: E402
from scalebench.analysis.regress import Gates, Series, SeriesKey, judge, wants_ab, wants_rerun  # noqa: E402
from scalebench.core.verdicts import (ENDED, FIXED, IMPROVEMENT, NO_BETTER, NO_EFFECT, PARTLY_FIXED,  # noqa: E402
                                      REGRESSION)
from regressions import Noise  # noqa: E402

KEY = SeriesKey("sim", 2, "images_per_s")
D0 = dt.date(2026, 1, 1)
NIGHTS, STEP_AT, FIX_AT = 50, 30, 36
PEERS = 20
SCORED = (REGRESSION, FIXED, PARTLY_FIXED, NO_BETTER, ENDED, IMPROVEMENT, NO_EFFECT)
LAST = NIGHTS - 1


@dataclass(frozen=True)
class Scenario:
    name: str
    segments: tuple[tuple[int, str, float, str], ...]  # (from night, image, level, driver)
    truth: tuple[tuple[str, int, int], ...]             # (message kind, first night, last night it may be said)
    culprit: tuple[str, int] | None = None  # the image that regressed >= 8 % and its night: to be named within 3
    no_change_from: int | None = None       # a step with no change from this night: its regression names none
    full_fix: bool = False                  # a later image brings the figure all the way back
    nightly: bool = False                   # a new image every night (false regressions counted per night)

    def at(self, t: int) -> tuple[str, float, str]:
        image, level, driver = "a", 1.0, "550"
        for start, i, lvl, drv in self.segments:
            if t >= start:
                image, level, driver = i, lvl, drv
        return image, level, driver


def seg(start: int, image: str, level: float, driver: str = "550") -> tuple[int, str, float, str]:
    return start, image, level, driver


SCENARIOS = [
    Scenario("a step that stays (B -10 %)", (seg(STEP_AT, "b", 0.9),), ((REGRESSION, STEP_AT, LAST),)),
    Scenario("a step, then a full fix (C)", (seg(STEP_AT, "b", 0.9), seg(FIX_AT, "c", 1.0)),
             ((REGRESSION, STEP_AT, FIX_AT - 1), (FIXED, FIX_AT, LAST))),
    Scenario("a partial fix (B -20 %, C -10 %)", (seg(STEP_AT, "b", 0.8), seg(FIX_AT, "c", 0.9)),
             ((REGRESSION, STEP_AT, FIX_AT - 1), (PARTLY_FIXED, FIX_AT, LAST))),
    Scenario("a new image no better (C = B)", (seg(STEP_AT, "b", 0.9), seg(FIX_AT, "c", 0.9)),
             ((REGRESSION, STEP_AT, FIX_AT - 1), (NO_BETTER, FIX_AT, LAST))),
    Scenario("ends by itself, then a harmless C", (seg(STEP_AT, "b", 0.9), seg(STEP_AT + 4, "b", 1.0),
                                                    seg(STEP_AT + 10, "c", 1.0)),
             ((REGRESSION, STEP_AT, STEP_AT + 3), (ENDED, STEP_AT + 4, STEP_AT + 9), (NO_EFFECT, STEP_AT + 10, LAST))),
    Scenario("a second step on top (B -10 %, C -20 %)", (seg(STEP_AT, "b", 0.9), seg(FIX_AT, "c", 0.8)),
             ((REGRESSION, STEP_AT, FIX_AT - 1), (REGRESSION, FIX_AT, LAST))),
    Scenario("two changes on consecutive nights (B -10 %, C = B)", (seg(STEP_AT, "b", 0.9), seg(STEP_AT + 1, "c", 0.9)),
             ((REGRESSION, STEP_AT, LAST), (NO_BETTER, STEP_AT + 1, LAST))),
    Scenario("an improvement that holds (C +10 %)", (seg(STEP_AT, "c", 1.1),), ((IMPROVEMENT, STEP_AT, LAST),)),
    Scenario("an improvement that does not hold", (seg(STEP_AT, "c", 1.12), seg(STEP_AT + 1, "c", 1.0)),
             ((NO_EFFECT, STEP_AT, LAST),)),
    Scenario("a driver change (-10 %), then B -10 %", (seg(20, "a", 0.9, "560"), seg(40, "b", 0.81, "560")),
             ((REGRESSION, 40, LAST),)),
    Scenario("harmless images, outlier nights 3 %", (seg(STEP_AT, "b", 1.0), seg(40, "c", 1.0)),
             ((NO_EFFECT, STEP_AT, 39), (NO_EFFECT, 40, LAST))),
]


def every(k: int, level, start: int = 0, driver="550") -> tuple[tuple[int, str, float, str], ...]:
    """A new image every k nights from `start` (named by its first night), at level(t)."""
    return tuple(seg(t, f"n{t}", level(t), driver) for t in range(start, NIGHTS, k))


def first_image_from(k: int, night: int, start: int = 0) -> int:
    return next(t for t in range(start, NIGHTS, k) if t >= night)


# what teams that rebuild their images often see (issue: nightly images judged, never absorbed)
NIGHTLY = [
    Scenario("a new image every night, no step", every(1, lambda t: 1.0), ((NO_EFFECT, 1, LAST),), nightly=True),
    Scenario("a new image every night, one 10 % slower from night 30", every(1, lambda t: 0.9 if t >= 30 else 1.0),
             ((NO_EFFECT, 1, 29), (REGRESSION, 30, LAST), (NO_BETTER, 31, LAST)), culprit=("n30", 30), nightly=True),
    Scenario("a new image every night, one 10 % slower from night 30, one fixing it from night 40",
             every(1, lambda t: 0.9 if 30 <= t < 40 else 1.0),
             ((NO_EFFECT, 1, 29), (REGRESSION, 30, 39), (NO_BETTER, 31, 39), (FIXED, 40, LAST), (NO_EFFECT, 41, LAST)),
             culprit=("n30", 30), nightly=True, full_fix=True),
    Scenario("a new image every night, one 8 % slower from night 3", every(1, lambda t: 0.92 if t >= 3 else 1.0),
             ((NO_EFFECT, 1, 2), (REGRESSION, 3, LAST), (NO_BETTER, 4, LAST)), culprit=("n3", 3), nightly=True),
    *(Scenario(f"a new image every {k} nights, the one from night {first_image_from(k, 20)} 10 % slower",
               every(k, lambda t, k=k: 0.9 if t >= first_image_from(k, 20) else 1.0),
               ((NO_EFFECT, k, first_image_from(k, 20) - 1), (REGRESSION, first_image_from(k, 20), LAST),
                (NO_BETTER, first_image_from(k, 20) + 1, LAST)), culprit=(f"n{first_image_from(k, 20)}",
                                                                         first_image_from(k, 20)))
      for k in (2, 3, 4)),
    *(Scenario(f"B 10 % slower {k} night(s) after the series' start", (seg(k, "b", 0.9),), ((REGRESSION, k, LAST),),
               culprit=("b", k)) for k in (1, 4)),
    *(Scenario(f"a driver change, then B 10 % slower {k} night(s) later",
               (seg(26, "a", 0.95, "560"), seg(26 + k, "b", 0.855, "560")), ((REGRESSION, 26 + k, LAST),),
               culprit=("b", 26 + k)) for k in (1, 4)),
    *(Scenario(f"an improvement (C +10 %), then B 10 % slower {k} night(s) after it is confirmed",
               (seg(20, "c", 1.1), seg(21 + k, "b", 0.99)), ((IMPROVEMENT, 20, 22), (REGRESSION, 21 + k, LAST)),
               culprit=("b", 21 + k)) for k in (1, 4)),
    *(Scenario(f"a harmless C, then a no-change step {k} nights later", (seg(30, "c", 1.0), seg(30 + k, "c", 0.9)),
               ((NO_EFFECT, 30, 30 + k - 1), (REGRESSION, 30 + k, LAST)), no_change_from=30 + k) for k in (2, 4, 6)),
    Scenario("a slow drift (-0.5 % a night from night 20) under harmless images every 3 nights",
             every(3, lambda t: 1.0 - 0.005 * max(0, t - 20)),
             ((NO_EFFECT, 3, LAST), (REGRESSION, 28, LAST), (NO_BETTER, 28, LAST)), no_change_from=28),
    Scenario("a step (B -10 %), then a rollback to exactly image A", (seg(STEP_AT, "b", 0.9), seg(FIX_AT, "a", 1.0)),
             ((REGRESSION, STEP_AT, FIX_AT - 1), (FIXED, FIX_AT, LAST)), full_fix=True),
]
SCENARIOS += NIGHTLY
for i, sc in enumerate(SCENARIOS):
    if sc.name == "a step, then a full fix (C)":
        SCENARIOS[i] = Scenario(sc.name, sc.segments, sc.truth, full_fix=True)
OUTLIERS = {"harmless images, outlier nights 3 %": 0.03}


# bench/regressions.py's noise model, with the repeats and reruns its search found for each CV
NOISES = {0.02: (Noise(0.02, 0.02), 1, 3), 0.05: (Noise(0.05, 0.02), 3, 8)}


def fingerprint(image: str, driver: str) -> dict:
    return {"image": f"sim:{image}", "image_digest": "sha256:" + image * 64, "driver": driver}


def previous_level(sc: Scenario, t: int, image: str) -> float:
    """The level of the A/B's previous image (the suspect's) as it last ran before night t."""
    return next(sc.at(u)[1] for u in range(t - 1, -1, -1) if f"sim:{sc.at(u)[0]}" == image)


def history(sc: Scenario, setting: tuple[Noise, int, int], ab: bool, rng: random.Random, gates: Gates,
            cost: list[int] | None = None) -> list:
    """One simulated history through the DAG's rerun decisions and the report's judge; `setting`:
    the noise, nightly repeats and reruns; `cost` (a list) gets the A/B and rerun cells of each night."""
    noise, repeats, rerun_count = setting
    outliers = OUTLIERS.get(sc.name, noise.outliers)
    night = []
    for _ in range(NIGHTS):
        f = 1 + rng.gauss(0, noise.cv_night)
        night.append(f * (1 - rng.uniform(0.15, 0.40)) if rng.random() < outliers else f)

    def cells(t: int, level: float, n: int) -> list[float]:
        return [1000 * level * night[t] * (1 + rng.gauss(0, noise.cv_cell)) for _ in range(n)]

    dates = [D0 + dt.timedelta(days=t) for t in range(NIGHTS)]
    points, prints, reruns, previous, factors = [], {}, {}, {}, {}
    dag = Judge(KEY, gates)  # the DAG's raw judgement, as scalebench.analysis.reruns does it
    for t, d in enumerate(dates):
        image, level, driver = sc.at(t)
        value = statistics.median(cells(t, level, repeats))
        prints[d] = fingerprint(image, driver)
        factors[d] = night[t] * (1 + rng.gauss(0, noise.cv_cell / math.sqrt(PEERS) * 1.25))
        points.append((d, value))
        j = dag.night(d, value, prints[d], peek=True)
        if ab and wants_ab(j, gates):
            assert j.suspect is not None
            before = previous_level(sc, t, j.suspect.name("previous"))
            previous[d], reruns[d] = cells(t, before, gates.ab_min_pairs), cells(t, level, gates.ab_min_pairs)
            j = dag.night(d, value, prints[d], previous=previous[d], reruns=reruns[d], peek=True)
            if j.ab is not None and j.ab.wants_pairs():  # the DAG's more_pairs round
                more = j.ab.wants_pairs()
                previous[d] += cells(t, before, more)
                reruns[d] += cells(t, level, more)
        elif wants_rerun(j, gates):
            reruns[d] = cells(t, level, rerun_count)
        dag.night(d, value, prints[d], previous=previous.get(d, ()), reruns=reruns.get(d, ()))
        if cost is not None:
            cost.append(len(previous.get(d, ())) + len(reruns.get(d, ())))
    return judge(Series(KEY, points, reruns, prints, factors, previous), gates)


def said(js: list) -> list[tuple[str, int]]:
    """(kind, night) of every message the history said that the bench scores (a regression: the
    night a figure enters the regressed state, or its regression is blamed on another change)."""
    out = []
    for t, j in enumerate(js):
        before = js[t - 1] if t else None
        if j.state == "regressed" and (before is None or before.state != "regressed" or j.blamed != before.blamed):
            out.append((REGRESSION, t))
        elif j.kind in SCORED and j.kind != REGRESSION:
            out.append((j.kind, t))
    return out


@dataclass
class Score:
    true: dict = field(default_factory=lambda: {k: 0 for k in SCORED})      # true messages
    recalled: dict = field(default_factory=lambda: {k: 0 for k in SCORED})  # said within 2 nights of them
    said: dict = field(default_factory=lambda: {k: 0 for k in SCORED})
    right: dict = field(default_factory=lambda: {k: 0 for k in SCORED})     # said inside a true window
    histories: int = 0
    no_suspect: int = 0                 # alerts naming no change on the nights of a regression a change caused
    partial_called_fixed: list = field(default_factory=lambda: [0, 0])
    self_fix_credited: list = field(default_factory=lambda: [0, 0])
    named: list = field(default_factory=lambda: [0, 0])           # image regressions named within 3 nights
    false_regressions: list = field(default_factory=lambda: [0, 0])  # regressions said, nights (nightly, no step)
    no_change: list = field(default_factory=lambda: [0, 0])       # no-change steps whose regression names none
    drift_blamed: list = field(default_factory=lambda: [0, 0])    # a drift's first alerts blamed on an image
    full_fix_fixed: list = field(default_factory=lambda: [0, 0])  # full fixes said "fixed", never partly / by itself
    ab_cells: list = field(default_factory=lambda: [0, 0])        # A/B and rerun cells, nights (nightly images)
    last: "Score | None" = None  # the same, over the last table's scenarios only (their goals are held there)

    def add(self, sc: Scenario, js: list) -> None:
        self.histories += 1
        messages = said(js)
        for kind, first, last in sc.truth:
            self.true[kind] += 1
            self.recalled[kind] += any(k == kind and first <= t <= min(first + 2, last) for k, t in messages)
        for kind, t in messages:
            self.said[kind] += 1
            self.right[kind] += any(k == kind and first <= t <= last for k, first, last in sc.truth)
        regressed = [first for kind, first, _ in sc.truth if kind == REGRESSION]
        if regressed and sc.no_change_from is None:  # a regression a change caused: from its first night on
            self.no_suspect += sum(1 for j in js[regressed[0]:] if j.alert and j.blamed is None)
        fixed = any(k == FIXED for k, _ in messages)
        if sc.culprit is not None:
            image, night = sc.culprit
            self.named[0] += any(j.state == "regressed" and j.blamed is not None and j.blamed.new_image == f"sim:{image}"
                                 for j in js[night:night + 4])
            self.named[1] += 1
        if sc.nightly and not any(k == REGRESSION for k, _, _ in sc.truth):
            self.false_regressions[0] += sum(1 for k, _ in messages if k == REGRESSION)
            self.false_regressions[1] += len(js)
        if sc.no_change_from is not None:
            first = next((t for k, t in messages if k == REGRESSION and t >= sc.no_change_from), None)
            if not sc.name.startswith("a slow drift"):
                self.no_change[0] += first is not None and js[first].blamed is None
                self.no_change[1] += 1
            elif first is not None:  # a drift is seldom seen at all (the baseline follows it): its first alerts
                self.drift_blamed[0] += js[first].blamed is not None
                self.drift_blamed[1] += 1
        if sc.full_fix:
            kinds = {k for k, _ in messages}
            self.full_fix_fixed[0] += FIXED in kinds and not kinds & {PARTLY_FIXED, ENDED}
            self.full_fix_fixed[1] += 1
        if any(k == PARTLY_FIXED for k, _, _ in sc.truth):
            self.partial_called_fixed[0] += fixed
            self.partial_called_fixed[1] += 1
        if any(k == ENDED for k, _, _ in sc.truth):
            self.self_fix_credited[0] += fixed
            self.self_fix_credited[1] += 1

    def recall(self, kind: str) -> float | None:
        return self.recalled[kind] / self.true[kind] if self.true[kind] else None

    def precision(self, kind: str) -> float | None:
        return self.right[kind] / self.said[kind] if self.said[kind] else None


def run(cv: float, ab: bool, histories: int, seed: int, gates: Gates = Gates()) -> tuple[Score, dict]:
    """Every scenario `histories` times at one noise level: the score, and per scenario the most
    common sequence of messages."""
    setting, score, sequences = NOISES[cv], Score(), {}
    for i, sc in enumerate(SCENARIOS):
        rng = random.Random(seed * 1000 + i)
        seen: dict[str, int] = {}
        for _ in range(histories):
            cost: list[int] = []
            js = history(sc, setting, ab, rng, gates, cost)
            score.add(sc, js)
            if sc not in NIGHTLY:
                score.last = score.last or Score()
                score.last.add(sc, js)
            if sc.nightly:
                score.ab_cells[0] += sum(cost)
                score.ab_cells[1] += len(cost)
            words = ", ".join(f"{k} @{t}" for k, t in said(js)) or "nothing"
            seen[words] = seen.get(words, 0) + 1
        sequences[sc.name] = max(seen.items(), key=lambda kv: kv[1])
    return score, sequences


# one benchmark, two figures: image B slows 2 GPUs by 10 % and 4 GPUs by 6 %; image C restores 2 GPUs only
TWO_FIGURES = {"2 GPUs": Scenario("2 GPUs: B -10 %, C fixes it", (seg(STEP_AT, "b", 0.9), seg(FIX_AT, "c", 1.0)), ()),
               "4 GPUs": Scenario("4 GPUs: B -6 %, C does not", (seg(STEP_AT, "b", 0.94), seg(FIX_AT, "c", 0.94)), ())}


def group_told_fixed(figures: dict[str, list]) -> bool:
    """The alert group rule (scalebench.store.alert_groups.AlertGroups.record_night) on one
    benchmark's figures: B's group opens with a figure's alert blamed on B; a figure flagged
    while it runs B joins it (also one whose alert blamed no change); a figure is back when it is judged fixed or ended
    (blamed on B) or better by a later change; the group is told fixed once every figure in it is back."""
    key, members, back = "sim:b", set(), set()
    for t in range(NIGHTS):
        tonight = {name: js[t] for name, js in figures.items()}
        for name, j in tonight.items():
            if j.alert and j.blamed is not None and j.blamed.new_image == key:
                members.add(name)
                back.discard(name)
        for name, j in tonight.items():
            blamed_b = j.blamed is not None and j.blamed.new_image == key
            if members and j.flagged and j.image == key and not (j.alert and blamed_b):
                members.add(name)
                back.discard(name)
        for name, j in tonight.items():
            blamed_b = j.blamed is not None and j.blamed.new_image == key
            if name in members and not j.flagged and ((j.kind in (FIXED, ENDED) and blamed_b) or j.kind == IMPROVEMENT):
                back.add(name)
        if members and members <= back:
            return True
    return False


def run_groups(cv: float, ab: bool, histories: int, seed: int, gates: Gates = Gates()) -> tuple[int, int]:
    """(histories whose B group was told fixed while 4 GPUs stayed 6 % slow, histories)."""
    rng, told = random.Random(seed * 1000 + 999), 0
    for _ in range(histories):
        told += group_told_fixed({name: history(sc, NOISES[cv], ab, rng, gates) for name, sc in TWO_FIGURES.items()})
    return told, histories


def goals(score: Score, groups: tuple[int, int] | None = None, nightly: bool = True) -> list[tuple[str, bool]]:
    """The goals at CV 2 %, each as (what, met). The nightly-image goals hold with the A/B, the
    normal case (without it a change on a short baseline cannot be judged at all: printed)."""
    last = score.last or score
    p, r = last.precision(FIXED), last.recall(FIXED)
    pf, n = last.partial_called_fixed
    sf, m = last.self_fix_credited
    return (nightly_goals(score, groups) if nightly else []) + [
            (f'"regression fixed" precision {pct(p)} on the last table\'s scenarios (goal >= 99 %)',
             p is None or p >= 0.99),
            (f'"regression fixed" recall within 2 nights {pct(r)} (goal >= 95 %)', r is None or r >= 0.95),
            (f"a partial fix called fixed {pf}/{n} (goal <= 2 %)", pf <= 0.02 * n),
            (f"a fix that came by itself credited to an image {sf}/{m} (goal <= 1 %)", sf <= 0.01 * m),
            (f"alerts naming no change on the nights of a regression a change caused: {last.no_suspect} (goal 0)",
             last.no_suspect == 0)]


def nightly_goals(score: Score, groups: tuple[int, int] | None) -> list[tuple[str, bool]]:
    named, images = score.named
    false, nights = score.false_regressions
    none, steps = score.no_change
    full, fixes = score.full_fix_fixed
    out = [(f"image regressions >= 8 % named with their image within 3 nights {named}/{images} (goal >= 95 %)",
            named >= 0.95 * images),
           (f"false regressions with a new image every night and no step {false} in {nights} nights "
            f"(goal <= 1 per 1000)", false * 1000 <= max(nights, 1)),
           (f"a no-change step 2-6 nights after a cleared image named as no change {none}/{steps} (goal >= 90 %)",
            none >= 0.9 * steps),

           (f'a full fix said "fixed", never "partly fixed" or "ended by itself" {full}/{fixes} (goal >= 99 %)',
            full >= 0.99 * fixes)]
    if groups is not None:
        told, n = groups
        out.append((f"a group told fixed while a figure it moved is still 6 % slow {told}/{n} (goal <= 1 %)",
                    told <= 0.01 * n))
    return out


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--histories", type=int, default=300, help="histories per scenario and setting")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true", help="the tables as docs/measurements.md has them")
    args = ap.parse_args()
    t0 = time.monotonic()
    md = args.markdown
    print(f"{len(SCENARIOS)} scenarios x {args.histories} histories, {NIGHTS} nights each, seed {args.seed}")
    head = ("| CV | A/B | message | true | said within 2 nights | said | right when said |\n|---|---|---|---|---|---|---|"
            if md else f"{'CV':>3} {'A/B':>4} {'message':<28} {'true':>5} {'recall':>7} {'said':>5} {'precision':>9}")
    rows, sequences, checks = [], {}, []
    for cv in NOISES:
        for ab in (True, False):
            score, seqs = run(cv, ab, args.histories, args.seed)
            sequences[(cv, ab)] = seqs
            for k in SCORED:
                cells = (f"{cv:.0%}", "yes" if ab else "no", k, str(score.true[k]), pct(score.recall(k)),
                         str(score.said[k]), pct(score.precision(k)))
                rows.append("| " + " | ".join(cells) + " |" if md else
                            f"{cells[0]:>3} {cells[1]:>4} {cells[2]:<28} {cells[3]:>5} {cells[4]:>7} {cells[5]:>5} "
                            f"{cells[6]:>9}")
            extra = (f"partial fix called fixed {score.partial_called_fixed[0]}/{score.partial_called_fixed[1]}, "
                     f"self-ended credited to an image {score.self_fix_credited[0]}/{score.self_fix_credited[1]}, "
                     f"alerts naming no change {score.no_suspect}")
            rows.append(f"| {cv:.0%} | {'yes' if ab else 'no'} | {extra} | | | | |" if md else f"{'':>9}{extra}")
            groups = run_groups(cv, ab, args.histories, args.seed)
            cells, nights = score.ab_cells
            nightly = [what for what, _ in nightly_goals(score, groups)] + [
                f"a slow drift under harmless images: first alerts blamed on an image {score.drift_blamed[0]}/"
                f"{score.drift_blamed[1]} (no goal: without a step, the A/B of an image the drift began under "
                f"can only say unknown)",
                f"A/B and rerun cells per night with new images every 1-4 nights {cells / max(nights, 1):.2f}"]
            for what in nightly:
                rows.append(f"| {cv:.0%} | {'yes' if ab else 'no'} | {what} | | | | |" if md else f"{'':>9}{what}")
            if cv == 0.02:  # with the A/B (the normal case) every goal; without it, those of the last table
                checks += [(f"CV 2 %, A/B {'yes' if ab else 'no'}: {what}", met)
                           for what, met in goals(score, groups, nightly=ab)]
    print(head)
    print("\n".join(rows))
    print("\nmost common messages per scenario (kind @night; B at night 30, C at 36 unless named):")
    for (cv, ab), seqs in sequences.items():
        for name, (words, count) in seqs.items():
            print(f"{'- ' if md else '  '}CV {cv:.0%}, A/B {'yes' if ab else 'no'}, {name}: {words} "
                  f"({count} of {args.histories})")
    print("\ngoals:")
    for what, met in checks:
        print(f"{'- ' if md else '  '}{what}: {'met' if met else 'NOT met'}")
    print(f"\ntook {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
