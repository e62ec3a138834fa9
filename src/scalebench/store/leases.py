"""GPU leases: each cell gets a concrete device set on its host, and no two cells overlap.

Where: the results database (SQLite file embedded, PostgreSQL distributed). Every lease
decision for a host runs in one transaction that first updates that host's row in
`lease_hosts`, which serialises deciders across processes and Celery workers (SQLite: the
write lock, taken at BEGIN IMMEDIATE; PostgreSQL: the row lock). The unique (host, device)
constraint is the last line of defence. The database was chosen over a host-local file lock
because the workers of one host may run in separate containers, and because the lease
history (acquired / released / reclaimed) is then queryable next to the results.

A holder heartbeats while its container runs. A lease is reclaimed when its heartbeat is
older than the TTL, or at once when its holder ran on this machine and its pid is gone
(SIGKILL, lost worker). Before reclaimed ids are handed out again, any container still
running under that lease (label org.scalebench.lease) is stopped.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from scalebench.core import paths
from scalebench.core import topology
from scalebench.core.config import Host
from scalebench.store.db import check_schema, make_engine
from scalebench.store.lease_tables import DeviceLeaseRow, LeaseEventRow, LeaseHostRow

log = logging.getLogger(__name__)
LEASE_LABEL = "org.scalebench.lease"
DEFAULT_TTL_S = 120.0


class LeaseTimeout(RuntimeError):
    """No device set could be leased in time; names the host, the request and the holders."""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_lease_containers(lease_id: str) -> list[str]:
    """Stop and remove containers labelled with the lease; returns their short ids."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        stopped = []
        for c in client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}):
            c.remove(force=True)  # kill + remove: an orphan's work has no value
            stopped.append(c.short_id)
        return stopped
    except Exception as exc:  # no engine here: nothing can be running under the lease on it
        log.warning("could not look for containers of lease %s: %s", lease_id, exc)
        return []


@dataclass
class Lease:
    lease_id: str
    host: str
    device_ids: list[str]
    cell_key: str
    exclusive: bool
    acquired_at: float
    waited_s: float
    co_tenants: set[str] = field(default_factory=set)
    manager: "LeaseManager | None" = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start_heartbeat(self, interval_s: float | None = None) -> None:
        interval_s = interval_s or max(self.manager.ttl_s / 4, 0.5)

        def beat():
            while not self._stop.wait(interval_s):
                try:
                    self.co_tenants |= self.manager.heartbeat(self)
                except Exception as exc:
                    log.warning("lease %s heartbeat failed: %s", self.lease_id, exc)

        self._thread = threading.Thread(target=beat, name=f"lease-{self.lease_id[:8]}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop heartbeating and free the devices; a second call does nothing (on_kill and execute race)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        self.manager.release(self)


class LeaseManager:
    def __init__(self, url: str | None = None, *, ttl_s: float | None = None,
                 stop_containers: Callable[[str], list[str]] = stop_lease_containers):
        self.url = url or paths.store_url()
        # a deployment may shorten it (SCALEBENCH_LEASE_TTL_S), e.g. for a lost-worker drill
        self.ttl_s = ttl_s if ttl_s is not None else float(os.environ.get("SCALEBENCH_LEASE_TTL_S", DEFAULT_TTL_S))
        self.stop_containers = stop_containers
        self.me = socket.gethostname()
        self.engine = make_engine(self.url, immediate=True)
        check_schema(self.engine, self.url)

    def _lock_host(self, conn, host: str) -> None:
        if conn.execute(update(LeaseHostRow).where(LeaseHostRow.host == host)
                        .values(version=LeaseHostRow.version + 1)).rowcount == 0:
            conn.execute(insert(LeaseHostRow).values(host=host, version=1))

    def _dead_reason(self, row, now: float) -> str | None:
        age = now - row.heartbeat_at
        if age > self.ttl_s:
            return f"heartbeat {age:.0f}s old (ttl {self.ttl_s:.0f}s)"
        if row.holder_host == self.me and not pid_alive(row.holder_pid):
            return f"holder pid {row.holder_pid} on {row.holder_host} is gone"
        return None

    def _event(self, conn, lease_id, host, devices, cell_key, kind, detail=None) -> None:
        conn.execute(insert(LeaseEventRow).values(lease_id=lease_id, host=host, devices=",".join(devices),
                                                  cell_key=cell_key, event=kind, detail=detail, at=time.time()))

    def _try_acquire(self, host: Host, n: int, cell_key: str, exclusive: bool,
                     avoid: list[str] | None = None) -> Lease | None:
        with self.engine.begin() as conn:
            self._lock_host(conn, host.name)
            now = time.time()
            rows = conn.execute(select(DeviceLeaseRow).where(DeviceLeaseRow.host == host.name)).all()
            live = []
            dead: dict[str, tuple[list, str]] = {}
            for r in rows:
                why = self._dead_reason(r, now)
                if why:
                    dead.setdefault(r.lease_id, ([], why))[0].append(r)
                else:
                    live.append(r)
            for lease_id, (lrows, why) in dead.items():
                stopped = self.stop_containers(lease_id)
                conn.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease_id))
                devices = [r.device_id for r in lrows]
                detail = f"{why}; stopped containers {stopped or 'none'}"
                self._event(conn, lease_id, host.name, devices, lrows[0].cell_key, "reclaimed", detail)
                log.warning("reclaimed lease %s on %s devices %s of cell %s: %s", lease_id, host.name, devices,
                            lrows[0].cell_key, detail)
            if any(r.exclusive for r in live) or (exclusive and live):
                return None
            held = {r.device_id for r in live}
            chosen = topology.choose([d for d in host.device_ids if d not in held], n, host.topology, host.device_ids,
                                     avoid)
            if chosen is None:
                return None
            lease_id = uuid.uuid4().hex
            conn.execute(insert(DeviceLeaseRow), [
                {"lease_id": lease_id, "host": host.name, "device_id": d, "cell_key": cell_key, "holder_host": self.me,
                 "holder_pid": os.getpid(), "exclusive": exclusive, "acquired_at": now, "heartbeat_at": now}
                for d in chosen])
            self._event(conn, lease_id, host.name, chosen, cell_key, "acquired", "exclusive" if exclusive else "packed")
            return Lease(lease_id, host.name, chosen, cell_key, exclusive, now, 0.0,
                         co_tenants={r.cell_key for r in live}, manager=self)

    def acquire(self, host: Host, n: int, cell_key: str, *, exclusive: bool = False, timeout_s: float = 3600,
                poll_s: float = 1.0, abort: threading.Event | None = None, avoid: list[str] | None = None) -> Lease:
        """Block until n devices of `host` are leased to `cell_key` (all of them, if exclusive);
        LeaseTimeout after timeout_s, or as soon as `abort` is set (the task was cancelled).
        `avoid`: a device set to take only when no other is free (a rerun's flagged cell's set)."""
        if n > len(host.device_ids):
            raise LeaseTimeout(f"host {host.name} has {len(host.device_ids)} devices; cell {cell_key} asked for {n}")
        start = time.monotonic()
        while True:
            try:
                lease = self._try_acquire(host, n, cell_key, exclusive, avoid)
            except (IntegrityError, OperationalError) as exc:  # a racing first insert, or a busy database
                log.info("lease attempt on %s retried: %s", host.name, exc.__class__.__name__)
                lease = None
            if lease:
                lease.waited_s = time.monotonic() - start
                log.info("leased %s devices %s to cell %s (%s, waited %.1fs)", host.name, lease.device_ids, cell_key,
                         "exclusive" if exclusive else "packed", lease.waited_s)
                return lease
            if abort is not None and abort.is_set():
                raise LeaseTimeout(f"stopped waiting for {n} devices on {host.name} for cell {cell_key}: cancelled")
            if time.monotonic() - start > timeout_s:
                holders = sorted({(r.cell_key, r.device_id) for r in self.holders(host.name)})
                raise LeaseTimeout(f"no {n} free devices on {host.name} for cell {cell_key} within {timeout_s:.0f}s; "
                                   f"held: {holders}")
            time.sleep(poll_s)

    def heartbeat(self, lease: Lease) -> set[str]:
        """Refresh the lease; returns the cells holding other devices of the host now."""
        with self.engine.begin() as conn:
            conn.execute(update(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease.lease_id)
                         .values(heartbeat_at=time.time()))
            others = conn.execute(select(DeviceLeaseRow.cell_key).where(DeviceLeaseRow.host == lease.host,
                                                                        DeviceLeaseRow.lease_id != lease.lease_id))
            return {k for (k,) in others}

    def release(self, lease: Lease) -> None:
        with self.engine.begin() as conn:
            gone = conn.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease.lease_id)).rowcount
            self._event(conn, lease.lease_id, lease.host, lease.device_ids, lease.cell_key, "released",
                        None if gone else "was already reclaimed")
        log.info("released lease %s on %s devices %s", lease.lease_id, lease.host, lease.device_ids)

    def holders(self, host: str | None = None) -> list[DeviceLeaseRow]:
        with self.engine.connect() as conn:
            q = select(DeviceLeaseRow)
            if host:
                q = q.where(DeviceLeaseRow.host == host)
            return list(conn.execute(q).all())

    def events(self, host: str | None = None) -> list:
        with self.engine.connect() as conn:
            q = select(LeaseEventRow).order_by(LeaseEventRow.id)
            if host:
                q = q.where(LeaseEventRow.host == host)
            return list(conn.execute(q).all())
