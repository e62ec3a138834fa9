"""The alert-group tables (scalebench.store.alert_groups): one group per change that regressed,
its figures, and every event of its life (nothing is deleted)."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from scalebench.core.columns import WIDTH
from scalebench.store.db import Base


class AlertGroupRow(Base):
    __tablename__ = "alert_groups"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(300), index=True)  # the suspect change, else the benchmark
    suspect_kind: Mapped[str | None] = mapped_column(String(16), nullable=True)  # image | config | None
    suspect: Mapped[str | None] = mapped_column(Text, nullable=True)             # the change in words
    previous_image: Mapped[str | None] = mapped_column(String(WIDTH["alert_groups.new_image"]), nullable=True)
    new_image: Mapped[str | None] = mapped_column(String(WIDTH["alert_groups.new_image"]), nullable=True)
    what_changed: Mapped[str | None] = mapped_column(Text, nullable=True)        # the package diff
    state: Mapped[str] = mapped_column(String(16), index=True)
    owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    first_night: Mapped[str] = mapped_column(String(10))
    last_night: Mapped[str] = mapped_column(String(10))
    # what the alert channel was last told: the state, the benchmarks, and the night of that message
    notified_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    notified_benchmarks: Mapped[str | None] = mapped_column(Text, nullable=True)  # comma-separated
    notified_night: Mapped[str | None] = mapped_column(String(10), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class AlertFigureRow(Base):
    __tablename__ = "alert_group_figures"
    __table_args__ = (UniqueConstraint("group_id", "benchmark", "gpus", "precision", "metric",
                                       name="uq_alert_figure"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_groups.id"), index=True)
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))
    gpus: Mapped[int] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(64))
    first_night: Mapped[str] = mapped_column(String(10))
    last_night: Mapped[str] = mapped_column(String(10))
    worst_change: Mapped[float] = mapped_column(Float)   # relative, in the bad direction (0.1: 10 % worse)
    line: Mapped[str] = mapped_column(Text)               # the latest night's alert line
    back_night: Mapped[str | None] = mapped_column(String(10), nullable=True)  # judged back (fixed or ended) on
    # where its A/B's step time went, the latest night's (analysis.profile_diff.ab_diff); None: no A/B profile
    profile_diff: Mapped[dict | None] = mapped_column(JSON, nullable=True)


class AlertEventRow(Base):
    __tablename__ = "alert_group_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_groups.id"), index=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    who: Mapped[str] = mapped_column(String(100))         # a person, or "scalebench" for what the report did
    kind: Mapped[str] = mapped_column(String(16))         # opened | figures | state | owner | note | notified
    from_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    to_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)


class AlertDeliveryRow(Base):
    """One message of a group to one channel ("main", or a route's name): delivered, or why not.
    A channel whose latest delivery failed is owed that message again the next night."""
    __tablename__ = "alert_deliveries"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("alert_groups.id"), index=True)
    channel: Mapped[str] = mapped_column(String(WIDTH["alert_deliveries.channel"]))
    reason: Mapped[str] = mapped_column(String(16))      # new | grew | state | fixed | partly | reminder
    night: Mapped[str] = mapped_column(String(10))
    delivered: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # the exception's first line
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
