"""The orchestrator's own cost: the same cells through the running scheduler and as a bare loop.

    .venv/bin/python bench/overhead.py [--rounds 3] [--gpus 1,2] [--benchmark resnet50_keras_cifar10]

A: `make airflow` (api-server, scheduler, dag-processor, triggerer; LocalExecutor), each cell
   triggered through the REST API as its own run and waited for before the next.
B: what a user would otherwise write: `docker run --rm` of the same image, command, mounts and
   environment (built by scalebench.cell.container.settings) on a copy of A's cell.json.
A and B alternate every round, since cells vary by ~15 % from run to run on this machine. The
report DAG is paused meanwhile: each run's results would start it beside the next cell.
Printed: the wall-time ratio A/B per round with its median and range, the in-container time
A/B per device count, and per cell where A's seconds outside training go (from the run's task
instances, the container's own timing and the cell operator's phases in placement.json). Also the
orchestrator's CPU (the Airflow processes `make airflow` started and every child they start and
reap): while idle for --idle-s after the DAG files were parsed, and while A's cells run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.support.drill_configs import write_drill_configs  # noqa: E402
from tests.support.service_clients import api_time as ts  # noqa: E402
from tests.support.service_clients import local_service  # noqa: E402

FIXED = ("plan_cells", "check_dataset_local", "cells")  # per-run tasks before the cell (cells: the groups' slices)
# per-run tasks after it (the rerun steps run only where a figure is flagged; the names before
# and after they moved out of the cell's group, so that the script measures either)
AFTER = ("record", "plan_reruns", "reruns", "record_reruns", "plan_more_pairs", "more_pairs", "record_more_pairs",
         "check_cells", "finish")
PHASES = ("begin", "lease", "preflight", "spec", "collect", "validate")  # the train task's, outside its container


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def orchestrator_cpu_s(airflow_home: Path) -> dict[str, float]:
    """CPU-seconds so far per component `make airflow` started, with all its descendants: each
    live process's own time plus what its reaped children used (a parse or task process that came
    and went since the last reading is in its parent's children times)."""
    import psutil

    out = {}
    for name, rec in json.loads((airflow_home / "service" / "pids.json").read_text()).items():
        out[name] = 0.0
        try:
            root = psutil.Process(rec["pid"])
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                t = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            out[name] += t.user + t.system + t.children_user + t.children_system
    return out


def idle_cpu(svc, seconds: float) -> dict[str, float]:
    """The orchestrator's CPU-seconds per minute per component over `seconds` with nothing
    triggered, measured once every DAG file has been parsed (the DAG list steady for 30 s)."""
    seen, steady_since = -1, time.monotonic()
    while time.monotonic() - steady_since < 30:
        n = len(svc.api.get("/api/v2/dags", params={"limit": 100})["dags"])
        if n != seen:
            seen, steady_since = n, time.monotonic()
        time.sleep(5)
    home = Path(svc.env["AIRFLOW_HOME"])
    c0, t0 = orchestrator_cpu_s(home), time.monotonic()
    time.sleep(seconds)
    c1, took = orchestrator_cpu_s(home), time.monotonic() - t0
    return {k: (c1[k] - c0[k]) / took * 60 for k in c0}


def run_through_airflow(svc, dag_id: str, gpus: int, seed: int) -> dict:
    """One cell as one REST-triggered run; the run's seconds split by where they went, and the
    orchestrator's CPU-seconds over it."""
    home = Path(svc.env["AIRFLOW_HOME"])
    cpu0 = sum(orchestrator_cpu_s(home).values())
    t0 = time.time()
    run_id = svc.api.trigger(dag_id, {"gpu_counts": [gpus], "repeats": 1, "profile": "smoke", "seed": seed})
    run = svc.api.wait_run(dag_id, run_id, timeout_s=1200, poll_s=2)  # the end comes from the run, not the poll
    if run["state"] != "success":
        raise RuntimeError(f"{dag_id} run {run_id} ended {run['state']}; see the Airflow UI")
    wall = ts(run["end_date"]) - t0
    tis = [t for t in svc.api.task_instances(dag_id, run_id)  # a skipped task has dates too, a moment apart
           if t["start_date"] and t["end_date"] and t["state"] != "skipped"]
    span = {t["task_id"]: (ts(t["start_date"]), ts(t["end_date"])) for t in tis}
    [train] = [v for k, v in span.items() if k.endswith(".train")]
    from scalebench.core.attempt_folders import run_dir

    [metrics] = run_dir(dag_id, run_id).glob("*/attempt-1/metrics.json")
    timing = json.loads(metrics.read_text())["timing"]
    placement = json.loads((metrics.parent / "placement.json").read_text())
    phases = placement.get("phases_s", {})  # none before the operator timed its phases
    busy = busy_seconds(list(span.values()))
    return {"wall_s": wall, "orchestrator_cpu_s": sum(orchestrator_cpu_s(home).values()) - cpu0,
            "container_s": timing["total_s"], "train_s": timing["train_s"],
            "scheduling_s": wall - busy,  # trigger to first task, gaps between tasks, last task to run end
            # wall seconds the tasks before and after the cell's kept busy (tasks in parallel counted once)
            "fixed_tasks_s": busy_seconds([v for k, v in span.items() if k.split(".")[-1] in FIXED]),
            "container_start_s": train[1] - train[0] - timing["total_s"],  # the train task outside its container
            "post_s": busy_seconds([v for k, v in span.items() if k.split(".")[-1] in AFTER]),
            "phases": {k: phases[k] for k in PHASES if k in phases},
            "phases_run_extra": phases["run"] - timing["total_s"] if phases else None,  # create, start, wait, remove
            # the task process itself: its start (imports, parsing its DAG), its end, talking to the API server
            "task_process_s": (train[1] - train[0] - sum(phases.values())) if phases else None,
            "cell_json": metrics.parent / "cell.json"}


def run_bare(cell_json: Path, bench_id: str, work: Path) -> dict:
    """The same container as `docker run --rm`, as a user's loop would start it."""
    from scalebench.core import paths
    from scalebench.core.config import Configs
    from scalebench.cell.container import settings
    from scalebench.cell.datasets import dataset_root

    spec = json.loads(cell_json.read_text())
    configs = Configs()
    bench, host = configs.benchmark(bench_id), configs.fleet.host(spec["cell"]["host"])
    out = work / f"bare-{time.time_ns()}"
    out.mkdir(parents=True)
    (out / "cell.json").write_text(cell_json.read_text())
    n = spec["devices"]["count"]
    cell = {**spec["cell"], "cell_id": "bare"}
    data_root = dataset_root(bench, spec["cell"]["profile"], host)
    s = settings(bench, host, cell, [str(i) for i in range(n)], str(data_root), str(out), str(paths.cache_dir()))
    cmd = ["docker", "run", "--rm", "--shm-size", str(s.shm_size)]
    for m in s.mounts:
        cmd += ["-v", f"{m['Source']}:{m['Target']}{':ro' if m['ReadOnly'] else ''}"]
    for k, v in s.environment.items():
        cmd += ["-e", f"{k}={v}"]
    t0 = time.time()
    subprocess.run([*cmd, s.image, *s.command], check=True, capture_output=True)
    wall = time.time() - t0
    timing = json.loads((out / "metrics.json").read_text())["timing"]
    return {"wall_s": wall, "container_s": timing["total_s"], "train_s": timing["train_s"],
            "container_start_s": wall - timing["total_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--benchmark", default="resnet50_keras_cifar10")
    ap.add_argument("--idle-s", type=float, default=120, help="how long the idle orchestrator is measured")
    args = ap.parse_args()
    gpus = [int(g) for g in args.gpus.split(",")]
    dag_id = f"scalebench_{args.benchmark}"

    with tempfile.TemporaryDirectory(prefix="scalebench-overhead-") as tmp:
        tmp = Path(tmp)
        configs = write_drill_configs(tmp / "configs", benchmarks=(args.benchmark,))
        with local_service(tmp / "state", configs) as svc:
            os.environ.update({k: svc.env[k] for k in ("SCALEBENCH_HOME", "SCALEBENCH_CONFIG_DIR")})
            # the report each run triggers would train beside the next cells (A's or B's) on this
            # machine's cores; the report's own cost is bench/report_scale.py's figure
            svc.api.request("PATCH", "/api/v2/dags/scalebench_nightly_report", json={"is_paused": True})
            print(f"make airflow: {svc.started_s:.0f} s; {svc.out.strip().splitlines()[-1]}")
            parts = idle_cpu(svc, args.idle_s)
            idle = sum(parts.values())
            print(f"idle orchestrator: {idle:.2f} CPU-s per minute = {idle / 60:.1%} of one core over "
                  f"{args.idle_s:.0f} s, DAG files parsed ({', '.join(f'{k} {v:.2f}' for k, v in parts.items())}); "
                  "goal <= 2 %", flush=True)
            print(f"{len(gpus)} cells per round, {args.rounds} rounds, A then B")
            rounds = []
            for r in range(1, args.rounds + 1):
                a = [run_through_airflow(svc, dag_id, g, seed=r) for g in gpus]
                b = [run_bare(x["cell_json"], args.benchmark, tmp / "bare") for x in a]
                rounds.append((a, b))
                wa, wb = sum(x["wall_s"] for x in a), sum(x["wall_s"] for x in b)
                print(f"round {r}: A {wa:.1f} s, B {wb:.1f} s, A/B {wa / wb:.3f}  "
                      f"(cells A {[round(x['wall_s'], 1) for x in a]}, B {[round(x['wall_s'], 1) for x in b]})", flush=True)
    report(rounds, gpus, idle)


def report(rounds: list, gpus: list[int], idle: float) -> None:
    ratios = [sum(x["wall_s"] for x in a) / sum(x["wall_s"] for x in b) for a, b in rounds]
    print(f"\noverhead: sweep wall time A/B = {statistics.median(ratios):.3f} (median of {len(ratios)} rounds, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}); goal <= 1.10 on 2 cores, 1.05 where a core is spared")
    cell_cpu = [x["orchestrator_cpu_s"] / x["wall_s"] * 60 for a, _ in rounds for x in a]
    print(f"orchestrator CPU: idle {idle:.2f} CPU-s/min ({idle / 60:.1%} of a core); while A's cells ran "
          f"{statistics.median(cell_cpu):.2f} CPU-s/min (median of {len(cell_cpu)} runs, "
          f"range {min(cell_cpu):.2f}-{max(cell_cpu):.2f})")
    for k, g in enumerate(gpus):
        inside = [rd[0][k]["container_s"] / rd[1][k]["container_s"] for rd in rounds]
        print(f"in-container time A/B at {g} device(s): {statistics.median(inside):.3f} (median of {len(inside)} "
              f"rounds, range {min(inside):.3f}-{max(inside):.3f}); goal <= 1.03")
    print("per cell, seconds (median over rounds):  A wall | B wall | in container A/B | outside training: "
          "scheduling, fixed per-run tasks, train task outside the container A (lease, start, validation) / B (start), "
          "the tasks after it (record, check_cells, finish; the rerun steps only when a figure is flagged)")
    for k, g in enumerate(gpus):
        a = [rd[0][k] for rd in rounds]
        b = [rd[1][k] for rd in rounds]

        def med(xs, key):
            return statistics.median(x[key] for x in xs)

        print(f"  {g} device(s): {med(a, 'wall_s'):6.1f} | {med(b, 'wall_s'):6.1f} | {med(a, 'container_s'):5.1f}/"
              f"{med(b, 'container_s'):5.1f} | {med(a, 'scheduling_s'):5.1f}, {med(a, 'fixed_tasks_s'):5.1f}, "
              f"{med(a, 'container_start_s'):4.1f}/{med(b, 'container_start_s'):4.1f}, {med(a, 'post_s'):5.1f}")
        if all(x["phases"] for x in a):
            print("      train task outside its container, A: " + ", ".join(
                f"{k} {statistics.median(x['phases'].get(k, 0.0) for x in a):.2f}" for k in PHASES)
                + f", container start/stop {statistics.median(x['phases_run_extra'] for x in a):.2f}"
                + f", the task process itself {statistics.median(x['task_process_s'] for x in a):.2f}")
    extra = statistics.median(sum(x["wall_s"] for x in a) - sum(x["wall_s"] for x in b) for a, b in rounds) / len(gpus)
    print(f"non-training seconds added per cell by the orchestrator: {extra:.1f} s (median); goal <= 10 s")


if __name__ == "__main__":
    main()
