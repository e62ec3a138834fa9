"""A figure's life, one night at a time: the regression judge as an explicit state machine.

Every state holds its own reference level, so a night is always judged against the right one:

  Building(base, recent)         fewer than min_history nights in the baseline; nights of every image
                                 join it unless a change's same-night A/B tells them apart
  Steady(base, held, recent, pin) judged against base; held: flagged nights waiting to be confirmed
                                 or cleared; recent: the last change decided (no effect, or the end
                                 of a regression), remembered a week; pin: the suspect (or none) the
                                 first held night settled, with what it says
  Testing(base, change, ...)     a change (image, config) judged against the baseline BEFORE it;
                                 held / better: its flagged and improved nights waiting to be
                                 confirmed; flags: how many of its nights were flagged
  Regressed(base, change, level, back, candidate, tried, quiet, partly)
                                 a confirmed regression since `change`: base is the level before
                                 it (frozen), level its own nights; back: nights within the gates
                                 again, to be confirmed; candidate: a later change judged as a fix
                                 against base (tried: its nights); quiet: last night alerted nothing;
                                 partly: a change judged a partial fix, credited if the figure comes back

What restarts a baseline: only an environment change (driver, GPU model, topology). An image or
config change is a candidate whatever the length of the baseline: judged by its same-night A/B
(previous image against new, which needs no history) and, once the baseline is long enough,
against it. A change the A/B finds "same" or whose nights stay within the gates is the same
product: its nights join the baseline, so a team with a new image every night has a baseline
after min_history nights like anyone else.

Moves (`step`, pure: the state and the night in, the next state and what it says out; VERDICTS;
a message that alerts does so on a night whose own figure is flagged)
  any      environment change                            -> Building([v]): restarted
  Building a change whose A/B says worse                 -> Regressed(change): regression
  Building a change whose A/B says better                -> Building([v]): improvement
  Building a change whose A/B says same                  -> Building(base + v, recent = it, cleared): no effect
  Building otherwise (no change, no A/B, A/B unknown)    -> Building(base + v): building (an undecided
           change is remembered as unjudged: a step on the next night may name it)
  Steady   flagged, not yet confirmed                    -> Steady(held + v, pin): flagged; the first held
           night pins the suspect: the recent change unless it was cleared (its A/B said same, or its
           nights stayed within the gates: then none, except on the first night after a change no
           A/B cleared); `recent` counts only within RECENT_NIGHTS
  Steady   flagged, confirmed (reruns or `confirm` nights) -> Regressed(pin): regression ("no change
           at the step (date); image C came 3 nights before it and its A/B said same" where the pin is none)
  Steady   otherwise (held nights were noise: join base) -> Steady: -
  Testing  flagged and confirmed (A/B, reruns, nights)   -> Regressed(change; after two changes on
           consecutive nights with the first one flagged, that first one): regression
  Testing  flagged, or an A/B that could not decide      -> Testing: inconclusive
  Testing  improved, fewer than `confirm` nights         -> Testing(better + v): inconclusive
  Testing  improved `confirm` nights                     -> Building(better nights): improvement
  Testing  otherwise (within the gates, or an A/B "same") -> Steady(recent = change): no effect
  Regressed  flagged (after a quiet night: confirmed again) -> Regressed(level + v): regression (flagged)
  Regressed  not flagged, nearer the regressed level     -> Regressed(level + v, quiet): -
  Regressed  back (within the gates, nearer the level before), not yet confirmed -> Regressed(back + v): back
  Regressed  back for `confirm_end` nights, or reruns equal the base -> Steady: ended (no change since),
           or fixed (credited to the change judged a partial fix, `partly`)
  Regressed  a new change                                -> Regressed(candidate = change), judged
    (a change the night after a candidate whose nights wait, on the same side of the two levels
    tonight and with no A/B: that candidate's run goes on, so nightly images can be confirmed as a fix):
    its level (its nights; on its first night with a decided A/B, the regressed level moved by
    the A/B's shift of new against previous) against base, confirmed by that A/B or `confirm` nights:
    (an A/B that says "same": the regressed level with tonight's night, as measured, so nightly
    images chain no estimates)
    back (by a decided A/B: the regression's gap less the least gain its interval allows is under
    the gate, whatever tonight's own night, and where only its estimate is back the nights
    decide; over nights: within the gates, nearer the level before, tonight not 5 % worse)
                                                          -> Steady(base + its nights): fixed
    still flagged, moved >= magnitude towards base       -> Regressed(level, partly = it): partly fixed
    still flagged, no better                             -> Regressed(level = its level): still regressed
    worse than the regressed level by the gate           -> Regressed(change = it): regression
    not yet confirmed                                    -> Regressed(tried + v): inconclusive / back
"""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, replace
from typing import Union

from scalebench.analysis.judgement import ABTest, Change, Gates, RerunVerdict, reruns_confirm
from scalebench.analysis.stats import robust_z
from scalebench.core.verdicts import (BACK, BUILDING, ENDED, FIXED, FLAGGED, IMPROVEMENT, INCONCLUSIVE, NO_BETTER,
                                      NO_EFFECT, PARTLY_FIXED, REGRESSION, RESTARTED, VERDICTS)

__all__ = ["Machine", "Night", "Move", "RECENT_NIGHTS"]

RECENT_NIGHTS = 7  # a regression this soon after a change was decided may be blamed on that change
CLEARED_BY_AB, CLEARED_BY_NIGHTS = "its A/B said same", "its nights stayed within the gates"
UNJUDGED = "it was not judged (no decided A/B on a short baseline)"


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
    before: float | None = None     # the night before's value (None on a series' first night)


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
    note: str = ""                  # what the evidence assumed (an A/B too small to count)


@dataclass(frozen=True)
class Recent:
    """The last change decided: judged no effect, or the change of a regression that ended."""
    change: Change | None
    night: dt.date                  # the night it was decided
    what: str                       # "judged no effect" | "its regression ended"
    cleared: str = ""               # why a later step is not its doing: CLEARED_BY_AB, CLEARED_BY_NIGHTS, or ""
    since: dt.date | None = None    # the night the change came
    nights: int = 0                 # nights judged since it was decided


@dataclass(frozen=True)
class Pin:
    """The suspect a flagged night settled (None: no change is blamed) and what the regression will say."""
    change: Change | None
    note: str = ""


@dataclass(frozen=True)
class Building:
    base: tuple[float, ...] = ()
    recent: Recent | None = None


@dataclass(frozen=True)
class Steady:
    base: tuple[float, ...]
    held: tuple[float, ...] = ()
    recent: Recent | None = None
    pin: Pin | None = None


@dataclass(frozen=True)
class Testing:
    base: tuple[float, ...]
    change: Change
    held: tuple[float, ...] = ()
    better: tuple[float, ...] = ()
    earlier: Change | None = None  # the change before, whose flagged nights wait (two changes on consecutive nights)
    since: dt.date | None = None   # the night the change came
    flags: int = 0                 # its nights flagged so far (a change with none is cleared by its nights)


@dataclass(frozen=True)
class Regressed:
    base: tuple[float, ...]
    change: Change | None
    level: tuple[float, ...]
    back: tuple[float, ...] = ()
    candidate: Change | None = None
    tried: tuple[float, ...] = ()
    quiet: bool = False  # the night before was not flagged: the next flagged night is confirmed again
    partly: Change | None = None  # judged a partial fix: if the figure then comes back, that change fixed it


State = Union[Building, Steady, Testing, Regressed]


@dataclass(frozen=True)
class Move:
    """What one night did: the verdict it says (a VERDICTS key, or None) and about which change."""
    verdict: str | None = None
    note: str = ""
    suspect: Change | None = None   # the change tonight's verdict is about
    blamed: Change | None = None    # the change the regression is blamed on (its alert group's suspect)
    evidence: Evidence | None = None
    before: float | None = None     # restarted: the night before's value
    needs_ab: bool = False          # tonight's change can be judged only by its same-night A/B

    @property
    def alert(self) -> bool:
        """A message that alerts, on a night whose own figure is flagged (a decision about a change
        while a regression lasts alerts only on such a night)."""
        return (self.verdict is not None and VERDICTS[self.verdict].alerts and self.evidence is not None
                and self.evidence.flagged)


class Machine:
    """A figure's state and the moves between states (`step`: pure, the state and night given,
    the next state and the move returned); the gates and direction fixed for the series."""

    def __init__(self, gates: Gates, direction: int):
        self.gates, self.direction = gates, direction
        self.state: State = Building()

    def step(self, state: State, night: Night) -> tuple[State, Move]:
        g, v, change = self.gates, night.value, night.change
        if change and change.kind == "environment" and night.before is not None:
            return Building((v,)), Move(RESTARTED, "baseline restarted", before=night.before)
        if isinstance(state, Building):
            if len(state.base) < g.min_history:
                return self.building(state, night)
            state = Steady(state.base, recent=state.recent)
        if change:
            state = self.begin(state, change, night)
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

    def begin(self, state: State, change: Change, night: Night) -> State:
        """A change under test: judged against the baseline before it; while a regression lasts,
        as a fix against the level before that regression. A change on the night after another
        whose nights wait to be confirmed continues that one's run where tonight agrees with it
        (both back, or both not) and no A/B ran tonight (an A/B judges tonight's change itself):
        with a new image every night a candidate never has two nights of its own, so the run's
        first change is the one judged (and credited)."""
        match state:
            case Regressed(candidate=Change(), tried=(_, *_)) if not night.previous and (
                    self.nearer_before(statistics.median(state.tried), state) == self.nearer_before(night.value, state)):
                return state
            case Regressed():
                return replace(state, candidate=change, tried=(), back=())
            case Testing() if state.held:  # the step may have come with the change before: it stays the suspect
                return Testing(state.base, change, state.held, earlier=state.earlier or state.change, since=night.date,
                               flags=state.flags)
            case _:  # nights waiting on an undecided change, or flagged before it, join nothing and count for nothing
                return Testing(state.base, change, since=night.date)

    # the states' moves
    def building(self, s: Building, night: Night) -> tuple[State, Move]:
        """A short baseline: the night joins it, unless tonight's change has an A/B that tells its
        image apart (the evidence that needs no history)."""
        g, v, c = self.gates, night.value, night.change
        recent = replace(s.recent, nights=s.recent.nights + 1) if s.recent else None
        have = f"the baseline holds {len(s.base)} of {g.min_history} nights"
        if c is None or not s.base:  # nothing to weigh against yet
            return Building(s.base + (v,), recent), Move(BUILDING, f"building baseline ({have})")
        ev = self.weigh(night, s.base, c)
        verdict = ev.ab.verdict if ev.ab is not None and not night.invalid else None
        if verdict == "worse":
            note = f"judged by its same-night A/B ({have})"
            return Regressed(s.base, c, (v,)), Move(REGRESSION, note, c, c, replace(ev, flagged=True))
        if verdict == "better":
            return Building((v,)), Move(IMPROVEMENT, f"judged by its same-night A/B ({have})", c, evidence=ev)
        if verdict == "same":
            r = Recent(c, night.date, "judged no effect", CLEARED_BY_AB, night.date)
            return Building(s.base + (v,), r), Move(NO_EFFECT, f"judged by its same-night A/B ({have})", c,
                                                    evidence=ev)
        why = "its A/B could not decide" if verdict else ev.note or "no A/B ran"
        r = Recent(c, night.date, "not judged", UNJUDGED, night.date)  # a step on the next night may name it
        return Building(s.base + (v,), r), Move(BUILDING, f"{c.text} not judged: {why} and {have}; the night "
                                                          "joins the baseline", c, evidence=ev if ev.ab else None,
                                                 needs_ab=c.kind == "image")

    def steady(self, s: Steady, night: Night) -> tuple[State, Move]:
        recent = replace(s.recent, nights=s.recent.nights + 1) if s.recent else None
        if recent is not None and (night.date - recent.night).days > RECENT_NIGHTS:
            recent = None
        ev = self.weigh(night, s.base, None)
        if not ev.flagged:
            return Steady(self.keep(s.base, s.held + (night.value,)), recent=recent), Move(evidence=ev)
        held = s.held + (night.value,)
        pin = s.pin or self.pin(recent, night.date)
        if not (ev.confirmed or len(held) >= self.gates.confirm):
            return Steady(s.base, held, recent, pin), Move(FLAGGED, evidence=ev)
        return Regressed(s.base, pin.change, held), Move(REGRESSION, pin.note, pin.change, pin.change, evidence=ev)

    @staticmethod
    def pin(r: Recent | None, night: dt.date) -> Pin:
        """Whom a step that shows on a night with no change is blamed on: a change decided within
        RECENT_NIGHTS that was not cleared (its regression that ended, or one with flagged nights),
        or one with no A/B on the first night after it; else no change, saying which came before."""
        if r is None or r.change is None:
            return Pin(None, "no change since the regression before" if r else "")
        since = r.since or r.night
        if not r.cleared:
            came = f"no change since {r.change.text} ({r.what} on {r.night})"
            return Pin(r.change, came)
        if r.cleared != CLEARED_BY_AB and r.nights == 1:
            return Pin(r.change, f"the step came the night after {r.change.text}, which no A/B cleared")
        days = (night - since).days
        return Pin(None, f"no change at the step ({night}); {r.change.text} came {days} night{'s' if days != 1 else ''} "
                         f"before it and {r.cleared}")

    def testing(self, s: Testing, night: Night) -> tuple[State, Move]:
        # after two changes on consecutive nights the A/B compares them, not the baseline: it clears nothing
        ev, c = self.weigh(night, s.base, s.change, ab_clears=s.earlier is None), s.change
        if ev.flagged:
            held = s.held + (night.value,)
            if ev.confirmed or len(held) >= self.gates.confirm:
                blamed = s.earlier or c  # the first flagged night's change
                note = f"the step came before {c.text}" if s.earlier else ""
                return Regressed(s.base, blamed, held), Move(REGRESSION, note, blamed, blamed, evidence=ev)
            return replace(s, held=held, flags=s.flags + 1), Move(INCONCLUSIVE, suspect=c, evidence=ev)
        base = self.keep(s.base, s.held)  # flagged nights before were noise
        if ev.ab is not None and ev.ab.verdict == "unknown":
            return replace(s, base=base, held=()), Move(INCONCLUSIVE, suspect=c, evidence=ev)
        same = ev.ab is not None and ev.ab.verdict == "same"  # the same product: a better night was the night's
        if (ev.improved and not same) or (ev.ab is not None and ev.ab.verdict == "better"):
            better = s.better + (night.value,)
            if len(better) < self.gates.confirm:
                return (replace(s, base=base, held=(), better=better),
                        Move(INCONCLUSIVE, "improved: to be confirmed by the next night", c, evidence=ev))
            return Building(better), Move(IMPROVEMENT, suspect=c, evidence=ev)
        # no effect: an improvement that did not hold was noise. A change with flagged nights stays
        # the suspect of a step that shows within the week; one cleared (by its A/B, or with every
        # night within the gates) is not (`pin`)
        cleared = CLEARED_BY_AB if ev.ab is not None and ev.ab.verdict == "same" and s.earlier is None \
            else CLEARED_BY_NIGHTS if s.flags == 0 and not s.held else ""
        recent = Recent(c, night.date, "judged no effect", cleared, s.since)
        return (Steady(self.keep(base, s.better + (night.value,)), recent=recent),
                Move(NO_EFFECT, suspect=c, evidence=ev))

    def regressed(self, s: Regressed, night: Night) -> tuple[State, Move]:
        ev, b, v = self.weigh(night, s.base, None), s.change, night.value
        if ev.flagged:  # after a quiet night, confirmed again as at first (reruns or the next night)
            kind = FLAGGED if s.quiet and not ev.confirmed else REGRESSION
            return replace(s, level=s.level + (v,), back=(), quiet=False), Move(kind, suspect=b, blamed=b, evidence=ev)
        if (ev.confirmed is not False and ev.delta >= self.gates.magnitude) or not self.nearer_before(v, s):
            # nearer the regressed level, not flagged: it alerts nothing but joins the regressed level
            # (made of flagged nights alone, that level sits below the truth and the midpoint with it:
            # a 6 % step's ordinary nights then passed for "back"); reruns that clear such a night
            # do not end it (night after night, a 6 % step is cleared at the 5 % margin sooner or later)
            return replace(s, level=s.level + (v,), back=(), quiet=True), Move(suspect=b, blamed=b, evidence=ev)
        back = s.back + (v,)
        # with no change to credit, nights alone say it ended: one night more than a change needs
        if len(back) < (self.gates.confirm if s.partly else self.gates.confirm_end) and ev.confirmed is not False:
            return replace(s, back=back, quiet=True), Move(BACK, "back within the gates: to be confirmed by the next "
                                                                 "night", b, b, evidence=ev)
        recent = Recent(b, night.date, "its regression ended")
        its = f"{b.text}'s regression" if b else "the regression"
        if s.partly is not None:  # the change judged a partial fix brought it all the way back
            note = f"regression ended with {s.partly.text} ({its} fixed; judged partly fixed at first)"
            return Steady(self.keep(s.base, back), recent=recent), Move(FIXED, note, s.partly, b, evidence=ev)
        since = f"no change since {b.text}" if b else "no change since it began"
        return (Steady(self.keep(s.base, back), recent=recent),
                Move(ENDED, f"regression ended by itself ({since})", b, b, evidence=ev))

    def candidate(self, s: Regressed, night: Night) -> tuple[State, Move]:
        """A change while the regression lasts, judged against the level before the regression."""
        g, d, b, c = self.gates, self.direction, s.change, s.candidate
        assert c is not None
        ev = self.weigh(night, s.base, c, ab_clears=False)
        tried = s.tried + (night.value,)
        regressed_level = statistics.median(s.level)
        decided = ev.ab is not None and ev.ab.verdict != "unknown"
        same = decided and ev.ab is not None and ev.ab.verdict == "same"
        if same:  # the same product as the regressed image: its night joins the regressed level as measured
            level, confirmed, how = statistics.median(s.level + (night.value,)), True, "by tonight's A/B"
        elif decided:  # tonight's A/B: new against previous, one host
            assert ev.ab is not None
            level, confirmed, how = regressed_level * (1 - d * ev.ab.change), True, "by tonight's A/B"
        else:
            level, confirmed, how = statistics.median(tried), len(tried) >= g.confirm, f"over {len(tried)} night(s)"
        med = statistics.median(s.base[-g.window:])
        delta = -d * (level - med) / abs(med) if med else 0.0
        if decided and not same:  # back when even the least gain the A/B allows leaves less than the gate to go
            assert ev.ab is not None
            gap = -d * (regressed_level - med) / abs(med) if med else 0.0
            interval = ev.ab.interval()
            back = interval is not None and gap + interval[1] < g.magnitude
            if not back and delta < g.magnitude and self.nearer_before(level, s):
                # its estimate is back, its interval not yet: the nights decide, never "partly fixed"
                back, confirmed, level, how = True, False, statistics.median(tried), f"over {len(tried)} night(s)"
        else:  # never "fixed" over nights while tonight is this much worse
            back = not (delta >= g.magnitude and -d * robust_z(level, list(s.base[-g.window:])) >= g.z) \
                and self.nearer_before(level, s) and ev.delta < g.magnitude
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
        # an A/B's level is an estimate from one night's shift; "same" keeps the measured nights
        moved = s.level + (night.value,) if same else (level,) if decided else tried
        if gain <= -g.magnitude:  # worse again by the gate: a regression of its own, on top
            note = f"{-gain * 100:.1f} % worse than {was} ({how}): a regression of its own"
            return Regressed(s.base, c, moved), Move(REGRESSION, note, c, c, evidence=ev)
        if gain >= g.magnitude:  # stays the change credited if the figure then comes back
            note = (f"partly fixed: {c.text} is {gain * 100:.1f} % better than {was} ({how}), "
                    f"{delta * 100:.1f} % short of the level before it")
            return Regressed(s.base, b, moved, partly=c), Move(PARTLY_FIXED, note, c, b, evidence=ev)
        note = (f"still regressed: {c.text} is no better than {was} ({gain * 100:+.1f} % {how}, "
                f"{delta * 100:.1f} % short of the level before it)")
        return Regressed(s.base, b, moved, partly=s.partly), Move(NO_BETTER, note, c, b, evidence=ev)

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
        the flag, `ab_clears`, as the host's night moves both images alike), else reruns. An A/B
        with fewer previous-image cells than ab_min_pairs cannot decide: its new-image cells are
        judged as reruns, and the note says so."""
        g, d, v = self.gates, self.direction, night.value
        window = list(base[-g.window:])
        med = statistics.median(window)
        delta = -d * (v - med) / abs(med) if med else 0.0
        z = -d * robust_z(v, window)
        flagged = delta >= g.magnitude and z >= g.z
        ab = rerun = None
        confirmed: bool | None = None
        p: float | None = None
        note = ""
        if change is not None and change.kind == "image" and night.previous:
            if len(night.previous) >= g.ab_min_pairs:
                ab = ABTest(change.name("previous"), change.name("new"), night.host, night.previous, night.reruns_raw,
                            d, g)
            else:
                note = (f"A/B with {len(night.previous)} previous-image cell(s), fewer than {g.ab_min_pairs}: "
                        f"tonight's {len(night.reruns)} new-image cells judged as reruns")
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
        return Evidence(med, delta, z, flagged, improved, confirmed, p, rerun, ab, note)
