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
(a published table), the aggregate fit: step(N) = c x per-GPU batch x growth(N), all that grows
with N in one term, its form earned on the series by held-out error (scaling_forms); a table's
multi-host rows fit what the hosts add. Bounded: no step below the ring all-reduce where the sync
is known, a plateau carried forward, an extrapolation said and widened. The interval comes from
bootstrapping the nights; one night gives none."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from scalebench.analysis.scaling_forms import PLATEAU_GAIN, Choice, Form, choose, plateau

MODEL_VERSION = 1
PARTS = ("compute", "data_wait", "sync", "other")
BOUND = {"compute": "compute-bound", "data_wait": "input-bound", "sync": "sync-bound", "other": "bound by other time",
         "overhead": "overhead that grows with N", "across_hosts": "bound by what the hosts add",
         "plateau": "held at the measured plateau"}
BOOTSTRAP = 100
LEVEL = 0.90
# what a Point may carry beside images/s: each count's median of them is what the fit reads
MEASURED = ("per_gpu_batch", "step_s", "compute_s", "data_wait_s", "sync_s", "other_s")
HOP_LATENCY_S = 5e-6            # a ring step inside a host (NCCL's small-message latency over NVLink or PCIe)
ACROSS_HOP_LATENCY_S = 20e-6    # a ring step across hosts (InfiniBand or RoCE)
ASSUMED_LINK_EFFICIENCY = 0.5   # the fraction of line rate a ring across hosts reaches, where no row measures it
BREAKDOWN_MARGIN = 0.01         # an aggregate form replaces the measured breakdown only when this much better held out
MIN_WIDTH = 0.03                # the narrowest half-width of a table's interval (chosen on the tuning part)


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
    link_efficiency: float | None = None    # the fraction of line rate a ring reaches across hosts (None: assumed)
    hop_latency_s: float = HOP_LATENCY_S    # one ring step's latency inside a host (NVLink, PCIe)

    @property
    def efficiency(self) -> float:
        return self.link_efficiency if self.link_efficiency is not None else ASSUMED_LINK_EFFICIENCY

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
            across = self.across_busbw_gbps or (self.link_gbps / 8 * self.efficiency if self.link_gbps else None)
            return min(bw, across) if across else None
        return bw

    def sync_s(self, gpus: int, hosts: int = 1) -> float | None:
        """Seconds of one ring all-reduce of the gradients over gpus x hosts ranks (0 on one rank):
        2 (n - 1) / n x bytes / bus bandwidth, plus 2 (n - 1) steps of latency (across hosts
        each step waits on the link)."""
        n = gpus * hosts
        if n == 1:
            return 0.0
        bw = self.busbw(gpus, hosts)
        if not self.gradient_bytes or not bw:
            return None
        latency = self.hop_latency_s if hosts == 1 else ACROSS_HOP_LATENCY_S
        return 2 * (n - 1) / n * self.gradient_bytes / (bw * 1e9) + 2 * (n - 1) * latency


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
    form: Form | None = None          # the aggregate's growth with N, chosen by held-out error
    across: Form | None = None        # growth with the hosts, fitted on a table's multi-host rows
    choice: Choice | None = None      # the forms scored (also for a breakdown fit: its interval's spread)
    held_out_error: float | None = None  # the model's own error at the largest count from the counts below
    plateau: bool = False             # the largest count gained (almost) nothing: carried forward
    per_image1: float = 0.0           # seconds per image per GPU at the smallest count (the forms' unit)

    def step(self, gpus: int, hosts: int = 1, batch: float | None = None) -> dict[str, float] | None:
        n, b = gpus * hosts, self.batch1 if batch is None else batch
        compute = (self.alpha + self.beta * b) * (1 + self.straggler * math.log2(n))
        full = self.network.sync_s(gpus, hosts)
        above_one = max(self.counts) > 1
        if self.kind == "aggregate":
            base = self.alpha + self.beta * b
            if self.across is not None and hosts > 1 and self.form is not None:
                single = base * self.form.growth(gpus)  # one host's step, then what the hosts add (fitted)
                return {"compute": base, "data_wait": 0.0, "sync": 0.0, "other": 0.0, "overhead": single - base,
                        "across_hosts": single * (self.across.growth(hosts) - 1)}
            compute = base * (self.form.growth(n) if self.form else 1.0)
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


def fit(points: Sequence[Point], network: Network = Network(), target: tuple[int, int] | None = None,
        use: str | None = None) -> Fit:
    """The step model from measured points (one per count: `median_points`) for a prediction at
    `target` (GPUs per host, hosts): the breakdown model where every point has one, unless an
    aggregate form predicted the largest count from the counts below it clearly better; else the
    aggregate form with the smallest such held-out error (scaling_forms). `use` ("breakdown" or a
    form) refits the model already chosen: a bootstrap resample does not choose again."""
    pts = sorted(median_points(points), key=lambda p: p.total)
    if not pts:
        raise ValueError("no measured point to fit")
    single = [p for p in pts if p.hosts == 1] or pts
    gpus, hosts = target or (2 * single[-1].total, 1)
    batch1 = single[0].per_gpu_batch or 1.0
    counts = tuple(p.total for p in pts)
    if use == "breakdown":  # a bootstrap resample of a breakdown fit: nothing to choose or score again
        return _fit_breakdown(pts, [p.per_gpu_batch or 1.0 for p in pts], network, counts)
    per_image = {p.total: _per_image(p) for p in single}
    c = per_image[single[0].total]
    growth = [(n, v / c) for n, v in per_image.items()]
    choice = choose(growth, gpus, use, strong=strong_scaling(single))
    notes = [f"form {choice.form.describe()}: {choice.reason}"]
    flat = plateau(growth)
    if all(p.broken_down for p in pts) and use is None:
        model = _fit_breakdown(pts, [p.per_gpu_batch or 1.0 for p in pts], network, counts)
        err = _held_out_breakdown(single, network)
        best = choice.scores.get("mix")
        if err is None or best is None or best >= err - _margin(points, single[-1].total):
            said = f"; it predicted the measured {single[-1].total} from the counts below within {err:.1%}" \
                if err is not None else ""
            return replace(model, notes=model.notes + (f"breakdown model{said}",), choice=choice,
                           held_out_error=err, plateau=flat, per_image1=c)
        notes.append(f"the measured breakdown predicted {single[-1].total} within {err:.1%} only: the form is used")
    notes.insert(0, "aggregate fit from throughput: what grows with N (the slowest rank, the sync, the input) is "
                    "one term")
    if len(single) == 1:
        notes.append("one GPU count measured: the sync is the measured all-reduce, not overlapped")
    across = None
    multi = [p for p in pts if p.hosts > 1]
    if multi:
        # relative to the form at the row's GPUs per host, as `step` computes it: the row is given back
        rows = [(p.hosts, _per_image(p) / c / choice.form.growth(p.gpus)) for p in multi]
        across_choice = choose([(1, 1.0), *rows], hosts)
        across = across_choice.form
        notes.append(f"across hosts, fitted on the {', '.join(str(h) for h, _ in rows)}-host row(s): form "
                     f"{across.describe()}; {across_choice.reason}" + _link_efficiency(network, multi[0], c, choice.form))
    err = choice.scores.get(choice.form.name) if choice.scores else None
    return Fit("aggregate", batch1, 0.0, c, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, network, counts, tuple(notes),
               choice.form, across, choice, err, flat, c)


def _link_efficiency(network: Network, row: Point, c: float, form: Form) -> str:
    """Where the gradient size and the link are known: the fraction of the link's line rate the
    ring across hosts reached at a multi-host row (its extra seconds a step against a ring at line
    rate)."""
    b = row.per_gpu_batch or 1.0
    extra = (_per_image(row) - c * form.growth(row.gpus)) * b
    if not network.gradient_bytes or not network.link_gbps or extra <= 0:
        return ""
    n = row.total
    ideal = 2 * (n - 1) / n * network.gradient_bytes / (network.link_gbps / 8 * 1e9)
    return (f"; the ring across them reached {min(1.0, ideal / extra):.0%} of the link's "
            f"{network.link_gbps:g} Gbit/s line rate at {row.hosts} hosts (fitted)")


def _margin(points: Sequence[Point], top: int) -> float:
    """How much better held out an aggregate form must be to replace a measured breakdown: at
    least BREAKDOWN_MARGIN, and twice the nights' spread (coefficient of variation) at the largest
    count, so one noisy night never decides."""
    values = [p.images_per_s for p in points if p.total == top and p.hosts == 1]
    cv = statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0
    return max(BREAKDOWN_MARGIN, 2 * cv)


def _per_image(p: Point) -> float:
    """Seconds per image per GPU: the step over the per-GPU batch."""
    b = p.per_gpu_batch or 1.0
    return (p.step_s if p.step_s else p.total * b / p.images_per_s) / b


def _held_out_breakdown(single: list[Point], network: Network) -> float | None:
    """The breakdown model's error at the largest count, fitted on the counts below (three or more)."""
    if len(single) < 3:
        return None
    top = single[-1]
    below = _fit_breakdown(single[:-1], [p.per_gpu_batch or 1.0 for p in single[:-1]], network,
                           tuple(p.total for p in single[:-1]))
    got = images_per_s(below, top.gpus, top.hosts, top.per_gpu_batch)
    return abs(got / top.images_per_s - 1) if got else None


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
    """images/s at gpus x hosts from the measured points, bounded (`_bounded`); the interval from
    bootstrapping the points' nights (BOOTSTRAP resamples; none with one night or without
    `interval`), from a table the chosen form's held-out error and the other forms' spread."""
    try:
        model = fit(points, network, (gpus, hosts))
    except ValueError as exc:
        return Prediction(gpus, hosts, None, why_not=str(exc))
    one = images_per_s(model, 1, 1, None) if 1 not in model.counts else \
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
    n = gpus * hosts
    parts, bounds = _bounded(model, points, parts, gpus, hosts, batch)
    step = sum(parts.values())
    ips = n * batch / step
    shares = {k: v / step for k, v in parts.items()}
    # a plateau that binds is what limits the prediction, whatever else the step holds
    part = "plateau" if "plateau" in parts else max(shares, key=lambda k: shares[k])
    limit = f"{BOUND[part]} at {n}: {shares[part]:.0%} of the step"
    if model.kind == "aggregate" and "overhead" in parts and part != "plateau":  # the 1-GPU step and the growth
        limit = (f"overhead grows with N: {shares['overhead']:.0%} of the step at {n}"
                 + (f", beside the 1-GPU step's {shares['compute']:.0%}" if part != "overhead" else "")
                 + (f" and the ring across hosts' {shares['sync']:.0%}" if shares["sync"] else "")
                 + (f" and what the hosts add {shares['across_hosts']:.0%}" if shares.get("across_hosts") else "")
                 + " (no breakdown measured: the slowest rank, the sync and the input are one term)")
    top = max(p.total for p in points)
    widen = max(1.0, math.log2(n / top)) * (2.0 if n > 2 * top else 1.0)
    if n > 2 * top:
        bounds.append(f"an extrapolation: {n} GPUs is more than twice the largest measured count ({top}); "
                      f"the interval is {widen:.3g}x as wide")
    low = high = None
    nights = sorted({p.night for p in points if p.night})
    if table:
        low, high = _form_interval(model, ips, gpus, hosts, batch, widen)
    elif len(nights) > 1 and interval:
        from scalebench.analysis.prediction_bootstrap import bootstrap

        low, high = bootstrap(points, nights, gpus, hosts, network, batch, seed,
                              "breakdown" if model.kind == "breakdown" else model.form.name if model.form else None)
        if low is not None and high is not None:
            low, high = ips - (ips - low) * widen, ips + (high - ips) * widen
    eff = ips / (n * one) if one else None
    return Prediction(gpus, hosts, ips, one / ips if one else None, eff, low, high,
                      {k: round(v, 4) for k, v in shares.items()}, limit, "table" if table else model.kind,
                      model.notes + _across_note(model, hosts) + tuple(bounds), nights=len(nights))


def _bounded(model: Fit, points: Sequence[Point], parts: dict[str, float], gpus: int, hosts: int,
             batch: float) -> tuple[dict[str, float], list[str]]:
    """No step shorter than the ring all-reduce alone where the sync is known (the forms never
    go below the 1-GPU compute: growth >= 1), and a plateau or drop at the largest measured count
    carried forward: no more images/s beyond it than it gave. What binds is said."""
    parts, said = dict(parts), []
    n, step = gpus * hosts, sum(parts.values())
    full = model.network.sync_s(gpus, hosts)
    if full and step < full:
        parts["overhead" if "overhead" in parts else "sync"] += full - step
        said.append(f"bounded by the ring all-reduce alone at {n}: {full * 1e3:.3g} ms a step")
    top = max(median_points(points), key=lambda p: (p.hosts == 1, p.total))
    step = sum(parts.values())
    if model.plateau and n > top.total and n * batch / step > top.images_per_s:
        parts["plateau"] = n * batch / top.images_per_s - step  # the limit names it, never a part measured
        said.append(f"a plateau at {top.total} GPUs (it added under {PLATEAU_GAIN:.0%} of a GPU's rate per GPU): "
                    f"carried forward, no more than its {top.images_per_s:.4g} images/s")
    return parts, said


def _form_interval(model: Fit, ips: float, gpus: int, hosts: int, batch: float,
                   widen: float) -> tuple[float, float]:
    """A table's interval: the prediction +- its model's held-out error (at least MIN_WIDTH),
    widened with the distance beyond the measured counts, and every other candidate form's
    prediction inside it."""
    w = max(model.held_out_error or 0.0, MIN_WIDTH) * widen
    n = gpus * hosts
    others = [n / (model.per_image1 * f.growth(n)) for f in model.choice.candidates.values()] \
        if model.choice and model.across is None and hosts == 1 else []
    return min([ips * (1 - w), *others]), max([ips * (1 + w), *others])


def _across_note(model: Fit, hosts: int) -> tuple[str, ...]:
    if hosts == 1 or model.across is not None:
        return ()
    network = model.network
    if network.across_busbw_gbps:
        return (f"{hosts} hosts: the all-reduce across them at the measured {network.across_busbw_gbps:g} GB/s",)
    said = ("given" if network.link_efficiency is not None else "assumed, no multi-host row measures it")
    return (f"{hosts} hosts: the link between them assumed at {network.link_gbps:g} Gbit/s, not measured; a ring "
            f"across them reaches {network.efficiency:.0%} of its line rate ({said})",)


def strong_scaling(points: Sequence[Point]) -> bool:
    """The per-GPU batch was measured at two counts or more and shrinks as the count grows (the
    global batch held, or nearly: strong scaling)."""
    known = sorted((p.total, p.per_gpu_batch) for p in points if p.per_gpu_batch)
    return len(known) > 1 and known[-1][1] < known[0][1]


def _batch_at(points: Sequence[Point], n: int, batch1: float) -> float:
    """The per-GPU batch at n: as measured there, else a strong-scaling run's global batch over n
    (the largest count's global batch held), else the same as measured (weak scaling)."""
    pts = median_points(points)
    for p in pts:
        if p.total == n and p.per_gpu_batch:
            return p.per_gpu_batch
    known = [p for p in pts if p.per_gpu_batch]
    if strong_scaling(known):
        top = max(known, key=lambda p: p.total)
        return (top.per_gpu_batch or batch1) * top.total / n
    return (known[-1].per_gpu_batch or batch1) if known else batch1


def images_per_s(model: Fit, gpus: int, hosts: int, batch: float | None) -> float | None:
    parts = model.step(gpus, hosts, batch)
    b = model.batch1 if batch is None else batch
    return gpus * hosts * b / sum(parts.values()) if parts else None
