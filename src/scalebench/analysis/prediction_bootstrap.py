"""The interval of a prediction from a store's nights: the nights resampled with replacement, each
resample's medians per count as weighted medians of values sorted once (no point copied), the
model refitted on each (BOOTSTRAP resamples, LEVEL interval)."""
from __future__ import annotations

from typing import Sequence

from scalebench.analysis.prediction import BOOTSTRAP, LEVEL, MEASURED, Network, Point, fit, images_per_s


def bootstrap(points: Sequence[Point], nights: list[str], gpus: int, hosts: int, network: Network,
               batch: float, seed: int, use: str | None = None) -> tuple[float | None, float | None]:
    """The LEVEL interval of images/s over BOOTSTRAP resamples of the nights (with replacement).
    A resample is its nights' counts, never copies of its points: each count's medians are
    weighted medians of the points sorted once (`_Resample`), the same values the points'
    medians would give."""
    import random

    rng = random.Random(seed)
    resample = _Resample(points, nights)
    got = []
    for _ in range(BOOTSTRAP):
        medians = resample.medians([rng.choice(nights) for _ in nights])
        if medians is None:
            continue  # a resample that lost a count fits another model
        ips = images_per_s(fit(medians, network, (gpus, hosts), use), gpus, hosts, batch)
        if ips:
            got.append(ips)
    if len(got) < BOOTSTRAP // 2:
        return None, None
    got.sort()
    lo, hi = (1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2
    return got[int(lo * (len(got) - 1))], got[int(hi * (len(got) - 1))]


class _Resample:
    """Each (GPU count, hosts) group's values per field, sorted once with the night each came from,
    so that the medians of a resample of nights are weighted medians (a night drawn k times
    weighs k): no point copied, no list sorted again."""
    FIELDS = ("images_per_s", *MEASURED)

    def __init__(self, points: Sequence[Point], nights: list[str]):
        import numpy as np

        self.index = {n: i for i, n in enumerate(nights)}
        self.totals = len({p.total for p in points})
        by_group: dict[tuple[int, int], list[Point]] = {}
        for p in points:
            if p.night in self.index:
                by_group.setdefault((p.gpus, p.hosts), []).append(p)
        self.groups = []
        for key, ps in sorted(by_group.items()):
            columns = {}
            for name in self.FIELDS:
                kept = sorted((getattr(p, name), self.index[p.night or ""]) for p in ps
                              if getattr(p, name) is not None)
                columns[name] = (np.array([v for v, _ in kept]), np.array([i for _, i in kept], dtype=int))
            self.groups.append((key, columns))

    def medians(self, drawn: list[str]) -> list[Point] | None:
        """One point per group of the resample `drawn` (nights, with repeats); None when it lost a
        GPU count the points have."""
        import numpy as np

        weights = np.bincount([self.index[n] for n in drawn], minlength=len(self.index))
        out = []
        for (gpus, hosts), columns in self.groups:
            values = {name: _weighted_median(v, weights[at]) for name, (v, at) in columns.items()}
            ips = values.pop("images_per_s")
            if ips is not None:
                out.append(Point(gpus, ips, hosts, **values))  # type: ignore[arg-type]
        return out if len({p.total for p in out}) == self.totals else None


def _weighted_median(ordered, weights) -> float | None:
    """statistics.median of `ordered` (ascending) with each value repeated by its weight."""
    import numpy as np

    n = int(weights.sum())
    if not n:
        return None
    cumulative = np.cumsum(weights)

    def at(q: int) -> float:  # the value at 0-based position q of the repeated list
        return float(ordered[int(np.searchsorted(cumulative, q, side="right"))])
    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2
