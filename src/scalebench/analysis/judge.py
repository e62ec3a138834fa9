"""One figure judged night by night: the adapter between a stored series and the state machine of
analysis.lifecycle (whose states and moves are all there). It completes each night's fingerprint,
divides out the night factor, feeds the Machine and turns the move into a Judgement; `peek`
judges a night without keeping it (the DAG decides tonight's reruns from tonight's raw judgement)."""
from __future__ import annotations

import datetime as dt
from typing import Sequence

from scalebench.analysis.judgement import DIRECTION, Change, Gates, Judgement, SeriesKey, classify_change
from scalebench.analysis.lifecycle import Machine, Move, Night, State
from scalebench.core.verdicts import BUILDING, NOT_A_VERDICT, RESTARTED, VERDICTS


class Judge:
    """One figure judged night by night: each night's fingerprint, night factor, reruns and A/B
    fed to its Machine, and what the move says as a Judgement. `peek` judges a night without
    keeping it (the DAG decides tonight's reruns from tonight's raw judgement, as a simulation can)."""

    def __init__(self, key: SeriesKey, gates: Gates = Gates(), config_alerts: bool = False, host: str = ""):
        self.key, self.config_alerts, self.host = key, config_alerts, host
        self.direction = DIRECTION.get(key.metric, +1)
        self.machine = Machine(gates, self.direction)
        self.last: float | None = None
        self.last_print: dict | None = None
        self.digests: dict[str, dt.date] = {}  # each image digest seen, and its first night
        self.pending = False  # the night before left a change's verdict to be confirmed

    def night(self, date: dt.date, raw: float, fingerprint: dict | None = None, factor: float | None = None,
              previous: Sequence[float] = (), reruns: Sequence[float] = (), invalid: bool = False,
              peek: bool = False) -> Judgement:
        value = raw / factor if factor else raw
        fingerprint, assumed = self.completed(fingerprint)
        change = classify_change(self.last_print, fingerprint, self.machine.gates)
        factored = tuple(r / factor if factor else r for r in reruns)
        night = Night(date, value, change, tuple(previous), factored, tuple(reruns), invalid, self.host, self.last)
        state, move = self.machine.step(self.machine.state, night)
        j = self.judgement(night, move, state, factor)
        j.image = (fingerprint or {}).get("image_ref") or (fingerprint or {}).get("image")
        assumed = assumed or self.returned(fingerprint, change)
        if assumed:
            j.note = f"{j.note}; {assumed}" if j.note else assumed
        if not peek:
            self.machine.state, self.last = state, value
            self.last_print = fingerprint or self.last_print
            self.pending = move.verdict is not None and VERDICTS[move.verdict].pending and move.suspect is not None
            digest = (fingerprint or {}).get("image_digest")
            if digest:
                self.digests.setdefault(digest, date)
        return j

    def completed(self, fingerprint: dict | None) -> tuple[dict | None, str]:
        """A fingerprint without an image digest (missing or empty) under the same reference as the
        night before is taken as the same build, and said; under another reference, the reference
        alone tells the change."""
        if not fingerprint or fingerprint.get("image_digest"):
            return fingerprint, ""
        before = self.last_print or {}
        if before.get("image_digest") and before.get("image") == fingerprint.get("image"):
            return ({**fingerprint, "image_digest": before["image_digest"]},
                    "no image digest recorded tonight: assumed the build of the night before (same reference)")
        rest = {k: v for k, v in fingerprint.items() if k != "image_digest"}
        return rest, "no image digest recorded tonight: the image is known by its reference alone"

    def returned(self, fingerprint: dict | None, change: Change | None) -> str:
        """Said when tonight's image is a build measured before (a tag moved back to an older digest)."""
        digest = (fingerprint or {}).get("image_digest")
        if change is not None and change.kind == "image" and digest in self.digests:
            return f"the image is again the build first measured on {self.digests[digest]} (its digest)"
        return ""

    def judgement(self, night: Night, move: Move, state: State, factor: float | None) -> Judgement:
        ev, d, v = move.evidence, self.direction, night.value
        if move.verdict == RESTARTED:
            before = move.before or v
            return Judgement(self.key, night.date, v, before, -d * (v - before) / abs(before) if before else 0.0, None,
                             False, False, move.note, changed_with=night.change.text if night.change else None,
                             factor=factor, kind=RESTARTED, state="building")
        blamed = move.blamed
        alert = move.alert and not (blamed is not None and blamed.kind == "config" and not self.config_alerts)
        note = "; ".join(n for n in (move.note, ev.note if ev else "") if n)
        building = move.verdict == BUILDING
        return Judgement(
            self.key, night.date, v, None if building else ev.median if ev else None,
            None if building else ev.delta if ev else None, None if building else ev.z if ev else None,
            bool(ev and ev.flagged and not building), alert, note, reruns=night.reruns if ev and ev.rerun else (),
            rerun_p=ev.p if ev else None, rerun=ev.rerun if ev else None,
            confirmed_by_reruns=ev.confirmed if ev else None, factor=factor, suspect=move.suspect,
            verdict=None if move.verdict in NOT_A_VERDICT else move.verdict, ab=ev.ab if ev else None,
            news=move.suspect is not None and (night.change is not None or self.pending),
            ended=blamed if move.verdict is not None and VERDICTS[move.verdict].ends else None,
            blamed=blamed, kind=move.verdict, state=type(state).__name__.lower(), needs_ab=move.needs_ab)
