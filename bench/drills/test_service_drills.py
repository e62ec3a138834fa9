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

from scalebench.cell.engine import CELL_LABEL
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


def _compete(svc) -> dict:
    """Trigger both benchmarks' 3-slot cells at once; per benchmark: its train task's span, its
    lease's span (lease_events) and its placement."""
    from scalebench.store.leases import LeaseManager

    runs = {b: trigger(svc, b, 3) for b in BENCHES}
    settled = {b: settle(svc, b, r) for b, r in runs.items()}  # both ended before anything is checked
    events = LeaseManager(f"sqlite:///{svc.home / 'results.db'}").events("local")
    out = {}
    for b, s in settled.items():
        check_invariants(svc, s, ["valid"])
        [train] = [t for t in svc.api.task_instances(f"scalebench_{b}", runs[b]) if t["task_id"] == "local_3gpu.train"]
        key = s["cells"][0]["key"]
        [acquired] = [e.at for e in events if e.cell_key == key and e.event == "acquired"]
        [released] = [e.at for e in events if e.cell_key == key and e.event == "released"]
        placement = s["cells"][0]["attempts"][0]["placement"]
        out[b] = {"task": (ts(train["start_date"]), ts(train["end_date"])), "lease": (acquired, released),
                  "devices": placement["device_ids"], "waited": placement["lease_wait_s"]}
    return out


def _pool_slots(svc, slots: int) -> None:
    """Set the host's pool as an operator would, with Airflow's CLI on the service's metadata DB."""
    out = subprocess.run([str(ROOT / ".venv/bin/airflow"), "pools", "set", "scalebench_local", str(slots),
                          "the host's device slots"], env=svc.env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def test_two_runs_of_different_benchmarks_compete_for_the_hosts_devices(svc, drill):
    """Pool and lease each keep the two cells apart; the second phase widens the pool so only the
    lease can, and shows that it does."""
    drill.update(drill="two DAG runs compete for one host's devices (pool, then lease alone)",
                 done="runs of two benchmarks triggered together, each wanting 3 of the host's 4 slots: with the "
                      "host's pool at 4 slots, then with the pool widened to 8 so only the device lease holds them apart")
    pooled = _compete(svc)
    a, b = (pooled[x] for x in BENCHES)
    assert _overlap(a["task"], b["task"]) == 0.0  # the pool held the second task back: it never started
    assert max(a["waited"], b["waited"]) < 5  # so no lease had to wait
    _pool_slots(svc, 8)
    try:
        leased = _compete(svc)
    finally:
        _pool_slots(svc, 4)
    a2, b2 = (leased[x] for x in BENCHES)
    both_ran = _overlap(a2["task"], b2["task"])
    assert both_ran > 0.0  # both tasks ran at once: the pool no longer kept them apart
    assert _overlap(a2["lease"], b2["lease"]) == 0.0 and len(a2["devices"]) == len(b2["devices"]) == 3
    waited = max(a2["waited"], b2["waited"])
    assert waited > HOLD_S / 2  # the second cell's lease waited for the first cell's devices
    first, second = sorted((a["task"], b["task"]))
    drill.update(happened="pool at 4: the second train task started only after the first ended (task overlap 0 s, "
                          "no lease wait); pool at 8: both train tasks ran at once, and the second waited in its lease "
                          "until the first released its devices (lease overlap 0 s); every cell valid",
                 figure=f"pool: second task started {second[0] - first[0]:.0f} s after the first; lease alone: tasks "
                        f"overlapped {both_ran:.0f} s, lease wait {waited:.0f} s")


def test_scheduler_restarted_mid_run(svc, drill):
    drill.update(drill="scheduler restarted mid-run",
                 done="the scheduler (and the LocalExecutor workers under it) stopped and started again while a cell ran")
    run_id, t = started(svc, "hold_b", 2)
    out = subprocess.run(["make", "-s", "airflow-restart", "COMPONENT=scheduler"], cwd=ROOT, env=svc.env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    restart_s = time.monotonic() - t
    s = settle(svc, "hold_b", run_id)
    # the workers' SIGTERM reaches the cell's on_kill: its attempt is `cancelled` (transient), retried
    check_invariants(svc, s, ["failed", "valid"])
    reasons = [a["reason"] for a in s["cells"][0]["attempts"]]
    assert reasons == ["cancelled", None], reasons
    line = first_error_line(svc, "hold_b", run_id)
    assert "failed: cancelled" in line and "(transient)" in line
    drill.update(happened=f"attempt 1 failed `{line.split('failed: ', 1)[1][:70]}`; Airflow retried it; attempt 2 "
                          "valid; one valid result recorded",
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
