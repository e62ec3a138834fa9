"""A figure's life, one night at a time: the regression judge as an explicit state machine.

Every state holds its own reference level, so a night is always judged against the right one:

  Building(base)                 fewer than min_history nights in the baseline
  Steady(base, held, recent)     judged against base; held: flagged nights waiting to be confirmed
                                 or cleared; recent: the last change decided (no effect, or the
                                 end of a regression), remembered a week as the prime suspect
  Testing(base, change, ...)     a change (image, config) judged against the baseline BEFORE it;
                                 held / better: its flagged and improved nights waiting to be
                                 confirmed
  Regressed(base, change, level, back, candidate, tried, quiet)
                                 a confirmed regression since `change`: base is the level before
                                 it (frozen), level its own nights; back: nights within the gates
                                 again, to be confirmed; candidate: a later change judged as a fix
                                 against base (tried: its nights); quiet: last night alerted nothing

Moves (`step`): state, what tonight shows -> next state: what it says (MESSAGES; a message that
alerts does so on a night whose own figure is flagged)
  any      environment change, or a change with too little history -> Building([v]): restarted
  Building fewer than min_history nights                 -> Building: building
  Steady   flagged, not yet confirmed                    -> Steady(held + v): flagged
  Steady   flagged, confirmed (reruns or `confirm` nights) -> Regressed(no change, or `recent`
           when it was decided within RECENT_NIGHTS)     : regression
  Steady   otherwise (held nights were noise: join base) -> Steady: -
  Testing  flagged and confirmed (A/B, reruns, nights)   -> Regressed(change; after two changes on
           consecutive nights with the first one flagged, that first one): regression
  Testing  flagged, or an A/B that could not decide      -> Testing: inconclusive
  Testing  improved, fewer than `confirm` nights         -> Testing(better + v): inconclusive
  Testing  improved `confirm` nights                     -> Building(better nights): improvement
  Testing  otherwise (within the gates, or an A/B "same") -> Steady(recent = change): no effect
  Regressed  flagged (after a quiet night: confirmed again) -> Regressed(level + v): regression (flagged)
  Regressed  not flagged, nearer the regressed level     -> Regressed(quiet): -
  Regressed  back (within the gates, nearer the level before), not yet confirmed -> Regressed(back + v): back
  Regressed  back for `confirm` nights, or reruns equal the base, no change since -> Steady: ended
  Regressed  a new change                                -> Regressed(candidate = change), judged:
    its level (its nights; on its first night with a decided A/B, the regressed level moved by
    the A/B's shift of new against previous) against base, confirmed by that A/B or `confirm` nights:
    back                                                 -> Steady(base + its nights): fixed
    still flagged, moved >= magnitude towards base       -> Regressed(level = its level): partly fixed
    still flagged, no better                             -> Regressed(level = its level): still regressed
    worse than the regressed level by the gate           -> Regressed(change = it): regression
    not yet confirmed                                    -> Regressed(tried + v): inconclusive / back
"""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, replace
from typing import Sequence, Union

from scalebench.analysis.regress import (BACK, BUILDING, DIRECTION, ENDED, FIXED, FLAGGED, IMPROVEMENT, INCONCLUSIVE,
                                         NO_BETTER, NO_EFFECT, NOT_A_VERDICT, PARTLY_FIXED, REGRESSION, RESTARTED,
                                         ABTest, Change, Gates, Judgement, RerunVerdict, SeriesKey, classify_change,
                                         reruns_confirm)
from scalebench.analysis.stats import robust_z

RECENT_NIGHTS = 7  # a regression this soon after a change was decided is blamed on that change


@dataclass(frozen=True)
class Message:
    """What a move says: its meaning, whether the night alerts, whether the figure is back."""
    meaning: str
    alerts: bool = False   # the figure is (still) a confirmed regression tonight
    ends: bool = False     # the regression is over: the figure is back at the level before it
    pending: bool = False  # a verdict not yet confirmed: the next night (or tonight's A/B) decides


MESSAGES: dict[str, Message] = {
    BUILDING: Message("fewer than min_history nights in the baseline: nothing is judged"),
    RESTARTED: Message("the environment changed (driver, GPU model, topology): a new baseline starts"),
    FLAGGED: Message("past both gates, not yet confirmed; held out of the baseline", pending=True),
    REGRESSION: Message("a confirmed regression (and every night it lasts); also a change that made a lasting "
                        "regression worse by the magnitude gate, blamed on that change", alerts=True),
    INCONCLUSIVE: Message("a change under test, flagged or improved, not yet confirmed", pending=True),
    IMPROVEMENT: Message("a change confirmed better: its level starts a new baseline"),
    NO_EFFECT: Message("a change within the gates of the baseline before it"),
    BACK: Message("a regressed figure back within the gates of the level before it, to be confirmed", pending=True),
    ENDED: Message("back for the confirming nights with no change since the regression: ended by itself",
                   ends=True),
    FIXED: Message("a change that came while the regression lasted brought the figure back", ends=True),
    PARTLY_FIXED: Message("a change moved the figure at least the magnitude gate towards the level before the "
                          "regression; it is still regressed", alerts=True),
    NO_BETTER: Message("a change that came while the regression lasted is no better than the regressed "
                       "image; the regression and its suspect stand", alerts=True),
}


@dataclass(frozen=True)
class Night:
    """One scheduled night of a figure, as the machine reads it."""
    date: dt.date
    value: float                    # the night's figure, the host's night factor divided out
    change: Change | None           # what changed since the night before (fingerprints)
    previous: tuple[float, ...]     # an A/B's cells on the previous image
    reruns: tuple[float, ...]       # reruns (or the A/B's new-image cells), night factor divided out
    reruns_raw: tuple[float, ...]   # the same, as measured (the A/B compares raw cells of one night)
    invalid: bool = False           # a person said this night is not a regression
    host: str = ""


@dataclass(frozen=True)
class Evidence:
    """Tonight's value against a baseline, with what reruns or an A/B add."""
    median: float
    delta: float                    # relative, in the bad direction
    z: float
    flagged: bool
    improved: bool
    confirmed: bool | None          # True: reruns / A/B confirm the flag; False: they clear it
    p: float | None
    rerun: RerunVerdict | None = None
    ab: ABTest | None = None


@dataclass(frozen=True)
class Recent:
    """The last change decided: judged no effect, or the change of a regression that ended."""
    change: Change | None
    night: dt.date
    what: str                       # "judged no effect" | "its regression ended"


@dataclass(frozen=True)
class Building:
    base: tuple[float, ...] = ()


@dataclass(frozen=True)
class Steady:
    base: tuple[float, ...]
    held: tuple[float, ...] = ()
    recent: Recent | None = None


@dataclass(frozen=True)
class Testing:
    base: tuple[float, ...]
    change: Change
    held: tuple[float, ...] = ()
    better: tuple[float, ...] = ()
    earlier: Change | None = None  # the change before, whose flagged nights wait (two changes on consecutive nights)


@dataclass(frozen=True)
class Regressed:
    base: tuple[float, ...]
    change: Change | None
    level: tuple[float, ...]
    back: tuple[float, ...] = ()
    candidate: Change | None = None
    tried: tuple[float, ...] = ()
    quiet: bool = False  # the night before was not flagged: the next flagged night is confirmed again


State = Union[Building, Steady, Testing, Regressed]


@dataclass(frozen=True)
class Move:
    """What one night did: the verdict it says (a MESSAGES key, or None) and about which change."""
    verdict: str | None = None
    note: str = ""
    suspect: Change | None = None   # the change tonight's verdict is about
    blamed: Change | None = None    # the change the regression is blamed on (its alert group's suspect)
    evidence: Evidence | None = None
    before: float | None = None     # restarted: the night before's value

    @property
    def alert(self) -> bool:
        """A message that alerts, on a night whose own figure is flagged (a decision about a change
        while a regression lasts alerts only on such a night)."""
        return (self.verdict is not None and MESSAGES[self.verdict].alerts and self.evidence is not None
                and self.evidence.flagged)


class Machine:
    """A figure's state and the moves between states (`step`: pure, the state given and returned);
    the gates and direction fixed for the series."""

    def __init__(self, gates: Gates, direction: int):
        self.gates, self.direction = gates, direction
        self.state: State = Building()
        self.last: float | None = None

    def step(self, state: State, night: Night) -> tuple[State, Move]:
        g, v, change = self.gates, night.value, night.change
        if change and self.last is not None and (change.kind == "environment" or len(state.base) < g.min_history):
            return Building((v,)), Move(RESTARTED, "baseline restarted", before=self.last)
        if isinstance(state, Building):
            if len(state.base) < g.min_history:
                return Building(state.base + (v,)), Move(BUILDING, "building baseline")
            state = Steady(state.base)
        if change:
            state = self.begin(state, change)
        match state:
            case Steady():
                return self.steady(state, night)
            case Testing():
                return self.testing(state, night)
            case Regressed(candidate=None):
                return self.regressed(state, night)
            case Regressed():
                return self.candidate(state, night)
        raise AssertionError(state)

    @staticmethod
    def begin(state: State, change: Change) -> State:
        """A change under test: judged against the baseline before it; while a regression lasts,
        as a fix against the level before that regression."""
        match state:
            case Regressed():
                return replace(state, candidate=change, tried=(), back=())
            case Testing() if state.held:  # the step may have come with the change before: it stays the suspect
                return Testing(state.base, change, state.held, earlier=state.earlier or state.change)
            case _:  # nights waiting on an undecided change, or flagged before it, join nothing and count for nothing
                return Testing(state.base, change)

    # the states' moves
    def steady(self, s: Steady, night: Night) -> tuple[State, Move]:
        ev = self.weigh(night, s.base, None)
        if not ev.flagged:
            return Steady(self.keep(s.base, s.held + (night.value,)), recent=s.recent), Move(evidence=ev)
        held = s.held + (night.value,)
        if not (ev.confirmed or len(held) >= self.gates.confirm):
            return replace(s, held=held), Move(FLAGGED, evidence=ev)
        r = s.recent if s.recent is not None and (night.date - s.recent.night).days <= RECENT_NIGHTS else None
        blamed = r.change if r else None
        note = f"no change since {r.change.text if r.change else 'the regression before'} ({r.what} on {r.night})" \
            if r else ""
        return Regressed(s.base, blamed, held), Move(REGRESSION, note, blamed, blamed, evidence=ev)

    def testing(self, s: Testing, night: Night) -> tuple[State, Move]:
        # after two changes on consecutive nights the A/B compares them, not the baseline: it clears nothing
        ev, c = self.weigh(night, s.base, s.change, ab_clears=s.earlier is None), s.change
        if ev.flagged:
            held = s.held + (night.value,)
            if ev.confirmed or len(held) >= self.gates.confirm:
                blamed = s.earlier or c  # the first flagged night's change
                note = f"the step came before {c.text}" if s.earlier else ""
                return Regressed(s.base, blamed, held), Move(REGRESSION, note, blamed, blamed, evidence=ev)
            return replace(s, held=held), Move(INCONCLUSIVE, suspect=c, evidence=ev)
        base = self.keep(s.base, s.held)  # flagged nights before were noise
        if ev.ab is not None and ev.ab.verdict == "unknown":
            return replace(s, base=base, held=()), Move(INCONCLUSIVE, suspect=c, evidence=ev)
        if ev.improved or (ev.ab is not None and ev.ab.verdict == "better"):
            better = s.better + (night.value,)
            if len(better) < self.gates.confirm:
                return (replace(s, base=base, held=(), better=better),
                        Move(INCONCLUSIVE, "improved: to be confirmed by the next night", c, evidence=ev))
            return Building(better), Move(IMPROVEMENT, suspect=c, evidence=ev)
        # no effect: an improvement that did not hold was noise; a step that shows later is still blamed on
        # this change (`recent`), so one night within the gates decides, and keeps A/Bs off later nights
        return (Steady(self.keep(base, s.better + (night.value,)), recent=Recent(c, night.date, "judged no effect")),
                Move(NO_EFFECT, suspect=c, evidence=ev))

    def regressed(self, s: Regressed, night: Night) -> tuple[State, Move]:
        ev, b, v = self.weigh(night, s.base, None), s.change, night.value
        if ev.flagged:  # after a quiet night, confirmed again as at first (reruns or the next night)
            kind = FLAGGED if s.quiet and not ev.confirmed else REGRESSION
            return replace(s, level=s.level + (v,), back=(), quiet=False), Move(kind, suspect=b, blamed=b, evidence=ev)
        if ev.confirmed is not False and (ev.delta >= self.gates.magnitude or not self.nearer_before(v, s)):
            # between the two levels: neither back nor the regressed level (which only flagged nights make)
            return replace(s, back=(), quiet=True), Move(suspect=b, blamed=b, evidence=ev)
        back = s.back + (v,)
        if len(back) < self.gates.confirm and ev.confirmed is not False:
            return replace(s, back=back, quiet=True), Move(BACK, "back within the gates: to be confirmed by the next "
                                                                 "night", b, b, evidence=ev)
        since = f"no change since {b.text}" if b else "no change since it began"
        return (Steady(self.keep(s.base, back), recent=Recent(b, night.date, "its regression ended")),
                Move(ENDED, f"regression ended by itself ({since})", b, b, evidence=ev))

    def candidate(self, s: Regressed, night: Night) -> tuple[State, Move]:
        """A change while the regression lasts, judged against the level before the regression."""
        g, d, b, c = self.gates, self.direction, s.change, s.candidate
        assert c is not None
        ev = self.weigh(night, s.base, c, ab_clears=False)
        tried = s.tried + (night.value,)
        regressed_level = statistics.median(s.level)
        if ev.ab is not None and ev.ab.verdict != "unknown":  # tonight's A/B: new against previous, one host
            level, confirmed, how = regressed_level * (1 - d * ev.ab.change), True, "by tonight's A/B"
        else:
            level, confirmed, how = statistics.median(tried), len(tried) >= g.confirm, f"over {len(tried)} night(s)"
        med = statistics.median(s.base[-g.window:])
        delta = -d * (level - med) / abs(med) if med else 0.0
        back = not (delta >= g.magnitude and -d * robust_z(level, list(s.base[-g.window:])) >= g.z) \
            and self.nearer_before(level, s) and ev.delta < g.magnitude  # never "fixed" on a night this much worse
        gain = d * (level - regressed_level) / abs(regressed_level) if regressed_level else 0.0
        was, its = (b.text, f"{b.text}'s regression") if b else ("the regressed level", "the regression")
        if not confirmed:
            verdict = BACK if back else INCONCLUSIVE
            note = (f"{c.text} judged against the level before {its} "
                    f"({delta * 100:+.1f}% worse so far): to be confirmed by the next night")
            return replace(s, tried=tried), Move(verdict, note, c, b, evidence=ev)
        if back:
            note = f"regression ended with {c.text} ({its} fixed)"
            return (Steady(self.keep(s.base, tried), recent=Recent(b, night.date, "its regression ended")),
                    Move(FIXED, note, c, b, evidence=ev))
        moved = (level,) if how.startswith("by") else tried
        if gain <= -g.magnitude:  # worse again by the gate: a regression of its own, on top
            note = f"{-gain * 100:.1f} % worse than {was} ({how}): a regression of its own"
            return Regressed(s.base, c, moved), Move(REGRESSION, note, c, c, evidence=ev)
        if gain >= g.magnitude:
            note = (f"partly fixed: {c.text} is {gain * 100:.1f} % better than {was} ({how}), "
                    f"{delta * 100:.1f} % short of the level before it")
            return Regressed(s.base, b, moved), Move(PARTLY_FIXED, note, c, b, evidence=ev)
        note = (f"still regressed: {c.text} is no better than {was} ({gain * 100:+.1f} % {how}, "
                f"{delta * 100:.1f} % short of the level before it)")
        return Regressed(s.base, b, moved), Move(NO_BETTER, note, c, b, evidence=ev)

    # helpers
    def nearer_before(self, value: float, s: Regressed) -> bool:
        """Closer to the level before the regression than to the regressed level: within the gates
        alone, a noisy night of a lasting step passes too often at CV 5 %."""
        return abs(value - statistics.median(s.base[-self.gates.window:])) < abs(value - statistics.median(s.level))

    def keep(self, base: tuple[float, ...], more: tuple[float, ...]) -> tuple[float, ...]:
        """The baseline with nights that joined it (the trailing window and no more)."""
        return (base + more)[-self.gates.window:]

    def weigh(self, night: Night, base: tuple[float, ...], change: Change | None, ab_clears: bool = True
              ) -> Evidence:
        """Tonight's value against `base`; an A/B of `change` where one ran (it confirms or clears
        the flag, `ab_clears`, as the host's night moves both images alike), else reruns."""
        g, d, v = self.gates, self.direction, night.value
        window = list(base[-g.window:])
        med = statistics.median(window)
        delta = -d * (v - med) / abs(med) if med else 0.0
        z = -d * robust_z(v, window)
        flagged = delta >= g.magnitude and z >= g.z
        ab = rerun = None
        confirmed: bool | None = None
        p: float | None = None
        if change is not None and change.kind == "image" and night.previous:
            ab = ABTest(change.name("previous"), change.name("new"), night.host, night.previous, night.reruns_raw, d, g)
        if ab is not None and ab_clears:
            confirmed, p = {"worse": True, "better": False, "same": False}.get(ab.verdict), ab.p(True)
            flagged = flagged or (confirmed is True and delta >= g.rerun_magnitude)  # the A/B shows the step
        elif ab is None and flagged and night.reruns:
            rerun = reruns_confirm(list(night.reruns), window, d, g)
            confirmed, p = rerun.confirmed, rerun.p
        if confirmed is False:  # the reruns (or the A/B) cleared it: an unlucky cell
            flagged = False
        if night.invalid:  # a person said so: it rejoins the baseline
            flagged, confirmed = False, None
        improved = not flagged and -delta >= g.magnitude and -z >= g.z
        return Evidence(med, delta, z, flagged, improved, confirmed, p, rerun, ab)


class Judge:
    """One figure judged night by night: each night's fingerprint, night factor, reruns and A/B
    fed to its Machine, and what the move says as a Judgement. `peek` judges a night without
    keeping it (the DAG decides tonight's reruns from tonight's raw judgement, as a simulation can)."""

    def __init__(self, key: SeriesKey, gates: Gates = Gates(), config_alerts: bool = False, host: str = ""):
        self.key, self.config_alerts, self.host = key, config_alerts, host
        self.direction = DIRECTION.get(key.metric, +1)
        self.machine = Machine(gates, self.direction)
        self.last_print: dict | None = None
        self.pending = False  # the night before left a change's verdict to be confirmed

    def night(self, date: dt.date, raw: float, fingerprint: dict | None = None, factor: float | None = None,
              previous: Sequence[float] = (), reruns: Sequence[float] = (), invalid: bool = False,
              peek: bool = False) -> Judgement:
        value = raw / factor if factor else raw
        change = classify_change(self.last_print, fingerprint, self.machine.gates)
        factored = tuple(r / factor if factor else r for r in reruns)
        night = Night(date, value, change, tuple(previous), factored, tuple(reruns), invalid, self.host)
        state, move = self.machine.step(self.machine.state, night)
        j = self.judgement(night, move, state, factor)
        if not peek:
            self.machine.state, self.machine.last = state, value
            self.last_print = fingerprint or self.last_print
            self.pending = move.verdict is not None and MESSAGES[move.verdict].pending and move.suspect is not None
        return j

    def judgement(self, night: Night, move: Move, state: State, factor: float | None) -> Judgement:
        ev, d, v = move.evidence, self.direction, night.value
        if move.verdict == RESTARTED:
            before = move.before or v
            return Judgement(self.key, night.date, v, before, -d * (v - before) / abs(before) if before else 0.0, None,
                             False, False, move.note, changed_with=night.change.text if night.change else None,
                             factor=factor, kind=RESTARTED, state="building")
        blamed = move.blamed
        alert = move.alert and not (blamed is not None and blamed.kind == "config" and not self.config_alerts)
        return Judgement(
            self.key, night.date, v, ev.median if ev else None, ev.delta if ev else None, ev.z if ev else None,
            bool(ev and ev.flagged), alert, move.note, reruns=night.reruns if ev and ev.rerun else (),
            rerun_p=ev.p if ev else None, rerun=ev.rerun if ev else None,
            confirmed_by_reruns=ev.confirmed if ev else None, factor=factor, suspect=move.suspect,
            verdict=None if move.verdict in NOT_A_VERDICT else move.verdict, ab=ev.ab if ev else None,
            news=move.suspect is not None and (night.change is not None or self.pending),
            ended=blamed if move.verdict is not None and MESSAGES[move.verdict].ends else None,
            blamed=blamed, kind=move.verdict, state=type(state).__name__.lower())
