"""Nightly regression detection.

A night's figure (median of its scheduled repeats) is flagged when it is worse than its trailing
baseline by a magnitude gate AND a noise gate (robust z on the baseline's median and spread).
A flagged figure alerts when it is confirmed:
  - the same night, by reruns: the benchmark's DAG reruns a figure that looks off (`wants_rerun`)
    k times; a one-sided Mann-Whitney U test of the reruns against the baseline confirms the flag
    (`rerun_alpha`, and the reruns' median past the magnitude gate), and only an equivalence test
    clears it (the 90 % interval of the reruns' change inside ±magnitude); neither leaves the flag
    standing, and the next night decides;
  - or, without reruns, on the next night (`confirm` consecutive flagged nights).
Throughput is judged after dividing out the host's night factor, the median over the other
benchmarks' figures on the host that night of value / their own trailing median: machine state,
thermals and noisy neighbours move every figure of a night together, a regression moves its
own benchmark's. The factors form a
series of their own, so a slowdown of the whole host still alerts.
Baselines compare like with like (the series key) and take scheduled nights only; reruns never
join them. A change is the prime suspect, not a fresh start: a change under test (the image:
its reference, digest, framework and the CUDA / cuDNN / NCCL it carries; or the resolved config,
config_sha) is judged against the OLD baseline with the usual gates, confirmed the same night by
an A/B of the previous and the new image (or by reruns, or by the next night), and only a change
found harmless (no effect, an improvement, an A/B whose equivalence test says "same") or an acknowledged shift
starts a new baseline. A change of the environment (driver, GPU model, topology) restarts the
baseline and says so. A flagged night joins the baseline only once cleared, so a step cannot
widen its own baseline; a confirmed regression's nights never join it."""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from scalebench.analysis.judgement import (  # noqa: F401  (the judge's terms, read from here too)
    CONFIG_KEYS, DIRECTION, EFFICIENCY, ENVIRONMENT_KEYS, FINGERPRINT_KEYS, HASHES, IMAGE_KEYS, NIGHT_FACTOR,
    RERUN_LEVEL, ABTest, Change, Gates, Judgement, RerunVerdict, SeriesKey, classify_change, reruns_confirm)
from scalebench.analysis.judge import Judge

MIN_PEERS = 3  # other figures of the host and night needed for a night factor


def gates_for(fleet) -> Gates:
    """The gates with the fleet's settings: its `driver_under_test` takes the driver out of the environment."""
    if getattr(fleet, "driver_under_test", False):
        return Gates(environment=tuple(k for k in ENVIRONMENT_KEYS if k != "driver"))
    return Gates()


@dataclass(frozen=True)
class Shift:
    benchmark: str
    since: dt.date
    reason: str
    gpus: tuple[int, ...] | None = None
    metric: str | None = None
    image: str | None = None  # from the first night on this image (reference or digest) on or after `since`

    def covers(self, key: "SeriesKey") -> bool:
        return (key.benchmark == self.benchmark and (self.gpus is None or key.gpus in self.gpus)
                and (self.metric is None or key.metric == self.metric))


@dataclass
class Series:
    key: SeriesKey
    points: list[tuple[dt.date, float]] = field(default_factory=list)  # scheduled nights, oldest first
    reruns: dict[dt.date, list[float]] = field(default_factory=dict)  # same-night reruns of flagged figures
    fingerprints: dict[dt.date, dict] = field(default_factory=dict)
    factors: dict[dt.date, float] = field(default_factory=dict)      # host night factors (throughput only)
    previous: dict[dt.date, list[float]] = field(default_factory=dict)  # the A/B's previous-image cells
    host: str = ""




def fingerprint_change(before: dict | None, after: dict | None) -> str | None:
    """What changed between two system fingerprints ("framework version 2.5.1 -> 2.6.0, driver 550 ->
    560"), None when nothing did or either is unknown (history recorded before fingerprints)."""
    change = classify_change(before, after)
    return change.text if change else None


def wants_rerun(j: Judgement, gates: Gates = Gates()) -> bool:
    """Whether the benchmark's DAG should rerun tonight's figure: judged raw (the night factor
    needs the other benchmarks of the night, which may not have run yet), on looser gates."""
    return (j.baseline is not None and j.changed_with is None and j.worse_by is not None and j.z is not None
            and j.worse_by >= gates.rerun_magnitude and j.z >= gates.rerun_z)


def wants_ab(j: Judgement, gates: Gates = Gates()) -> bool:
    """Whether tonight's figure needs an A/B of the previous and the new image: it came with an
    image change and either looks regressed (confirmed on its first night, whatever the host's
    night) or cannot be judged from its history alone (a baseline shorter than min_history: the
    series' first nights, the nights after a restart or after a confirmed improvement)."""
    return (j.suspect is not None and j.suspect.kind == "image" and j.news
            and (j.needs_ab or wants_rerun(j, gates)))


def _shift_start(series: Series, shifts: list[Shift]) -> dt.date | None:
    """The newest acknowledged shift's first night in this series (an image shift: the first night
    on that image on or after its date)."""
    starts = []
    for s in shifts:
        if not s.covers(series.key):
            continue
        if s.image is None:
            starts.append(s.since)
            continue
        on = [n for n, _ in series.points if n >= s.since and s.image in
              {(series.fingerprints.get(n) or {}).get(k) for k in ("image", "image_ref", "image_digest")}]
        if on:
            starts.append(min(on))
    return max(starts, default=None)


def judge(series: Series, gates: Gates = Gates(), shifts: Sequence[Shift] = (), config_alerts: bool = False,
          invalid: Sequence[tuple[dt.date, dt.date]] = ()) -> list[Judgement]:
    """Judge every night of a series against the nights before it: each night is fed to the
    figure's state machine (scalebench.analysis.lifecycle), which says what the night means.
    `config_alerts`: a confirmed regression that came with a config change alerts too (else it is
    reported, not alerted: whoever edited the profile knows); `invalid`: night ranges of alert
    groups a person called not a regression (never flagged)."""

    since = _shift_start(series, list(shifts))
    figure = Judge(series.key, gates, config_alerts, series.host)
    return [figure.night(night, raw, series.fingerprints.get(night), series.factors.get(night),
                         series.previous.get(night, ()), series.reruns.get(night, ()),
                         any(a <= night <= b for a, b in invalid))
            for night, raw in series.points if not (since and night < since)]


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

    return [Shift(s.benchmark, s.since, s.reason, tuple(s.gpus) if s.gpus else None, s.metric, s.image)
            for s in load_acknowledged_shifts(path)]
