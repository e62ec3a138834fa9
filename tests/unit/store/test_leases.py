import multiprocessing as mp
import os
import random
import signal
import time

import pytest

from scalebench.core.config import Host
from scalebench.store.leases import LeaseLost, LeaseManager, LeaseTimeout, ReclaimUnconfirmed

from scalebench.core.topology import choose

HOST = Host(name="gpu-a", kind="gpu", queue="gpu-a", device_ids=["0", "1", "2", "3"])


@pytest.fixture
def url(both_stores):
    return both_stores


def _worker(url, seed, rounds, out_path):
    rng = random.Random(seed)
    mgr = LeaseManager(url, stop_containers=lambda lease_id: [])
    lines = []
    for r in range(rounds):
        n = rng.randint(1, 4)
        lease = mgr.acquire(HOST, n, f"cell-{seed}-{r}", timeout_s=120, poll_s=0.01)
        start = time.time()
        time.sleep(rng.uniform(0.0, 0.02))
        lines.append(f"{start} {time.time()} {','.join(lease.device_ids)}\n")
        lease.release()
    with open(out_path, "a") as fh:
        fh.writelines(lines)


def test_concurrent_leases_never_overlap_and_are_all_released(url, tmp_path):
    mgr = LeaseManager(url)
    out = tmp_path / "intervals.txt"
    procs = [mp.get_context("fork").Process(target=_worker, args=(url, s, 12, out)) for s in range(8)]
    t0 = time.time()
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    elapsed = time.time() - t0
    intervals = [(float(a), float(b), set(d.split(","))) for a, b, d in (line.split() for line in out.read_text().splitlines())]
    assert len(intervals) == 8 * 12
    for i, (a1, b1, d1) in enumerate(intervals):
        for a2, b2, d2 in intervals[i + 1:]:
            if a1 < b2 and a2 < b1:
                assert not d1 & d2, f"overlap: {d1} and {d2}"
    assert mgr.holders() == []
    kinds = [e.event for e in mgr.events()]
    assert kinds.count("acquired") == kinds.count("released") == 96
    print(f"\n{len(intervals)} leases by 8 processes in {elapsed:.1f}s: {len(intervals) / elapsed:.1f} leases/s")


def _hold_then_wait(url, ready):
    mgr = LeaseManager(url, stop_containers=lambda lease_id: [])
    mgr.acquire(HOST, 2, "victim", timeout_s=10)
    ready.set()
    time.sleep(600)


def test_a_sigkilled_holders_lease_is_reclaimed_and_logged(url, tmp_path):
    stopped = []
    mgr = LeaseManager(url, ttl_s=3600, stop_containers=lambda lease_id: stopped.append(lease_id) or ["c0ffee"])
    ready = mp.get_context("fork").Event()
    p = mp.get_context("fork").Process(target=_hold_then_wait, args=(url, ready))
    p.start()
    assert ready.wait(30)
    victim = mgr.holders("gpu-a")
    assert sorted(r.device_id for r in victim) == ["0", "1"]
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    t = time.monotonic()
    lease = mgr.acquire(HOST, 4, "next", timeout_s=10)
    reclaim_s = time.monotonic() - t
    assert lease.device_ids == ["0", "1", "2", "3"]
    assert stopped == [victim[0].lease_id]
    [ev] = [e for e in mgr.events() if e.event == "reclaimed"]
    assert ev.cell_key == "victim" and f"holder pid {p.pid}" in ev.detail and "c0ffee" in ev.detail
    lease.release()
    print(f"\nreclaim of a SIGKILLed holder took {reclaim_s * 1000:.0f} ms")


def test_expired_heartbeat_is_reclaimed(url, tmp_path):
    mgr = LeaseManager(url, ttl_s=0.3, stop_containers=lambda lease_id: [])
    first = mgr.acquire(HOST, 4, "stale")  # this pid lives: only the heartbeat age can free it
    with pytest.raises(LeaseTimeout, match="no 1 free devices on gpu-a for cell fresh"):
        LeaseManager(url, ttl_s=3600).acquire(HOST, 1, "fresh", timeout_s=0.2, poll_s=0.05)
    time.sleep(0.4)
    second = mgr.acquire(HOST, 1, "fresh", timeout_s=2)
    assert second.device_ids == ["0"] and "heartbeat" in [e for e in mgr.events() if e.event == "reclaimed"][0].detail
    first.release()  # releasing a reclaimed lease is harmless and logged
    assert [e.detail for e in mgr.events() if e.event == "released"] == ["was already reclaimed"]


def test_heartbeat_keeps_a_lease_alive_and_sees_co_tenants(url, tmp_path):
    mgr = LeaseManager(url, ttl_s=2.0, stop_containers=lambda lease_id: [])
    a = mgr.acquire(HOST, 1, "a")
    a.start_heartbeat(0.1)  # 20 renewals per TTL: a loaded machine may miss several
    b = mgr.acquire(HOST, 1, "b")
    assert b.co_tenants == {"a"}
    time.sleep(2.5)
    c = mgr.acquire(HOST, 1, "c")  # deciding reclaims stale leases: b (no heartbeat), not a
    assert [e.cell_key for e in mgr.events() if e.event == "reclaimed"] == ["b"]
    assert {r.cell_key for r in mgr.holders()} == {"a", "c"}
    assert "b" in a.co_tenants
    for lease in (a, b, c):
        lease.release()


def test_a_reclaimed_holder_learns_it_at_its_next_heartbeat_and_stops_its_container(url):
    """The holder's heartbeat never brings a reclaimed lease back: it raises, and on_lost runs once."""
    holder = LeaseManager(url, ttl_s=3600, stop_containers=lambda lease_id: [])  # its own deadline is far off
    lease = holder.acquire(HOST, 2, "victim")
    stopped = []
    lease.start_heartbeat(3600, on_lost=stopped.append)  # no beat of its own: this test renews by hand
    time.sleep(0.4)  # older than the deciders' TTL
    nxt = LeaseManager(url, ttl_s=0.3, stop_containers=lambda lease_id: ["c0ffee"]).acquire(HOST, 4, "next")
    with pytest.raises(LeaseLost, match="no lease rows left"):
        lease.confirm()
    with pytest.raises(LeaseLost):
        lease.confirm()  # lost stays lost, and the container is stopped once
    assert len(stopped) == 1 and lease.lost == stopped[0]
    lease.release()
    nxt.release()
    assert holder.holders() == []


def test_a_lease_marked_for_reclaim_cannot_be_renewed(url):
    mgr = LeaseManager(url, ttl_s=0.3, stop_containers=lambda lease_id: [])
    lease = mgr.acquire(HOST, 1, "victim")
    time.sleep(0.4)
    dead = mgr._mark_dead(HOST.name)  # a decider's first step: marked, devices still held
    assert list(dead) == [lease.lease_id] and mgr.holders()[0].reclaim_reason == dead[lease.lease_id]
    with pytest.raises(LeaseLost, match=r"reclaimed by another decider \(heartbeat \d+s old"):
        lease.confirm()
    lease.release()


class FlakyDatabase:
    """A manager whose heartbeats fail (the database is down) until `back` is set."""

    def __init__(self, mgr):
        self.mgr, self.back, self.calls = mgr, False, 0

    def heartbeat(self, lease):
        from sqlalchemy.exc import OperationalError

        self.calls += 1
        if not self.back:
            raise OperationalError("UPDATE device_leases", {}, Exception("connection refused"))
        return self.mgr.heartbeat(lease)

    def __getattr__(self, name):
        return getattr(self.mgr, name)


def test_the_heartbeat_outlasts_an_outage_shorter_than_the_ttl_and_says_so(url, caplog):
    mgr = LeaseManager(url, ttl_s=2.0, stop_containers=lambda lease_id: [])
    lease = mgr.acquire(HOST, 1, "held")
    lease.manager = FlakyDatabase(mgr)
    lease.confirm()  # down, 0 s into the outage
    assert lease.lost is None and "heartbeat failed (OperationalError" in caplog.text and "holds for 2 s more" in caplog.text
    lease.manager.back = True
    lease.confirm()
    assert lease.lost is None and mgr.holders()[0].heartbeat_at > lease.acquired_at
    lease.manager.back = False
    lease._renewed -= 2.0  # the outage has now lasted a whole TTL
    with pytest.raises(LeaseLost, match="no heartbeat reached the results database for 2 s"):
        lease.confirm()
    lease.manager = mgr
    lease.release()


class HungDatabase(FlakyDatabase):
    """A manager whose heartbeats never return once `hang` is set (a paused server: the connection
    neither answers nor refuses)."""

    def __init__(self, mgr):
        super().__init__(mgr)
        import threading

        self.hang, self.forever = threading.Event(), threading.Event()

    def heartbeat(self, lease):
        self.calls += 1
        if self.hang.is_set():
            self.forever.wait()
        return self.mgr.heartbeat(lease)


def test_a_heartbeat_that_hangs_loses_the_lease_one_ttl_after_the_last_renewal(url):
    """The deadline checker beside the heartbeat: the renewal call itself never returns."""
    mgr = LeaseManager(url, ttl_s=2.0, stop_containers=lambda lease_id: [])
    lease = mgr.acquire(HOST, 1, "held")
    lease.manager = hung = HungDatabase(mgr)
    stopped = []
    lease.start_heartbeat(0.2, on_lost=lambda why: stopped.append((time.monotonic(), why)))
    time.sleep(0.5)
    assert lease.lost is None and hung.calls >= 1
    hung.hang.set()
    began = time.monotonic()
    time.sleep(0.25)  # the next renewal is under way, and hangs
    while not stopped and time.monotonic() - began < 10:
        time.sleep(0.05)
    assert len(stopped) == 1, "the container was not stopped while the renewal hung"
    at, why = stopped[0]
    assert 1.5 <= at - began <= 3.5, at - began  # a whole TTL after the last renewal, not when the call returns
    assert "no heartbeat reached the results database for 2 s" in why and "the call did not return" in why
    with pytest.raises(LeaseLost):
        lease.confirm()
    hung.forever.set()
    lease.manager = mgr
    lease.release()
    assert mgr.holders() == []


def test_a_call_past_its_deadline_is_abandoned_and_a_late_lease_is_handed_back():
    import threading

    from scalebench.store.leases import DatabaseDeadline, bounded

    go, late = threading.Event(), []
    began = time.monotonic()
    with pytest.raises(DatabaseDeadline, match="lease decision: the results database did not answer within 0.3 s"):
        bounded(lambda: go.wait() and "lease", 0.3, "lease decision", on_late=late.append)
    assert time.monotonic() - began < 1.0
    go.set()
    for _ in range(50):
        if late:
            break
        time.sleep(0.02)
    assert late == ["lease"]
    assert bounded(lambda: 7, 1.0, "quick") == 7
    with pytest.raises(ZeroDivisionError):
        bounded(lambda: 1 / 0, 1.0, "failing")  # an error inside the deadline is the caller's


def test_postgresql_connections_carry_server_side_deadlines(postgres_database):
    from sqlalchemy import text

    from scalebench.store.db import make_engine

    engine = make_engine(postgres_database, deadline_s=7.5)
    with engine.connect() as conn:
        got = {k: conn.execute(text(f"SHOW {k}")).scalar() for k in ("statement_timeout", "lock_timeout",
                                                                    "idle_in_transaction_session_timeout")}
    engine.dispose()
    assert got == {"statement_timeout": "7500ms", "lock_timeout": "7500ms", "idle_in_transaction_session_timeout": "15s"}
    assert LeaseManager(postgres_database, ttl_s=120).call_s == 30.0 and LeaseManager(postgres_database, ttl_s=5).call_s == 1.25


def test_a_reclaim_the_engine_cannot_confirm_keeps_the_devices_held(url):
    answers = {"engine": False}

    def stop(lease_id):
        if not answers["engine"]:
            raise ReclaimUnconfirmed("the Docker engine did not answer (ReadTimeout: 30 s)")
        return ["c0ffee"]

    mgr = LeaseManager(url, ttl_s=0.3, stop_containers=stop)
    dead = mgr.acquire(HOST, 4, "dead")
    time.sleep(0.4)
    with pytest.raises(LeaseTimeout, match=r"is not reclaimed: the Docker engine did not answer"):
        mgr.acquire(HOST, 1, "next", timeout_s=0.3, poll_s=0.05)
    assert {r.device_id for r in mgr.holders()} == {"0", "1", "2", "3"}  # still held: the container may run
    assert all(r.reclaim_reason for r in mgr.holders())
    answers["engine"] = True
    nxt = mgr.acquire(HOST, 1, "next", timeout_s=2)
    [ev] = [e for e in mgr.events() if e.event == "reclaimed"]
    assert ev.lease_id == dead.lease_id and "c0ffee" in ev.detail
    nxt.release()


def _age(mgr, lease, seconds):
    """Make a lease's last heartbeat `seconds` old, as if its holder had stopped renewing it."""
    from sqlalchemy import update

    from scalebench.store.lease_tables import DeviceLeaseRow

    with mgr.engine.begin() as conn:
        conn.execute(update(DeviceLeaseRow).where(DeviceLeaseRow.lease_id == lease.lease_id)
                     .values(heartbeat_at=DeviceLeaseRow.heartbeat_at - seconds))


def test_no_docker_call_is_made_while_the_host_lock_is_held(url):
    """The engine may take 30 s to answer: meanwhile another holder's heartbeat must go through."""
    other = LeaseManager(url, stop_containers=lambda lease_id: []).acquire(HOST, 1, "other")
    renewed = []

    def stop(lease_id):
        t = time.monotonic()
        other.manager.heartbeat(other)  # on SQLite a held host lock is the database's write lock
        renewed.append(time.monotonic() - t)
        return []

    mgr = LeaseManager(url, stop_containers=stop)
    dead = mgr.acquire(HOST, 1, "dead")
    _age(mgr, dead, 3600)
    lease = mgr.acquire(HOST, 2, "next", timeout_s=5)
    assert len(renewed) == 1 and renewed[0] < 5  # not the busy timeout (30 s): no lock held
    lease.release()
    other.release()


def test_exclusive_lease_waits_for_an_empty_host_and_blocks_others(url, tmp_path):
    mgr = LeaseManager(url, stop_containers=lambda lease_id: [])
    packed = mgr.acquire(HOST, 1, "packed")
    with pytest.raises(LeaseTimeout):
        mgr.acquire(HOST, 2, "timed", exclusive=True, timeout_s=0.2, poll_s=0.05)
    packed.release()
    timed = mgr.acquire(HOST, 2, "timed", exclusive=True, timeout_s=1)
    with pytest.raises(LeaseTimeout):
        mgr.acquire(HOST, 1, "other", timeout_s=0.2, poll_s=0.05)  # 2 ids are free, but the host is taken
    timed.release()


ISLANDS = {  # 8 GPUs, two NVLink islands {0-3} and {4-7}, SYS between them
    str(a): {str(b): ("NV12" if (a < 4) == (b < 4) else "SYS") for b in range(8) if b != a} for a in range(8)}


@pytest.mark.parametrize("free, n, expected", [
    (["0", "1", "2", "3", "4", "5", "6", "7"], 2, ["0", "1"]),
    (["0", "4", "5", "6"], 2, ["4", "5"]),          # stays inside an island rather than take 0
    (["2", "3", "4", "5"], 4, ["2", "3", "4", "5"]),
    (["3", "4", "6"], 2, ["4", "6"]),
    (["1", "2"], 3, None),
])
def test_topology_keeps_a_cell_inside_an_nvlink_island(free, n, expected):
    assert choose(free, n, ISLANDS, [str(i) for i in range(8)]) == expected


def test_without_topology_contiguous_ids_win():
    order = [str(i) for i in range(8)]
    assert choose(["0", "2", "3", "5", "6", "7"], 3, None, order) == ["5", "6", "7"]
    assert choose(["0", "2", "3", "5"], 2, None, order) == ["2", "3"]


def test_more_nvlinks_beat_fewer_and_pcie_ranks():
    topo = {"0": {"1": "NV2", "2": "NV4", "3": "PIX"}, "1": {"2": "PHB", "3": "SYS"}, "2": {"3": "NODE"}}
    order = ["0", "1", "2", "3"]
    assert choose(order, 2, topo, order) == ["0", "2"]
    assert choose(["1", "2", "3"], 2, topo, order) == ["1", "2"]  # PHB beats NODE and SYS


def test_a_rerun_avoids_its_flagged_cells_devices_when_another_set_is_free():
    order = [str(i) for i in range(4)]
    assert choose(order, 2, None, order) == ["0", "1"]
    assert choose(order, 2, None, order, avoid=["0", "1"]) == ["1", "2"]
    assert choose(["0", "1"], 2, None, order, avoid=["0", "1"]) == ["0", "1"]  # no other set free: the same one
    topo = {"0": {"1": "NV4", "2": "SYS", "3": "SYS"}, "1": {"2": "SYS", "3": "SYS"}, "2": {"3": "NV4"}}
    assert choose(order, 2, topo, order, avoid=["0", "1"]) == ["2", "3"]  # the other island, as well linked
    slow = {**topo, "2": {"3": "SYS"}}
    assert choose(order, 2, slow, order, avoid=["0", "1"]) == ["0", "1"]  # never onto slower links
