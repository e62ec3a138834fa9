"""The prediction tables (scalebench.store.predictions): each host's all-reduce bus bandwidth per
GPU count and size, and the predictions frozen each night, with the night that judged them."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from scalebench.core.columns import WIDTH
from scalebench.store.db import Base


class AllreduceRow(Base):
    """One size of one all-reduce sweep on a host at a GPU count (newest sweep wins)."""
    __tablename__ = "allreduce_bandwidth"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]), index=True)
    gpus: Mapped[int] = mapped_column(Integer)
    backend: Mapped[str] = mapped_column(String(16))
    bytes: Mapped[int] = mapped_column(BigInteger)
    busbw_gbps: Mapped[float] = mapped_column(Float)
    image: Mapped[str | None] = mapped_column(String(WIDTH["image_packages.image"]), nullable=True)
    night: Mapped[str] = mapped_column(String(10))
    measured_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class PredictionRow(Base):
    """A prediction frozen on a night before that night's cells were read; never rewritten. The
    first later night (or the same night) that measures its target judges it."""
    __tablename__ = "predictions"
    __table_args__ = (UniqueConstraint("benchmark", "host", "precision", "gpus", "hosts", "night",
                                       name="uq_one_prediction_per_night"),
                      Index("ix_predictions_benchmark_night", "benchmark", "night"))  # a benchmark's window
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    benchmark: Mapped[str] = mapped_column(String(WIDTH["cells.benchmark"]))
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    precision: Mapped[str] = mapped_column(String(32))
    gpus: Mapped[int] = mapped_column(Integer)
    hosts: Mapped[int] = mapped_column(Integer)
    night: Mapped[str] = mapped_column(String(10), index=True)     # frozen before this night's cells
    role: Mapped[str] = mapped_column(String(16))                 # held_out (the largest measured count) | beyond
    model_version: Mapped[int] = mapped_column(Integer)
    fitted_nights: Mapped[list] = mapped_column(JSON)
    fitted_counts: Mapped[list] = mapped_column(JSON)
    images_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    efficiency: Mapped[float | None] = mapped_column(Float, nullable=True)
    low: Mapped[float | None] = mapped_column(Float, nullable=True)
    high: Mapped[float | None] = mapped_column(Float, nullable=True)
    line: Mapped[str] = mapped_column(Text)
    doc: Mapped[dict] = mapped_column(JSON)
    judged_night: Mapped[str | None] = mapped_column(String(10), nullable=True)
    measured_images_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    measured_efficiency: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
