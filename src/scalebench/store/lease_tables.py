"""The lease tables (scalebench.store.leases): one row per host to serialise decisions, one per
leased device, and the history of leases."""
from __future__ import annotations

from sqlalchemy import Boolean, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from scalebench.core.columns import WIDTH
from scalebench.store.db import Base


class LeaseHostRow(Base):
    """One row per host; updating it serialises lease decisions for that host."""
    __tablename__ = "lease_hosts"
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class DeviceLeaseRow(Base):
    __tablename__ = "device_leases"
    __table_args__ = (UniqueConstraint("host", "device_id", name="uq_one_lease_per_device"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    lease_id: Mapped[str] = mapped_column(String(64), index=True)
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    device_id: Mapped[str] = mapped_column(String(WIDTH["device_leases.device_id"]))  # a GPU or MIG UUID fits
    cell_key: Mapped[str] = mapped_column(String(64))
    holder_host: Mapped[str] = mapped_column(String(255))
    holder_pid: Mapped[int] = mapped_column(Integer)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    acquired_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    # set when a decider found the lease dead: its devices stay held until its containers are gone
    reclaim_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class LeaseEventRow(Base):
    __tablename__ = "lease_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    lease_id: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(WIDTH["cells.host"]))
    devices: Mapped[str] = mapped_column(Text)  # every device id of the lease
    cell_key: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    at: Mapped[float] = mapped_column(Float)
