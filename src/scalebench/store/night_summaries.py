"""The night summaries (a benchmark's night at one GPU count and precision, as the history pages
show it) and their reads: replaced whole when a run is recorded, marked by the night's report,
read in windows or streamed, their span and newest nights found through the indexes (a page
never reads every summary of the years). `Store` has these as its own methods."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterator, Sequence, cast

from sqlalchemy import JSON, DateTime, Float, Index, Integer, String, Text, UniqueConstraint, delete, func, select
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Mapped, Session, mapped_column

from scalebench.core.columns import WIDTH
from scalebench.core.figures import FIGURE_NAMES, HISTORY_FIGURES
from scalebench.core.records import Mark, NightSummary
from scalebench.store.db import Base


class NightSummaryRow(Base):
    """A night of one benchmark at one GPU count and precision, as the history pages show it:
    written when its run is recorded (scalebench.report.summary), marked by that night's report.
    Derived from the attempts, so it is replaced, never appended (unlike an attempt)."""
    __tablename__ = "night_summaries"
    __table_args__ = (UniqueConstraint("benchmark", "night", "gpus", "precision", name="uq_night_summary"),
                      Index("ix_night_summaries_benchmark_night", "benchmark", "night"),
                      Index("ix_night_summaries_night", "night"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))
    night: Mapped[str] = mapped_column(String(10))
    gpus: Mapped[int] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(32))
    dag_id: Mapped[str] = mapped_column(String(250))
    run_id: Mapped[str] = mapped_column(String(250))
    run_type: Mapped[str] = mapped_column(String(32))
    profile: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    cells: Mapped[int] = mapped_column(Integer)
    valid: Mapped[int] = mapped_column(Integer)
    retried: Mapped[int] = mapped_column(Integer)        # cells with more than one attempt
    reruns: Mapped[int] = mapped_column(Integer)         # same-night reruns of a flagged figure
    basis: Mapped[str | None] = mapped_column(String(16), nullable=True)
    relative_time_ci: Mapped[list | None] = mapped_column(JSON, nullable=True)
    metrics: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    step_shares: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    image_digest: Mapped[str | None] = mapped_column(String(100), nullable=True)
    fingerprint: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    marks: Mapped[list | None] = mapped_column(JSON, nullable=True)  # [{kind, text}] from the night's report
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


for _figure in HISTORY_FIGURES:  # a column per figure of core.figures (each added by a migration)
    setattr(NightSummaryRow, _figure.name, mapped_column(Float, nullable=True))
JSON_FIELDS = frozenset(c.name for c in NightSummaryRow.__table__.columns if isinstance(c.type, JSON))
SUMMARY_FIELDS = tuple(c.name for c in NightSummaryRow.__table__.columns  # a summary's other fields
                       if c.name not in ("id", "updated_at", *FIGURE_NAMES))



class SummaryQueries:
    """The night summaries' writes and reads, on the store's engine."""
    engine: Any

    def save_summaries(self, benchmark: str, night: str, rows: list[NightSummary]) -> None:
        """Replace one benchmark's summaries of one night (they are derived: recomputed whole),
        keeping the marks its report already wrote."""
        now = dt.datetime.now(dt.timezone.utc)
        t = NightSummaryRow.__table__
        with Session(self.engine) as s, s.begin():
            where = (t.c.benchmark == benchmark) & (t.c.night == night)
            marks = {(r.gpus, r.precision): r.marks for r in s.execute(select(t.c.gpus, t.c.precision, t.c.marks).where(where))}
            s.execute(delete(NightSummaryRow).where(where))
            for r in rows:
                fields = {f: r.get(f) for f in SUMMARY_FIELDS} | {f: r["figures"].get(f) for f in FIGURE_NAMES}
                s.add(NightSummaryRow(**fields | {"benchmark": benchmark, "night": night, "updated_at": now,
                                                  "marks": marks.get((r["gpus"], r["precision"]))}))

    def save_marks(self, night: str, marks: dict[tuple[str, int, str], list[Mark]]) -> int:
        """Set the night's report marks ((benchmark, gpus, precision) -> [{kind, text}]) on its
        summaries; a summary the report did not mark has none. Returns the rows marked."""
        t = NightSummaryRow.__table__
        n = 0
        with Session(self.engine) as s, s.begin():
            for row in s.scalars(select(NightSummaryRow).where(t.c.night == night)):
                row.marks = marks.get((row.benchmark, row.gpus, row.precision)) or None
                n += bool(row.marks)
        return n

    def summaries(self, benchmark: str | None = None, night: str | None = None, since: str | None = None,
                  columns: tuple[str, ...] | None = None) -> list[NightSummary]:
        """Stored summaries, oldest night first (then GPU count, precision); `columns`: only those
        ("figures": every figure). Each summary's figures are one mapping, by figure name."""
        return list(self.iter_summaries(benchmark, night, since, columns))

    def iter_summaries(self, benchmark: str | None = None, night: str | None = None, since: str | None = None,
                       columns: tuple[str, ...] | None = None, batch: int = 2000,
                       before: str | None = None) -> Iterator[NightSummary]:
        """As `summaries` (`before`: nights before it only), read `batch` rows at a time (a
        server-side cursor): a download of every night starts at once and holds one batch in memory.
        The JSON columns are read as text and decoded here (a third of the time of SQLAlchemy's own)."""
        t = NightSummaryRow.__table__
        names = ([n for c in columns for n in (FIGURE_NAMES if c == "figures" else (c,))] if columns
                 else [c.name for c in t.columns if c.name != "id"])
        q = select(*[sql_cast(t.c[n], Text).label(n) if n in JSON_FIELDS else t.c[n] for n in names]).order_by(
            t.c.night, t.c.benchmark, t.c.gpus, t.c.precision)
        if benchmark:
            q = q.where(t.c.benchmark == benchmark)
        if night:
            q = q.where(t.c.night == night)
        if since:
            q = q.where(t.c.night >= since)
        if before:
            q = q.where(t.c.night < before)
        decode = [n for n in names if n in JSON_FIELDS]
        figures = any(n in FIGURE_NAMES for n in names)
        with self.engine.connect() as conn:
            for r in conn.execution_options(yield_per=batch).execute(q):
                row: dict[str, Any] = dict(zip(names, r))
                for k in decode:
                    if row[k] is not None:
                        row[k] = json.loads(row[k])
                if figures:
                    row["figures"] = {f: row.pop(f) for f in FIGURE_NAMES}
                if row.get("updated_at") is not None:
                    row["updated_at"] = row["updated_at"].isoformat()
                yield cast(NightSummary, row)

    def summary_arrays(self, benchmark: str, fields: Sequence[str], extra: Sequence[str] = (),
                       since: str | None = None, before: str | None = None, batch: int = 2000) -> Iterator[tuple]:
        """A benchmark's summaries from `since` to before `before`, oldest first, each as its `extra`
        columns' values and then the JSON text of an array of its `fields` (columns, JSON ones
        embedded as JSON as stored), the text written by the database (SQLite's json_array,
        PostgreSQL's json_build_array): a stream of years of nights that the history page passes on
        as it is and the history CSV decodes once a row."""
        t = NightSummaryRow.__table__
        array: Any
        if self.engine.dialect.name == "postgresql":
            array = sql_cast(func.json_build_array(*[t.c[f] for f in fields]), Text)  # text, not decoded by the driver
        else:
            array = func.json_array(*[func.json(t.c[f]) if f in JSON_FIELDS else t.c[f] for f in fields])
        q = (select(*[t.c[c] for c in extra], array).where(t.c.benchmark == benchmark)
             .order_by(t.c.night, t.c.gpus, t.c.precision))
        if since:
            q = q.where(t.c.night >= since)
        if before:
            q = q.where(t.c.night < before)
        with self.engine.connect() as conn:
            yield from conn.execution_options(yield_per=batch).execute(q)

    def newest_summaries(self, benchmark: str, limit: int, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        """A benchmark's newest `limit` summaries, newest first, only `columns` (through its
        (benchmark, night) index, read backwards)."""
        t = NightSummaryRow.__table__
        q = (select(*[t.c[c] for c in columns]).where(t.c.benchmark == benchmark)
             .order_by(t.c.night.desc()).limit(limit))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def summary_span(self, benchmark: str | None = None) -> dict[str, tuple[str, str]]:
        """benchmark -> (its first summarized night, its last), through the (benchmark, night) index:
        a few lookups per benchmark (each next benchmark is the least one above the last), never a
        scan of the years of nights; `benchmark`: that one only (absent without a summary)."""
        t = NightSummaryRow.__table__
        out: dict[str, tuple[str, str]] = {}
        with self.engine.connect() as conn:
            bench = benchmark if benchmark is not None else conn.execute(select(func.min(t.c.benchmark))).scalar()
            while bench is not None:
                first = conn.execute(select(func.min(t.c.night)).where(t.c.benchmark == bench)).scalar()
                last = conn.execute(select(func.max(t.c.night)).where(t.c.benchmark == bench)).scalar()
                if first is not None:
                    out[bench] = (first, last)
                bench = None if benchmark is not None else \
                    conn.execute(select(func.min(t.c.benchmark)).where(t.c.benchmark > bench)).scalar()
        return out

    def recent_summary_nights(self, limit: int, before: str | None = None) -> list[str]:
        """The newest `limit` nights some benchmark has a summary of (before `before`), newest first,
        each the greatest night below the last through the night index (one lookup a night)."""
        t = NightSummaryRow.__table__
        out: list[str] = []
        with self.engine.connect() as conn:
            while len(out) < limit:
                q = select(func.max(t.c.night))
                below = out[-1] if out else before
                night = conn.execute(q.where(t.c.night < below) if below else q).scalar()
                if night is None:
                    break
                out.append(night)
        return out
