"""Fault drills against the running service (`make airflow`): cells of the kit's hold trainer (they
hold their device slots for a set time and report a valid contract) driven through the REST API
while something breaks. Minutes each, so `make drills` runs them, not CI. Each checks: the run
ends with every cell valid (nothing lost), one valid attempt per cell (nothing duplicated), no
lease and no container left, and the failed attempt's class and reason in its first error line."""
import json
import subprocess
import time

import docker
import pytest

from scalebench.cell.container import CELL_LABEL
from scalebench.store.leases import LeaseManager
from scalebench.store.results import Store
from tests.support import ROOT
from tests.support.engine import requires_docker
from tests.support.drill_configs import hold_benchmark, write_hold_configs
from tests.support.service_clients import api_time as ts
from tests.support.service_clients import local_service

pytestmark = [requires_docker, pytest.mark.slow]
HOLD_S = 45
BENCHES = ("hold_a", "hold_b")


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drills")
    docs = {b: hold_benchmark(b, {(g, 1): HOLD_S for g in (1, 2, 3)}, retries=2, retry_delay_s=5) for b in BENCHES}
    configs = write_hold_configs(tmp / "configs", docs, slots=4)
    # a lost task is noticed in a minute, a dead holder's lease in 30 s (the defaults: 5 min, 2 min)
    with local_service(tmp / "state", configs, AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT="60",
                       SCALEBENCH_LEASE_TTL_S="30") as s:
        yield s


def trigger(svc, bench: str, gpus: int) -> str:
    return svc.api.trigger(f"scalebench_{bench}", {"gpu_counts": [gpus], "repeats": 1, "profile": "smoke"})


def container_of(bench: str, timeout_s: float = 180):
    client = docker.from_env()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = client.containers.list(filters={"label": f"org.scalebench.benchmark={bench}"})
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no running container of {bench} within {timeout_s} s")


def started(svc, bench: str, gpus: int) -> tuple[str, float]:
    """Trigger one cell and return once its container has run 5 s: (run id, that moment)."""
    run_id = trigger(svc, bench, gpus)
    container_of(bench)
    time.sleep(5)
    return run_id, time.monotonic()


def settle(svc, bench: str, run_id: str) -> dict:
    """The run's end and its cells as stored."""
    run = svc.api.wait_run(f"scalebench_{bench}", run_id, timeout_s=1200, poll_s=2)
    return {"run": run, "bench": bench, "cells": Store(f"sqlite:///{svc.home / 'results.db'}").cells(benchmark=bench,
                                                                                                   run_id=run_id)}


def first_error_line(svc, bench: str, run_id: str) -> str:
    [f] = [p for p in (svc.home / "results" / f"scalebench_{bench}").glob("*/*/attempt-1/failure.json")
           if run_id.replace(":", "_").replace("+", "_") in str(p)]
    return json.loads(f.read_text())["message"]


def check_invariants(svc, s: dict, attempts: list[str]) -> None:
    """Every cell valid once, the attempts as expected, and nothing left: no lease, no container."""
    assert s["run"]["state"] == "success", s["run"]
    [cell] = s["cells"]
    assert cell["status"] == "valid" and [a["status"] for a in cell["attempts"]] == attempts, cell["attempts"]
    assert LeaseManager(f"sqlite:///{svc.home / 'results.db'}").holders() == []
    assert docker.from_env().containers.list(all=True, filters={"label": f"{CELL_LABEL}={cell['key']}"}) == []


def test_container_sigkilled_mid_cell_under_the_scheduler(svc, drill):
    drill.update(drill="container SIGKILLed mid-cell (scheduler)",
                 done=f"`docker kill` of a running {HOLD_S} s cell's container, 10 s in, under the running scheduler")
    run_id = trigger(svc, "hold_a", 1)
    c = container_of("hold_a")
    time.sleep(10)
    c.kill()
    t = time.monotonic()
    s = settle(svc, "hold_a", run_id)
    check_invariants(svc, s, ["failed", "valid"])
    line = first_error_line(svc, "hold_a", run_id)
    assert "failed: killed, exit code 137 (transient)" in line
    drill.update(happened=f"attempt 1 failed `{line.split('failed: ', 1)[1][:70]}`; Airflow retried it after the retry "
                          "delay; attempt 2 valid; one valid result recorded",
                 figure=f"run ended {time.monotonic() - t:.0f} s after the kill; 2 attempts, 1 valid, 0 leases held")


def test_two_runs_of_different_benchmarks_compete_for_the_hosts_devices(svc, drill):
    drill.update(drill="two DAG runs compete for one host's devices",
                 done="runs of two benchmarks triggered together, each wanting 3 of the host's 4 slots")
    runs = {b: trigger(svc, b, 3) for b in BENCHES}
    settled = {b: settle(svc, b, r) for b, r in runs.items()}  # both ended before anything is checked
    spans = []
    for b, s in settled.items():
        check_invariants(svc, s, ["valid"])
        [train] = [t for t in svc.api.task_instances(f"scalebench_{b}", runs[b]) if t["task_id"] == "local_3gpu.train"]
        [placement] = (svc.home / "results" / f"scalebench_{b}").glob("*/g3-*/attempt-1/placement.json")
        spans.append((ts(train["start_date"]), ts(train["end_date"]), json.loads(placement.read_text())["device_ids"]))
    (a0, a1, ids_a), (b0, b1, ids_b) = sorted(spans)
    overlap = max(0.0, min(a1, b1) - max(a0, b0))
    assert overlap == 0.0 and len(ids_a) == len(ids_b) == 3
    drill.update(happened="the host's pool (4 slots) held the second cell back until the first ended; each got 3 "
                          "leased slots; both valid", figure=f"overlap {overlap:.0f} s; the second waited {b0 - a0:.0f} s")


def test_scheduler_restarted_mid_run(svc, drill):
    drill.update(drill="scheduler restarted mid-run",
                 done="the scheduler (and the LocalExecutor workers under it) stopped and started again while a cell ran")
    run_id, t = started(svc, "hold_b", 2)
    out = subprocess.run(["make", "-s", "airflow-restart", "COMPONENT=scheduler"], cwd=ROOT, env=svc.env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    restart_s = time.monotonic() - t
    s = settle(svc, "hold_b", run_id)
    statuses = [a["status"] for a in s["cells"][0]["attempts"]]
    check_invariants(svc, s, statuses)
    assert statuses.count("valid") == 1 and statuses[-1] == "valid"
    reasons = [a.get("reason") for a in s["cells"][0]["attempts"] if a["status"] != "valid"]
    drill.update(happened=f"attempts {statuses} (reasons {reasons}); the run finished with one valid result",
                 figure=f"scheduler back in {restart_s:.0f} s; run ended {time.monotonic() - t:.0f} s after the restart")


def test_docker_engine_restarted_mid_cell(svc, drill):
    drill.update(drill="Docker engine restarted mid-cell",
                 done="dockerd stopped (SIGTERM) while a cell's container ran, then started again")
    run_id, t = started(svc, "hold_a", 2)
    pid = int(subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout.split()[0])
    subprocess.run(["kill", "-TERM", str(pid)], check=True)
    while subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode == 0:
        time.sleep(0.5)
    down_s = time.monotonic() - t
    subprocess.run([str(ROOT / "containers/ensure-docker.sh")], check=True, capture_output=True, timeout=120)
    back_s = time.monotonic() - t
    s = settle(svc, "hold_a", run_id)
    check_invariants(svc, s, ["failed", "valid"])
    line = first_error_line(svc, "hold_a", run_id)
    assert "(transient)" in line
    drill.update(happened=f"attempt 1 failed `{line.split('failed: ', 1)[1][:80]}`; retried once the engine answered; "
                          "attempt 2 valid", figure=f"engine down {down_s:.0f} s, back after {back_s:.0f} s; "
                                                     f"run ended {time.monotonic() - t:.0f} s after the stop")
