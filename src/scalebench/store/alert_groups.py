"""Alert groups in the results store (tables: scalebench.store.alert_tables; rules:
scalebench.core.alert_rules). The report adds each night's confirmed regressions to the open
group of their suspect, marks each figure judged back (a later change fixed it, or it ended by
itself) and closes a group as fixed once every figure is back; a person sets states, owners and
notes. Every change is an event; nothing is deleted."""
from __future__ import annotations

import datetime as dt
from typing import Iterable

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from scalebench.core.alert_rules import (OPEN, STATES, AlertStateError, check_change, check_move,
                                         group_key, judged_fixed, reopened)
from scalebench.core.records import DEFAULT_PRECISION
from scalebench.store.alert_tables import AlertDeliveryRow, AlertEventRow, AlertFigureRow, AlertGroupRow

REPORT = "scalebench"  # who the report's own events are by
MAIN = "main"          # the main alert channel's name among the channels (the routes have theirs)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class AlertGroups:
    """Every write is one transaction that holds the group's lock while it reads, checks and
    writes (SQLite: an immediate transaction, the database's write lock; PostgreSQL: the group
    row's lock): two people's moves, or a person's and the nightly report's, run one after the
    other, and the second is checked against the state the first left."""

    def __init__(self, store):
        from scalebench.store.db import make_engine

        self.engine = store.engine if store.engine.dialect.name != "sqlite" else make_engine(store.url, immediate=True)

    # the report's side
    def record_night(self, night: str, details: Iterable[dict], back: Iterable[dict] = (),
                     moved: Iterable[dict] = ()) -> list[int]:
        """Add a night's confirmed regressions (the report's alert details) to the open group of
        their suspect, opening one where none is, or reopening the group fixed within
        REOPEN_DAYS that held the figure (it slipped back); add each figure flagged tonight
        (`moved`: report.figures.moved_detail) to the open group of the image it ran on,
        where that group holds its benchmark already (it opens none); then mark each figure judged
        back tonight (`back`: report.figures.back_detail; a key of None: whichever open group holds
        it) and close as fixed each open group whose figures are all back. Idempotent for a night.
        Returns the groups touched."""
        touched: set[int] = set()
        with Session(self.engine) as s, s.begin():
            for d in details:
                g = self._group_for(s, d, night)
                g.last_night = max(g.last_night, night)
                self._add_figure(s, g, d, night)
                touched.add(g.id)
            for m in moved:
                holder = self._open_group(s, m["key"])
                if holder is not None and any(f.benchmark == m["benchmark"] for f in self._figures(s, holder.id)):
                    self._add_figure(s, holder, m, night)
                    touched.add(holder.id)
            for b in back:
                open_group = self._open_group(s, b["key"]) if b["key"] is not None else self._holding(s, b)
                f = self._figure(s, open_group, b) if open_group is not None else None
                if open_group is None or f is None or f.back_night is not None or f.last_night >= night:
                    continue  # not in an open group, told already, or it alerted (or was flagged) tonight
                f.back_night = night
                self._event(s, open_group.id, REPORT, "figures", None, None, f"back on {night}: {b['line']}")
                touched.add(open_group.id)
                locked = s.get(AlertGroupRow, open_group.id, with_for_update=True, populate_existing=True)
                to = judged_fixed(locked.state, [x.back_night is not None for x in self._figures(s, open_group.id)]
                                  ) if locked is not None else None
                if locked is not None and to:
                    self._event(s, open_group.id, REPORT, "state", locked.state, to, b["line"])
                    locked.state = to
        return sorted(touched)

    def mark_notified(self, group_id: int, night: str, reason: str) -> None:
        """The alert channel was told: the group's state and benchmarks as of now."""
        with Session(self.engine) as s, s.begin():
            g = s.get(AlertGroupRow, group_id)
            if g is None:
                return
            g.notified_state, g.notified_night = g.state, night
            g.notified_benchmarks = ",".join(sorted({f.benchmark for f in self._figures(s, group_id)}))
            self._event(s, group_id, REPORT, "notified", None, None, reason)

    def record_delivery(self, group_id: int, channel: str, night: str, reason: str, error: str | None = None) -> None:
        """A group's `reason` message to one channel: delivered (no error), or why not; a route
        that failed is said in the group's events too."""
        with Session(self.engine) as s, s.begin():
            s.add(AlertDeliveryRow(group_id=group_id, channel=channel, reason=reason, night=night,
                                   delivered=error is None, error=error, at=_now()))
            if error is not None:
                self._event(s, group_id, REPORT, "undelivered", None, None, f"{channel}: {reason} message: {error}")

    def took(self, group_id: int, channel: str, reason: str) -> bool:
        """Whether `channel` took this group's `reason` message since the main channel was last
        told (a message the main channel is owed again is not repeated to a route that has it)."""
        with Session(self.engine) as s:
            g = s.get(AlertGroupRow, group_id)
            last = s.scalars(select(AlertDeliveryRow).where(
                AlertDeliveryRow.group_id == group_id, AlertDeliveryRow.channel == channel,
                AlertDeliveryRow.delivered.is_(True)).order_by(AlertDeliveryRow.id.desc())).first()
            return bool(g is not None and last is not None and last.reason == reason
                        and (g.notified_night is None or last.night > g.notified_night))

    def undelivered(self) -> list[dict]:
        """Each channel whose latest message of a group failed: what it is owed again, since when
        and why, oldest group first."""
        with Session(self.engine) as s:
            latest = select(func.max(AlertDeliveryRow.id)).group_by(AlertDeliveryRow.group_id,
                                                                     AlertDeliveryRow.channel)
            rows = s.scalars(select(AlertDeliveryRow).where(AlertDeliveryRow.id.in_(latest),
                                                            AlertDeliveryRow.delivered.is_(False))
                             .order_by(AlertDeliveryRow.group_id, AlertDeliveryRow.channel)).all()
            history: dict[tuple[int, str], list] = {}  # every delivery of those groups, read once
            if rows:
                for h in s.execute(select(AlertDeliveryRow.group_id, AlertDeliveryRow.channel, AlertDeliveryRow.night,
                                          AlertDeliveryRow.delivered)
                                   .where(AlertDeliveryRow.group_id.in_({r.group_id for r in rows}))
                                   .order_by(AlertDeliveryRow.id)):
                    history.setdefault((h.group_id, h.channel), []).append(h)
            out = []
            for r in rows:
                failing: list[str] = []  # the nights since the channel last took one of the group's messages
                for h in history[(r.group_id, r.channel)]:
                    failing = [] if h.delivered else [*failing, h.night]
                out.append({"group_id": r.group_id, "channel": r.channel, "reason": r.reason, "since": min(failing),
                            "night": r.night, "error": r.error})
            return out

    def add_event(self, group_id: int, kind: str, note: str, who: str = REPORT) -> None:
        """An event of the report's own (a bisection started or not) in the group's log."""
        with Session(self.engine) as s, s.begin():
            self._event(s, group_id, who, kind, None, None, note)

    def needing_news(self) -> list[dict]:
        """Groups that may be owed a message: open ones, and closed ones not yet told of their state."""
        with Session(self.engine) as s:
            rows = s.scalars(select(AlertGroupRow).where(or_(
                AlertGroupRow.state.in_(OPEN), AlertGroupRow.notified_state.is_(None),
                AlertGroupRow.state != AlertGroupRow.notified_state)).order_by(AlertGroupRow.id))
            return [self._doc(s, g) for g in rows]

    # a person's side
    def set(self, group_id: int, who: str, *, state: str | None = None, owner: str | None = None,
            note: str | None = None) -> dict:
        """Change a group's state, owner or add a note (each an event); AlertStateError names a bad field."""
        check_change(state, owner, note, has_owner=True)  # the fields; the owner rule once the group is read
        check_change(None, who, None)
        if state is None and owner is None and not note:
            raise AlertStateError("nothing to change: give a state, an owner or a note")
        with Session(self.engine) as s, s.begin():
            g = s.get(AlertGroupRow, group_id, with_for_update=True)  # held until the move is written
            if g is None:
                raise AlertStateError(f"group: no alert group #{group_id}")
            check_change(state, owner, note, has_owner=g.owner is not None)
            if state is not None:
                out = sum(1 for f in self._figures(s, g.id) if f.back_night is None)
                check_move(g.state, state, note, out)
            if owner is not None and owner != g.owner:
                self._event(s, g.id, who, "owner", None, None, f"{g.owner or 'nobody'} -> {owner}")
                g.owner = owner
            if state is not None and state != g.state:
                self._event(s, g.id, who, "state", g.state, state, note)
                g.state = state
            elif note:
                self._event(s, g.id, who, "note", None, None, note)
            return self._doc(s, g)

    # reading
    def groups(self, state: str | None = None, benchmark: str | None = None, owner: str | None = None) -> list[dict]:
        """Groups, open ones first (newest first within each), filtered by state, benchmark, owner."""
        if state is not None and state not in STATES + ("open",):
            raise AlertStateError(f"state: {state!r} is not one of open, {', '.join(STATES)}")
        q = select(AlertGroupRow).order_by(AlertGroupRow.id.desc())
        if state is not None:
            q = q.where(AlertGroupRow.state.in_(OPEN if state == "open" else (state,)))
        if owner is not None:
            q = q.where(AlertGroupRow.owner == owner)
        with Session(self.engine) as s:
            docs = [self._doc(s, g) for g in s.scalars(q)]
        docs = [d for d in docs if benchmark is None or benchmark in d["benchmarks"]]
        return sorted(docs, key=lambda d: d["state"] not in OPEN)  # stable: newest first within each

    def group(self, group_id: int) -> dict | None:
        with Session(self.engine) as s:
            g = s.get(AlertGroupRow, group_id)
            return self._doc(s, g, events=True) if g is not None else None

    def closed_as(self, state: str) -> list[dict]:
        """Groups in a closed state that changes the baseline (invalid, accepted), with their figures."""
        with Session(self.engine) as s:
            return [self._doc(s, g) for g in s.scalars(select(AlertGroupRow).where(AlertGroupRow.state == state))]

    # helpers
    def _group_for(self, s: Session, d: dict, night: str) -> AlertGroupRow:
        """The open group of the alert's suspect; else the group of that key fixed within
        REOPEN_DAYS that holds this figure, reopened; else a new one."""
        key = group_key(d.get("suspect"), d["benchmark"])
        g = self._open_group(s, key)
        if g is not None:
            return g
        fixed = s.scalars(select(AlertGroupRow).where(AlertGroupRow.key == key, AlertGroupRow.state == "fixed")
                          .order_by(AlertGroupRow.id.desc())).first()
        f = self._figure(s, fixed, d) if fixed is not None else None
        before = fixed is not None and f is not None and s.scalars(select(AlertEventRow.from_state).where(
            AlertEventRow.group_id == fixed.id, AlertEventRow.to_state == "fixed").order_by(AlertEventRow.id.desc())
        ).first()
        move = reopened(before or None, f.back_night, fixed.last_night, night) if fixed and f else None
        if fixed is not None and move is not None:
            state, why = move
            self._event(s, fixed.id, REPORT, "state", "fixed", state, f"reopened: {why}: {d['line']}")
            fixed.state = state  # the other figures stay back; this one's mark goes as it joins
            return fixed
        suspect = d.get("suspect") or {}
        g = AlertGroupRow(key=key, suspect_kind=suspect.get("kind"), suspect=suspect.get("text"),
                          previous_image=suspect.get("previous_image"), new_image=suspect.get("new_image"),
                          what_changed=suspect.get("what_changed"), state="new", owner=None,
                          first_night=night, last_night=night, created_at=_now())
        s.add(g)
        s.flush()
        self._event(s, g.id, REPORT, "opened", None, "new", f"first figure: {d['line']}")
        return g

    @staticmethod
    def _figure(s: Session, g: AlertGroupRow, d: dict) -> AlertFigureRow | None:
        return s.scalars(select(AlertFigureRow).where(
            AlertFigureRow.group_id == g.id, AlertFigureRow.benchmark == d["benchmark"],
            AlertFigureRow.gpus == d["gpus"], AlertFigureRow.precision == (d.get("precision") or DEFAULT_PRECISION),
            AlertFigureRow.metric == d["metric"])).first()

    @staticmethod
    def _holding(s: Session, d: dict) -> AlertGroupRow | None:
        """The newest open group holding this figure not yet back."""
        return s.scalars(select(AlertGroupRow).join(AlertFigureRow, AlertFigureRow.group_id == AlertGroupRow.id).where(
            AlertGroupRow.state.in_(OPEN), AlertFigureRow.back_night.is_(None),
            AlertFigureRow.benchmark == d["benchmark"], AlertFigureRow.gpus == d["gpus"],
            AlertFigureRow.precision == (d.get("precision") or DEFAULT_PRECISION), AlertFigureRow.metric == d["metric"])
            .order_by(AlertGroupRow.id.desc())).first()

    @staticmethod
    def _open_group(s: Session, key: str) -> AlertGroupRow | None:
        return s.scalars(select(AlertGroupRow).where(AlertGroupRow.key == key, AlertGroupRow.state.in_(OPEN))
                         .order_by(AlertGroupRow.id.desc()).with_for_update()).first()  # a person's move waits

    def _add_figure(self, s: Session, g: AlertGroupRow, d: dict, night: str) -> None:
        precision = d.get("precision") or DEFAULT_PRECISION
        f = self._figure(s, g, d)
        change = float(d.get("change") or 0.0)
        if f is None:
            s.add(AlertFigureRow(group_id=g.id, benchmark=d["benchmark"], gpus=d["gpus"], precision=precision,
                                 metric=d["metric"], first_night=night, last_night=night, worst_change=change,
                                 line=d["line"], profile_diff=d.get("profile_diff")))
            if g.first_night != night:  # a figure that joined later
                self._event(s, g.id, REPORT, "figures", None, None, f"joined on {night}: {d['line']}")
            return
        if night >= f.last_night:
            f.last_night, f.line = night, d["line"]
            f.profile_diff = d.get("profile_diff") or f.profile_diff  # a night without an A/B keeps the last one
            if f.back_night is not None and f.back_night <= night:  # back, then regressed again
                f.back_night = None
        f.first_night = min(f.first_night, night)
        f.worst_change = max(f.worst_change, change)

    @staticmethod
    def _figures(s: Session, group_id: int) -> list[AlertFigureRow]:
        return list(s.scalars(select(AlertFigureRow).where(AlertFigureRow.group_id == group_id)
                              .order_by(AlertFigureRow.benchmark, AlertFigureRow.precision, AlertFigureRow.gpus,
                                        AlertFigureRow.metric)))

    @staticmethod
    def _event(s: Session, group_id: int, who: str, kind: str, from_state: str | None, to_state: str | None,
               note: str | None) -> None:
        s.add(AlertEventRow(group_id=group_id, at=_now(), who=who, kind=kind, from_state=from_state,
                            to_state=to_state, note=note))

    def _doc(self, s: Session, g: AlertGroupRow, events: bool = False) -> dict:
        rows = self._figures(s, g.id)
        figures = [{"benchmark": f.benchmark, "gpus": f.gpus, "precision": f.precision, "metric": f.metric,
                    "first_night": f.first_night, "last_night": f.last_night, "worst_change": f.worst_change,
                    "line": f.line, "back_night": f.back_night, "profile_diff": f.profile_diff} for f in rows]
        doc: dict = {"id": g.id, "key": g.key, "state": g.state, "owner": g.owner, "suspect_kind": g.suspect_kind,
               "suspect": g.suspect, "previous_image": g.previous_image, "new_image": g.new_image,
               "what_changed": g.what_changed, "first_night": g.first_night, "last_night": g.last_night,
               "benchmarks": sorted({f.benchmark for f in rows}), "figures": figures,
               "notified_state": g.notified_state, "notified_night": g.notified_night,
               "notified_benchmarks": [b for b in (g.notified_benchmarks or "").split(",") if b]}
        if g.state == "fixed":  # what ended it: the note of the event that fixed it
            doc["fixed_by"] = s.scalars(select(AlertEventRow.note).where(
                AlertEventRow.group_id == g.id, AlertEventRow.to_state == "fixed").order_by(AlertEventRow.id.desc())
            ).first()
        if events:
            doc["events"] = [{"at": e.at.isoformat(timespec="seconds") if e.at else None, "who": e.who, "kind": e.kind,
                              "from": e.from_state, "to": e.to_state, "note": e.note}
                             for e in s.scalars(select(AlertEventRow).where(AlertEventRow.group_id == g.id)
                                                .order_by(AlertEventRow.id))]
        return doc

