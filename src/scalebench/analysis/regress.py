"""Nightly regression detection.

A night's figure (median of its scheduled repeats) is flagged when it is worse than its trailing
baseline by a magnitude gate AND a noise gate (robust z on the baseline's median and spread).
A flagged figure alerts when it is confirmed:
  - the same night, by reruns: the benchmark's DAG reruns a figure that looks off (`wants_rerun`)
    k times, and a one-sided Mann-Whitney U test of the reruns against the baseline confirms or
    clears the flag (`rerun_alpha`, and the reruns' median past the magnitude gate);
  - or, without reruns, on the next night (`confirm` consecutive flagged nights).
Throughput is judged after dividing out the host's night factor, the median over the other
benchmarks' figures on the host that night of value / their own trailing median: machine state,
thermals and noisy neighbours move every figure of a night together, a regression moves its
own benchmark's. The factors form a
series of their own, so a slowdown of the whole host still alerts.
Baselines compare like with like (the series key) and take scheduled nights only; reruns never
join them. An acknowledged shift, or a change of the system fingerprint (image digest,
framework, CUDA, NCCL, driver, GPU model, topology) or of the resolved config (config_sha: a
redefined profile, batch, model), restarts the baseline: the first night after
a change is compared with the last night before it and reported as "changed with ...". A
flagged night joins the baseline only once cleared, so a step cannot widen its own baseline; a
confirmed regression's nights never join it."""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from scalebench_kit.names import ALL_METRICS

from scalebench.analysis.stats import robust_z
from scalebench.core.records import DEFAULT_PRECISION

# metric -> +1 if higher is better, -1 if lower is better
DIRECTION = {name: +1 if m.higher_is_better else -1 for name, m in ALL_METRICS.items()}
EFFICIENCY = "efficiency"        # T(1) / (n T(n)) of one night: the scaling curve, judged apart from the times
NIGHT_FACTOR = "night_factor"    # a host's night factor, judged as a series of its own
DIRECTION[EFFICIENCY] = DIRECTION[NIGHT_FACTOR] = +1
# what a system fingerprint holds, in the order a change is reported
# (and the resolved config's identity: a changed plan, e.g. a redefined profile, is a new baseline too)
FINGERPRINT_KEYS = ("image_digest", "framework", "framework_version", "cuda", "cudnn", "nccl", "driver",
                    "gpu_model", "topology", "config_sha")
HASHES = {"image_digest", "config_sha"}  # shown shortened
MIN_PEERS = 3  # other figures of the host and night needed for a night factor


@dataclass(frozen=True)
class Gates:
    magnitude: float = 0.05   # at least 5 % worse than the baseline median
    z: float = 2.5            # and at least 2.5 robust standard deviations
    window: int = 20          # trailing scheduled nights in the baseline
    min_history: int = 5      # nights needed before anything is judged
    confirm: int = 2          # consecutive flagged nights before an alert, when there are no reruns
    rerun_z: float = 1.5      # the DAG reruns a figure this far off ...
    rerun_magnitude: float = 0.03  # ... and at least this much worse (raw, before the night factor)
    rerun_alpha: float = 0.01  # one-sided Mann-Whitney U, reruns vs baseline


@dataclass(frozen=True)
class Shift:
    benchmark: str
    since: dt.date
    reason: str
    gpus: tuple[int, ...] | None = None
    metric: str | None = None

    def covers(self, key: "SeriesKey") -> bool:
        return (key.benchmark == self.benchmark and (self.gpus is None or key.gpus in self.gpus)
                and (self.metric is None or key.metric == self.metric))


@dataclass(frozen=True, order=True)
class SeriesKey:
    benchmark: str
    gpus: int
    metric: str
    profile: str = "nightly"
    host_class: str = ""
    scaling_mode: str = "weak"
    image_lineage: str = ""
    precision: str = DEFAULT_PRECISION


@dataclass
class Judgement:
    key: SeriesKey
    night: dt.date
    value: float
    baseline: float | None
    change: float | None       # relative change in the bad direction (0.1 = 10 % worse)
    z: float | None
    flagged: bool
    alert: bool
    note: str = ""
    reruns: tuple[float, ...] = ()    # the same night's reruns of this figure
    rerun_p: float | None = None      # Mann-Whitney U p-value of the reruns against the baseline
    confirmed_by_reruns: bool | None = None  # None: no reruns; True: confirmed; False: cleared
    changed_with: str | None = None   # the fingerprint change that restarted the baseline this night
    factor: float | None = None       # the host's night factor divided out of the value

    def line(self) -> str:
        k = self.key
        head = f"{k.benchmark} {k.gpus} GPU{'s' if k.gpus != 1 else ''}{' ' + k.precision if k.precision != DEFAULT_PRECISION else ''} {k.metric}"
        if self.changed_with:
            return (f"{head}: changed with {self.changed_with}: {self.value:.4g} vs {self.baseline:.4g} the night "
                    f"before ({-self.change * 100:+.1f}%) on {self.night}; baseline restarted")
        s = (f"{head}: {self.value:.4g} vs baseline {self.baseline:.4g} ({self.change * 100:+.1f}% worse, robust z "
             f"{self.z:.1f}) on {self.night}")
        if self.reruns:
            verdict = "confirmed" if self.confirmed_by_reruns else "cleared"
            s += (f"; reruns {', '.join(f'{v:.4g}' for v in self.reruns)}: {verdict} "
                  f"(Mann-Whitney U p = {self.rerun_p:.3g})")
        if self.factor is not None and abs(self.factor - 1) >= 0.005:
            s += f"; host night factor {self.factor:.3f} divided out"
        return s


@dataclass
class Series:
    key: SeriesKey
    points: list[tuple[dt.date, float]] = field(default_factory=list)  # scheduled nights, oldest first
    reruns: dict[dt.date, list[float]] = field(default_factory=dict)  # same-night reruns of flagged figures
    fingerprints: dict[dt.date, dict] = field(default_factory=dict)
    factors: dict[dt.date, float] = field(default_factory=dict)      # host night factors (throughput only)


def fingerprint_change(before: dict | None, after: dict | None) -> str | None:
    """What changed between two system fingerprints ("torch 2.5.1 -> 2.6.0, driver 550 -> 560"),
    None when nothing did or either is unknown (history recorded before fingerprints)."""
    if not before or not after:
        return None
    out = []
    for k in FINGERPRINT_KEYS:
        a, b = before.get(k), after.get(k)
        if a != b:
            short = (lambda v: str(v)[:19]) if k in HASHES else str
            out.append(f"{k.replace('_', ' ')} {short(a) if a is not None else 'unknown'} -> "
                       f"{short(b) if b is not None else 'unknown'}")
    return ", ".join(out) or None


def wants_rerun(j: Judgement, gates: Gates = Gates()) -> bool:
    """Whether the benchmark's DAG should rerun tonight's figure: judged raw (the night factor
    needs the other benchmarks of the night, which may not have run yet), on looser gates."""
    return (j.baseline is not None and j.changed_with is None and j.change >= gates.rerun_magnitude
            and j.z >= gates.rerun_z)


def reruns_confirm(reruns: list[float], base: list[float], direction: int, gates: Gates) -> tuple[bool, float]:
    """(confirmed, p): the reruns are worse than the baseline by a one-sided Mann-Whitney U test at
    rerun_alpha, and their median is past the magnitude gate."""
    from scipy.stats import mannwhitneyu

    med = statistics.median(base)
    p = float(mannwhitneyu(reruns, base, alternative="less" if direction > 0 else "greater").pvalue)
    change = -direction * (statistics.median(reruns) - med) / abs(med) if med else 0.0
    return p <= gates.rerun_alpha and change >= gates.magnitude, p


def judge(series: Series, gates: Gates = Gates(), shifts: list[Shift] = ()) -> list[Judgement]:
    """Judge every night of a series against the nights before it."""
    direction = DIRECTION.get(series.key.metric, +1)
    since = max((s.since for s in shifts if s.covers(series.key)), default=None)
    out: list[Judgement] = []
    history: list[list] = []  # [value, state]: "in" the baseline, "pending" (flagged), "out" (confirmed)
    streak = 0
    last_print: dict | None = None
    for night, raw in series.points:
        if since and night < since:
            continue
        factor = series.factors.get(night)
        value = raw / factor if factor else raw
        fp = series.fingerprints.get(night)
        changed = fingerprint_change(last_print, fp)
        last_print = fp or last_print
        if changed and history:  # a new system: compare with the last night before, then start again
            before = history[-1][0]
            history = [[value, "in"]]
            streak = 0
            out.append(Judgement(series.key, night, value, before, -direction * (value - before) / abs(before)
                                 if before else 0.0, None, False, False, "baseline restarted", changed_with=changed,
                                 factor=factor))
            continue
        base = [v for v, state in history if state == "in"][-gates.window:]
        entry = [value, "in"]
        history.append(entry)
        if len(base) < gates.min_history:
            out.append(Judgement(series.key, night, value, None, None, None, False, False, "building baseline",
                                 factor=factor))
            streak = 0
            continue
        med = statistics.median(base)
        change = -direction * (value - med) / abs(med) if med else 0.0
        z = -direction * robust_z(value, base)
        flagged = change >= gates.magnitude and z >= gates.z
        reruns = [r / factor if factor else r for r in series.reruns.get(night, [])]
        confirmed, p = (reruns_confirm(reruns, base, direction, gates) if flagged and reruns else (None, None))
        if confirmed is False:  # the reruns cleared it: an unlucky cell, judged as not flagged
            flagged = False
        if flagged:
            streak += 1
            entry[1] = "pending"
        else:  # this night clears the flagged nights before it: they were noise, and join the baseline
            streak = 0
            for h in history:
                if h[1] == "pending":
                    h[1] = "in"
        alert = flagged and (bool(confirmed) or streak >= gates.confirm)
        if alert:  # keep judging later nights against the level before the regression
            for h in history[-streak:]:
                h[1] = "out"
        out.append(Judgement(series.key, night, value, med, change, z, flagged, alert,
                             reruns=tuple(reruns) if confirmed is not None else (), rerun_p=p,
                             confirmed_by_reruns=confirmed, factor=factor))
    return out


def night_factors(values: dict[str, dict[dt.date, float]], window: int = 20, min_peers: int = MIN_PEERS,
                  only: list[str] | None = None, groups: dict[str, str] | None = None, probe: str | None = None,
                  by_group: bool = False, restarts: dict[str, set[dt.date]] | None = None
                  ) -> dict[str, dict[dt.date, float]]:
    """Per figure and night, the host's night factor: a figure's ratio to its own median of the
    `window` nights before, taken over the figure's peers (`only`: just these figures).

    A figure's peers are the host's figures outside its group (its benchmark: a new image or a
    code change moves every GPU count of a benchmark together, and must not be divided out).
    - default: the median over peer figures, on a night with at least `min_peers` of them;
    - `by_group`: the median over peer groups of each group's median (a benchmark with four GPU
      counts is one voice, not four), on a night with at least two groups;
    - `probe`: the probe figure's ratio where the probe ran that night (a fixed cell on a pinned
      image: it has no changes of its own), else the rule above.
    `restarts`: per figure, the nights its system changed (image, config, driver...): its ratios
    start again there, so a peer's announced change is never read as the host's night."""
    groups = groups or {}
    restarts = restarts or {}
    ratios: dict[dt.date, dict[str, float]] = {}
    for name, pts in values.items():
        nights_sorted = sorted(pts)
        since = 0
        for i, night in enumerate(nights_sorted):
            if night in restarts.get(name, ()):
                since = i
            prior = [pts[n] for n in nights_sorted[max(since, i - window):i]]
            if len(prior) >= 3:
                ratios.setdefault(night, {})[name] = pts[night] / statistics.median(prior)
    wanted = list(values) if only is None else only
    out: dict[str, dict[dt.date, float]] = {name: {} for name in wanted}
    for night, per in ratios.items():
        for name in wanted:
            if night not in values[name]:
                continue
            if probe is not None and probe != name and probe in per:
                out[name][night] = per[probe]
                continue
            mine = groups.get(name, name)
            peers = {other: r for other, r in per.items() if other != name and groups.get(other, other) != mine}
            if by_group:
                voices: dict[str, list[float]] = {}
                for other, r in peers.items():
                    voices.setdefault(groups.get(other, other), []).append(r)
                if len(voices) >= 2:
                    medians = [statistics.median(v) for v in voices.values()]
                    # two voices: a third, neutral one (1.0), so one group's own change moves the
                    # factor only as far as the other voice agrees with it
                    out[name][night] = statistics.median(medians + [1.0] * (len(medians) == 2))
            elif len(peers) >= min_peers:
                out[name][night] = statistics.median(peers.values())
    return out


def host_factor_series(factors: dict[str, dict[dt.date, float]], host: str, profile: str) -> Series:
    """The host's own night factor (the median over all its figures), judged for a whole-host slowdown."""
    per_night: dict[dt.date, list[float]] = {}
    for pts in factors.values():
        for night, f in pts.items():
            per_night.setdefault(night, []).append(f)
    return Series(SeriesKey(f"host {host}", 0, NIGHT_FACTOR, profile=profile, host_class=host),
                  sorted((n, statistics.median(v)) for n, v in per_night.items()))


def load_shifts(path: Path | str) -> list[Shift]:
    """include/configs/acknowledged_shifts.yaml (validated by the config module) as shifts."""
    from scalebench.core.config import load_acknowledged_shifts

    return [Shift(s.benchmark, s.since, s.reason, tuple(s.gpus) if s.gpus else None, s.metric)
            for s in load_acknowledged_shifts(path)]
