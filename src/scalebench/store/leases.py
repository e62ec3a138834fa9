"""GPU leases: each cell gets a concrete device set on its host, and no two cells overlap.

Where: the results database (SQLite file embedded, PostgreSQL distributed). Every lease
decision for a host runs in one transaction that first updates that host's row in
`lease_hosts`, which serialises deciders across processes and Celery workers (SQLite: the
write lock, taken at BEGIN IMMEDIATE; PostgreSQL: the row lock). The unique (host, device)
constraint is the last line of defence. The database was chosen over a host-local file lock
because the workers of one host may run in separate containers, and because the lease
history (acquired / released / reclaimed) is then queryable next to the results.

A holder heartbeats while its container runs. A lease is dead when its heartbeat is older than
the TTL, or at once when its holder ran on this machine and its pid is gone (SIGKILL, lost
worker). A decider reclaims a dead lease in three steps: under the host lock it marks the lease
(`reclaim_reason`), outside any transaction it has the containers labelled with the lease
stopped (`stop_containers`: the Docker adapter's, given by whoever leases), and under the lock
again it frees the devices, only if the engine confirmed that no such container is left (a
decider given no stopper leaves them held). A holder whose heartbeat finds its lease marked or
gone, or that could not heartbeat for a whole TTL (a database outage), has lost it: it stops its
container and its attempt fails as `lease_lost`.

No lease call waits without a deadline: each database transaction (a decision's two, a heartbeat,
a release) is bounded by `call_s` on the client (`bounded`), because a paused or half-dead server
leaves a connection that neither answers nor refuses, and enforces no timeout of its own; a hung
heartbeat counts as not renewed. A deadline checker beside the heartbeat thread gives the lease up
a whole TTL after the last renewal the database took, whatever the calls are doing.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError

from scalebench.core import paths
from scalebench.core import topology
from scalebench.core.config import Host
from scalebench.store.db import check_schema, make_engine
from scalebench.store.lease_tables import DeviceLeaseRow, LeaseEventRow, LeaseHostRow

log = logging.getLogger(__name__)
DEFAULT_TTL_S = 120.0


class LeaseTimeout(RuntimeError):
    """No device set could be leased in time; names the host, the request and the holders."""


class LeaseLost(RuntimeError):
    """A holder's lease was reclaimed, or could not be renewed for a whole TTL; says why."""


class ReclaimUnconfirmed(RuntimeError):
    """The engine could not confirm that a dead lease's containers are gone: its devices stay held."""


class DatabaseDeadline(RuntimeError):
    """A results-database call did not return within its deadline (a hung connection, a paused server)."""


def bounded(fn: Callable, seconds: float, what: str, on_late: Callable | None = None):
    """fn(), waited for at most `seconds` (it runs in a daemon thread). DatabaseDeadline when it has
    not returned by then: the call is abandoned, its thread ends when its connection does, and what
    it returns late goes to `on_late` (a decision that leased devices after all releases them)."""
    lock, done = threading.Lock(), threading.Event()
    box: dict[str, Any] = {}

    def run():
        try:
            outcome = ("value", fn())
        except BaseException as exc:  # handed to the caller, or dropped when it gave up
            outcome = ("error", exc)
        with lock:
            late = box.get("abandoned", False)
            if not late:
                box["outcome"] = outcome
        done.set()
        if late and outcome[0] == "value" and on_late is not None:
            on_late(outcome[1])

    threading.Thread(target=run, name=f"db-{what}", daemon=True).start()
    done.wait(seconds)
    with lock:
        if "outcome" not in box:
            box["abandoned"] = True
            raise DatabaseDeadline(f"{what}: the results database did not answer within {seconds:.1f} s")
    kind, value = box["outcome"]
    if kind == "error":
        raise value
    return value


DATABASE_ERRORS = (OperationalError, InterfaceError, DatabaseDeadline)  # a database down, busy or hung


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    lost: str | None = None  # why the lease was lost, once it was
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _renewed: float = field(default_factory=time.monotonic)  # the last heartbeat the database took
    _on_lost: Callable[[str], None] | None = None
    _last_error: str = ""
    _losing: threading.Lock = field(default_factory=threading.Lock)

    def start_heartbeat(self, interval_s: float | None = None, on_lost: Callable[[str], None] | None = None) -> None:
        """Renew the lease every TTL/4 in a thread, and check its deadline in another. A failed renewal
        is logged with the time the lease still holds; when the lease is lost, `on_lost(reason)` is
        called once (stop the container)."""
        interval_s = interval_s or max(self._mgr.ttl_s / 4, 0.5)
        self._on_lost = on_lost

        def beat():
            while not self._stop.wait(interval_s):
                try:
                    self.confirm()
                except LeaseLost:
                    return

        def deadline():  # a renewal can hang for its whole call deadline; the TTL is kept to the second
            ttl = self._mgr.ttl_s
            while not self._stop.wait(min(1.0, ttl / 20)) and not self.lost:
                silent = time.monotonic() - self._renewed
                if silent >= ttl:
                    try:
                        self._lose(self._silence(silent, ttl))
                    except LeaseLost:
                        return

        self._thread = threading.Thread(target=beat, name=f"lease-{self.lease_id[:8]}", daemon=True)
        self._thread.start()
        threading.Thread(target=deadline, name=f"lease-deadline-{self.lease_id[:8]}", daemon=True).start()

    @property
    def _mgr(self) -> "LeaseManager":
        if self.manager is None:
            raise RuntimeError(f"lease {self.lease_id[:8]} has no manager (leases come from LeaseManager.acquire)")
        return self.manager

    def _silence(self, silent: float, ttl: float) -> str:
        return (f"no heartbeat reached the results database for {silent:.0f} s (ttl {ttl:.0f} s; last error "
                f"{self._last_error or 'none: the call did not return'}): the lease may have been reclaimed")

    def confirm(self) -> None:
        """Renew the lease now; LeaseLost if it is lost. A database that does not answer is
        outlasted for one TTL: no decider can reclaim a lease before its heartbeat is that old."""
        if self.lost:
            raise LeaseLost(self.lost)
        if self._stop.is_set():
            return  # released by its holder (a cancel): nothing to renew, nothing lost
        ttl = self._mgr.ttl_s
        try:
            self.co_tenants |= self._mgr.heartbeat(self)
        except LeaseLost as exc:
            self._lose(str(exc))
        except Exception as exc:
            silent = time.monotonic() - self._renewed
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__
            self._last_error = why
            if silent >= ttl:
                self._lose(self._silence(silent, ttl))
            log.warning("lease %s: heartbeat failed (%s); the lease holds for %.0f s more", self.lease_id[:8], why,
                        ttl - silent)
            return
        silent = time.monotonic() - self._renewed
        if self.lost:  # the deadline passed while this renewal was on its way: it changes nothing
            raise LeaseLost(self.lost)
        if silent > 2 * max(ttl / 4, 0.5):
            log.warning("lease %s: heartbeat back after %.0f s without one (ttl %.0f s)", self.lease_id[:8], silent, ttl)
        self._renewed = time.monotonic()

    def _lose(self, reason: str) -> None:
        """Once, from whichever thread sees it first: record why, stop the container, raise."""
        with self._losing:
            if self.lost:
                raise LeaseLost(self.lost)
            self.lost = reason
        log.error("lease %s of cell %s on %s devices %s lost: %s", self.lease_id[:8], self.cell_key, self.host,
                  self.device_ids, reason)
        if self._on_lost:
            self._on_lost(reason)
        raise LeaseLost(reason)

    def release(self) -> None:
        """Stop heartbeating and free the devices; a second call does nothing (on_kill and execute
        race). A database that does not answer leaves the rows to expire with the TTL."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        try:
            self._mgr.release(self)
        except DATABASE_ERRORS as exc:
            log.warning("lease %s: could not release (%s); a decider reclaims it once its heartbeat is %.0f s old",
                        self.lease_id[:8], str(exc).splitlines()[0][:160], self._mgr.ttl_s)


class LeaseManager:
    def __init__(self, url: str | None = None, *, ttl_s: float | None = None,
                 stop_containers: Callable[[str], list[str]] | None = None):
        self.url = url or paths.store_url()
        # a deployment may shorten it (SCALEBENCH_LEASE_TTL_S), e.g. for a lost-worker drill
        self.ttl_s = ttl_s if ttl_s is not None else float(os.environ.get("SCALEBENCH_LEASE_TTL_S", DEFAULT_TTL_S))
        self.stop_containers = stop_containers
        self.me = socket.gethostname()
        # every call's deadline: a renewal that cannot finish within a heartbeat interval counts as missed
        self.call_s = max(min(self.ttl_s / 4, 30.0), 1.0)
        self.engine = make_engine(self.url, immediate=True, deadline_s=self.call_s)
        self._checked = False
        self.waiting_for: str | None = None  # why the last decision handed nothing out, when not plain busy

    def _check_schema(self) -> None:
        if not self._checked:  # at the first decision, not in __init__: a database that is down is waited for
            bounded(lambda: check_schema(self.engine, self.url), self.call_s, "schema check")
            self._checked = True

    def _lock_host(self, conn, host: str) -> None:
        if conn.execute(update(LeaseHostRow).where(LeaseHostRow.host == host)
                        .values(version=LeaseHostRow.version + 1)).rowcount == 0:
            conn.execute(insert(LeaseHostRow).values(host=host, version=1))

    def _dead_reason(self, row, now: float) -> str | None:
        if row.reclaim_reason:
            return row.reclaim_reason
        age = now - row.heartbeat_at
        if age > self.ttl_s:
            return f"heartbeat {age:.0f}s old (ttl {self.ttl_s:.0f}s)"
        if row.holder_host == self.me and not pid_alive(row.holder_pid):
            return f"holder pid {row.holder_pid} on {row.holder_host} is gone"
        return None

    def _event(self, conn, lease_id, host, devices, cell_key, kind, detail=None) -> None:
        conn.execute(insert(LeaseEventRow).values(lease_id=lease_id, host=host, devices=",".join(devices),
                                                  cell_key=cell_key, event=kind, detail=detail, at=time.time()))

    def _mark_dead(self, host: str) -> dict[str, str]:
        return bounded(lambda: self._mark_dead_now(host), self.call_s, "lease decision (mark)")

    def _mark_dead_now(self, host: str) -> dict[str, str]:
        """Under the host lock: mark the dead leases (their devices stay held); lease id -> why."""
        with self.engine.begin() as conn:
            self._lock_host(conn, host)
            now = time.time()
            dead: dict[str, str] = {}
            for r in conn.execute(select(DeviceLeaseRow).where(DeviceLeaseRow.host == host)).all():
                why = self._dead_reason(r, now)
                if why:
                    dead[r.lease_id] = why
            for lease_id, why in dead.items():
                conn.execute(update(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease_id,
                                                          DeviceLeaseRow.reclaim_reason.is_(None))
                             .values(reclaim_reason=why))
            return dead

    def _stop_dead(self, dead: dict[str, str]) -> dict[str, str]:
        """Outside any transaction: stop each dead lease's containers; lease id -> the event's detail,
        for those the engine confirmed gone."""
        confirmed, waiting = {}, []
        for lease_id, why in dead.items():
            try:
                if self.stop_containers is None:
                    raise ReclaimUnconfirmed("this decider was given no engine to stop its containers with")
                stopped = self.stop_containers(lease_id)
            except Exception as exc:  # the stopper could not confirm: the devices stay held
                waiting.append(f"lease {lease_id[:8]} ({why}) is not reclaimed: {exc}")
                log.warning("%s; its devices stay held", waiting[-1])
                continue
            confirmed[lease_id] = f"{why}; stopped containers {stopped or 'none'}"
        self.waiting_for = "; ".join(waiting) or None
        return confirmed

    def _decide(self, host: Host, n: int, cell_key: str, exclusive: bool, avoid: list[str] | None,
                freed: dict[str, str]) -> Lease | None:
        def late(lease: Lease | None) -> None:  # leased after the caller gave up: nobody holds it
            if lease is not None:
                log.warning("lease %s on %s came after its deadline: released", lease.lease_id[:8], host.name)
                self.release(lease)

        return bounded(lambda: self._decide_now(host, n, cell_key, exclusive, avoid, freed), self.call_s,
                       "lease decision", on_late=late)

    def _decide_now(self, host: Host, n: int, cell_key: str, exclusive: bool, avoid: list[str] | None,
                    freed: dict[str, str]) -> Lease | None:
        """Under the host lock: free the confirmed dead leases, then choose and insert."""
        with self.engine.begin() as conn:
            self._lock_host(conn, host.name)
            now = time.time()
            rows = conn.execute(select(DeviceLeaseRow).where(DeviceLeaseRow.host == host.name)).all()
            for lease_id, detail in freed.items():
                lrows = [r for r in rows if r.lease_id == lease_id and r.reclaim_reason]
                if not lrows:
                    continue  # released meanwhile, or freed by another decider
                conn.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease_id))
                devices = [r.device_id for r in lrows]
                self._event(conn, lease_id, host.name, devices, lrows[0].cell_key, "reclaimed", detail)
                log.warning("reclaimed lease %s on %s devices %s of cell %s: %s", lease_id, host.name, devices,
                            lrows[0].cell_key, detail)
            live = [r for r in rows if r.lease_id not in freed]
            if any(r.exclusive for r in live) or (exclusive and live):
                return None
            if any(r.reclaim_reason is None and self._dead_reason(r, now) for r in live):
                return None  # died since the marking: the next decision reclaims it first
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

    def _try_acquire(self, host: Host, n: int, cell_key: str, exclusive: bool,
                     avoid: list[str] | None = None) -> Lease | None:
        """One decision. No Docker call is made while the host lock is held (on SQLite the lock
        is the whole database's: every heartbeat would wait for the engine)."""
        self._check_schema()
        dead = self._mark_dead(host.name)
        freed = self._stop_dead(dead) if dead else {}
        return self._decide(host, n, cell_key, exclusive, avoid, freed)

    def acquire(self, host: Host, n: int, cell_key: str, *, exclusive: bool = False, timeout_s: float = 3600,
                poll_s: float = 1.0, abort: threading.Event | None = None, avoid: list[str] | None = None) -> Lease:
        """Block until n devices of `host` are leased to `cell_key` (all of them, if exclusive);
        LeaseTimeout after timeout_s, or as soon as `abort` is set (the task was cancelled).
        `avoid`: a device set to take only when no other is free (a rerun's flagged cell's set)."""
        if n > len(host.device_ids):
            raise LeaseTimeout(f"host {host.name} has {len(host.device_ids)} devices; cell {cell_key} asked for {n}")
        start = said = time.monotonic()
        unreachable: str | None = None
        while True:
            try:
                lease = self._try_acquire(host, n, cell_key, exclusive, avoid)
            except (IntegrityError, *DATABASE_ERRORS) as exc:  # a racing first insert, a busy, down or hung
                lease, unreachable = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"  # database
                if time.monotonic() - said > 30:  # say it now and then, not every poll
                    log.warning("lease decision on %s retried: %s", host.name, unreachable)
                    said = time.monotonic()
            else:
                unreachable = None
            if lease:
                lease.waited_s = time.monotonic() - start
                log.info("leased %s devices %s to cell %s (%s, waited %.1fs)", host.name, lease.device_ids, cell_key,
                         "exclusive" if exclusive else "packed", lease.waited_s)
                return lease
            if abort is not None and abort.is_set():
                raise LeaseTimeout(f"stopped waiting for {n} devices on {host.name} for cell {cell_key}: cancelled")
            if time.monotonic() - start > timeout_s:
                if unreachable:
                    raise LeaseTimeout(f"no lease decision on {host.name} for cell {cell_key} within {timeout_s:.0f}s: "
                                       f"the results database did not answer ({unreachable})")
                holders = sorted({(r.cell_key, r.device_id) for r in self.holders(host.name)})
                raise LeaseTimeout(f"no {n} free devices on {host.name} for cell {cell_key} within {timeout_s:.0f}s; "
                                   f"held: {holders}" + (f"; {self.waiting_for}" if self.waiting_for else ""))
            time.sleep(poll_s)

    def heartbeat(self, lease: Lease) -> set[str]:
        """Renew the lease; returns the cells holding other devices of the host now. LeaseLost when
        a decider marked it dead or freed its devices: a renewal never brings a lease back."""
        return bounded(lambda: self._heartbeat_now(lease), self.call_s, "lease heartbeat")

    def _heartbeat_now(self, lease: Lease) -> set[str]:
        with self.engine.begin() as conn:
            renewed = conn.execute(update(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease.lease_id,
                                                                DeviceLeaseRow.reclaim_reason.is_(None))
                                   .values(heartbeat_at=time.time())).rowcount
            if not renewed:
                why = conn.execute(select(DeviceLeaseRow.reclaim_reason)
                                   .where(DeviceLeaseRow.lease_id == lease.lease_id)).scalars().first()
                raise LeaseLost(f"reclaimed by another decider ({why})" if why else
                                "its devices were reclaimed and handed on (no lease rows left)")
            others = conn.execute(select(DeviceLeaseRow.cell_key).where(DeviceLeaseRow.host == lease.host,
                                                                        DeviceLeaseRow.lease_id != lease.lease_id))
            return {k for (k,) in others}

    def release(self, lease: Lease) -> None:
        bounded(lambda: self._release_now(lease), self.call_s, "lease release")

    def _release_now(self, lease: Lease) -> None:
        with self.engine.begin() as conn:
            gone = conn.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease.lease_id)).rowcount
            self._event(conn, lease.lease_id, lease.host, lease.device_ids, lease.cell_key, "released",
                        None if gone else "was already reclaimed")
        log.info("released lease %s on %s devices %s", lease.lease_id, lease.host, lease.device_ids)

    def holders(self, host: str | None = None) -> list[DeviceLeaseRow]:
        self._check_schema()  # a store that does not exist yet is refused, never created by a read
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
