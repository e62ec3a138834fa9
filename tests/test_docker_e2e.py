"""The real thing: `airflow dags test` of the real DAG, cells in the real Keras image on Docker."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, api_get, api_server, docker_ready, free_port, requires_docker

BIN = Path(sys.executable).parent
DAG_ID = "scalebench_resnet50_keras_cifar10"


def airflow_env(home: Path) -> dict:
    return {**os.environ, "SCALEBENCH_HOME": str(home), "AIRFLOW_HOME": str(home / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "GX_ANALYTICS_ENABLED": "false"}


def run(cmd, env, timeout=900):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return out.returncode, out.stdout + out.stderr


def prepare_homes(env):
    """What `make airflow-db` does: Airflow's metadata DB, the results store, the fleet's pools."""
    for cmd in (["airflow", "db", "migrate"], ["scalebench", "db", "upgrade"], ["scalebench", "pools", "--apply"]):
        rc, log = run([BIN / cmd[0], *cmd[1:]], env, 300)
        assert rc == 0, log[-3000:]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("e2e")
    env = airflow_env(home)
    prepare_homes(env)
    conf = {"gpu_counts": [1, 2], "repeats": 1, "profile": "smoke", "seed": 0}
    rc, log = run([BIN / "airflow", "dags", "test", DAG_ID, "-c", json.dumps(conf)], env)
    (home / "dags-test.log").write_text(log)
    assert rc == 0 and "state=success" in log and "all 2 cells valid" in log, log[-5000:]
    return home, env, log


@requires_docker
@pytest.mark.slow
def test_task_logs_carry_no_migration_chatter_and_no_gpu_probe(smoke_run):
    _, _, log = smoke_run
    assert "Context impl" not in log and "Will assume non-transactional DDL" not in log
    assert "cuInit" not in log and "CUDA" not in log


@requires_docker
@pytest.mark.slow
def test_smoke_cells_train_the_real_resnet50_on_1_and_2_devices(smoke_run):
    home, env, _ = smoke_run
    contracts = sorted((home / "results" / DAG_ID).glob("*/g*/attempt-1/metrics.json"))
    assert [p.parent.parent.name for p in contracts] == ["g1-e3-r1", "g2-e3-r1"]
    for path in contracts:
        doc = json.loads(path.read_text())
        n = doc["cell"]["gpus"]
        assert doc["devices"]["world_size"] == n == doc["devices"]["count"]
        assert doc["training"]["global_batch"] == doc["training"]["per_device_batch"] * n
        assert doc["model"]["architecture"] == "ResNet50" and doc["model"]["strategy"] == "MirroredStrategy"
        assert 23.5e6 < doc["model"]["parameters"] < 23.7e6  # real ResNet50, 10 classes
        assert doc["loss_curve"][-1] < doc["loss_curve"][0], doc["loss_curve"]  # it learns
        assert doc["metrics"]["recall"] >= 0.5, doc["metrics"]  # and precise BN lets evaluation show it
        assert doc["provenance"]["image_digest"].startswith("sha256:")
        assert doc["data"]["fingerprint"].startswith("sha256:")
        assert doc["provenance"]["resolved_config"]["profile"] == "smoke"
        assert doc["timing"]["warmup_s"] > 0 and doc["timing"]["train_s"] > 0 and len(doc["timing"]["epoch_s"]) == 3
        b = doc["timing"]["breakdown"]  # one process drives every replica; TF hides the all-reduce
        assert b["ranks"] == 1 and b["sync_s"] is None and "not exposed" in b["method"]["sync_s"]
        assert b["data_wait_s"] is not None and 0 <= b["other_s"] <= 0.10 * b["step_s"], b
        assert b["step_s"] == pytest.approx(doc["timing"]["train_s"], abs=1e-3)
        events = [json.loads(line)["key"] for line in (path.parent / "events.jsonl").read_text().splitlines()]
        assert events[0] == "run_start" and events[-1] == "run_stop" and events.count("epoch_stop") == 3
        assert events.index("eval_start") < events.index("precise_bn") < events.index("eval_stop")
        assert json.loads((path.parent / "validation.json").read_text())["success"]


@requires_docker
@pytest.mark.slow
def test_the_run_is_recorded_named_and_reported(smoke_run):
    home, env, _ = smoke_run
    rc, out = run([BIN / "scalebench", "results", "--json"], env, 120)
    assert rc == 0, out
    cells = json.loads(out[out.index("["):])
    assert [(c["gpus"], c["status"]) for c in cells] == [(1, "valid"), (2, "valid")]
    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        names = dict(db.execute("select task_id, rendered_map_index from task_instance where task_id like '%.train' "
                                "and map_index = 0").fetchall())
    assert names == {"local_1gpu.train": "1 GPU · 3 epochs · repeat 1", "local_2gpu.train": "2 GPUs · 3 epochs · repeat 1"}
    rc, out = run([BIN / "scalebench", "report", "--out", str(home / "report")], env, 120)
    assert rc == 0, out
    text = (home / "report" / "report.md").read_text()
    # one repeat: accuracy verdicts are honest about it
    assert "| resnet50_keras_cifar10 | inconclusive at 2 | inconclusive at 2 | 100.0% |" in text


@requires_docker
def test_bad_trigger_input_is_refused_before_anything_runs(tmp_path):
    env = airflow_env(tmp_path)
    prepare_homes(env)
    rc, log = run([BIN / "airflow", "dags", "test", DAG_ID, "-c", json.dumps({"gpu_counts": [5]})], env, 300)
    assert rc != 0 and "Invalid input for param gpu_counts: 5 is not one of [1, 2, 3, 4]" in log, log[-3000:]
    assert not (tmp_path / "results").exists()


@requires_docker
@pytest.mark.slow
def test_a_failing_cell_fails_alone_and_is_reported_with_its_class(tmp_path):
    """1 GPU trains for real; the 2-GPU cell dies with an NCCL-like error. The rest of the DAG
    runs, the run ends failed (check_cells), and the report lists the cell with its class."""
    import yaml

    from tests.conftest import CONFIGS

    tree = tmp_path / "configs"
    (tree / "benchmarks").mkdir(parents=True)
    (tree / "fleet.yaml").write_text((CONFIGS / "fleet.yaml").read_text())
    doc = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    doc.update(id="flaky", retries=0, entrypoint=["sh", "-c", "[ {gpus} = 1 ] && exec python -m trainers.resnet50_keras; "
                                                   "echo 'NCCL error: unhandled system error' >&2; exit 1"])
    (tree / "benchmarks" / "flaky.yaml").write_text(yaml.safe_dump(doc))
    # a benchmark whose real dataset is absent: its check_dataset fails before any cell starts
    doc = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    doc["id"] = "nodata"
    doc["profiles"]["smoke"]["synthetic_data"] = False
    (tree / "benchmarks" / "nodata.yaml").write_text(yaml.safe_dump(doc))
    home = tmp_path / "state"
    (tmp_path / "passwords.json").write_text(json.dumps({"ops": "s3cret"}))
    port = free_port()
    env = {**airflow_env(home), "SCALEBENCH_CONFIG_DIR": str(tree),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "ops:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
           "AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API": f"http://ops:s3cret@127.0.0.1:{port}"}
    prepare_homes(env)
    with api_server(env, port):
        rc, log = run([BIN / "airflow", "dags", "test", "scalebench_flaky", "-c",
                       json.dumps({"gpu_counts": [1, 2], "profile": "smoke"})], env)
        (tmp_path / "dags-test.log").write_text(log)
        ti = api_get(port, "ops", "s3cret", "/api/v2/dags/scalebench_flaky/dagRuns/~/taskInstances")
        rc, det_log = run([BIN / "airflow", "dags", "test", "scalebench_nodata", "-c",
                           json.dumps({"gpu_counts": [1, 2], "profile": "smoke"})], env)
        (tmp_path / "dags-test-nodata.log").write_text(det_log)
        det_ti = api_get(port, "ops", "s3cret", "/api/v2/dags/scalebench_nodata/dagRuns/~/taskInstances")
    assert "state=failed" in log, log[-4000:]
    reason = ("cell g2-e3-r1 (2 GPUs · 3 epochs · repeat 1) attempt 1 failed: communication_error, exit code 1 "
              "(transient): collective communication failed (NCCL error: unhandled system error)")
    assert reason in log
    # the reason line comes right after the folded container output, then the output tail
    after = log[log.index("::endgroup::", log.index("NCCL error: unhandled system error")):]
    assert after.index(reason) < after.index("last 1 lines of the container output")
    failed = sorted((t["task_id"], t["map_index"]) for t in ti["task_instances"] if t["state"] == "failed")
    assert failed == [("check_cells", -1), ("local_2gpu.train", 0)]
    [failed_ti] = [t for t in ti["task_instances"] if t["task_id"] == "local_2gpu.train"]
    assert failed_ti["task_id"] == "local_2gpu.train" and failed_ti["note"] == reason
    assert failed_ti["rendered_map_index"] == "2 GPUs · 3 epochs · repeat 1"
    assert "1 of 2 cells have no valid result: 2 GPUs · 3 epochs · repeat 1: failed (communication_error)" in log
    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        states = dict(db.execute("select task_id || ':' || map_index, state from task_instance").fetchall())
    assert states["local_1gpu.train:0"] == states["record:-1"] == "success"
    assert states["local_2gpu.train:0"] == states["check_cells:-1"] == "failed"
    rc, out = run([BIN / "scalebench", "report", "--out", str(tmp_path / "report")], env, 120)
    assert rc == 0, out
    text = (tmp_path / "report" / "report.md").read_text()
    assert "- flaky: 2 GPUs · 3 epochs · repeat 1: failed (communication_error)" in text
    assert "| flaky | – | – | 100.0% |" in text  # precision and recall verdicts need the 2-GPU cell

    # a failed task before the cells: every planned cell is failed with its reason, and its note says why
    [check] = [t for t in det_ti["task_instances"] if t["task_id"] == "check_dataset"]
    assert check["state"] == "failed" and check["note"].startswith(
        "check_dataset failed (dataset_missing): host 'local' has no data_root in the fleet config; profile 'smoke' "
        "of nodata needs the real cifar10 dataset"), check["note"]
    assert check["note"].endswith("2 planned cells recorded as failed")
    assert ("2 of 2 cells have no valid result: 1 GPU · 3 epochs · repeat 1: failed (dataset_missing); "
            "2 GPUs · 3 epochs · repeat 1: failed (dataset_missing)") in det_log, det_log[-3000:]
    rc, out = run([BIN / "scalebench", "results", "--benchmark", "nodata"], env, 120)
    assert rc == 0 and out.count("failed   dataset_missing, exit code none, attempt 1 of 1") == 2, out
    assert "missing" not in out.replace("dataset_missing", "")


requires_torch_image = pytest.mark.skipif(not docker_ready("scalebench/torch:cpu") and os.environ.get("CI") != "true",
                                          reason="needs a Docker engine and scalebench/torch:cpu (make images)")


@requires_torch_image
@pytest.mark.slow
def test_unet_trains_under_torchrun_ddp_on_1_and_2_devices_and_is_reported(tmp_path):
    """The real UNet DAG: VOC2007-format synthetic data, torchrun with DDP over gloo on 1 and 2
    CPU device slots, results validated by GX, recorded, and the UNet row in the report."""
    env = airflow_env(tmp_path)
    prepare_homes(env)
    dag = "scalebench_unet_torch_voc2007"
    rc, log = run([BIN / "airflow", "dags", "test", dag, "-c", json.dumps({"gpu_counts": [1, 2], "profile": "smoke"})], env)
    (tmp_path / "dags-test.log").write_text(log)
    assert rc == 0 and "all 2 cells valid" in log, log[-5000:]
    contracts = sorted((tmp_path / "results" / dag).glob("*/g*/attempt-1/metrics.json"))
    assert [p.parent.parent.name for p in contracts] == ["g1-e12-r1", "g2-e12-r1"]
    for path in contracts:
        doc = json.loads(path.read_text())
        n = doc["cell"]["gpus"]
        assert doc["devices"]["world_size"] == n and doc["system"]["backend"] == "gloo"
        assert doc["model"]["architecture"] == "UNet" and doc["model"]["strategy"] == "DistributedDataParallel"
        assert doc["training"]["global_batch"] == 8 * n and doc["timing"]["steps"] == 12 * (192 // (8 * n))
        assert doc["loss_curve"][-1] < doc["loss_curve"][0]
        assert doc["metrics"]["iou"] >= 0.5, doc["metrics"]  # background everywhere scores far below
        b = doc["timing"]["breakdown"]
        assert b["ranks"] == n and (b["sync_s"] > 0) == (n > 1) and b["other_s"] <= 0.10 * b["step_s"], b
        print(f"\n{n} device(s): mIoU {doc['metrics']['iou']:.3f}, train {doc['timing']['train_s']:.1f} s, "
              f"total {doc['timing']['total_s']:.1f} s")
    rc, out = run([BIN / "scalebench", "report", "--out", str(tmp_path / "report")], env, 120)
    assert rc == 0, out
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| unet_torch_voc2007 |" in text
    assert "- unet_torch_voc2007: sync is " in text, text  # the generated sentence on what grows with devices
    assert "| unet_torch_voc2007 | 2 |" in text.split("## Where a steady step goes")[1]
