"""CellDockerOperator without an engine: a spec-ed Docker API client stands in for dockerd (as the
provider's own tests do), so every failure class, retry decision, cancel, XCom and note is
exercised here; tests/unit/cell/test_cell_failures.py runs the same paths against the real engine."""
import json
import threading
from unittest import mock

import docker
import docker.errors
import pytest
import requests
from airflow.providers.docker.hooks.docker import DockerHook

from scalebench.cell import preflight
from scalebench.core.attempt_folders import attempt_dir, cell_attempts
from scalebench.core.config import Configs
from scalebench.store.leases import LeaseManager
from scalebench.orchestration.cell_operator import CellFailed, CellFailedPermanently
from scalebench.orchestration.cell_run import fold_output
from scalebench.store.recording import record_run
from scalebench.store.results import Store
from tests.support.samples import make_probe, sample_contract


@pytest.fixture
def cell_op(tmp_path, monkeypatch):
    """make(...) -> (operator, context, cell, client mock, notes set); the container exits as told."""
    notes_set = []
    monkeypatch.setattr("scalebench.orchestration.cell_operator.notes.set_note", lambda ti, line: notes_set.append(line) or "set")

    def make(exit_code=0, lines=(), oom=False, writes_result=False, writes_for=None, packages_kept=True, **probe_kw):
        op, ctx, cell, tree = make_probe(tmp_path, "unused: the engine is a mock", **probe_kw)
        if packages_kept:  # the image's package list was read before: no container but the cell's
            Store().save_image_packages("sha256:1mage", "scalebench/probe:cpu", "scalebench/probe:sha256-1mage",
                                        {"python": {}, "debian": {}, "cuda": {}})
        monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
        ctx["ti"].dag_id = "scalebench_probe"
        client = mock.MagicMock(spec=docker.APIClient)
        client.images.return_value = [{"Id": "sha256:1mage"}]
        client.inspect_image.return_value = {"Id": "sha256:1mage"}
        client.create_container.return_value = {"Id": "c0ffee" * 8}
        client.attach.return_value = iter([f"{line}\n".encode() for line in lines])
        client.wait.return_value = {"StatusCode": exit_code}
        client.inspect_container.return_value = {"State": {"ExitCode": exit_code, "OOMKilled": oom}}
        if writes_result:
            def start(_id):  # the trainer writes its contract into the attempt's folder (the newest)
                number, folder = cell_attempts(cell)[-1]
                (folder / "metrics.json").write_text(json.dumps(sample_contract(writes_for or cell, attempt=number)))
            client.start.side_effect = start
        op.hook = mock.MagicMock(spec=DockerHook, api_client=client, client_created=True)
        return op, ctx, cell, client, notes_set

    return make


def _fails(op, ctx):
    with pytest.raises((CellFailed, CellFailedPermanently)) as err:
        op.execute(ctx)
    return err.value


def _record(cell, attempt=1):
    return json.loads((attempt_dir(cell, attempt) / "failure.json").read_text())


def _no_leases_held():
    return LeaseManager().holders() == []


def test_a_clean_exit_with_a_valid_contract_is_collected(cell_op):
    op, ctx, cell, client, notes_set = cell_op(0, ["step 1"], writes_result=True)
    summary = op.execute(ctx)
    assert summary["attempt"] == 1 and summary["world_size"] == 1 and summary["device_ids"] == ["0"]
    spec = json.loads((attempt_dir(cell, 1) / "cell.json").read_text())
    assert spec["provenance"]["image_digest"] == "sha256:1mage" and spec["cell"]["attempt"] == 1
    client.remove_container.assert_called_once_with("c0ffee" * 8, force=True)
    assert "cpuset_cpus" not in client.create_host_config.call_args.kwargs  # the fleet lists no cores
    assert ctx["ti"].pushed == {} and notes_set == [] and _no_leases_held()


def test_progress_lines_are_logged_outside_the_folded_container_output(cell_op):
    from airflow.providers.docker.operators.docker import DockerOperator

    progress = "scalebench progress: step 40 of 400 (10%), 812.5 images/s, 1 min 20 s left"
    op, ctx, cell, client, _ = cell_op(0, ["Epoch 1/3", progress, "loss 0.5"], writes_result=True)
    logged = mock.MagicMock()
    with mock.patch.object(DockerOperator, "log", new_callable=mock.PropertyMock, return_value=logged):
        op.execute(ctx)
        assert op.log is logged  # the container is gone: the plain logger again
    lines = [c.args[0] % c.args[1:] for c in logged.info.call_args_list]
    start = lines.index("::group::Container output (scalebench/tensorflow:cpu)")
    first = lines.index("Epoch 1/3")
    assert start < first and "::endgroup::" not in lines[start:first]  # the output is folded...
    assert lines[first:first + 6] == ["Epoch 1/3", "::endgroup::", progress,  # ...but for its progress line
                                      "::group::Container output, continued (scalebench/tensorflow:cpu)", "loss 0.5",
                                      "::endgroup::"]


def test_output_lines_split_across_chunks_are_logged_whole(cell_op):
    op, *_ = cell_op()
    logged = mock.MagicMock()
    lines = fold_output(iter([b"Epoch 1", b"/3\nloss 0.", "5\r\nscalebench progress: step 1", b"\xff\nlast"]), logged,
                        op.image)
    assert lines == ["Epoch 1/3", "loss 0.5", "scalebench progress: step 1\ufffd", "last"]
    assert [c.args[1] for c in logged.info.call_args_list if c.args[0] == "%s"] == lines


# exit code, OOMKilled, output -> class, retried, words in the detail
EXIT_TABLE = [
    (0, False, ["done"], "contract_missing_or_invalid", False, "metrics.json: file missing"),
    (137, True, ["Epoch 1/3"], "out_of_memory", False, "OOM killer"),
    (137, False, ["Epoch 1/3"], "killed", True, "ended by SIGKILL (docker kill"),
    (143, False, ["Epoch 1/3"], "killed", True, "ended by SIGTERM"),
    (139, False, ["Epoch 1/3"], "killed", True, "ended by SIGSEGV"),
    (1, False, ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], "out_of_memory", False,
     "device memory exhausted"),
    (1, False, ["RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"],
     "communication_error", True, "collective communication failed"),
    (1, False, ["FileNotFoundError: CIFAR-10 file missing: /data/cifar-10-batches-py/test_batch"], "dataset_missing",
     False, "dataset missing or malformed"),
    (1, False, ["Traceback (most recent call last):", "ValueError: bad shape"], "unknown", False,
     "last output line: ValueError: bad shape"),
]


@pytest.mark.parametrize("exit_code, oom, lines, reason, transient, words", EXIT_TABLE,
                         ids=[f"{r[0]}-{r[3]}" for r in EXIT_TABLE])
def test_exit_classification_retry_xcom_note_and_record(cell_op, exit_code, oom, lines, reason, transient, words):
    op, ctx, cell, client, notes_set = cell_op(exit_code, lines, oom=oom)
    exc = _fails(op, ctx)
    assert exc.failure.reason == reason and words in str(exc)
    assert isinstance(exc, CellFailedPermanently) is (not transient) and isinstance(exc, CellFailed) is transient
    line = (f"cell g1-fp32-e3-r1 (1 GPU · fp32 · 3 epochs · repeat 1) attempt 1 failed: {reason}, exit code {exit_code}"
            f"{' (transient)' if transient else ''}: ")
    assert str(exc).startswith(line)
    stage = "collect" if reason == "contract_missing_or_invalid" else "classify"
    assert ctx["ti"].pushed["cell_summary"] == {"cell": cell, "attempt": 1, "stage": stage, "reason": reason,
                                                "exit_code": exit_code, "transient": transient, "message": str(exc)}
    assert notes_set == [str(exc)]
    record = _record(cell)
    assert (record["reason"], record["exit_code"], record["attempt"], record["message"]) == \
        (reason, exit_code, 1, str(exc))
    assert record["output_tail"] == lines
    client.remove_container.assert_called_once()
    assert _no_leases_held()


def test_the_watchdog_stops_a_cell_past_its_timeout_and_that_wins_over_the_signal(cell_op):
    op, ctx, cell, client, _ = cell_op(137, ["started"], timeout_minutes=0.01)
    stopped = threading.Event()
    client.stop.side_effect = lambda *a, **k: stopped.set()
    client.wait.side_effect = lambda *_: stopped.wait(10) and {"StatusCode": 137}
    exc = _fails(op, ctx)
    assert exc.failure.reason == "timeout" and isinstance(exc, CellFailedPermanently)
    assert "ran past the cell timeout of 1s" in str(exc) and exc.logs == ["started"]
    client.stop.assert_called_once_with("c0ffee" * 8, timeout=5)


def test_a_users_cancel_stops_the_container_frees_the_devices_and_is_not_retried(cell_op):
    op, ctx, cell, client, notes_set = cell_op(143, ["Epoch 1/3"])
    held_during_run = []

    def wait(_id):  # SIGTERM arrives while the container runs: the SDK calls on_kill, then execute goes on
        held_during_run.append(len(LeaseManager().holders()))
        op.on_kill()
        return {"StatusCode": 143}

    client.wait.side_effect = wait
    exc = _fails(op, ctx)
    assert held_during_run == [1]
    # transient: after a user's mark-failed Airflow retries nothing anyway; after a shutdown the retry saves the cell
    assert exc.failure.reason == "cancelled" and not isinstance(exc, CellFailedPermanently)
    client.stop.assert_called_once_with("c0ffee" * 8, timeout=5)
    assert _no_leases_held()
    released = [e for e in LeaseManager().events() if e.event == "released"]
    assert len(released) == 1 and released[0].detail is None  # on_kill and execute both release: once
    assert _record(cell)["reason"] == "cancelled" and notes_set == [str(exc)]


def test_cancel_while_waiting_for_a_lease_stops_waiting(cell_op):
    op, ctx, cell, client, _ = cell_op(0, timeout_minutes=5)
    other = LeaseManager().acquire(Configs().fleet.host("local"), 4, "other-cell")
    threading.Timer(0.5, op.on_kill).start()
    exc = _fails(op, ctx)
    other.release()
    assert exc.failure.reason == "cancelled" and "failed at lease: cancelled" in str(exc)
    client.create_container.assert_not_called()


def test_no_free_devices_is_a_recorded_transient_lease_timeout(cell_op):
    op, ctx, cell, client, notes_set = cell_op(0, timeout_minutes=0.01)
    other = LeaseManager().acquire(Configs().fleet.host("local"), 4, "other-cell")
    exc = _fails(op, ctx)
    other.release()
    assert isinstance(exc, CellFailed) and exc.failure.reason == "lease_timeout"
    assert str(exc).startswith("cell g1-fp32-e3-r1 (1 GPU · fp32 · 3 epochs · repeat 1) attempt 1 failed at lease: lease_timeout, "
                               "exit code none (transient): no 1 free devices on local")
    assert _record(cell)["stage"] == "lease" and notes_set == [str(exc)]
    client.create_container.assert_not_called()
    # recorded as a failed attempt with its class, not as "missing"
    counts = record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    assert counts["failed"] == 1 and counts["missing"] == 0
    assert counts["not_valid"] == ["1 GPU · fp32 · 3 epochs · repeat 1: failed (lease_timeout)"]
    [stored] = Store().cells()
    assert stored["attempts"][0]["reason"] == "lease_timeout" and stored["attempts"][0]["message"] == str(exc)


def test_a_failed_preflight_is_transient_and_keeps_its_report(cell_op, monkeypatch):
    op, ctx, cell, client, _ = cell_op(0, host_update={"kind": "gpu"})

    def throttled(ids, precision=None):
        raise preflight.PreflightFailed(f"GPU {ids[0]}: active throttle reason: power cap", {"devices": ids})

    monkeypatch.setattr("scalebench.orchestration.cell_run.preflight.check", throttled)
    exc = _fails(op, ctx)
    assert isinstance(exc, CellFailed) and exc.failure.reason == "preflight_failed"
    assert "failed at preflight: preflight_failed" in str(exc) and "power cap" in str(exc)
    assert json.loads((attempt_dir(cell, 1) / "preflight.json").read_text()) == {"devices": ["0"]}
    client.create_container.assert_not_called()
    assert _no_leases_held()


@pytest.mark.parametrize("where, error, reason, transient", [
    ("inspect_image", requests.exceptions.ConnectionError("Connection refused"), "engine_unreachable", True),
    ("inspect_image", docker.errors.ImageNotFound("No such image"), "image_missing", False),
    ("wait", requests.exceptions.ConnectionError("Connection aborted: dockerd restarting"), "engine_unreachable", True),
    ("create_container", docker.errors.APIError("500 Server Error", explanation='could not select device driver ""'),
     "unknown", False),
])
def test_engine_down_and_image_missing(cell_op, where, error, reason, transient):
    op, ctx, cell, client, _ = cell_op(0)
    getattr(client, where).side_effect = error
    exc = _fails(op, ctx)
    assert exc.failure.reason == reason and isinstance(exc, CellFailed) is transient
    assert _record(cell)["reason"] == reason and _no_leases_held()
    assert "attempt 1" in str(exc)  # never "attempt 0"


def test_no_dataset_check_result_is_dataset_missing(cell_op):
    op, ctx, cell, client, _ = cell_op(0)
    op.dataset = None
    exc = _fails(op, ctx)
    assert exc.failure.reason == "dataset_missing" and isinstance(exc, CellFailedPermanently)
    assert _record(cell)["stage"] == "begin"


def test_the_image_is_tagged_by_its_digest_and_its_packages_read_once(cell_op):
    """The first cell on an image reads its package list in a short container of the image (no
    network) and keeps it by digest; every cell's spec names the tag that runs the image again."""
    from scalebench.cell.images import PACKAGES_COMMAND

    packages = {"python": {"torch": "2.13.0"}, "debian": {"libc6": "2.36"}, "cuda": {}}
    op, ctx, cell, client, _ = cell_op(0, writes_result=True, packages_kept=False)
    client.inspect_image.return_value = {"Id": "sha256:" + "ab" * 32, "RepoDigests": []}
    client.create_container.side_effect = lambda image, **kw: {"Id": "pkgs" if kw.get("command") == PACKAGES_COMMAND
                                                               else "c0ffee" * 8}
    client.logs.side_effect = lambda c, stdout=True, stderr=True: json.dumps(packages).encode() if stdout else b""
    op.execute(ctx)
    repo = op.image.split(":")[0]
    client.tag.assert_called_with("sha256:" + "ab" * 32, repo, "sha256-abababababab")
    spec = json.loads((attempt_dir(cell, 1) / "cell.json").read_text())
    assert spec["provenance"]["image_ref"] == f"{repo}:sha256-abababababab"
    kept = Store().image_packages("sha256:" + "ab" * 32)
    assert kept["packages"] == packages and kept["ref"] == f"{repo}:sha256-abababababab"
    assert Store().image_packages(f"{repo}:sha256-abababababab")["digest"] == "sha256:" + "ab" * 32
    pkg_calls = [c for c in client.create_container.call_args_list if c.kwargs.get("command") == PACKAGES_COMMAND]
    assert len(pkg_calls) == 1 and pkg_calls[0].kwargs["network_disabled"] is True
    # a second cell on the same image reads nothing again; a registry digest is its reference
    client.inspect_image.return_value = {"Id": "sha256:" + "ab" * 32, "RepoDigests": [f"{repo}@sha256:" + "cd" * 32]}
    ctx["ti"].try_number = 2
    op.execute(ctx)
    assert len([c for c in client.create_container.call_args_list if c.kwargs.get("command") == PACKAGES_COMMAND]) == 1
    assert json.loads((attempt_dir(cell, 2) / "cell.json").read_text())["provenance"]["image_ref"] == \
        f"{repo}@sha256:" + "cd" * 32


def test_a_package_list_that_cannot_be_read_does_not_fail_the_cell(cell_op):
    op, ctx, cell, client, _ = cell_op(0, writes_result=True, packages_kept=False)
    client.logs.return_value = b"not json"
    assert op.execute(ctx)["attempt"] == 1
    assert Store().image_packages("sha256:1mage") is None


def test_a_retry_is_a_new_attempt_folder(cell_op):
    op, ctx, cell, client, _ = cell_op(0, writes_result=True)
    ctx["ti"].try_number = 2
    assert op.execute(ctx)["attempt"] == 2
    assert (attempt_dir(cell, 2) / "metrics.json").exists() and not attempt_dir(cell, 1).exists()


def test_the_providers_host_parameters_reach_the_container_its_record_and_repro(cell_op):
    """A GPU host's NCCL settings given as the docker provider's parameters (ipc_mode, a memlock
    ulimit) start the cell's container, are kept in container.json and come back in repro's docker run."""
    from docker.types import Ulimit

    from scalebench.tools.repro import HOST_FLAGS, docker_run

    given = {"ipc_mode": "host", "ulimits": [Ulimit(name="memlock", soft=-1, hard=-1)], "mem_limit": "8g",
             "network_mode": "none", "cap_add": ["IPC_LOCK"], "dns": ["10.0.0.2"], "extra_hosts": {"nfs": "10.0.0.3"},
             "privileged": True}
    op, ctx, cell, client, _ = cell_op(0, writes_result=True, **given)
    op.execute(ctx)
    assert {k: client.create_host_config.call_args.kwargs[k] for k in given} == given
    record = json.loads((attempt_dir(cell, 1) / "container.json").read_text())
    assert set(record["host_options"]) == set(given) <= set(HOST_FLAGS)
    line = " ".join(docker_run(record, "/tmp/new"))
    for flag in ("--ipc host", "--ulimit memlock=-1:-1", "--memory 8g", "--network none", "--cap-add IPC_LOCK",
                 "--dns 10.0.0.2", "--add-host nfs:10.0.0.3", "--privileged"):
        assert flag in line
    plain, *_ = cell_op(0)
    assert plain.host_options() == {}  # none by default: the engine's defaults


def test_pinned_cores_go_into_the_host_config(cell_op):
    op, ctx, cell, client, _ = cell_op(0, writes_result=True, host_update={"device_ids": ["0", "1"], "cpus": [0, 1]})
    op.execute(ctx)
    assert client.create_host_config.call_args.kwargs["cpuset_cpus"] == "0"
    assert client.create_container.call_args.kwargs["host_config"] is client.create_host_config.return_value


def test_an_unforeseen_error_still_leaves_a_record(cell_op, monkeypatch):
    op, ctx, cell, client, _ = cell_op(0)
    monkeypatch.setattr("scalebench.orchestration.cell_run.settings", mock.Mock(side_effect=KeyError("threads")))
    exc = _fails(op, ctx)
    assert exc.failure.reason == "unknown" and "failed at spec: unknown" in str(exc) and "KeyError" in str(exc)
    assert _no_leases_held()


def test_the_execution_timeout_backstop_stops_the_container_before_freeing_the_devices(cell_op):
    from airflow.sdk.exceptions import AirflowTaskTimeout

    op, ctx, cell, client, _ = cell_op(0)
    held_at_stop = []
    client.stop.side_effect = lambda *a, **k: held_at_stop.append(len(LeaseManager().holders()))
    client.wait.side_effect = AirflowTaskTimeout()
    with pytest.raises(AirflowTaskTimeout):
        op.execute(ctx)
    assert held_at_stop == [1]  # the devices were still leased while their container stopped
    assert _record(cell)["reason"] == "timeout" and "execution_timeout (backstop)" in _record(cell)["message"]
    assert _no_leases_held()


def test_an_attempt_lost_with_its_worker_gets_its_record_on_the_retry(cell_op):
    """A Celery worker killed mid-cell writes nothing; its retry records what happened to it,
    so the store shows a failed attempt with a reason, not an unvalidated result."""
    op, ctx, cell, client, _ = cell_op(0, ["step 1"], writes_result=True)
    lost = attempt_dir(cell, 1)
    lost.mkdir(parents=True)
    (lost / "cell.json").write_text("{}")
    (lost / "metrics.json").write_text(json.dumps(sample_contract(cell)))  # its orphaned container finished
    ctx["ti"].try_number = 2
    op.execute(ctx)
    record = _record(cell, 1)
    assert record["reason"] == "worker_lost" and record["transient"] and record["attempt"] == 1
    assert "retried as attempt 2" in record["message"]
    assert json.loads((attempt_dir(cell, 2) / "validation.json").read_text())["success"]  # validated in its task
    ctx["ti"].try_number = 3  # an attempt with a verdict (validated, or its own failure.json) is left alone
    op.execute(ctx)
    assert not (attempt_dir(cell, 2) / "failure.json").exists() and _record(cell, 1) == record
    counts = record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    assert counts["failed"] == 1 and counts["valid"] == 2


TORCHRUN_TAIL = """/opt/venv/bin/python3: No module named trainers.unet_voc
E1130 05:58:49.480000 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 9) of binary: /opt/venv/bin/python3
Traceback (most recent call last):
  File "/opt/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
trainers.unet_voc FAILED
------------------------------------------------------------
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================""".splitlines()


@pytest.mark.parametrize("lines, detail", [
    (TORCHRUN_TAIL, "last output line: /opt/venv/bin/python3: No module named trainers.unet_voc"),
    (["step 3", "scalebench: trainer failed: RuntimeError: cell asked for 2 devices", "Traceback (most recent call last):",
      "RuntimeError: cell asked for 2 devices"], "RuntimeError: cell asked for 2 devices"),
    (["step 3", "Segmentation fault in libfoo", ""], "last output line: Segmentation fault in libfoo"),
    ([], "last output line: no output"),
])
def test_an_unknown_failure_names_the_cause_not_the_launchers_summary(lines, detail):
    from scalebench.cell.failures import classify

    assert classify(1, lines).detail == detail


def test_a_result_that_fails_validation_fails_its_cell_and_is_stored_invalid(cell_op):
    """Validation runs inside the cell's task: a result the schema allows but the GX suite does not
    (here 2 ranks reported by a 1-GPU cell) fails the task at once (not retried), with the
    expectation and value in its first error line; the store keeps it as invalid."""
    op, ctx, cell, client, notes_set = cell_op(0, ["step 1"], writes_result=True)

    def start(_id):
        doc = sample_contract(cell)
        doc["devices"]["world_size"] = 2
        (attempt_dir(cell, 1) / "metrics.json").write_text(json.dumps(doc))

    client.start.side_effect = start
    exc = _fails(op, ctx)
    assert isinstance(exc, CellFailedPermanently) and exc.failure.reason == "validation_failed"
    assert str(exc).startswith("cell g1-fp32-e3-r1 (1 GPU · fp32 · 3 epochs · repeat 1) attempt 1 failed: validation_failed, exit code 0: ")
    assert "column=world_size, min_value=1.0, max_value=1.0) got [2]" in str(exc)
    assert notes_set == [str(exc)]
    verdict = json.loads((attempt_dir(cell, 1) / "validation.json").read_text())
    assert verdict["success"] is False and "world_size" in verdict["message"]
    counts = record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    assert counts["invalid"] == 1 and counts["not_valid"] == ["1 GPU · fp32 · 3 epochs · repeat 1: invalid (validation_failed)"]
    assert _no_leases_held()


def test_a_container_left_by_an_earlier_attempt_is_removed_before_the_next_starts(cell_op):
    """An engine restart stops a cell's container before its attempt can remove it; the retry
    removes it (only stopped containers of this cell) before creating its own."""
    op, ctx, cell, client, _ = cell_op(0, ["step 1"], writes_result=True)
    client.containers.return_value = [{"Id": "deadbeef" * 8}]
    op.execute(ctx)
    filters = client.containers.call_args.kwargs["filters"]
    assert filters == {"label": f"org.scalebench.cell={cell['key']}", "status": ["created", "exited", "dead"]}
    removed = [c.args[0] for c in client.remove_container.call_args_list]
    assert removed == ["deadbeef" * 8, "c0ffee" * 8]  # the leftover first, then this attempt's own


def _reclaim_during_run(client, cell):
    """While the container 'runs': another decider reclaims the cell's lease (its heartbeat aged)."""
    from sqlalchemy import update

    from scalebench.store.lease_tables import DeviceLeaseRow

    def wait(*_a, **_k):
        mgr = LeaseManager()
        with mgr.engine.begin() as conn:
            conn.execute(update(DeviceLeaseRow).values(heartbeat_at=0.0))
        mgr.stop_containers = lambda lease_id: []
        mgr.acquire(Configs().fleet.host("local"), 4, "next-cell").release()
        return {"StatusCode": 0}

    client.wait.side_effect = wait


def test_a_result_made_after_the_lease_was_reclaimed_is_lease_lost_never_valid(cell_op):
    op, ctx, cell, client, _ = cell_op(0, ["step 1"], writes_result=True)
    _reclaim_during_run(client, cell)
    exc = _fails(op, ctx)
    assert isinstance(exc, CellFailed) and exc.failure.reason == "lease_lost" and exc.failure.transient
    assert "attempt 1 failed: lease_lost, exit code 0 (transient): its devices were reclaimed" in str(exc)
    assert not (attempt_dir(cell, 1) / "validation.json").exists()
    record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    [stored] = Store().cells()
    assert stored["status"] == "failed" and stored["attempts"][0]["reason"] == "lease_lost"


def test_a_lost_lease_stops_the_container_at_once(cell_op):
    op, ctx, cell, client, _ = cell_op(0, ["step 1"])
    stops = []
    client.stop.side_effect = lambda cid, timeout: stops.append(timeout)

    def wait(*_a, **_k):
        op.cell_run.lease_held.lost = None
        op.cell_run.lease_held._renewed -= op.cell_run.lease_held.manager.ttl_s + 1  # a whole TTL without a renewal
        op.cell_run.lease_held.manager = mock.Mock(ttl_s=op.cell_run.lease_held.manager.ttl_s, heartbeat=mock.Mock(side_effect=OSError("down")))
        with pytest.raises(Exception, match="no heartbeat reached the results database"):
            op.cell_run.lease_held.confirm()
        return {"StatusCode": 137}

    client.wait.side_effect = wait
    exc = _fails(op, ctx)
    assert exc.failure.reason == "lease_lost" and stops == [0]  # no grace: its devices may be handed on


def test_a_replayed_try_number_gets_its_own_folder_and_both_attempts_are_kept(cell_op, tmp_path):
    """A deleted and re-created run (or a second `dags test` of one date) starts its tries at 1
    again: the second try 1 becomes attempt 2, and attempt 1's files are untouched."""
    from scalebench.orchestration.cell_operator import CellDockerOperator

    op, ctx, cell, client, _ = cell_op(0, ["step 1"], writes_result=True)
    first = op.execute(ctx)
    before = {p.name: p.read_bytes() for p in attempt_dir(cell, 1).iterdir()}
    again = CellDockerOperator(task_id="probe", cell=cell, dataset=op.dataset, benchmark_id="probe", host_name="local",
                               image=op.image)
    again.hook = op.hook
    second = again.execute(ctx)  # the same try number, 1
    assert (first["attempt"], second["attempt"]) == (1, 2)
    assert {p.name: p.read_bytes() for p in attempt_dir(cell, 1).iterdir()} == before
    task = json.loads((attempt_dir(cell, 2) / "task.json").read_text())
    assert task == {"dag_id": cell["dag_id"], "run_id": cell["run_id"], "task_id": "probe", "map_index": 0,
                    "try_number": 1, "attempt": 2}
    record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    [stored] = Store().cells()
    assert [(a["attempt"], a["status"], a["try_number"]) for a in stored["attempts"]] == [(1, "valid", 1), (2, "valid", 1)]
    assert stored["figure"]["attempt"] == 2  # the newest valid attempt is the figure


def test_a_contract_of_another_cell_is_refused_naming_both(cell_op):
    from tests.support.samples import sample_cell

    other = sample_cell(gpus=1, repeat=2, benchmark="probe", dag_id="scalebench_probe")
    op, ctx, cell, client, _ = cell_op(0, ["step 1"], writes_result=True, writes_for=other)
    exc = _fails(op, ctx)
    assert exc.failure.reason == "contract_missing_or_invalid"
    assert f"the contract names cell key {other['key']!r} (the folder's is {cell['key']!r})" in str(exc)


def _events(cell, ranks_done, world):
    """The trainer's events.jsonl in the newest attempt: every rank started, `ranks_done` logged run_stop."""
    number, folder = cell_attempts(cell)[-1]
    lines = [{"key": "run_start", "rank": r, "world_size": world} for r in range(world)]
    lines += [{"key": "run_stop", "value": "success", "rank": r, "world_size": world} for r in ranks_done]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))


@pytest.mark.parametrize("exit_code, lines, world", [
    (1, ["run_stop success", "terminate called without an active exception",
         "E1205 20:00:01.1 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 1",
         "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 11)"], 2),
    (134, ["run_stop success", "Fatal Python error: Aborted"], 1),   # one process, no launcher
])
def test_a_crash_after_every_ranks_success_leaves_the_cell_valid_with_the_crash_recorded(cell_op, exit_code, lines,
                                                                                           world):
    op, ctx, cell, client, notes_set = cell_op(exit_code, lines, writes_result=True)
    trainer_writes = client.start.side_effect
    client.start.side_effect = lambda _id: (trainer_writes(_id), _events(cell, range(world), world))
    summary = op.execute(ctx)  # not raised: the cell is valid and not retried
    folder = attempt_dir(cell, 1)
    crash = json.loads((folder / "teardown.json").read_text())
    assert crash["reason"] == "teardown_crash" and crash["exit_code"] == exit_code
    assert " attempt 1 valid, then crashed at teardown: teardown_crash" in crash["message"]
    assert ("rank 1 ended by SIGABRT" if world == 2 else "the main process ended by SIGABRT") in crash["message"]
    assert summary["teardown_crash"] == crash["message"] and notes_set == [crash["message"]]
    assert not (folder / "failure.json").exists() and json.loads((folder / "validation.json").read_text())["success"]
    counts = record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    assert counts["valid"] == 1 and counts["failed"] == 0
    [stored] = Store().cells(key=cell["key"])
    [attempt] = stored["attempts"]  # what `scalebench results` and the report read
    assert (attempt["status"], attempt["reason"], attempt["message"]) == ("valid", "teardown_crash", crash["message"])
    from scalebench.report.exports import result_row

    assert result_row(stored)["detail"].endswith(f"images/s; then teardown_crash, exit code {exit_code}")
    assert [f["figure"]["teardown"] for f in Store().figures()] == [crash["message"]]  # what the report lists


def test_a_crash_before_every_ranks_success_is_a_failure_as_before(cell_op):
    op, ctx, cell, client, notes_set = cell_op(1, ["terminate called without an active exception",
                                                   "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 11)"],
                                               writes_result=True)
    trainer_writes = client.start.side_effect
    client.start.side_effect = lambda _id: (trainer_writes(_id), _events(cell, [0], 2))  # rank 1 never finished
    err = _fails(op, ctx)
    assert err.failure.reason == "unknown" and not (attempt_dir(cell, 1) / "teardown.json").exists()
    assert _record(cell)["reason"] == "unknown"
