"""GPU packing: the real scheduler, pools and lease allocator on an emulated 8-slot host.

    .venv/bin/python bench/packing.py [--policies packed,exclusive] [--benchmarks 6] [--min-cell 30] [--max-cell 60]

The study's cell mix: six benchmarks x GPU counts 1-4 x their four epoch values. Each cell is a
container that holds its slots (scalebench_kit.hold, sleeping, not training) for a time that
follows the study: epochs x the relative time at its GPU count x the benchmark's cost, squeezed
into [--min-cell, --max-cell] seconds (a power law, so the order of cells is kept). Every
benchmark's run is triggered at once through the REST API of `make airflow`; the host's pool and
the lease allocator decide what runs when.

Printed per policy: makespan (first cell start to last cell end) / lower bound, where the lower
bound is max(total slot-seconds / slots, the longest cell) of the hold times. `exclusive` (a timed
cell has the host to itself) beside `packed` shows what timing fidelity costs; with the full mix
it takes over an hour, so --benchmarks narrows the mix for it.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "containers" / "kit")]

from scalebench_kit.hold import STUDY_RELATIVE  # noqa: E402
from tests.support.drill_configs import hold_benchmark, write_hold_configs  # noqa: E402
from tests.support.service_clients import api_time as ts  # noqa: E402
from tests.support.service_clients import local_service  # noqa: E402

SLOTS = 8
# the study's rows: epochs run and a relative cost per epoch at 1 GPU (detection epochs are dearer)
MIX = {"resnet50_keras_cifar10": ([40, 50, 60, 70], 1.0), "unet_torch_voc2007": ([70, 80, 90, 100], 1.5),
       "frcnn_tf_voc2007": ([5, 10, 15, 20], 8.0), "frcnn_mmdet_voc2007": ([5, 10, 15, 20], 10.0),
       "maskrcnn_mmdet_voc2012": ([5, 10, 15, 20], 12.0), "msrcnn_mmdet_voc2012": ([5, 10, 15, 20], 14.0)}


def hold_times(benchmarks: list[str], lo_s: float, hi_s: float) -> dict[tuple[str, int, int], float]:
    """(benchmark, gpus, epochs) -> seconds held, the study's cost squeezed into [lo_s, hi_s]."""
    raw = {(b, g, e): MIX[b][1] * e * STUDY_RELATIVE[g - 1] for b in benchmarks for e in MIX[b][0] for g in (1, 2, 3, 4)}
    small, big = min(raw.values()), max(raw.values())
    gamma = math.log(hi_s / lo_s) / math.log(big / small) if big > small else 1.0
    return {k: lo_s * (v / small) ** gamma for k, v in raw.items()}


def write_configs(dst: Path, held: dict, policy: str) -> list[str]:
    """One hold benchmark per study row, on one 8-slot host with the given timing policy."""
    rows = sorted({k[0] for k in held})
    docs = {f"hold_{b}": hold_benchmark(f"hold_{b}", {(g, e): s for (bb, g, e), s in held.items() if bb == b}, retries=0)
            for b in rows}
    write_hold_configs(dst, docs, slots=SLOTS, timing_policy=policy)
    return list(docs)


def run_policy(svc, ids: list[str], held: dict) -> dict:
    t0 = time.time()
    runs = {dag: svc.api.trigger(f"scalebench_{dag}", {"gpu_counts": [1, 2, 3, 4], "repeats": 1, "profile": "smoke"})
            for dag in ids}
    done = {dag: svc.api.wait_run(f"scalebench_{dag}", r, timeout_s=4 * 3600, poll_s=5) for dag, r in runs.items()}
    trains = [t for dag, r in runs.items() for t in svc.api.task_instances(f"scalebench_{dag}", r)
              if t["task_id"].endswith(".train")]
    starts, ends = [ts(t["start_date"]) for t in trains], [ts(t["end_date"]) for t in trains]
    slot_s = sum(d * k[1] for k, d in held.items())
    bound = max(slot_s / SLOTS, max(held.values()))
    makespan = max(ends) - min(starts)
    busy = sum((ts(t["end_date"]) - ts(t["start_date"])) * int(t["task_id"].split("_")[-1][0]) for t in trains)
    return {"states": {d: r["state"] for d, r in done.items()}, "cells": len(trains), "makespan_s": makespan,
            "bound_s": bound, "ratio": makespan / bound, "trigger_to_end_s": max(ends) - t0,
            "slot_utilisation": busy / (SLOTS * makespan), "hold_slot_s": slot_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="packed")
    ap.add_argument("--benchmarks", type=int, default=6, help="the first N study rows (default: all six)")
    ap.add_argument("--min-cell", type=float, default=30.0)
    ap.add_argument("--max-cell", type=float, default=60.0)
    args = ap.parse_args()
    held = hold_times(list(MIX)[:args.benchmarks], args.min_cell, args.max_cell)
    print(f"{len(held)} cells, hold times {min(held.values()):.0f}-{max(held.values()):.0f} s, "
          f"{sum(d * k[1] for k, d in held.items()):.0f} slot-seconds on {SLOTS} slots", flush=True)
    with tempfile.TemporaryDirectory(prefix="scalebench-packing-") as tmp:
        tmp = Path(tmp)
        policies = args.policies.split(",")
        ids = write_configs(tmp / "configs", held, policies[0])
        with local_service(tmp / "state", tmp / "configs") as svc:
            for policy in policies:
                write_configs(tmp / "configs", held, policy)  # read by every cell at its start
                r = run_policy(svc, ids, held)
                print(f"{policy:9}: makespan {r['makespan_s']:.0f} s / lower bound {r['bound_s']:.0f} s = "
                      f"{r['ratio']:.3f} (goal <= 1.05 for packed); slots busy {100 * r['slot_utilisation']:.0f} % of "
                      f"the makespan (train tasks); trigger to last cell end {r['trigger_to_end_s']:.0f} s; "
                      f"{r['cells']} cells; runs {sorted(set(r['states'].values()))}", flush=True)


if __name__ == "__main__":
    main()
