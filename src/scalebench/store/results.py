"""Results store: every attempt of every cell, in any SQLAlchemy database (SQLite by default).

The schema is the database's (scalebench.store.db): opening a store checks it and never migrates. A
cell's figure is its newest valid attempt; failed or invalid attempts are kept for the record
but never hide it. Attempts are append-only: a row, once written, is never updated or deleted.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any, Mapping, cast

from sqlalchemy import (JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, case,
                        select)
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship

from scalebench.core import nights
from scalebench.core import paths
from scalebench.core.columns import WIDTH
from scalebench.store.db import Base, check_schema, make_engine
from scalebench.store.profiles import record_profile
from scalebench.store.night_summaries import SummaryQueries
from scalebench.core.provenance import system_of
from scalebench.core.records import (CELL_FIELDS, DEFAULT_PRECISION, AttemptRecord, Figure, FigureRow, PlannedCell,
                                     Status, StoredCell)

STATUSES = ("valid", "invalid", "failed")
_FIGURE_JSON = ("metrics", "timing", "fingerprint")  # an attempt's JSON columns a figure carries
log = logging.getLogger(__name__)


def config_sha(contract: dict | None) -> str | None:
    """Identity of the resolved config a result ran with (same for every GPU count of a run)."""
    import hashlib
    import json

    resolved = ((contract or {}).get("provenance") or {}).get("resolved_config")
    if resolved is None:
        return None
    return hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()[:16]


class CellRow(Base):
    __tablename__ = "cells"
    # a benchmark's nights (a record step's summary, the report's window): never all of its years
    __table_args__ = (Index("ix_cells_benchmark_night", "benchmark", "night"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    dag_id: Mapped[str] = mapped_column(String(250))
    run_id: Mapped[str] = mapped_column(String(250), index=True)
    run_type: Mapped[str] = mapped_column(String(32))
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))  # ix_cells_benchmark_night leads with it
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    gpus: Mapped[int] = mapped_column(Integer)
    epochs: Mapped[int] = mapped_column(Integer)
    repeat: Mapped[int] = mapped_column(Integer)
    profile: Mapped[str] = mapped_column(String(16))
    precision: Mapped[str] = mapped_column(String(32), default=DEFAULT_PRECISION, server_default=DEFAULT_PRECISION)
    seed: Mapped[int] = mapped_column(Integer)
    scaling_mode: Mapped[str] = mapped_column(String(16))
    per_device_batch: Mapped[int] = mapped_column(Integer)
    global_batch: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(WIDTH["cells.label"]))  # with a bisection's image tag (128 at most)
    night: Mapped[str | None] = mapped_column(String(10), index=True, nullable=True)  # ISO date of the DAG run
    # or "rerun", "ab_previous", "probe"
    role: Mapped[str] = mapped_column(String(16), default="measure", server_default="measure")
    rerun_of: Mapped[str | None] = mapped_column(String(64), nullable=True)  # a rerun's flagged cell key
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[list["AttemptRow"]] = relationship(back_populates="cell", order_by="AttemptRow.attempt")


class AttemptRow(Base):
    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("cell_id", "attempt", name="uq_attempt_per_cell"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cells.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[Status] = mapped_column(String(16))  # STATUSES
    reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    train_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    images_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    metrics: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    contract: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    image_digest: Mapped[str | None] = mapped_column(String(100), nullable=True)
    placement: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    config_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    timing: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    fingerprint: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # provenance.system_of(contract)
    task_id: Mapped[str | None] = mapped_column(String(250), nullable=True)  # the Airflow task instance that ran it
    map_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    try_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    recorded_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    cell: Mapped[CellRow] = relationship(back_populates="attempts")


class BenchmarkRunRow(Base):
    """One recorded DAG run of a benchmark: the report's notion of 'this night's run finished'."""
    __tablename__ = "benchmark_runs"
    __table_args__ = (UniqueConstraint("dag_id", "run_id", name="uq_benchmark_run"),)  # run ids repeat across DAGs
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dag_id: Mapped[str] = mapped_column(String(250))
    run_id: Mapped[str] = mapped_column(String(250))
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))
    run_type: Mapped[str] = mapped_column(String(32))
    night: Mapped[str] = mapped_column(String(10), index=True)
    recorded_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    counts: Mapped[dict | None] = mapped_column(JSON, nullable=True)




class HostAssignmentRow(Base):
    """The GPU host a benchmark runs on (scalebench.core.assignment), since when and why."""
    __tablename__ = "host_assignments"
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]), primary_key=True)
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    since: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    reason: Mapped[str] = mapped_column(String(300))


class AssignmentMoveRow(Base):
    """One change of a benchmark's GPU host (its first assignment included), with the reason."""
    __tablename__ = "assignment_moves"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]), index=True)
    from_host: Mapped[str | None] = mapped_column(String(WIDTH["cells.host"]), nullable=True)
    to_host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    reason: Mapped[str] = mapped_column(String(300))
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class ImagePackagesRow(Base):
    """What one training image carries, read once inside it (scalebench.cell.images), by its digest."""
    __tablename__ = "image_packages"
    digest: Mapped[str] = mapped_column(String(100), primary_key=True)
    image: Mapped[str] = mapped_column(String(WIDTH["image_packages.image"]), index=True)
    ref: Mapped[str] = mapped_column(String(300), index=True)
    packages: Mapped[dict] = mapped_column(JSON)
    read_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class BisectStepRow(Base):
    """One step of a bisect between images (scalebench.analysis.bisect): what ran and what it said."""
    __tablename__ = "bisect_steps"
    __table_args__ = (UniqueConstraint("bisect_id", "step", name="uq_bisect_step"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisect_id: Mapped[str] = mapped_column(String(100))
    step: Mapped[int] = mapped_column(Integer)
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))
    run_id: Mapped[str | None] = mapped_column(String(250), nullable=True)
    doc: Mapped[dict] = mapped_column(JSON)
    recorded_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Store(SummaryQueries):
    def __init__(self, url: str | None = None):
        self.url = url or paths.store_url()
        self.engine = make_engine(self.url)
        check_schema(self.engine, self.url)

    def record_attempt(self, cell: PlannedCell, attempt: int, status: str, *, reason: str | None = None,
                       exit_code: int | None = None, message: str | None = None, contract: dict | None = None,
                       placement: dict | None = None, task: dict | None = None) -> str:
        """Insert one attempt; returns 'inserted', 'kept' (recorded before, the same) or 'conflict'
        (recorded before, differently: the first record stands, and the difference is logged).
        The record step is re-run freely; an attempt's folder is never reused, so a conflict
        means its files were changed by hand."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        now = dt.datetime.now(dt.timezone.utc)
        timing = (contract or {}).get("timing", {})
        for key in ("evaluations", "epoch"):  # per-epoch scores and what an epoch was travel with the times
            if contract and contract.get(key):
                timing = {**timing, key: contract[key]}
        values: dict[str, Any] = {
            "status": status, "reason": reason, "exit_code": exit_code, "message": message,
            "train_s": timing.get("train_s"), "images_per_s": timing.get("images_per_s"),
            "metrics": (contract or {}).get("metrics"), "contract": contract,
            "image_digest": (contract or {}).get("provenance", {}).get("image_digest"), "placement": placement,
            "config_sha": config_sha(contract), "timing": timing or None, "fingerprint": system_of(contract),
            "task_id": (task or {}).get("task_id"), "map_index": (task or {}).get("map_index"),
            "try_number": (task or {}).get("try_number"), "recorded_at": now,
        }
        with Session(self.engine) as s, s.begin():
            row = self._cell_row(s, cell, now)
            att = s.scalar(select(AttemptRow).where(AttemptRow.cell_id == row.id, AttemptRow.attempt == attempt))
            if att is None:
                att = AttemptRow(cell_id=row.id, attempt=attempt, **values)
                s.add(att)
                if contract and contract.get("profile"):  # the profiling window's summary, as rows
                    s.flush()
                    record_profile(s, att.id, contract["profile"])
                return "inserted"
            first = (att.status, att.reason, att.contract)
        if first == (status, reason, contract):
            return "kept"
        log.warning("attempt %d of cell %s (%s) was recorded as %s (%s); its files now say %s (%s): the first record "
                    "stands", attempt, cell["key"], cell.get("label"), first[0], first[1], status, reason)
        return "conflict"

    @staticmethod
    def _cell_row(s: Session, cell: Mapping[str, Any], now: dt.datetime) -> CellRow:
        row = s.scalar(select(CellRow).where(CellRow.key == cell["key"]))
        if row is None:
            row = CellRow(**{f: cell[f] for f in CELL_FIELDS}, night=cell.get("night") or nights.today(),
                          role=cell.get("role", "measure"), rerun_of=cell.get("rerun_of"), created_at=now)
            s.add(row)
            s.flush()
        return row

    def record_missing(self, cell: PlannedCell) -> None:
        """A planned cell that never ran: stored with no attempt, so the report can mark it."""
        with Session(self.engine) as s, s.begin():
            self._cell_row(s, cell, dt.datetime.now(dt.timezone.utc))

    def record_run(self, *, dag_id: str, run_id: str, benchmark: str, run_type: str, night: str | None,
                   counts: dict) -> None:
        """Note that a DAG run recorded its cells (night defaults to today, UTC, like a cell's)."""
        with Session(self.engine) as s, s.begin():
            row = s.scalar(select(BenchmarkRunRow).where(BenchmarkRunRow.dag_id == dag_id, BenchmarkRunRow.run_id == run_id))
            if row is None:
                row = BenchmarkRunRow(dag_id=dag_id, run_id=run_id, benchmark=benchmark)
                s.add(row)
            now = dt.datetime.now(dt.timezone.utc)
            row.run_type, row.night, row.counts, row.recorded_at = run_type, night or nights.today(), counts, now

    def assignments(self) -> dict[str, dict]:
        """benchmark -> {host, since, reason}: the stored host assignment."""
        with Session(self.engine) as s:
            return {r.benchmark: {"host": r.host, "since": r.since.isoformat(), "reason": r.reason}
                    for r in s.scalars(select(HostAssignmentRow))}

    def save_assignments(self, hosts: dict[str, str], reasons: dict[str, str]) -> dict[str, str]:
        """Store the benchmarks whose host changed (or is new); returns them. Others keep their row."""
        now = dt.datetime.now(dt.timezone.utc)
        changed = {}
        with Session(self.engine) as s, s.begin():
            for bench, host in sorted(hosts.items()):
                row = s.get(HostAssignmentRow, bench)
                if row is not None and row.host == host:
                    continue
                s.add(AssignmentMoveRow(benchmark=bench, from_host=row.host if row else None, to_host=host,
                                        reason=reasons.get(bench, "new")[:300], at=now))
                if row is None:
                    row = HostAssignmentRow(benchmark=bench)
                    s.add(row)
                row.host, row.since, row.reason = host, now, reasons.get(bench, "new")[:300]
                changed[bench] = host
        return changed

    def assignment_moves(self, benchmark: str | None = None) -> list[dict]:
        """Every recorded host change, oldest first."""
        with Session(self.engine) as s:
            q = select(AssignmentMoveRow).order_by(AssignmentMoveRow.id)
            if benchmark:
                q = q.where(AssignmentMoveRow.benchmark == benchmark)
            return [{"benchmark": r.benchmark, "from": r.from_host, "to": r.to_host, "reason": r.reason,
                     "at": r.at.isoformat()} for r in s.scalars(q)]

    def save_image_packages(self, digest: str, image: str, ref: str, packages: dict) -> bool:
        """Keep an image's package list by its digest; False when it was kept before (read once)."""
        with Session(self.engine) as s, s.begin():
            if s.get(ImagePackagesRow, digest) is not None:
                return False
            s.add(ImagePackagesRow(digest=digest, image=image, ref=ref, packages=packages,
                                   read_at=dt.datetime.now(dt.timezone.utc)))
            return True

    def image_packages(self, ident: str) -> dict | None:
        """An image's kept package list by its digest, its re-runnable reference or the reference it
        was read as (the newest read of that name): {"digest", "image", "ref", "packages", "read_at"}."""
        with Session(self.engine) as s:
            row = (s.get(ImagePackagesRow, ident)
                   or s.scalar(select(ImagePackagesRow).where(ImagePackagesRow.ref == ident))
                   or s.scalar(select(ImagePackagesRow).where(ImagePackagesRow.image == ident)
                               .order_by(ImagePackagesRow.read_at.desc()).limit(1)))
            if row is None:
                return None
            return {"digest": row.digest, "image": row.image, "ref": row.ref, "packages": row.packages,
                    "read_at": row.read_at.isoformat()}

    def save_bisect_step(self, bisect_id: str, step: int, benchmark: str, run_id: str | None, doc: dict) -> None:
        """One bisect step, appended (a step recorded twice keeps its first record)."""
        with Session(self.engine) as s, s.begin():
            if s.scalar(select(BisectStepRow).where(BisectStepRow.bisect_id == bisect_id, BisectStepRow.step == step)):
                return
            s.add(BisectStepRow(bisect_id=bisect_id, step=step, benchmark=benchmark, run_id=run_id, doc=doc,
                                recorded_at=dt.datetime.now(dt.timezone.utc)))

    def bisect_steps(self, bisect_id: str) -> list[dict]:
        with Session(self.engine) as s:
            rows = s.scalars(select(BisectStepRow).where(BisectStepRow.bisect_id == bisect_id)
                             .order_by(BisectStepRow.step)).all()
            return [{"step": r.step, "benchmark": r.benchmark, "run_id": r.run_id, **r.doc} for r in rows]

    def runs(self, night: str | None = None) -> list[dict]:
        with Session(self.engine) as s:
            q = select(BenchmarkRunRow).order_by(BenchmarkRunRow.night, BenchmarkRunRow.recorded_at)
            if night:
                q = q.where(BenchmarkRunRow.night == night)
            return [{"dag_id": r.dag_id, "run_id": r.run_id, "benchmark": r.benchmark, "run_type": r.run_type,
                     "night": r.night, "counts": r.counts} for r in s.scalars(q)]

    def cell_nights(self) -> list[tuple[str, str]]:
        """(benchmark, night) of every stored cell: what `scalebench db summarize` rebuilds."""
        c = CellRow.__table__
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(c.c.benchmark, c.c.night).distinct()
                                                   .where(c.c.night.is_not(None)).order_by(c.c.night, c.c.benchmark))]

    def figures(self, up_to_night: str | None = None, since_night: str | None = None,
                benchmark: str | None = None) -> list[FigureRow]:
        """Every cell as one flat row (its figure = latest valid attempt), fast enough for 10^5 cells."""
        c, a = CellRow.__table__, AttemptRow.__table__
        # the JSON columns come as text, decoded here for valid attempts only (SQLAlchemy decodes every row)
        q = (select(*[c.c[f] for f in CELL_FIELDS], c.c.night, c.c.role, c.c.rerun_of, a.c.attempt, a.c.status,
                    a.c.reason, a.c.train_s, a.c.images_per_s, *[sql_cast(a.c[k], Text).label(k) for k in _FIGURE_JSON],
                    a.c.image_digest, a.c.config_sha,
                    case((a.c.reason == "teardown_crash", a.c.message), else_=None).label("teardown"))
             .select_from(c.outerjoin(a, a.c.cell_id == c.c.id)).order_by(c.c.id, a.c.attempt))
        if up_to_night:
            q = q.where(c.c.night <= up_to_night)
        if since_night:
            q = q.where(c.c.night >= since_night)
        if benchmark:
            q = q.where(c.c.benchmark == benchmark)
        rows: dict[str, FigureRow] = {}
        tried: dict[str, list[tuple[int, str, str | None]]] = {}  # each cell's attempts: (number, status, reason)
        with self.engine.connect() as conn:
            for r in conn.execute(q).mappings():
                key = r["key"]
                cur = rows.get(key)
                if cur is None:
                    cur = rows[key] = cast(FigureRow, {
                        **{f: r[f] for f in CELL_FIELDS}, "night": r["night"], "role": r["role"],
                        "rerun_of": r["rerun_of"], "status": "missing", "reason": None, "figure": None, "others": []})
                    tried[key] = []
                if r["status"] is None:
                    continue
                tried[key].append((r["attempt"], r["status"], r["reason"]))
                if r["status"] == "valid":  # ordered by attempt: the newest valid attempt is the figure
                    cur["figure"] = cast(Figure, {k: json.loads(r[k]) if k in _FIGURE_JSON and r[k] is not None
                                                  else r[k] for k in Figure.__annotations__})
                    cur["status"], cur["reason"] = "valid", None
                elif cur["figure"] is None:
                    cur["status"], cur["reason"] = r["status"], r["reason"]
        for key, cur in rows.items():
            figure = cur["figure"]
            shown = figure["attempt"] if figure else (tried[key][-1][0] if tried[key] else None)
            cur["others"] = [f"attempt {n} {status}" + (f" ({reason})" if reason else "")
                             for n, status, reason in tried[key] if n != shown]
        return list(rows.values())

    def cells(self, benchmark: str | None = None, run_id: str | None = None, night: str | None = None,
              since: str | None = None, key: str | None = None) -> list[StoredCell]:
        """Every stored cell with its attempts and its figure (the newest valid attempt, or None);
        `night` one night (ISO date), `since` that night and later."""
        q = select(CellRow).order_by(CellRow.night, CellRow.benchmark, CellRow.run_id, CellRow.gpus, CellRow.epochs,
                                     CellRow.repeat)
        if benchmark:
            q = q.where(CellRow.benchmark == benchmark)
        if run_id:
            q = q.where(CellRow.run_id == run_id)
        if night:
            q = q.where(CellRow.night == night)
        if since:
            q = q.where(CellRow.night >= since)
        if key:
            q = q.where(CellRow.key == key)
        out = []
        with Session(self.engine) as s:
            for row in s.scalars(q):
                attempts = [AttemptRecord(
                    attempt=a.attempt, status=a.status, reason=a.reason, exit_code=a.exit_code, message=a.message,
                    train_s=a.train_s, images_per_s=a.images_per_s, metrics=a.metrics, image_digest=a.image_digest,
                    placement=a.placement, fingerprint=a.fingerprint, task_id=a.task_id, map_index=a.map_index,
                    try_number=a.try_number, recorded_at=a.recorded_at.isoformat(),
                ) for a in row.attempts]
                valid = [a for a in attempts if a["status"] == "valid"]
                cell: dict[str, Any] = {f: getattr(row, f) for f in CELL_FIELDS}
                cell["created_at"] = row.created_at.isoformat()
                cell["night"], cell["role"], cell["rerun_of"] = row.night, row.role, row.rerun_of
                cell["attempts"] = attempts
                cell["figure"] = valid[-1] if valid else None
                cell["status"] = "valid" if valid else (attempts[-1]["status"] if attempts else "missing")
                out.append(cast(StoredCell, cell))
        return out

    def contract(self, key: str) -> dict | None:
        """The contract of a cell's figure (latest valid attempt)."""
        with Session(self.engine) as s:
            q = (select(AttemptRow.contract).join(CellRow).where(CellRow.key == key, AttemptRow.status == "valid")
                 .order_by(AttemptRow.attempt.desc()))
            return s.scalars(q).first()
