"""Op-level profiles in the results store: each profiled attempt's window (the slowest rank's:
steps, seconds per step, traces, or why there is none) and its operations and kernels by self
time per step (scalebench_kit.profiling writes them into the contract's `profile`)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from scalebench.store.db import Base

KINDS = ("op", "kernel")  # the contract's `ops` and `kernels`


class AttemptProfileRow(Base):
    """One profiled attempt's window, as its slowest rank saw it."""
    __tablename__ = "attempt_profiles"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id"), unique=True)
    rank: Mapped[int | None] = mapped_column(Integer, nullable=True)
    steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    step_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    traces: Mapped[list] = mapped_column(JSON)
    why_not: Mapped[str | None] = mapped_column(Text, nullable=True)


class ProfileOpRow(Base):
    """One operation (or kernel) of a profiled attempt: its self time and calls per step."""
    __tablename__ = "profile_ops"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    profile_id: Mapped[int] = mapped_column(ForeignKey("attempt_profiles.id"), index=True)
    kind: Mapped[str] = mapped_column(String(8))
    position: Mapped[int] = mapped_column(Integer)        # its place by self time, from 0
    name: Mapped[str] = mapped_column(Text)
    self_s: Mapped[float] = mapped_column(Float)          # seconds per step
    calls: Mapped[float] = mapped_column(Float)           # per step
    share: Mapped[float | None] = mapped_column(Float, nullable=True)  # of the window's step


def record_profile(s: Session, attempt_id: int, profile: dict[str, Any]) -> None:
    """The contract's profile of a newly inserted attempt, as rows."""
    row = AttemptProfileRow(attempt_id=attempt_id, rank=profile.get("rank"), steps=profile.get("steps"),
                            step_s=profile.get("step_s"), traces=list(profile.get("traces") or []),
                            why_not=profile.get("why_not"))
    s.add(row)
    s.flush()
    for kind, key in zip(KINDS, ("ops", "kernels")):
        for i, op in enumerate(profile.get(key) or []):
            s.add(ProfileOpRow(profile_id=row.id, kind=kind, position=i, name=str(op["name"]), self_s=op["self_s"],
                               calls=op["calls"], share=op.get("share")))


def profile_of(s: Session, attempt_id: int) -> dict[str, Any] | None:
    """An attempt's stored profile in the contract's shape, or None when it was not profiled."""
    row = s.scalar(select(AttemptProfileRow).where(AttemptProfileRow.attempt_id == attempt_id))
    return _with_ops(s, {row.id: _window(row)})[row.id] if row is not None else None


def _window(row: AttemptProfileRow) -> dict[str, Any]:
    out: dict[str, Any] = {"rank": row.rank, "steps": row.steps, "step_s": row.step_s, "traces": row.traces,
                           "ops": [], "kernels": []}
    if row.why_not:
        out["why_not"] = row.why_not
    return out


def _with_ops(s: Session, windows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each window (by profile id) with its operations and kernels, in their stored order (one query)."""
    for op in s.scalars(select(ProfileOpRow).where(ProfileOpRow.profile_id.in_(list(windows)))
                        .order_by(ProfileOpRow.profile_id, ProfileOpRow.kind, ProfileOpRow.position)):
        windows[op.profile_id]["ops" if op.kind == "op" else "kernels"].append(
            {"name": op.name, "self_s": op.self_s, "calls": op.calls, "share": op.share})
    return windows


def cell_profile(engine, key: str) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(the cell, its newest profiled valid attempt's profile or None) for a cell key; None: no such cell."""
    from scalebench.store.results import CellRow

    with Session(engine) as s:
        cell = s.scalar(select(CellRow).where(CellRow.key == key))
        if cell is None:
            return None
        about = {"key": cell.key, "benchmark": cell.benchmark, "gpus": cell.gpus, "host": cell.host,
                 "precision": cell.precision, "label": cell.label, "run_id": cell.run_id, "night": cell.night}
    found = cells_profiles(engine, [key]).get(key)
    if found is not None:
        found.pop("attempt")
    return about, found


def cells_profiles(engine, keys: list[str]) -> dict[str, dict[str, Any]]:
    """{cell key: its newest profiled valid attempt's profile, with `attempt`} for those of `keys`
    that have one (one query for the windows, one for their operations)."""
    from scalebench.store.results import AttemptRow, CellRow

    if not keys:
        return {}
    with Session(engine) as s:
        q = (select(CellRow.key, AttemptRow.attempt, AttemptProfileRow)
             .join(AttemptRow, AttemptRow.cell_id == CellRow.id)
             .join(AttemptProfileRow, AttemptProfileRow.attempt_id == AttemptRow.id)
             .where(CellRow.key.in_(sorted(set(keys))), AttemptRow.status == "valid").order_by(AttemptRow.attempt))
        newest = {key: (attempt, row) for key, attempt, row in s.execute(q)}  # ordered: the newest attempt wins
        windows = _with_ops(s, {row.id: {"attempt": attempt, **_window(row)} for attempt, row in newest.values()})
        return {key: windows[row.id] for key, (_, row) in newest.items()}
