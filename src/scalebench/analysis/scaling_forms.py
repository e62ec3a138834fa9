"""How the step grows with the GPU count where no breakdown says why: candidate forms, each fitted
on a series' measured counts and scored by predicting its own largest count from the smaller
ones; the prediction mixes them by that held-out error, refitted on every count
(docs/prediction.md).

A form gives growth(N) = step(N) / step(1) at the same per-GPU batch (>= 1: nothing runs faster
than its 1-GPU compute):

    log      1 + s log2 N                     every doubling adds the same share
    amdahl   1 + a (N - 1)                    a serial part: throughput tends to 1 / a
    usl      1 + a (N - 1) + k N (N - 1)      Gunther's universal law: a peak, then a drop
    held     growth(top) beyond the largest count: its per-GPU rate held
    mix      the forms' throughputs weighted by 1 / (held-out error + MIX_FLOOR)^2

`usl` is a candidate only where the series shows a plateau or a drop (`plateau`). With fewer than
three counts nothing can be scored: a weak-scaling series (the per-GPU batch held) takes the more
conservative of log and held, a strong-scaling one (the global batch held, each GPU's share
shrinking) Amdahl's law, whose fixed part per step is what more GPUs cannot divide; the choice is
said. Amdahl stays a candidate for the interval everywhere (on the tuning part's weak two-count
tables it was 9 % pessimistic on average, log 0.6 %, held 4.9 % optimistic; on its five strong
ones Amdahl 12 % mean error, the old rule 28 %; bench/prediction.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

FORMS = ("log", "amdahl", "held", "usl")
PLATEAU_GAIN = 0.25   # an added GPU that brings under a quarter of the 1-GPU rate: a plateau
MIX_FLOOR = 0.01      # a form's weight is 1 / (its held-out error + this)^2 (chosen on the tuning part)
UNSCORED = ("log", "held")  # the forms a series too short to score chooses between, conservatively


@dataclass(frozen=True)
class Form:
    name: str
    params: tuple[float, ...]
    top: int = 1          # the largest count it was fitted on
    top_growth: float = 1.0
    parts: tuple["Form", ...] = ()  # a mix's forms, `params` their weights

    def growth(self, n: float) -> float:
        if self.name == "mix":  # the weighted mean of the forms' throughputs (N / growth)
            return 1 / sum(w / f.growth(n) for w, f in zip(self.params, self.parts))
        if self.name == "held":  # per-GPU rate of the largest count beyond it, the log shape below it
            if n >= self.top:
                return self.top_growth
            return 1 + (self.top_growth - 1) * math.log2(n) / math.log2(self.top) if self.top > 1 else 1.0
        if self.name == "log":
            g = 1 + self.params[0] * math.log2(n)
        elif self.name == "amdahl":
            g = 1 + self.params[0] * (n - 1)
        else:
            g = 1 + self.params[0] * (n - 1) + self.params[1] * n * (n - 1)
        return max(1.0, g)

    def describe(self) -> str:
        if self.name == "held":
            return f"held ({self.top}-GPU per-GPU rate carried forward)"
        if self.name == "mix":
            return "mix of " + ", ".join(f"{f.describe()} {w:.0%}" for w, f in
                                         sorted(zip(self.params, self.parts), key=lambda x: -x[0]))
        names = {"log": ("s",), "amdahl": ("a",), "usl": ("a", "k")}[self.name]
        return f"{self.name} ({', '.join(f'{k}={v:.3g}' for k, v in zip(names, self.params))})"


def fit_form(name: str, growth: Sequence[tuple[float, float]]) -> Form:
    """`name` fitted on (N, growth(N)) pairs (N > 1 only carry information), parameters >= 0,
    least squares through growth(1) = 1."""
    pairs = [(n, g) for n, g in growth if n > 1]
    top = max((n for n, _ in pairs), default=1)
    top_growth = next((g for n, g in pairs if n == top), 1.0)
    if name == "held":
        return Form("held", (), int(top), max(1.0, top_growth))
    if name == "usl":
        import numpy as np
        from scipy.optimize import nnls

        if not pairs:
            return Form("usl", (0.0, 0.0), int(top), top_growth)
        a = np.array([[n - 1, n * (n - 1)] for n, _ in pairs], dtype=float)
        coef, _ = nnls(a, np.array([g - 1 for _, g in pairs], dtype=float))
        return Form("usl", (float(coef[0]), float(coef[1])), int(top), top_growth)
    x = (lambda n: math.log2(n)) if name == "log" else (lambda n: n - 1)
    sxx = sum(x(n) ** 2 for n, _ in pairs)
    p = max(0.0, sum(x(n) * (g - 1) for n, g in pairs) / sxx) if sxx else 0.0
    return Form(name, (p,), int(top), top_growth)


def plateau(growth: Sequence[tuple[float, float]]) -> bool:
    """The largest count's step added under PLATEAU_GAIN of a 1-GPU rate per added GPU (or lost
    throughput): throughput n / growth(n)."""
    pts = sorted(growth)
    if len(pts) < 2:
        return False
    (n0, g0), (n1, g1) = pts[-2], pts[-1]
    return (n1 / g1 - n0 / g0) / (n1 - n0) < PLATEAU_GAIN


@dataclass(frozen=True)
class Choice:
    """The form used, each candidate's held-out error at the largest count (None: not scored)
    and why this one."""
    form: Form
    scores: dict[str, float]
    held_out: int | None
    reason: str
    candidates: dict[str, Form]   # each candidate refitted on every count


def choose(growth: Sequence[tuple[float, float]], target: float, only: str | None = None,
           strong: bool = False) -> Choice:
    """The forms mixed by held-out error where three counts or more allow scoring, else Amdahl
    for a `strong`-scaling series and the more conservative of UNSCORED (the larger growth at
    `target`) for a weak one; `only` refits one form (a bootstrap resample of a series that
    chose it)."""
    pts = sorted(growth)
    if only and only != "mix":
        form = fit_form(only, pts)
        return Choice(form, {}, None, "refitted", {only: form})
    names = [f for f in FORMS if f != "usl" or plateau(pts)]
    refit = {name: fit_form(name, pts) for name in names}
    if len(pts) < 3:
        too_few = f"{len(pts)} counts measured, too few to score a form on its largest: "
        if strong:
            return Choice(refit["amdahl"], {}, None, too_few + "strong scaling (the global batch held), so "
                          "Amdahl's law: a part of each step that more GPUs do not divide (amdahl)", refit)
        pick = max(UNSCORED, key=lambda f: refit[f].growth(target))
        return Choice(refit[pick], {}, None, too_few + f"the more conservative of log and held ({pick})", refit)
    held_n, held_g = pts[-1]
    below = {name: fit_form(name, pts[:-1]) for name in names}
    scores = {name: abs(held_g / below[name].growth(held_n) - 1) for name in names}
    weights = [1 / (scores[f] + MIX_FLOOR) ** 2 for f in names]
    total = sum(weights)
    mix = Form("mix", tuple(w / total for w in weights), int(held_n), held_g, tuple(refit[f] for f in names))
    scored = Form("mix", mix.params, int(held_n), held_g, tuple(below[f] for f in names))
    scores["mix"] = abs(held_g / scored.growth(held_n) - 1)
    return Choice(mix, scores, int(held_n), f"predicted the measured {int(held_n)} from the counts below it: "
                  + ", ".join(f"{f} {scores[f]:.1%}" for f in names) + f", the mix {scores['mix']:.1%}", refit)
