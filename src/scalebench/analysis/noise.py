"""Whether a host's measured noise lets a benchmark's repeats and reruns meet the detection goals.

A throughput figure's noise is its CV over its last nights after the host's night factor (what
the detector sees). It is looked up in the detection-power table that `bench/regressions.py
--power-table` generates from simulated histories (shipped beside this module): rows by (CV,
night-factor peers, repeats, reruns) with the share of 10 % steps caught within two nights, the
false alarms per 1000 steady nights and the cells a night. A measured CV is matched to the
smallest simulated CV whose figure, at the same repeats and peers, is at least as noisy, and the
peers and reruns are rounded down to the table's: the answer errs towards "more repeats"."""
from __future__ import annotations

import functools
import json
import statistics
from dataclasses import dataclass
from importlib import resources

from scalebench_kit.names import THROUGHPUT

from scalebench.analysis.regress import Series

POWER_FILE = "detection_power.json"
MIN_NIGHTS = 10   # fewer stored nights give no CV worth a setting
WINDOW = 30       # the nights a CV is taken over, newest last
JUDGED_PROFILE = "nightly"  # the scheduled profile the regression detector judges


@dataclass(frozen=True)
class PowerRow:
    cv: float
    peers: int
    repeats: int
    reruns: int
    residual_cv: float
    first_night: float
    within_two: float
    false_per_1000: float
    cells: float

    def meets(self, goals: dict) -> bool:
        return self.within_two >= goals["within_two"] and self.false_per_1000 <= goals["false_per_1000"]

    def setting(self) -> str:
        return f"{self.repeats} repeat{'s' * (self.repeats != 1)} + {self.reruns} rerun{'s' * (self.reruns != 1)}"


@functools.cache
def power_table() -> tuple[dict, tuple[PowerRow, ...], str]:
    """(goals, rows, how it was generated) from the shipped table."""
    doc = json.loads(resources.files("scalebench.analysis").joinpath(POWER_FILE).read_text())
    return doc["goals"], tuple(PowerRow(**r) for r in doc["rows"]), doc["generated_by"]


@dataclass(frozen=True)
class NoiseVerdict:
    benchmark: str
    host: str
    figure: str                          # "4 GPUs bf16"
    nights: int
    cv: float | None = None              # after the night factor
    peers: int = 0
    table_cv: float | None = None        # the simulated CV it was matched to; None: noisier than the table
    configured: PowerRow | None = None
    cheapest: PowerRow | None = None
    repeats: int = 0
    reruns: int = 0

    @property
    def meets(self) -> bool | None:
        return None if self.configured is None else self.configured.meets(power_table()[0])

    def line(self) -> str:
        head = f"{self.benchmark} on {self.host}"
        if self.cv is None:
            return (f"{head}: too little history to judge its repeats ({self.nights} nights of {self.figure}, "
                    f"{MIN_NIGHTS} needed); {self.repeats} repeats + {self.reruns} reruns as configured")
        what = (f"{head}: noisiest figure {self.figure}, CV {self.cv:.1%} after the night factor over {self.nights} "
                f"nights ({self.peers} peer figures)")
        if self.table_cv is None:
            return f"{what}: noisier than the power table's largest CV; no setting in it meets the goals"
        c = self.configured
        if c is None:  # the table has a row for every CV it covers: never missing when table_cv is set
            return f"{what}: the power table has no row for {self.repeats} repeats + {self.reruns} reruns"
        rounded = ("" if (c.repeats, c.reruns) == (self.repeats, self.reruns) else
                   f" (the table's nearest below the configured {self.repeats} + {self.reruns})")
        verdict = "meets the goals" if self.meets else "misses the goals (>= 95 % within two nights, <= 1 in 1000)"
        cheap = (f"cheapest that meets them: {self.cheapest.setting()} ({self.cheapest.cells:.1f} cells a night)"
                 if self.cheapest else "no setting in the table meets them")
        return (f"{what}, as noisy as the table's histories at CV {self.table_cv:.0%}: {c.setting()}{rounded} catch "
                f"{c.within_two:.0%} of 10 % steps within two nights, {c.false_per_1000:.2f} false alarms in "
                f"1000: {verdict}; {cheap}")

    def to_json(self) -> dict:
        return {"benchmark": self.benchmark, "host": self.host, "figure": self.figure, "nights": self.nights,
                "cv": self.cv, "peers": self.peers, "table_cv": self.table_cv, "repeats": self.repeats,
                "reruns": self.reruns, "meets": self.meets,
                "configured": self.configured.__dict__ if self.configured else None,
                "cheapest": self.cheapest.__dict__ if self.cheapest else None}


def residual_cv(series: Series, window: int = WINDOW) -> tuple[float | None, int]:
    """(CV of the last `window` nights divided by their night factors, nights counted)."""
    values = [v / series.factors.get(d, 1.0) for d, v in series.points[-window:]]
    if len(values) < MIN_NIGHTS:
        return None, len(values)
    return statistics.stdev(values) / statistics.fmean(values), len(values)


def lookup(cv: float, peers: int, repeats: int, reruns: int) -> tuple[float | None, PowerRow | None, PowerRow | None]:
    """(the table's CV matched, the configured setting's row there, the cheapest row there meeting the goals)."""
    goals, rows, _ = power_table()
    peer_levels = sorted({r.peers for r in rows})
    tp = max([p for p in peer_levels if p <= peers] or peer_levels[:1])
    tr = min(max(repeats, 1), max(r.repeats for r in rows))
    tk = max([k for k in {r.reruns for r in rows} if k <= reruns] or [0])
    level = sorted((r for r in rows if r.peers == tp and r.repeats == tr and r.reruns == tk), key=lambda r: r.cv)
    match = next((r for r in level if r.residual_cv >= cv), None)
    if match is None:
        return None, None, None
    ok = [r for r in rows if r.cv == match.cv and r.peers == tp and r.meets(goals)]
    return match.cv, match, min(ok, key=lambda r: (r.cells, r.repeats), default=None)


def judge_noise(series: list[Series], settings: dict[str, tuple[int, int]], profile: str = JUDGED_PROFILE
                ) -> list[NoiseVerdict]:
    """One verdict per (benchmark, host): its noisiest throughput figure of `profile` against the
    benchmark's (repeats, reruns) in `settings`; a benchmark with no stored figure says so."""
    tput = [s for s in series if s.key.metric == THROUGHPUT.name and s.key.profile == profile
            and s.key.benchmark in settings]
    per_host: dict[str, int] = {}
    for s in tput:
        per_host[s.key.host_class] = per_host.get(s.key.host_class, 0) + 1
    out: dict[tuple[str, str], NoiseVerdict] = {}
    for s in tput:
        k = s.key
        repeats, reruns = settings[k.benchmark]
        cv, nights = residual_cv(s)
        figure = f"{k.gpus} GPU{'s' if k.gpus != 1 else ''} {k.precision}"
        mine = NoiseVerdict(k.benchmark, k.host_class, figure, nights, cv, per_host[k.host_class] - 1,
                            repeats=repeats, reruns=reruns)
        if cv is not None:
            table_cv, configured, cheapest = lookup(cv, mine.peers, repeats, reruns)
            mine = NoiseVerdict(**{**mine.__dict__, "table_cv": table_cv, "configured": configured,
                                   "cheapest": cheapest})
        held = out.get((k.benchmark, k.host_class))
        if held is None or _noisier(mine, held):
            out[(k.benchmark, k.host_class)] = mine
    missing = [NoiseVerdict(b, "any host", "any figure", 0, repeats=r, reruns=k)
               for b, (r, k) in sorted(settings.items()) if not any(b == key[0] for key in out)]
    return [out[key] for key in sorted(out)] + missing


def _noisier(a: NoiseVerdict, b: NoiseVerdict) -> bool:
    """A figure without enough history counts as noisiest: its host cannot be vouched for."""
    if a.cv is None or b.cv is None:
        return a.cv is None and b.cv is not None
    return a.cv > b.cv
