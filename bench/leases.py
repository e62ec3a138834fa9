"""Lease allocator figures: leases per second under contention, and reclaim delay.

    .venv/bin/python bench/leases.py [--procs 1,2,4,8] [--rounds 40]

Each process leases a random 1-4 of a host's 4 devices, holds them ~1 ms, releases, again.
Reclaim delay: a holder is SIGKILLed; the time the next acquire takes to get its devices.
Uses a throw-away SQLite store (the embedded default); pass --url for another database.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scalebench.core.config import Host  # noqa: E402
from scalebench.store.leases import LeaseManager  # noqa: E402
from scalebench.store.db import upgrade  # noqa: E402

HOST = Host(name="bench", kind="gpu", queue="bench", device_ids=["0", "1", "2", "3"])


def worker(url: str, seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    mgr = LeaseManager(url, stop_containers=lambda _: [])
    for r in range(rounds):
        lease = mgr.acquire(HOST, rng.randint(1, 4), f"c{seed}-{r}", timeout_s=300, poll_s=0.005)
        time.sleep(0.001)
        lease.release()


def holder(url: str, ready) -> None:
    LeaseManager(url, stop_containers=lambda _: []).acquire(HOST, 4, "victim")
    ready.set()
    time.sleep(600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--url")
    args = ap.parse_args()
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        mgr = LeaseManager(url, stop_containers=lambda _: [])
        print(f"store: {url.split(':')[0]}, host with 4 devices, {args.rounds} leases per process")
        for n in [int(x) for x in args.procs.split(",")]:
            procs = [ctx.Process(target=worker, args=(url, s, args.rounds)) for s in range(n)]
            t = time.perf_counter()
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            dt = time.perf_counter() - t
            print(f"{n:2d} processes: {n * args.rounds / dt:7.1f} leases/s ({n * args.rounds} leases in {dt:.2f}s)")
        delays = []
        for _ in range(5):
            ready = ctx.Event()
            p = ctx.Process(target=holder, args=(url, ready))
            p.start()
            ready.wait(30)
            os.kill(p.pid, signal.SIGKILL)
            p.join()
            t = time.perf_counter()
            mgr.acquire(HOST, 4, "next").release()
            delays.append(time.perf_counter() - t)
        print(f"reclaim of a SIGKILLed holder: median {sorted(delays)[2] * 1000:.1f} ms, max {max(delays) * 1000:.1f} ms "
              "(without stopping containers; the orphan drill test measures that with the real engine)")


if __name__ == "__main__":
    main()
