"""What more GPUs would give: a model of one data-parallel step, fitted per benchmark, host and
precision on the GPU counts measured, that predicts a count not measured (8 on one host, two
hosts of n). docs/prediction.md is the model's page; in short:

    step(N) = compute(N) + data_wait(N) + exposed_sync(N) + other        (slowest rank, per step)
    compute(N)   = (alpha + beta x per-GPU batch) x (1 + s log2 N)      Pollux's form; s the slowest
                                                                        rank's growth with N
    data_wait(N) = d1 + h (n - 1)                                       the n ranks of a host share its CPUs
    sync(N)      = 2 (N - 1) / N x gradient bytes / bus bandwidth       a ring all-reduce, measured
    exposed      = (compute^g + sync^g)^(1/g) - compute                 Pollux's overlap, g fitted
    images/s(N)  = N x per-GPU batch / step(N)

Each part is fitted on the measured counts (alpha and beta need two per-GPU batches, s, h and g a
count above 1; without one they are 0, 0 and 1: no growth, no overlap, said in the fit's notes).
Where a framework gives no breakdown (TensorFlow's MirroredStrategy) or only throughput is known
(a published table), the aggregate fit: step(N) = c x per-GPU batch x (1 + s log2 N), all that
grows with N (the slowest rank, the sync, the input) in one term, s >= 0 by least squares; two
hosts add the all-reduce's extra time over the slower link. The interval comes from
bootstrapping the nights; one night gives none."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Sequence

MODEL_VERSION = 1
PARTS = ("compute", "data_wait", "sync", "other")
BOUND = {"compute": "compute-bound", "data_wait": "input-bound", "sync": "sync-bound", "other": "bound by other time",
         "overhead": "overhead that grows with N"}
BOOTSTRAP = 100
LEVEL = 0.90
# what a Point may carry beside images/s: each count's median of them is what the fit reads
MEASURED = ("per_gpu_batch", "step_s", "compute_s", "data_wait_s", "sync_s", "other_s")


@dataclass(frozen=True)
class Point:
    """One GPU count as measured (a cell, or a night's median): images/s and, where the framework
    measures them, the slowest rank's seconds per steady step by part."""
    gpus: int
    images_per_s: float
    hosts: int = 1
    per_gpu_batch: float | None = None
    step_s: float | None = None
    compute_s: float | None = None
    data_wait_s: float | None = None
    sync_s: float | None = None
    other_s: float | None = None
    night: str | None = None

    @property
    def total(self) -> int:
        return self.gpus * self.hosts

    @property
    def broken_down(self) -> bool:
        return None not in (self.step_s, self.compute_s, self.data_wait_s, self.sync_s)


@dataclass(frozen=True)
class Network:
    """What a gradient sync costs: the gradient bytes (parameters x 4), the bus bandwidth measured
    per GPU count on the host (GB/s, all-reduce sweep) and the link between hosts (Gbit/s, the
    fleet's link_gbps: assumed, not measured)."""
    gradient_bytes: float | None = None
    busbw_gbps: dict[int, float] = field(default_factory=dict)
    link_gbps: float | None = None
    across_busbw_gbps: float | None = None  # an all-reduce measured across hosts (GB/s): the link's own figure

    def busbw(self, gpus: int, hosts: int) -> float | None:
        """GB/s a ring of `gpus` per host sees: the sweep at that count, else at the nearest
        measured count (bandwidth of a larger ring is taken from the largest measured); across
        hosts the slower of that and the link (a measured bus bandwidth across hosts where there
        is one, else the link's line rate)."""
        if not self.busbw_gbps:
            return None
        near = min(self.busbw_gbps, key=lambda n: (abs(n - gpus), -n))
        bw = self.busbw_gbps[near]
        if hosts > 1:
            across = self.across_busbw_gbps or (self.link_gbps / 8 if self.link_gbps else None)
            return min(bw, across) if across else None
        return bw

    def sync_s(self, gpus: int, hosts: int = 1) -> float | None:
        """Seconds of one all-reduce of the gradients over gpus x hosts ranks (0 on one rank)."""
        n = gpus * hosts
        if n == 1:
            return 0.0
        bw = self.busbw(gpus, hosts)
        if not self.gradient_bytes or not bw:
            return None
        return 2 * (n - 1) / n * self.gradient_bytes / (bw * 1e9)


def ring(n: int) -> float:
    return 2 * (n - 1) / n


@dataclass(frozen=True)
class Fit:
    """A fitted step model; `step(N, hosts, batch)` gives each part's seconds per step."""
    kind: str                        # "breakdown" or "aggregate"
    batch1: float                    # the per-GPU batch at the smallest measured count
    alpha: float
    beta: float
    straggler: float                 # s: compute grows by s x log2 N on the slowest rank
    data_wait1: float
    data_growth: float               # h: seconds per step per added rank
    overlap: float                   # g of (compute^g + sync^g)^(1/g); 1: none
    sync_k: float                    # no sweep on the host: exposed sync = K x 2(N-1)/N from the measured counts
    other: float
    network: Network
    counts: tuple[int, ...]
    notes: tuple[str, ...] = ()

    def step(self, gpus: int, hosts: int = 1, batch: float | None = None) -> dict[str, float] | None:
        n, b = gpus * hosts, self.batch1 if batch is None else batch
        compute = (self.alpha + self.beta * b) * (1 + self.straggler * math.log2(n))
        full = self.network.sync_s(gpus, hosts)
        above_one = max(self.counts) > 1
        if self.kind == "aggregate":
            base = compute / (1 + self.straggler * math.log2(n))
            extra = self._across_hosts(gpus, hosts)
            if above_one and extra is not None:  # growth with N (the slowest rank, the sync, the input) as one
                # overhead, never called sync: none was measured; across hosts, the ring's extra time is
                return {"compute": base, "data_wait": 0.0, "sync": extra, "other": 0.0, "overhead": compute - base}
            # one count: the sweep's all-reduce, not overlapped; else nothing to go on
            return None if full is None else {"compute": compute, "data_wait": 0.0, "sync": full, "other": 0.0}
        if full is None:
            if hosts > 1 or not above_one:
                return None  # no sweep across hosts; no sync measured at all
            exposed = self.sync_k * ring(n)
        else:
            g = self.overlap
            exposed = (compute ** g + full ** g) ** (1 / g) - compute if full > 0 else 0.0
        # data wait grows with the ranks sharing one host's CPUs: per host, not in all
        return {"compute": compute, "data_wait": self.data_wait1 + self.data_growth * (gpus - 1), "sync": exposed,
                "other": self.other}

    def _across_hosts(self, gpus: int, hosts: int) -> float | None:
        """The aggregate's extra seconds per step on several hosts: the all-reduce over the slower
        link less the same ring inside one host, not overlapped (None without the sweep and link)."""
        if hosts == 1:
            return 0.0
        across, inside = self.network.sync_s(gpus, hosts), self.network.sync_s(gpus * hosts, 1)
        return across - inside if across is not None and inside is not None else None


@dataclass(frozen=True)
class Prediction:
    """A count not measured, predicted: images/s, time relative to 1 GPU, efficiency, the part
    that limits it, the interval (None without two nights) and why not, where it cannot be made."""
    gpus: int
    hosts: int
    images_per_s: float | None
    relative_time: float | None = None
    efficiency: float | None = None
    low: float | None = None
    high: float | None = None
    shares: dict[str, float] = field(default_factory=dict)
    limit: str = ""
    kind: str = ""
    notes: tuple[str, ...] = ()
    why_not: str | None = None
    nights: int = 0

    @property
    def label(self) -> str:
        return f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}" + (f" x {self.hosts} hosts" if self.hosts > 1 else "")

    def line(self) -> str:
        if self.images_per_s is None:
            return f"{self.label}: not predicted ({self.why_not})"
        interval = (f" (90% interval {self.low:.4g}-{self.high:.4g})" if self.low is not None
                    else " (no interval: one night)" if self.kind != "table" and self.nights < 2 else "")
        eff = f", efficiency {self.efficiency:.0%}" if self.efficiency is not None else ""
        rel = f", {self.relative_time:.0%} of 1 GPU's time" if self.relative_time is not None else ""
        return f"{self.label}: {self.images_per_s:.4g} images/s{interval}{rel}{eff}; {self.limit}"

    def to_json(self) -> dict:
        return {"gpus": self.gpus, "hosts": self.hosts, "images_per_s": self.images_per_s,
                "relative_time": self.relative_time, "efficiency": self.efficiency, "low": self.low,
                "high": self.high, "shares": self.shares, "limit": self.limit, "kind": self.kind,
                "notes": list(self.notes), "why_not": self.why_not, "nights": self.nights, "line": self.line()}


def median_points(points: Iterable[Point]) -> list[Point]:
    """One point per (GPU count, hosts): the median of each field over its cells or nights."""
    groups: dict[tuple[int, int], list[Point]] = {}
    for p in points:
        groups.setdefault((p.gpus, p.hosts), []).append(p)

    def med(ps: list[Point], name: str) -> float | None:
        values = [getattr(p, name) for p in ps if getattr(p, name) is not None]
        return statistics.median(values) if values else None

    out = []
    for (gpus, hosts), ps in sorted(groups.items()):
        out.append(Point(gpus, statistics.median(p.images_per_s for p in ps), hosts,
                         **{f: med(ps, f) for f in MEASURED}))  # type: ignore[arg-type]
    return out


def fit(points: Sequence[Point], network: Network = Network()) -> Fit:
    """The step model from measured points (one per count: `median_points`): the breakdown model
    where every point has one, else the aggregate fit from throughput."""
    pts = sorted(median_points(points), key=lambda p: p.total)
    if not pts:
        raise ValueError("no measured point to fit")
    batch1 = pts[0].per_gpu_batch or 1.0
    steps = [(p.step_s if p.step_s else p.total * (p.per_gpu_batch or 1.0) / p.images_per_s) for p in pts]
    batches = [p.per_gpu_batch or 1.0 for p in pts]
    counts = tuple(p.total for p in pts)
    if all(p.broken_down for p in pts):
        return _fit_breakdown(pts, batches, network, counts)
    c = steps[0] / batches[0]
    # s >= 0: the step's growth beyond compute at 1 GPU, in log2 N, least squares over counts > 1
    xs = [(math.log2(p.total), st / (c * b) - 1) for p, st, b in zip(pts, steps, batches) if p.total > 1]
    grow = max(0.0, sum(x * y for x, y in xs) / sum(x * x for x, _ in xs)) if xs else 0.0
    notes = ["aggregate fit from throughput: what grows with N (the slowest rank, the sync, the input) is "
             "one term in log2 N"]
    if not xs:
        notes.append("one GPU count measured: the sync is the measured all-reduce, not overlapped")
    return Fit("aggregate", batch1, 0.0, c, grow, 0.0, 0.0, 1.0, 0.0, 0.0, network, counts, tuple(notes))


def _fit_breakdown(pts: list[Point], batches: list[float], network: Network, counts: tuple[int, ...]) -> Fit:
    notes = []
    compute = [p.compute_s or 0.0 for p in pts]
    alpha, beta, s = _fit_compute([p.total for p in pts], batches, compute)
    if len(set(batches)) < 2:
        notes.append("one per-GPU batch measured: compute taken as proportional to the batch")
    dw1 = pts[0].data_wait_s or 0.0
    more = [(p.total - 1, (p.data_wait_s or 0.0) - dw1) for p in pts if p.total > 1]
    h = max(0.0, sum(x * y for x, y in more) / sum(x * x for x, _ in more)) if more else 0.0
    other = statistics.median(p.other_s or 0.0 for p in pts)
    g, k = 1.0, 0.0
    if network.sync_s(2) is not None:
        measured = [(p, c) for p, c in zip(pts, compute) if p.total > 1]
        if measured:
            g = min((x / 4 for x in range(4, 41)), key=lambda g_: sum(
                (((c ** g_ + (network.sync_s(p.gpus, p.hosts) or 0.0) ** g_) ** (1 / g_) - c) - (p.sync_s or 0.0)) ** 2
                for p, c in measured))
        else:
            notes.append("no count above 1 measured: sync taken as not overlapped with backward")
    else:
        syncs = [(ring(p.total), p.sync_s or 0.0) for p in pts if p.total > 1]
        k = max(0.0, sum(x * y for x, y in syncs) / sum(x * x for x, _ in syncs)) if syncs else 0.0
        notes.append("no all-reduce measured on this host: the exposed sync scaled as a ring from the measured counts")
    return Fit("breakdown", batches[0], alpha, beta, s, dw1, h, g, k, other, network, counts, tuple(notes))


def _fit_compute(counts: list[int], batches: list[float], compute: list[float]) -> tuple[float, float, float]:
    """(alpha, beta, s) of compute = (alpha + beta b)(1 + s log2 N), alpha, beta, s >= 0. With one
    per-GPU batch alpha is 0 and the fit is linear (compute = A + B log2 N, s = B / A); with
    several, least squares over a grid of s (NNLS for alpha and beta at each)."""
    import numpy as np
    from scipy.optimize import nnls

    logs = np.array([math.log2(n) for n in counts])
    y, b = np.array(compute), np.array(batches)
    if len(set(batches)) < 2:
        cols = [np.ones(len(counts))] + ([logs] if len(counts) > 1 else [])
        coef, _ = nnls(np.column_stack(cols), y)
        a = float(coef[0])
        grow = float(coef[1]) / a if len(coef) > 1 and a > 0 else 0.0
        return 0.0, a / batches[0], grow
    best = None
    for s in (x / 100 for x in range(0, 51)):
        scale = 1 + s * logs
        coef, res = nnls(np.column_stack([scale, scale * b]), y)
        if best is None or res < best[0] - 1e-12:
            best = (res, s, coef)
    assert best is not None
    return float(best[2][0]), float(best[2][1]), best[1]


def predict(points: Sequence[Point], gpus: int, hosts: int = 1, network: Network = Network(), *,
            batch: float | None = None, table: bool = False, interval: bool = True, seed: int = 0) -> Prediction:
    """images/s at gpus x hosts from the measured points; the interval from bootstrapping the
    points' nights (BOOTSTRAP resamples), none with one night, from a table or without `interval`."""
    try:
        model = fit(points, network)
    except ValueError as exc:
        return Prediction(gpus, hosts, None, why_not=str(exc))
    one = _images_per_s(model, 1, 1, None) if 1 not in model.counts else \
        median_points([p for p in points if p.total == 1])[0].images_per_s
    if batch is None:
        batch = _batch_at(points, gpus * hosts, model.batch1)
    parts = model.step(gpus, hosts, batch)
    if parts is None:
        needs = ("the gradient size (a params column), --busbw (one host's all-reduce bus bandwidth) and "
                 "--link-gbps or a bus bandwidth measured across hosts (--busbw INSIDE,ACROSS)" if table else
                 "the link speed between them (the fleet's link_gbps) and a measured all-reduce")
        why = (f"two hosts need {needs}" if hosts > 1 else
               "one GPU count measured and no all-reduce measured: nothing to scale the sync from")
        return Prediction(gpus, hosts, None, kind=model.kind, notes=model.notes, why_not=why)
    step = sum(parts.values())
    ips = gpus * hosts * batch / step
    shares = {k: v / step for k, v in parts.items()}
    part = max(shares, key=lambda k: shares[k])
    limit = f"{BOUND[part]} at {gpus * hosts}: {shares[part]:.0%} of the step"
    if model.kind == "aggregate" and "overhead" in parts:  # no breakdown: the 1-GPU step and what grows with N
        limit = (f"overhead grows with N: {shares['overhead']:.0%} of the step at {gpus * hosts}"
                 + (f", beside the 1-GPU step's {shares['compute']:.0%}" if part != "overhead" else "")
                 + (f" and the ring across hosts' {shares['sync']:.0%}" if shares["sync"] else "")
                 + " (no breakdown measured: the slowest rank, the sync and the input are one term)")
    low = high = None
    nights = sorted({p.night for p in points if p.night})
    if len(nights) > 1 and not table and interval:
        low, high = _bootstrap(points, nights, gpus, hosts, network, batch, seed)
    n = gpus * hosts
    eff = ips / (n * one) if one else None
    return Prediction(gpus, hosts, ips, one / ips if one else None, eff, low, high,
                      {k: round(v, 4) for k, v in shares.items()}, limit, "table" if table else model.kind,
                      model.notes + _across_note(network, hosts),
                      nights=len(nights))


def _across_note(network: Network, hosts: int) -> tuple[str, ...]:
    if hosts == 1:
        return ()
    if network.across_busbw_gbps:
        return (f"{hosts} hosts: the all-reduce across them at the measured {network.across_busbw_gbps:g} GB/s",)
    return (f"{hosts} hosts: the link between them assumed at {network.link_gbps:g} Gbit/s, not measured",)


def _batch_at(points: Sequence[Point], n: int, batch1: float) -> float:
    """The per-GPU batch at n: as measured there, else a strong-scaling run's global batch over n
    (the largest count's global batch held), else the same as measured (weak scaling)."""
    pts = median_points(points)
    for p in pts:
        if p.total == n and p.per_gpu_batch:
            return p.per_gpu_batch
    known = [p for p in pts if p.per_gpu_batch]
    if len(known) > 1 and len({p.per_gpu_batch for p in known}) > 1:
        top = max(known, key=lambda p: p.total)
        return (top.per_gpu_batch or batch1) * top.total / n
    return (known[-1].per_gpu_batch or batch1) if known else batch1


def _images_per_s(model: Fit, gpus: int, hosts: int, batch: float | None) -> float | None:
    parts = model.step(gpus, hosts, batch)
    b = model.batch1 if batch is None else batch
    return gpus * hosts * b / sum(parts.values()) if parts else None


def _bootstrap(points: Sequence[Point], nights: list[str], gpus: int, hosts: int, network: Network,
               batch: float, seed: int) -> tuple[float | None, float | None]:
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
        ips = _images_per_s(fit(medians, network), gpus, hosts, batch)
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


def naive_rules(points: Sequence[Point], n: int) -> dict[str, float]:
    """The two rules a prediction must beat, as images/s at n: per-GPU throughput stays at the
    largest measured count's; the efficiency trend continues linearly (least squares in N)."""
    pts = median_points(points)
    top = max(pts, key=lambda p: p.total)
    one = next(p.images_per_s for p in pts if p.total == 1)
    xs = [(p.total, p.images_per_s / (p.total * one)) for p in pts]
    mx, my = statistics.fmean(x for x, _ in xs), statistics.fmean(y for _, y in xs)
    sxx = sum((x - mx) ** 2 for x, _ in xs)
    slope = sum((x - mx) * (y - my) for x, y in xs) / sxx if sxx else 0.0
    eff = my + slope * (n - mx)
    return {"per-GPU throughput held": top.images_per_s / top.total * n, "efficiency trend": eff * n * one}


SeriesId = tuple[str, str, str]  # benchmark, host, precision: one series of predictions


def series_points(rows: Sequence, before: str | None = None, up_to: str | None = None) -> dict[SeriesId, list[Point]]:
    """Per benchmark, host and precision, one point per valid measured cell (the step breakdown
    per step where the trainer measured it), on the nights (before `before`, or up to `up_to`) of
    the newest night's image: a new image starts the fit again. Scheduled runs of the nightly
    profile where a series has them (the nights the regression judge keeps: not a weekly full
    run, not a manual trial of a candidate image), else its newest night's runs (a demo's)."""
    from scalebench.analysis.noise import JUDGED_PROFILE

    groups: dict[SeriesId, list] = {}
    for r in rows:
        if r.get("role", "measure") != "measure" or r.get("status") != "valid" or not r.get("figure") or \
                not r.get("night") or before and r["night"] >= before or up_to and r["night"] > up_to:
            continue
        groups.setdefault((r["benchmark"], r["host"], r["precision"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        nightly = [r for r in rs if r.get("run_type") == "scheduled" and r["profile"] == JUDGED_PROFILE]
        rs = nightly or rs
        newest = max(rs, key=lambda r: (r["night"], r["run_id"]))
        same = [r for r in rs if r["figure"].get("image_digest") == newest["figure"].get("image_digest")
                and r["profile"] == newest["profile"]]
        out[key] = [_point(r) for r in same]
    return out


def _point(row) -> Point:
    figure = row["figure"]
    b = ((figure.get("timing") or {}).get("breakdown") or {})
    steps = b.get("timed_steps") or 0

    def per_step(part: str) -> float | None:
        v = b.get(part)
        return v / steps if v is not None and steps else None
    return Point(row["gpus"], figure["images_per_s"], 1, row.get("per_device_batch"), per_step("step_s"),
                 per_step("compute_s"), per_step("data_wait_s"), per_step("sync_s"), per_step("other_s"), row["night"])
