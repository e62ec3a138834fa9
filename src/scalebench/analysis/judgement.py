"""The judge's terms, in one leaf module that the state machine (lifecycle), the series judge
(regress), the report and the DAGs read: the gates, the series key, a night's Judgement, the
evidence (the same-night A/B, reruns) and what changed between two nights (Change). What a night can say (its verdicts,
their meanings and order) is scalebench.core.verdicts. It imports no other judge module."""
from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass

from scalebench_kit.names import ALL_METRICS

from scalebench.analysis.stats import MOST_REPEATS, inside, pairs_for_shift_equivalence, rank_test_p, relative_change
from scalebench.core.records import DEFAULT_PRECISION
from scalebench.core.verdicts import BUILDING, REGRESSION

# metric -> +1 if higher is better, -1 if lower is better
DIRECTION = {name: +1 if m.higher_is_better else -1 for name, m in ALL_METRICS.items()}
EFFICIENCY = "efficiency"        # T(1) / (n T(n)) of one night: the scaling curve, judged apart from the times
NIGHT_FACTOR = "night_factor"    # a host's night factor, judged as a series of its own
DIRECTION[EFFICIENCY] = DIRECTION[NIGHT_FACTOR] = +1
# what a system fingerprint holds, in the order a change is reported: what the image carries is
# under test; the environment is not (a host move is a new series already); the resolved
# config's identity is under test too, but alerts only where its benchmark asks for it
IMAGE_KEYS = ("image", "image_digest", "framework", "framework_version", "cuda", "cudnn", "nccl")
ENVIRONMENT_KEYS = ("driver", "gpu_model", "topology")
CONFIG_KEYS = ("config_sha",)
FINGERPRINT_KEYS = IMAGE_KEYS + ENVIRONMENT_KEYS + CONFIG_KEYS
HASHES = {"image_digest", "config_sha"}  # shown shortened


@dataclass(frozen=True)
class Gates:
    magnitude: float = 0.05   # at least 5 % worse than the baseline median
    z: float = 2.5            # and at least 2.5 robust standard deviations
    window: int = 20          # trailing scheduled nights in the baseline
    min_history: int = 5      # nights needed before anything is judged
    confirm: int = 2          # consecutive flagged nights before an alert, when there are no reruns
    confirm_end: int = 3      # nights back, with no change since, before a regression ended by itself
    rerun_z: float = 1.5      # the DAG reruns a figure this far off ...
    rerun_magnitude: float = 0.03  # ... and at least this much worse (raw, before the night factor)
    rerun_alpha: float = 0.01  # one-sided Mann-Whitney U, reruns vs baseline
    environment: tuple[str, ...] = ENVIRONMENT_KEYS  # changes that restart a baseline (drop "driver" to test it)
    ab_alpha: float = 0.01     # same-night A/B of the previous and the new image: one-sided Mann-Whitney U
    ab_min_pairs: int = 5      # 4 + 4 cells cannot reach p <= 0.01 with a rank test (the least p is 0.014)
    ab_max_pairs: int = 8      # an "unknown" A/B adds pairs up to this many


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
    worse_by: float | None     # relative change in the bad direction (0.1 = 10 % worse; a Change is what changed)
    z: float | None
    flagged: bool
    alert: bool
    note: str = ""
    reruns: tuple[float, ...] = ()    # the same night's reruns of this figure
    rerun_p: float | None = None      # Mann-Whitney U p-value of the reruns against the baseline
    confirmed_by_reruns: bool | None = None  # True: confirmed; False: cleared; None: no reruns, or undecided
    rerun: "RerunVerdict | None" = None  # the reruns' verdict, p and interval
    changed_with: str | None = None   # the environment change that restarted the baseline this night
    factor: float | None = None       # the host's night factor divided out of the value
    suspect: "Change | None" = None   # the change under test this night's figure is judged with
    verdict: str | None = None        # the suspect's verdict: REGRESSION, IMPROVEMENT, NO_EFFECT, INCONCLUSIVE
    ab: "ABTest | None" = None        # the same-night A/B of the previous and the new image
    news: bool = False                # the suspect appeared tonight, or its verdict was decided tonight
    ended: "Change | None" = None     # fixed / ended: the change whose confirmed regression this night ended
    blamed: "Change | None" = None    # a regression's change (its alert group's suspect), kept while it lasts
    kind: str | None = None           # what the night says (a key of MESSAGES)
    state: str = ""                   # the figure's state after the night: building, steady, testing, regressed
    needs_ab: bool = False            # tonight's change cannot be judged from the history alone (a short baseline)
    image: str | None = None          # tonight's image, as it ran (the reference that names its alert group)

    @property
    def head(self) -> str:
        k = self.key
        precision = f" {k.precision}" if k.precision != DEFAULT_PRECISION else ""
        return f"{k.benchmark} {k.gpus} GPU{'s' if k.gpus != 1 else ''}{precision} {k.metric}"

    def line(self) -> str:
        head = self.head
        if self.changed_with:
            return (f"{head}: changed with {self.changed_with}: {self.value:.4g} vs {self.baseline:.4g} the night "
                    f"before ({-(self.worse_by or 0.0) * 100:+.1f}%) on {self.night}; baseline restarted")
        if self.baseline is None:  # building: no baseline to compare with
            s = f"{head}: {self.value:.4g} on {self.night}: {self.kind or BUILDING}"
            if self.ab is not None:
                s += f"; A/B: {self.ab.line()}"
            return s + (f"; {self.note}" if self.note else "")
        if self.verdict == REGRESSION and self.blamed is not None:
            head += f": regressed with {self.blamed.text}"
        elif self.suspect is not None and self.verdict is not None:
            head += f": with {self.suspect.text} ({self.verdict})"
        s = (f"{head}: {self.value:.4g} vs baseline {self.baseline:.4g} ({(self.worse_by or 0.0) * 100:+.1f}% worse, robust z "
             f"{self.z:.1f}) on {self.night}")
        if self.ab is not None:
            s += f"; A/B: {self.ab.line()}"
        if self.reruns and self.rerun is not None:
            s += (f"; reruns {', '.join(f'{v:.4g}' for v in self.reruns)}: "
                  f"{self.rerun.text()}")
        if self.factor is not None and abs(self.factor - 1) >= 0.005:
            s += f"; host night factor {self.factor:.3f} divided out"
        if self.note:
            s += f"; {self.note}"
        return s


@dataclass(frozen=True)
class ABTest:
    """A same-night A/B: the cell on the previous image (A) and on the new one (B), in pairs on one host."""
    previous: str              # the previous image, as a person knows it (the reference it ran as)
    new: str                   # tonight's image
    host: str
    a: tuple[float, ...]       # A's values (the previous image)
    b: tuple[float, ...]       # B's values (tonight's image)
    direction: int = +1        # +1: higher is better
    gates: Gates | None = None  # None: the default gates

    @property
    def change(self) -> float:
        """B relative to A in the bad direction (0.1: B 10 % worse), from the Hodges-Lehmann shift
        of the log values (the median of every pair's log ratio)."""
        got = self._interval()
        return got[0] if got else 0.0

    @property
    def level(self) -> float:
        """The interval's coverage: two one-sided tests at 5 % over all the looks an A/B may take
        (5 pairs, then one more at a time to the cap), Bonferroni-split so that a change at the
        gate is called "same" at most 5 % of the time however many pairs were added."""
        g = self.gates or Gates()
        return 1 - 2 * 0.05 / max(1, g.ab_max_pairs - g.ab_min_pairs + 1)

    def interval(self) -> tuple[float, float] | None:
        """The interval of the change (low, high) at `level`, in the bad direction: exact and
        distribution-free (Moses' interval of the log shift); None with too few cells."""
        got = self._interval()
        return (got[1], got[2]) if got else None

    def _interval(self) -> tuple[float, float, float] | None:
        return relative_change(self.a, self.b, self.direction, self.level)

    def p(self, worse: bool = True) -> float:
        """One-sided Mann-Whitney U, B worse than A (or, worse=False, better): exact by permutation
        at these sizes, ties included."""
        b_low = (self.direction > 0) == worse
        return rank_test_p(self.b, self.a, "less" if b_low else "greater")

    @property
    def verdict(self) -> str:
        """worse | better: the rank test rejects at ab_alpha and the change passes the magnitude
        gate; same: equivalence, the interval of the change (`level`) inside ±magnitude (two
        one-sided tests); unknown otherwise (add pairs up to the cap; then it stays unknown and
        decides nothing)."""
        g = self.gates or Gates()
        if min(len(self.a), len(self.b)) < g.ab_min_pairs:
            return "unknown"
        if self.p(True) <= g.ab_alpha and self.change >= g.magnitude:
            return "worse"
        if self.p(False) <= g.ab_alpha and -self.change >= g.magnitude:
            return "better"
        ci = self.interval()
        return "same" if inside(ci, g.magnitude) else "unknown"

    def wants_pairs(self) -> int:
        """How many more pairs an "unknown" A/B should run (0: decided, or at its cap)."""
        g = self.gates or Gates()
        if self.verdict != "unknown":
            return 0
        return max(0, g.ab_max_pairs - min(len(self.a), len(self.b)))

    def pairs_to_decide(self) -> int | None:
        """Pairs that would show "same" with 80 % power if the images do not differ, at the spread
        measured tonight (the pooled SD of the log values); None without a spread."""
        if min(len(self.a), len(self.b)) < 2 or min(self.a + self.b) <= 0:
            return None
        la, lb = [math.log(v) for v in self.a], [math.log(v) for v in self.b]
        sd = math.sqrt((statistics.variance(la) * (len(la) - 1) + statistics.variance(lb) * (len(lb) - 1))
                       / (len(la) + len(lb) - 2))
        g = self.gates or Gates()
        # "same": -magnitude < -(exp(shift) - 1) < magnitude, i.e. the log shift inside these bounds
        return pairs_for_shift_equivalence(sd, math.log(1 - g.magnitude), math.log(1 + g.magnitude), self.level)

    def line(self) -> str:
        verdict = self.verdict
        ci = self.interval()
        kind = {"worse": "slower" if self.direction > 0 else "worse", "better": "faster" if self.direction > 0
                else "better"}.get(verdict)
        if kind:
            what = f"image {self.new} {abs(self.change) * 100:.1f} % {kind} than image {self.previous}"
            if ci is not None:
                lo, hi = sorted(abs(v) * 100 for v in ci)
                what += f" ({self.level * 100:g} % interval {lo:.1f}..{hi:.1f} %)"
        else:  # signed as B against A: + is better
            what = f"image {self.new} vs image {self.previous}: {verdict} ({-self.change * 100:+.1f} %"
            if ci is not None:
                what += f", {self.level * 100:g} % interval {-ci[1] * 100:+.1f}..{-ci[0] * 100:+.1f} %"
            g = self.gates or Gates()
            if verdict == "same":
                what += f", inside ±{g.magnitude * 100:g} %"
            elif ci is not None:
                what += f", not inside ±{g.magnitude * 100:g} %"
                need = self.pairs_to_decide()
                if need is not None and need <= MOST_REPEATS:
                    what += (f"; {need} pairs would show \"same\" with 80 % power if the images do not differ, "
                             "at tonight's spread")
            what += ")"
        p = self.p(verdict != "better")
        return f"{what} tonight on {self.host} (p = {p:.3g}, {len(self.a)} + {len(self.b)} cells)"


@dataclass(frozen=True)
class Change:
    """What changed between two nights' fingerprints, and whether it is under test."""
    kind: str    # "image" (under test), "config" (under test, alerts where asked) or "environment" (restarts)
    text: str    # "image scalebench/torch:b (was scalebench/torch:a), framework version 2.5.1 -> 2.6.0"
    before: dict
    after: dict

    @property
    def previous_image(self) -> str | None:
        """The reference that runs the previous image again (its tag by digest), else its name."""
        return self.before.get("image_ref") or self.before.get("image")

    @property
    def new_image(self) -> str | None:
        return self.after.get("image_ref") or self.after.get("image")

    def name(self, which: str) -> str:
        """How a person knows the image (the reference it ran as), else its digest."""
        fp = self.before if which == "previous" else self.after
        return fp.get("image") or str(fp.get("image_digest") or which)[:19]


def _describe(before: dict, after: dict, keys) -> list[str]:
    out = []
    for k in keys:
        a, b = before.get(k), after.get(k)
        if a == b:
            continue
        if k == "image":
            out.append(f"image {b or 'unknown'} (was {a or 'unknown'})")
            continue
        if k == "image_digest" and before.get("image") != after.get("image") and a and b:
            continue  # the image's name says it; the digests are in the package diff
        short = (lambda v: str(v)[:19]) if k in HASHES else str
        out.append(f"{k.replace('_', ' ')} {short(a) if a is not None else 'unknown'} -> "
                   f"{short(b) if b is not None else 'unknown'}")
    return out


def classify_change(before: dict | None, after: dict | None, gates: "Gates | None" = None) -> Change | None:
    """The change between two system fingerprints, None when nothing changed or either is unknown
    (history recorded before fingerprints). A fingerprint without an image reference (recorded
    before references were) changes only with its digest."""
    if not before or not after:
        return None
    g = gates or Gates()
    if "image" not in before or "image" not in after:
        before, after = {k: v for k, v in before.items() if k != "image"}, {k: v for k, v in after.items() if k != "image"}
    env = _describe(before, after, [k for k in FINGERPRINT_KEYS if k in g.environment])
    if env:
        return Change("environment", ", ".join(_describe(before, after, FINGERPRINT_KEYS)), before, after)
    image = _describe(before, after, [k for k in IMAGE_KEYS + ENVIRONMENT_KEYS if k not in g.environment])
    config = _describe(before, after, CONFIG_KEYS)
    if image:
        return Change("image", ", ".join(image + config), before, after)
    if config:
        return Change("config", ", ".join(config), before, after)
    return None




RERUN_LEVEL = 0.90  # one look: two one-sided tests at 5 %


@dataclass(frozen=True)
class RerunVerdict:
    """What a flagged figure's same-night reruns say against its baseline."""
    verdict: str                      # "confirmed" | "cleared" | "undecided"
    p: float                          # one-sided rank test, the reruns worse than the baseline
    interval: tuple[float, float] | None  # the change's RERUN_LEVEL interval, in the bad direction
    margin: float                     # the equivalence margin (the magnitude gate)

    @property
    def confirmed(self) -> bool | None:
        """True: confirmed; False: cleared; None: undecided (the flag stands, the next night decides)."""
        return {"confirmed": True, "cleared": False}.get(self.verdict)

    def text(self) -> str:
        s = f"{self.verdict} (Mann-Whitney U p = {self.p:.3g}"
        if self.interval is not None:
            lo, hi = self.interval
            inside = "inside" if self.verdict == "cleared" else "not inside"
            s += (f", {RERUN_LEVEL * 100:g} % interval {lo * 100:+.1f}..{hi * 100:+.1f}% worse, "
                  f"{inside} ±{self.margin * 100:g} %")
        return s + (")" if self.verdict != "undecided" else "): the next night decides")


def reruns_confirm(reruns: list[float], base: list[float], direction: int, gates: Gates) -> RerunVerdict:
    """Confirmed: the reruns are worse than the baseline by a one-sided rank test at rerun_alpha
    and their median is past the magnitude gate. Cleared only by equivalence: the RERUN_LEVEL
    interval of the change (Moses' interval of the log shift, reruns vs baseline) inside
    ±magnitude. Undecided otherwise: the flag stands and the next night decides. The test
    assumes the reruns (single cells) and the baseline's nights (medians of several repeats)
    are exchangeable when nothing changed: exact for that model, approximate where a cell
    spreads more than a night's median."""
    med = statistics.median(base)
    p = rank_test_p(reruns, base, "less" if direction > 0 else "greater")
    change = -direction * (statistics.median(reruns) - med) / abs(med) if med else 0.0
    got = relative_change(base, reruns, direction, RERUN_LEVEL)
    ci = (got[1], got[2]) if got else None
    if p <= gates.rerun_alpha and change >= gates.magnitude:
        return RerunVerdict("confirmed", p, ci, gates.magnitude)
    cleared = inside(ci, gates.magnitude)
    return RerunVerdict("cleared" if cleared else "undecided", p, ci, gates.magnitude)
