#!/usr/bin/env python3
"""How fast the CI machine was, so that runs on different machines (or one machine on a busy day)
can be compared: one core's speed on a fixed pure-Python workload, and how busy both cores were
while pytest ran (a share well under 100 % means more workers could help; near 100 %, only less
work can). Standard library only: it runs before the venv exists.

    python3 .ci/machine.py speed              # seconds for the reference workload, best of 3
    python3 .ci/machine.py cpu > FILE         # the CPU counters now (Linux /proc/stat)
    python3 .ci/machine.py busy FILE          # the share of CPU time busy since FILE was taken
"""
import sys
import time


def reference() -> float:
    """Dicts, strings and calls, as Airflow's and GX's start-up do (docs/testing.md has its readings)."""
    t = time.perf_counter()
    d: dict = {}
    for i in range(1_800_000):
        key = f"k{i % 5000}"
        d[key] = d.get(key, 0) + len(key)
    sorted(d.items(), key=lambda kv: (kv[1], kv[0]))
    return time.perf_counter() - t


def cpu() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def busy(before: list[int], after: list[int]) -> float:
    """Share of CPU time not idle (idle and iowait are fields 4 and 5 of the cpu line)."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    return 1 - (delta[3] + delta[4]) / total if total else 0.0


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "speed":
        print(f"{min(reference() for _ in range(3)):.2f}")
    elif what == "cpu":
        print(" ".join(map(str, cpu())))
    elif what == "busy" and len(sys.argv) == 3:
        with open(sys.argv[2]) as f:
            print(f"{100 * busy([int(x) for x in f.read().split()], cpu()):.0f}")
    else:
        sys.exit("usage: machine.py speed | cpu | busy FILE")
