"""Statistics the report states: dispersion of repeats, bootstrap CIs of relative time,
equivalence verdicts for accuracy, rank correlation. numpy/scipy only, imported lazily."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def iqr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def bootstrap_ratio_ci(t1: list[float], tn: list[float], *, n_boot: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap CI of median(tn) / median(t1), resampling each side's repeats."""
    return bootstrap_mean_ratio_ci([(t1, tn)], n_boot=n_boot, level=level, seed=seed)


def bootstrap_mean_ratio_ci(pairs: list[tuple[list[float], list[float]]], *, n_boot: int = 2000,
                            level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean over epoch counts of median(tn) / median(t1): each
    replicate resamples the repeats of every epoch count (both sides), takes each ratio of
    medians and averages them, so the interval is that of the averaged ratio itself (not an
    average of per-epoch interval ends, which is wider). None when a side has < 2 repeats."""
    if not pairs or any(len(t1) < 2 or len(tn) < 2 for t1, tn in pairs):
        return None
    import numpy as np

    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for t1, tn in pairs:
        a, b = np.asarray(t1, float), np.asarray(tn, float)
        ra = np.median(rng.choice(a, size=(n_boot, a.size)), axis=1)
        rb = np.median(rng.choice(b, size=(n_boot, b.size)), axis=1)
        total += rb / ra
    lo, hi = np.quantile(total / len(pairs), [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Verdict:
    kind: str               # equivalent | worse | better | inconclusive | uninformative
    diff: float | None      # mean(n GPUs) - mean(1 GPU)
    ci: tuple[float, float] | None
    margin: float
    n: tuple[int, int]
    why: str | None = None  # uninformative: why the figures cannot tell (a metric at its floor, no variance)

    def text(self, scale: float = 100.0, unit: str = " pt") -> str:
        if self.kind == "uninformative":
            return f"uninformative ({self.why})"
        if self.ci is None:
            return f"inconclusive (n too small: {self.n[0]} vs {self.n[1]} repeats)"
        lo, hi = (v * scale for v in self.ci)
        d = self.diff * scale
        ci = f"90% CI {lo:+.1f}..{hi:+.1f}{unit}"
        if self.kind == "equivalent":
            return f"equivalent (diff {d:+.1f}{unit}, {ci}, margin ±{self.margin * scale:.1f}{unit})"
        if self.kind == "worse":
            return f"worse by {-d:.1f}{unit} ({ci})"
        if self.kind == "better":
            return f"better by {d:.1f}{unit} ({ci})"
        return f"inconclusive (diff {d:+.1f}{unit}, {ci}, margin ±{self.margin * scale:.1f}{unit})"


def equivalence(base: list[float], other: list[float], margin: float, floor: float | None = 0.0,
                ceiling: float | None = 1.0) -> Verdict:
    """Two one-sided tests at 5 % each: equivalent when the 90 % Welch CI of the difference
    lies inside ±margin; worse/better when the CI excludes 0 on that side (and is not
    inside the margin); inconclusive otherwise. Uninformative, never equivalent, when every
    value of both sides sits at the metric's floor or ceiling (a detector that finds nothing
    scores 0 at every GPU count), or when neither side varies over its repeats."""
    n = (len(base), len(other))
    values = [*base, *other]
    for bound, name in ((floor, "floor"), (ceiling, "ceiling")):
        if bound is not None and min(n) >= 1 and all(v == bound for v in values):
            return Verdict("uninformative", 0.0, None, margin, n, f"at its {name} {bound:g} on both sides")
    if min(n) >= 2 and len(set(base)) == 1 and len(set(other)) == 1:
        return Verdict("uninformative", other[0] - base[0], None, margin, n,
                       "no variance: every repeat gave the same value on both sides")
    if min(n) < 2:
        return Verdict("inconclusive", None if not min(n) else statistics.fmean(other) - statistics.fmean(base),
                       None, margin, n)
    from scipy import stats as st

    m1, m2 = statistics.fmean(base), statistics.fmean(other)
    v1, v2 = statistics.variance(base), statistics.variance(other)
    se = math.sqrt(v1 / n[0] + v2 / n[1])
    diff = m2 - m1
    if se == 0:
        ci = (diff, diff)
    else:
        df = (v1 / n[0] + v2 / n[1]) ** 2 / ((v1 / n[0]) ** 2 / (n[0] - 1) + (v2 / n[1]) ** 2 / (n[1] - 1))
        half = float(st.t.ppf(0.95, df)) * se
        ci = (diff - half, diff + half)
    if -margin < ci[0] and ci[1] < margin:
        kind = "equivalent"
    elif ci[1] < 0:
        kind = "worse"
    elif ci[0] > 0:
        kind = "better"
    else:
        kind = "inconclusive"
    return Verdict(kind, diff, ci, margin, n)


def spearman(x: list[float], y: list[float]) -> tuple[float, float] | tuple[None, None] | None:
    """Spearman's rho and its two-sided p-value (exact, by permutation, up to 8 pairs; the
    t approximation beyond); None with fewer than 3 pairs; (None, None) when either side is
    constant, where the rank correlation is undefined (no rho, no p-value)."""
    if len(x) < 3:
        return None
    if len(set(x)) == 1 or len(set(y)) == 1:
        return None, None
    import itertools

    from scipy import stats as st

    rho = float(st.spearmanr(x, y).statistic)
    if len(x) > 8:
        return rho, float(st.spearmanr(x, y).pvalue)
    perms = list(itertools.permutations(y))
    extreme = sum(abs(float(st.spearmanr(x, p).statistic)) >= abs(rho) - 1e-12 for p in perms)
    return rho, extreme / len(perms)


def robust_scale(history: list[float]) -> float:
    """Standard deviation of the history without its outliers (points beyond 3 MAD-sigmas of
    the median): as robust as the MAD, much less noisy on 10-20 nights."""
    med = statistics.median(history)
    mad = statistics.median([abs(h - med) for h in history]) * 1.4826
    kept = [h for h in history if abs(h - med) <= 3 * mad] if mad > 0 else list(history)
    if len(kept) < 3:
        return mad
    mean = sum(kept) / len(kept)  # plain floats: statistics.stdev's exact fractions are 100x slower
    return math.sqrt(sum((h - mean) ** 2 for h in kept) / (len(kept) - 1))


def robust_z(value: float, history: list[float]) -> float:
    """(value - median) / robust scale; a zero spread falls back to 1 % of the median."""
    med = statistics.median(history)
    spread = robust_scale(history) or abs(med) * 0.01 or 1.0
    return (value - med) / spread
