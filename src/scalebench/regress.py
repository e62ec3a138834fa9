"""Nightly regression detection: a figure is flagged when it is worse than its trailing
baseline by a magnitude gate AND a noise gate (robust z on the baseline's median/MAD), and
alerts only when confirmed on the next night. Baselines compare like with like (the series
key) and take scheduled nights only; an acknowledged shift restarts the baseline. A flagged
night joins the baseline only once the next night clears it, so a step cannot widen its own
baseline; a confirmed regression's nights never join it."""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from scalebench_kit.names import ALL_METRICS

from .stats import robust_z

# metric -> +1 if higher is better, -1 if lower is better
DIRECTION = {name: +1 if m.higher_is_better else -1 for name, m in ALL_METRICS.items()}


@dataclass(frozen=True)
class Gates:
    magnitude: float = 0.05   # at least 5 % worse than the baseline median
    z: float = 2.5            # and at least 2.5 robust standard deviations
    window: int = 20          # trailing scheduled nights in the baseline
    min_history: int = 5      # nights needed before anything is judged
    confirm: int = 2          # consecutive flagged nights before an alert


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

    def line(self) -> str:
        k = self.key
        return (f"{k.benchmark} {k.gpus} GPU{'s' if k.gpus > 1 else ''} {k.metric}: {self.value:.4g} vs baseline "
                f"{self.baseline:.4g} ({self.change * 100:+.1f}% worse, robust z {self.z:.1f}) on {self.night}")


@dataclass
class Series:
    key: SeriesKey
    points: list[tuple[dt.date, float]] = field(default_factory=list)  # scheduled nights, oldest first


def judge(series: Series, gates: Gates = Gates(), shifts: list[Shift] = ()) -> list[Judgement]:
    """Judge every night of a series against the nights before it."""
    direction = DIRECTION.get(series.key.metric, +1)
    since = max((s.since for s in shifts if s.covers(series.key)), default=None)
    out: list[Judgement] = []
    history: list[list] = []  # [value, state]: "in" the baseline, "pending" (flagged), "out" (confirmed)
    streak = 0
    for night, value in series.points:
        if since and night < since:
            continue
        base = [v for v, state in history if state == "in"][-gates.window:]
        entry = [value, "in"]
        history.append(entry)
        if len(base) < gates.min_history:
            out.append(Judgement(series.key, night, value, None, None, None, False, False, "building baseline"))
            streak = 0
            continue
        med = statistics.median(base)
        change = -direction * (value - med) / abs(med) if med else 0.0
        z = -direction * robust_z(value, base)
        flagged = change >= gates.magnitude and z >= gates.z
        if flagged:
            streak += 1
            entry[1] = "pending"
        else:  # this night clears the flagged nights before it: they were noise, and join the baseline
            streak = 0
            for h in history:
                if h[1] == "pending":
                    h[1] = "in"
        alert = streak >= gates.confirm
        if alert:  # keep judging later nights against the level before the regression
            for h in history[-streak:]:
                h[1] = "out"
        out.append(Judgement(series.key, night, value, med, change, z, flagged, alert))
    return out


def load_shifts(path: Path | str) -> list[Shift]:
    """include/configs/acknowledged_shifts.yaml: intentional changes that restart a baseline."""
    import yaml

    path = Path(path)
    if not path.exists():
        return []
    doc = yaml.safe_load(path.read_text()) or {}
    shifts = []
    for i, s in enumerate(doc.get("shifts") or []):
        unknown = set(s) - {"benchmark", "since", "reason", "gpus", "metric"}
        if unknown or not {"benchmark", "since", "reason"} <= set(s):
            from .config import ConfigError

            raise ConfigError(f"{path}: field 'shifts.{i}': expected benchmark, since (YYYY-MM-DD), reason and "
                              f"optional gpus, metric (got keys {sorted(s)})")
        since = s["since"] if isinstance(s["since"], dt.date) else dt.date.fromisoformat(str(s["since"]))
        shifts.append(Shift(s["benchmark"], since, s["reason"], tuple(s["gpus"]) if s.get("gpus") else None,
                            s.get("metric")))
    return shifts
