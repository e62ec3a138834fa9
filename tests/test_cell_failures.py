"""Failure classification against the real Docker engine, through CellDockerOperator.execute."""
import json
import time

import docker
import pytest
import yaml

from scalebench.failures import classify
from scalebench.operators import CellDockerOperator, CellFailed, CellFailedPermanently
from tests.conftest import CONFIGS, requires_docker, sample_cell

IMAGE = "scalebench/tensorflow:cpu"


class FakeTI:
    def __init__(self, dataset, try_number=1):
        self.try_number, self.dataset, self.pushed = try_number, dataset, {}

    def xcom_pull(self, task_ids=None, map_indexes=None, key="return_value"):
        return self.dataset if task_ids == "check_dataset" else None

    def xcom_push(self, key, value):
        self.pushed[key] = value


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """A benchmark 'probe' whose entrypoint is a shell snippet, in a copy of the configs."""

    def make(script: str, timeout_minutes: float = 2.0, **op_kwargs):
        tree = tmp_path / "configs"
        (tree / "benchmarks").mkdir(parents=True, exist_ok=True)
        (tree / "fleet.yaml").write_text((CONFIGS / "fleet.yaml").read_text())
        doc = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
        doc.update(id="probe", entrypoint=["sh", "-c", script])
        doc["profiles"]["smoke"]["cell_timeout_minutes"] = timeout_minutes
        (tree / "benchmarks" / "probe.yaml").write_text(yaml.safe_dump(doc))
        monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
        data = tmp_path / "data"
        data.mkdir(exist_ok=True)
        dataset = {"root": str(data), "format": "cifar10-python", "name": "cifar10", "fingerprint": "sha256:0"}
        cell = sample_cell(gpus=1, benchmark="probe", dag_id="scalebench_probe")
        op = CellDockerOperator(task_id="probe", cell=cell, benchmark_id="probe", host_name="local", image=IMAGE,
                                **op_kwargs)
        return op, {"ti": FakeTI(dataset)}, cell

    return make


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
    assert time.monotonic() - t < 30
    assert exc.failure.reason == "timeout" and "cell timeout of 3s" in str(exc)
    assert exc.logs == ["started"]
    assert _no_containers_left(cell)


@requires_docker
def test_nccl_like_error_is_a_transient_communication_error_with_its_output_tail(probe):
    op, ctx, cell = probe("for i in $(seq 1 80); do echo step $i; done; "
                          "echo 'RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error' >&2; exit 1")
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailed) and not isinstance(exc, CellFailedPermanently)
    assert exc.failure.reason == "communication_error" and exc.failure.transient
    assert str(exc).startswith("cell g1-e3-r1 (1 GPU · 3 epochs · repeat 1) attempt 1 failed: communication_error, "
                               "exit code 1 (will retry)")
    failure = json.loads((op_attempt_dir(cell) / "failure.json").read_text())
    assert len(failure["output_tail"]) == 50  # stdout and stderr interleave freely; the error is in the tail
    assert any(line.startswith("RuntimeError: NCCL error") for line in failure["output_tail"])


@requires_docker
def test_exit_zero_without_a_result_is_contract_missing(probe):
    op, ctx, cell = probe("echo training done")
    exc = _run(op, ctx)
    assert isinstance(exc, CellFailedPermanently) and exc.failure.reason == "contract_missing_or_invalid"
    assert "metrics.json: file missing" in str(exc) and "exit code 0" in str(exc)


@requires_docker
def test_missing_image_is_its_own_class(probe):
    op, ctx, cell = probe("true")
    op.image = "scalebench/does-not-exist:cpu"
    exc = _run(op, ctx)
    assert exc.failure.reason == "image_missing" and "make images" in str(exc)


def op_attempt_dir(cell):
    from scalebench import runs

    return runs.attempt_dir(cell, 1)


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
