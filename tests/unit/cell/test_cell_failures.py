"""Failure classification against the real Docker engine, through CellDockerOperator.execute."""
import json
import time

import docker
import pytest

from scalebench.cell.failures import classify
from scalebench.orchestration.cell_operator import CellFailed, CellFailedPermanently
from tests.support.engine import requires_docker

IMAGE = "scalebench/tensorflow:cpu"


def _run(op, ctx):
    with pytest.raises((CellFailed, CellFailedPermanently)) as err:
        op.execute(ctx)
    return err.value


def _no_containers_left(cell):
    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": f"org.scalebench.cell={cell['key']}"}) == []


@requires_docker
def test_host_oom_is_classified_from_the_container_state(probe):
    op, ctx, cell = probe("python -c \"b = bytearray(400 * 1024 * 1024); print(len(b))\"", mem_limit="64m")
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailedPermanently) and exc.failure.reason == "out_of_memory"
    assert "OOM killer" in str(exc) and "exit code 137" in str(exc)
    assert _no_containers_left(cell)


@requires_docker
def test_a_cell_past_its_timeout_is_stopped_and_classified(probe):
    op, ctx, cell = probe("echo started; sleep 300", timeout_minutes=0.05)
    t = time.monotonic()
    exc = _run(op, ctx)
    assert time.monotonic() - t < 150  # stopped: the script would sleep 300 s (the bound allows a slow engine)
    assert exc.failure.reason == "timeout" and "cell timeout of 3s" in str(exc)
    assert exc.logs == ["started"]
    assert _no_containers_left(cell)


@requires_docker
def test_nccl_like_error_is_a_transient_communication_error_with_its_output_tail(probe):
    op, ctx, cell = probe("for i in $(seq 1 80); do echo step $i; done; sleep 0.5; "
                          "echo 'RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error' >&2; exit 1")
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailed) and not isinstance(exc, CellFailedPermanently)
    assert exc.failure.reason == "communication_error" and exc.failure.transient
    assert str(exc).startswith("cell g1-fp32-e3-r1 (1 GPU · fp32 · 3 epochs · repeat 1) attempt 1 failed: communication_error, "
                               "exit code 1 (transient)")
    failure = json.loads((op_attempt_dir(cell) / "failure.json").read_text())
    assert len(failure["output_tail"]) == 50  # stdout and stderr interleave freely; the error is in the tail
    assert any(line.startswith("RuntimeError: NCCL error") for line in failure["output_tail"])


@requires_docker
def test_a_docker_kill_is_a_transient_kill_with_the_signal_named(probe, drill):
    """Preemption, a reboot or an operator's `docker kill`: not OOM, not unknown; retried."""
    import threading

    from scalebench.store.leases import LeaseManager

    drill.update(drill="container SIGKILLed mid-cell", done="`docker kill` of a running cell's container, 1 s in")

    op, ctx, cell = probe("echo Epoch 1/3; sleep 300")
    client = docker.from_env()

    def kill_when_running():
        for _ in range(600):
            found = client.containers.list(filters={"label": f"org.scalebench.cell={cell['key']}"})
            if found:
                time.sleep(1)  # let it print
                found[0].kill()
                return
            time.sleep(0.1)

    threading.Thread(target=kill_when_running, daemon=True).start()
    t = time.monotonic()
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailed) and not isinstance(exc, CellFailedPermanently)
    assert exc.failure.reason == "killed" and "exit code 137 (transient)" in str(exc) and "SIGKILL" in str(exc)
    assert exc.logs == ["Epoch 1/3"]
    assert _no_containers_left(cell) and LeaseManager().holders() == []
    drill.update(happened=f"attempt failed as `{exc.failure.reason}` (transient: Airflow retries it); first error "
                          f"line: {str(exc).split(': ', 1)[1][:90]}; container removed, lease released",
                 figure=f"{time.monotonic() - t:.1f} s from start to classified failure; 0 leases held")


@requires_docker
def test_exit_zero_without_a_result_is_contract_missing(probe):
    op, ctx, cell = probe("echo training done")
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailedPermanently) and exc.failure.reason == "contract_missing_or_invalid"
    assert "metrics.json: file missing" in str(exc) and "exit code 0" in str(exc)


@requires_docker
def test_pinned_cores_reach_the_container(probe):
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 cores to tell pinned from unpinned")
    op, ctx, cell = probe("echo cores=$(nproc)", host_update={"device_ids": ["0", "1"], "cpus": [0, 1]})
    exc = _run(op, ctx)
    assert exc.failure.reason == "contract_missing_or_invalid" and exc.logs == ["cores=1"]


@requires_docker
def test_missing_image_is_its_own_class(probe):
    op, ctx, cell = probe("true")
    op.image = "scalebench/does-not-exist:cpu"
    exc = _run(op, ctx)
    assert exc.failure.reason == "image_missing" and "make images" in str(exc)


def op_attempt_dir(cell):
    from scalebench.core.attempt_folders import attempt_dir

    return attempt_dir(cell, 1)


@pytest.mark.parametrize("lines, kw, reason", [
    (["x", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], {}, "out_of_memory"),
    (["ResourceExhaustedError: OOM when allocating tensor with shape[800,64,112,112]"], {}, "out_of_memory"),
    (["[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"], {}, "communication_error"),
    (["FileNotFoundError: CIFAR-10 file missing: /data/cifar-10-batches-py/test_batch"], {}, "dataset_missing"),
    (["Traceback", "ValueError: bad"], {}, "unknown"),
    ([], {"oom_killed": True}, "out_of_memory"),
    (["NCCL error"], {"timed_out": True, "timeout_s": 60}, "timeout"),
])
def test_classify(lines, kw, reason):
    assert classify(1, lines, **kw).reason == reason


@requires_docker
def test_orphan_drill_sigkilled_task_its_container_is_stopped_before_the_gpus_go_again(tmp_path, isolated_state, drill):
    """SIGKILL the task process of a running cell: the next lease on its devices stops the
    orphaned container and reclaims the lease (holder pid gone) before handing them out."""
    import os
    import signal
    import subprocess
    import sys

    from scalebench.core.config import Configs
    from scalebench.cell.engine import LEASE_LABEL, Engine
    from scalebench.store.leases import LeaseManager
    from tests.support import ROOT

    drill.update(drill="operator process SIGKILLed mid-cell (no scheduler)",
                 done="SIGKILL to a plain Python process running a cell's operator (no Airflow around it) while its "
                      "container runs, then a lease request for all of the host's devices")
    env = {**os.environ, "SCALEBENCH_HOME": str(isolated_state), "PYTHONPATH": str(ROOT)}
    task = subprocess.Popen([sys.executable, "-m", "tests.support.orphan_task", str(tmp_path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = docker.from_env()
    mgr = LeaseManager(ttl_s=3600, stop_containers=Engine().stop_lease_containers)
    deadline = time.monotonic() + 120
    running = []
    while not running and time.monotonic() < deadline:  # this test's lease (another worker's cells share the engine)
        lease_ids = {row.lease_id for row in mgr.holders()}
        running = [c for c in client.containers.list(filters={"label": LEASE_LABEL})
                   if c.labels[LEASE_LABEL] in lease_ids]
        time.sleep(0.5)
    assert running, "the probe container never started"
    lease_id = running[0].labels[LEASE_LABEL]
    task.send_signal(signal.SIGKILL)
    task.wait(30)
    assert client.containers.get(running[0].id).status == "running"  # an orphan now
    t = time.monotonic()
    lease = mgr.acquire(Configs().fleet.host("local"), 4, "next-cell", timeout_s=60)
    reclaim_s = time.monotonic() - t
    assert lease.device_ids == ["0", "1", "2", "3"]
    assert client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"}) == []
    [ev] = [e for e in mgr.events() if e.event == "reclaimed"]
    assert ev.lease_id == lease_id and f"holder pid {task.pid}" in ev.detail and running[0].short_id in ev.detail
    lease.release()
    assert mgr.holders() == []
    print(f"\norphan drill: container stopped and lease reclaimed in {reclaim_s:.2f}s")
    drill.update(happened="the orphaned container kept running until the next lease request stopped and removed it "
                          f"and reclaimed its lease (event: {ev.detail[:80]}) before handing the devices on",
                 figure=f"{reclaim_s:.2f} s to stop the orphan and hand the devices on")


# a 2-rank cell under torchrun whose rank 1 aborted at exit, after the run (the night)
TEARDOWN_TAIL = """epoch 12/12 done
run_stop success
terminate called without an active exception
W1205 20:00:01.000000 1 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 10 closing signal SIGTERM
E1205 20:00:01.100000 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 1 (pid: 11) of binary: /opt/venv/bin/python3
Traceback (most recent call last):
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trainers.unet_voc FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_20:00:01
  host      : gpu-a
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 11)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 11
============================================================""".splitlines()


def _stops(*ranks, value="success", world=2):
    """events.jsonl of a run of `world` processes in which `ranks` logged their run_stop."""
    return ([{"key": "run_start", "rank": r, "world_size": world} for r in range(world)]
            + [{"key": "run_stop", "value": value, "rank": r, "world_size": world} for r in ranks])


@pytest.mark.parametrize("events, finished", [
    (_stops(0, 1), True),
    (_stops(0), False),                      # rank 1 never finished: the crash is the run's
    (_stops(1), False),
    (_stops(0, 1, value="aborted"), False),
    (_stops(0, world=1), True),              # one process (MirroredStrategy on every device)
    (_stops(world=1), False),
    ([], False),
])
def test_a_run_is_over_when_every_rank_logged_its_run_stop_success(events, finished):
    from scalebench.cell.failures import every_rank_finished

    assert every_rank_finished(events) is finished


def test_a_crash_after_every_ranks_success_is_a_teardown_crash_and_before_it_a_failure_as_before():
    from scalebench.cell.failures import every_rank_finished

    after = classify(1, TEARDOWN_TAIL, finished=every_rank_finished(_stops(0, 1)))
    assert after.reason == "teardown_crash" and not after.transient and after.exit_code == 1
    assert after.detail.startswith("after every rank's run_stop success: rank 1 ended by SIGABRT at teardown; last "
                                   "lines: ") and "terminate called without an active exception" in after.detail
    before = classify(1, TEARDOWN_TAIL, finished=every_rank_finished(_stops(0)))
    assert before.reason == "unknown" and before.detail == "last output line: terminate called without an active exception"
    # what finished decides first: a hang stopped by our watchdog or the OOM killer at teardown keep
    # the result; a user's cancel still says what it is, and before the end a timeout is a timeout
    hung = classify(137, TEARDOWN_TAIL, timed_out=True, timeout_s=60, finished=True)
    assert hung.reason == "teardown_crash" and "hung at teardown until the cell timeout of 60s" in hung.detail
    assert classify(137, [], oom_killed=True, finished=True).reason == "teardown_crash"
    assert classify(137, [], cancelled=True, finished=True).reason == "cancelled"
    assert classify(137, TEARDOWN_TAIL, timed_out=True, timeout_s=60, finished=False).reason == "timeout"
    # one process (no launcher): the container's own exit code names the signal
    single = classify(134, ["run_stop success", "Fatal Python error: Aborted"], finished=True)
    assert single.reason == "teardown_crash" and "the main process ended by SIGABRT at teardown" in single.detail


@requires_docker
@pytest.mark.parametrize("fault, deadline_s, timeout_minutes, says", [
    ("hang", 3, 2.0, "after every rank's run_stop success: hung at teardown for 3 s and was stopped"),
    ("hang", 600, 0.1, "after every rank's run_stop success: hung at teardown until the cell timeout of 6s"),
    ("abort", 600, 2.0, "after every rank's run_stop success: the main process ended by SIGABRT"),
])
def test_a_cell_that_finished_and_then_hung_or_aborted_at_teardown_is_kept_valid(tmp_path, monkeypatch, fault,
                                                                                   deadline_s, timeout_minutes, says):
    """The real container logs its run_stop success with its result written, then hangs (stopped
    at the teardown deadline, or the cell timeout where that comes first) or aborts: the cell is
    valid with the crash kept, not a timeout, and not retried."""
    from tests.support.samples import FakeTI, contract_probe, sample_contract

    tree, data, make = contract_probe(tmp_path, timeout_minutes=timeout_minutes)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    cell, op = make()
    op.teardown_deadline_s = deadline_s
    (data / f"contract-{cell['key']}-1.json").write_text(json.dumps(sample_contract(cell, train_s=1.0)))
    (data / f"teardown-{cell['key']}-1").write_text(fault)
    began = time.monotonic()
    summary = op.execute({"ti": FakeTI()})  # not raised: valid
    assert time.monotonic() - began < 120  # stopped, not left to its 600-s hang
    assert " valid, then crashed at teardown: teardown_crash" in summary["teardown_crash"], summary
    assert says in summary["teardown_crash"], summary["teardown_crash"]
    assert _no_containers_left(cell)


def test_a_tensorflow_multi_device_cell_knows_when_it_finished(tmp_path, monkeypatch):
    """One process holds every replica (MirroredStrategy, no launcher): its run_stop ends the run;
    under torchrun (WORLD_SIZE) every rank's is needed."""
    from scalebench.cell.failures import every_rank_finished
    from scalebench_kit.events import read_events
    from scalebench_kit.runtime import Cell
    from tests.support.samples import sample_cell, sample_spec

    (tmp_path / "cell.json").write_text(json.dumps(sample_spec(sample_cell(gpus=2))))
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    Cell(tmp_path).events.log("run_stop", "success")
    assert every_rank_finished(read_events(tmp_path / "events.jsonl"))
    (tmp_path / "events.jsonl").unlink()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    Cell(tmp_path).events.log("run_stop", "success")
    assert not every_rank_finished(read_events(tmp_path / "events.jsonl"))  # rank 1 has not
