"""A benchmark DAG's failures end to end: refused trigger input, a failing cell, a missing dataset."""
import json
import sqlite3

import pytest

from tests.support.airflow_home import BIN, airflow_env, api_get, api_server, prepare_homes, run
from tests.support.engine import free_port, requires_docker
from tests.support.nights import run_steps

DAG_ID = "scalebench_resnet50_keras_cifar10"


@requires_docker
def test_bad_trigger_input_is_refused_before_anything_runs(tmp_path):
    env = airflow_env(tmp_path, ("resnet50_keras_cifar10",))
    prepare_homes(env)
    rc, log = run([BIN / "airflow", "dags", "test", DAG_ID, "-c", json.dumps({"gpu_counts": [5]})], env, 300)
    assert rc != 0 and "Invalid input for param gpu_counts: 5 is not one of [1, 2, 3, 4]" in log, log[-3000:]
    assert not (tmp_path / "results").exists()


@requires_docker
@pytest.mark.slow
def test_a_failing_cell_fails_alone_and_is_reported_with_its_class(tmp_path):
    """The 1-GPU cell is valid (the kit's hold trainer: the ResNet50 DAG test trains for real); the
    2-GPU cell dies with an NCCL-like error. The rest of the DAG runs, the run ends failed
    (check_cells), and the report lists the cell with its class. Both DAGs run in one process."""
    import yaml

    from tests.support import CONFIGS, new_config_tree

    tree = tmp_path / "configs"
    new_config_tree(tree)
    doc = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    doc.update(id="flaky", retries=0, entrypoint=["sh", "-c", "[ {gpus} = 1 ] && exec python -m scalebench_kit.hold "
                                                   "--epoch-seconds 0.5; "
                                                   "echo 'NCCL error: unhandled system error' >&2; exit 1"])
    doc["profiles"]["smoke"]["epochs"] = [1]  # the 1-GPU cell only has to be valid beside the failing one
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
    conf = json.dumps({"gpu_counts": [1, 2], "profile": "smoke"})
    with api_server(env, port):
        [(rc, log), (det_rc, det_log)] = run_steps(env, [["dags", "test", f"scalebench_{b}", "-c", conf]
                                                         for b in ("flaky", "nodata")])
        (tmp_path / "dags-test.log").write_text(log)
        (tmp_path / "dags-test-nodata.log").write_text(det_log)
        ti = api_get(port, "ops", "s3cret", "/api/v2/dags/scalebench_flaky/dagRuns/~/taskInstances")
        det_ti = api_get(port, "ops", "s3cret", "/api/v2/dags/scalebench_nodata/dagRuns/~/taskInstances")
    assert rc == det_rc == 1  # both runs fail: a cell, a dataset
    assert "state=failed" in log, log[-4000:]
    reason = ("cell g2-fp32-e1-r1 (2 GPUs · fp32 · 1 epoch · repeat 1) attempt 1 failed: communication_error, exit code 1 "
              "(transient): collective communication failed (NCCL error: unhandled system error)")
    assert reason in log
    # the reason line comes right after the folded container output, then the output tail
    after = log[log.index("::endgroup::", log.index("NCCL error: unhandled system error")):]
    assert after.index(reason) < after.index("last 1 lines of the container output")
    failed = sorted((t["task_id"], t["map_index"]) for t in ti["task_instances"] if t["state"] == "failed")
    assert failed == [("check_cells", -1), ("local_2gpu.train", 0)]
    [failed_ti] = [t for t in ti["task_instances"] if t["task_id"] == "local_2gpu.train"]
    assert failed_ti["task_id"] == "local_2gpu.train" and failed_ti["note"] == reason
    assert failed_ti["rendered_map_index"] == "2 GPUs · fp32 · 1 epoch · repeat 1"
    assert "1 of 2 cells have no valid result: 2 GPUs · fp32 · 1 epoch · repeat 1: failed (communication_error)" in log
    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        states = dict(db.execute("select task_id || ':' || map_index, state from task_instance").fetchall())
    assert states["local_1gpu.train:0"] == states["record:-1"] == "success"
    assert states["local_2gpu.train:0"] == states["check_cells:-1"] == "failed"
    rc, out = run([BIN / "scalebench", "report", "--out", str(tmp_path / "report")], env, 120)
    assert rc == 0, out
    text = (tmp_path / "report" / "report.md").read_text()
    assert "- flaky (fp32): 2 GPUs · fp32 · 1 epoch · repeat 1: failed (communication_error)" in text
    assert "| flaky | fp32 | train time | – | – | 100.0% |" in text  # precision and recall verdicts need the 2-GPU cell

    # a failed task before the cells: every planned cell is failed with its reason, and its note says why
    [check] = [t for t in det_ti["task_instances"] if t["task_id"] == "check_dataset_local"]
    assert check["state"] == "failed" and check["note"].startswith(
        "check_dataset failed (dataset_missing): host 'local' has no data_root in the fleet config; profile 'smoke' "
        "of nodata needs the real cifar10 dataset"), check["note"]
    assert check["note"].endswith("2 planned cells recorded as failed")
    assert ("2 of 2 cells have no valid result: 1 GPU · fp32 · 3 epochs · repeat 1: failed (dataset_missing); "
            "2 GPUs · fp32 · 3 epochs · repeat 1: failed (dataset_missing)") in det_log, det_log[-3000:]
    rc, out = run([BIN / "scalebench", "results", "--benchmark", "nodata"], env, 120)
    rows = [line for line in out.splitlines()[1:] if line.split()[1:2] == ["nodata"]]  # night, benchmark, ...
    assert rc == 0 and len(rows) == 2, out
    assert all(" failed " in r and " 1 of 1 " in r and "dataset_missing, exit code none: " in r for r in rows), out
    assert "missing" not in out.replace("dataset_missing", "")
