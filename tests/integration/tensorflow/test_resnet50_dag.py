"""The real thing: `airflow dags test` of the real DAG, cells in the real Keras image on Docker."""
import json
import sqlite3

import pytest
from mlperf_logging.compliance_checker import mlp_parser
from scalebench_kit.names import MLLOG_KEYS

from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run
from tests.support.engine import requires_docker

DAG_ID = "scalebench_resnet50_keras_cifar10"
pytestmark = pytest.mark.timeout(900)  # the module's one `dags test` runs in the first test


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("e2e")
    env = {**airflow_env(home, ("resnet50_keras_cifar10",)), "SCALEBENCH_PROGRESS_EVERY_S": "1"}  # smoke cells train for seconds, not minutes
    prepare_homes(env)
    # fp32 only: bf16 (test_resnet50_trainer) is several times slower on a CPU without AVX512-BF16
    # profiled after the timed steps (profile_ops): the same run proves the figures and the window
    conf = {"gpu_counts": [1, 2], "repeats": 1, "profile": "smoke", "seed": 0, "profile_ops": True}
    rc, log = run([BIN / "airflow", "dags", "test", DAG_ID, "-c", json.dumps(conf)], env, 600)
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
    assert [p.parent.parent.name for p in contracts] == ["g1-fp32-e3-r1", "g2-fp32-e3-r1"]
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
        mllog, errors = mlp_parser.parse_file(str(path.parent / "mlperf.log"), ruleset="4.1.0")  # MLPerf's reader
        assert errors == [] and [ll.key for ll in mllog] == [MLLOG_KEYS[k][0] for k in events]
        assert json.loads((path.parent / "validation.json").read_text())["success"]
        p = doc["precision"]
        assert p["observed_dtype"] == "float32" and p["switches"]["dtype_policy"] == "float32", p
        print(f"\n{n} device(s) {p['requested']}: train {doc['timing']['train_s']:.1f} s, "
              f"{doc['timing']['images_per_s']:.1f} images/s")


@requires_docker
@pytest.mark.slow
def test_the_run_is_recorded_named_and_reported(smoke_run):
    home, env, _ = smoke_run
    rc, out = run([BIN / "scalebench", "results", "-o", "json"], env, 120)
    assert rc == 0, out
    cells = json.loads(out[out.index("["):])
    assert sorted((c["gpus"], c["precision"], c["status"]) for c in cells) == [(1, "fp32", "valid"), (2, "fp32", "valid")]
    with sqlite3.connect(home / "airflow" / "airflow.db") as db:
        names = dict(db.execute("select task_id, rendered_map_index from task_instance where task_id like '%.train' "
                                "and map_index = 0").fetchall())
    assert names == {"local_1gpu.train": "1 GPU · fp32 · 3 epochs · repeat 1", "local_2gpu.train": "2 GPUs · fp32 · 3 epochs · repeat 1"}
    rc, out = run([BIN / "scalebench", "report", "--out", str(home / "report")], env, 120)
    assert rc == 0, out
    text = (home / "report" / "report.md").read_text()
    # one repeat: accuracy verdicts are honest about it
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| resnet50_keras_cifar10 | ")
            and line.split(" | ")[2] == "train time"}  # the study's table: benchmark | dtype | timed by | ...
    assert sorted(rows) == ["fp32"], rows  # a row per precision in the study's table
    for p, line in rows.items():  # each verdict says what one repeat allows (a metric at 1.0 says nothing)
        verdicts = line.split(" | ")[3:-2]
        assert verdicts and all(v in ("inconclusive at 2", "uninformative") for v in verdicts), line
        assert line.split(" | ")[-2] == "100.0%", line


@requires_docker
@pytest.mark.slow
def test_the_trainers_progress_lines_are_in_the_task_log_outside_the_folded_output(smoke_run):
    import re

    _, _, log = smoke_run
    found = re.findall(r"scalebench progress: step (\d+) of (\d+) \(\d+%\), [\d.]+ images/s, .+ left", log)
    assert found and all(int(i) <= int(n) for i, n in found)
    lines = log.splitlines()
    for k, line in enumerate(lines):  # each one right after the fold closed, and the fold reopened after it
        if "scalebench progress: step" in line and "::group::" not in line:
            assert "::endgroup::" in lines[k - 1] and "::group::Container output, continued" in lines[k + 1], lines[k - 1:k + 2]


@requires_docker
@pytest.mark.slow
def test_each_cell_is_profiled_after_its_figures_through_tensorflows_profiler(smoke_run):
    """TensorFlow's profiler over the smoke profile's 2 window steps: its XPlane trace kept
    compressed beside the result, the ops read by TensorFlow's own converter, the summary stored
    and shown by `scalebench profile show`; two cells at different GPU counts are not diffed."""
    home, env, _ = smoke_run
    keys = []
    for path in sorted((home / "results" / DAG_ID).glob("*/g*/attempt-1/metrics.json")):
        doc = json.loads(path.read_text())
        keys.append(doc["cell"]["key"])
        events = [json.loads(line)["key"] for line in (path.parent / "events.jsonl").read_text().splitlines()]
        assert events.index("eval_stop") < events.index("profile_start") < events.index("profile_stop") < \
            events.index("run_stop")
        prof = doc["profile"]
        assert "why_not" not in prof, prof
        assert prof["steps"] == 2 and prof["step_s"] > 0 and prof["rank"] == 0 and prof["ops"], prof
        assert any("Conv2D" in o["name"] for o in prof["ops"]), [o["name"] for o in prof["ops"]]
        assert all(o["self_s"] > 0 and o["calls"] > 0 and 0 < o["share"] < 1.5 for o in prof["ops"]), prof["ops"]
        assert prof["traces"] and all((path.parent / t).stat().st_size > 0 and t.endswith(".xplane.pb.gz")
                                      for t in prof["traces"])
        assert doc["timing"]["steps"] == 3 * doc["epoch"]["steps_per_epoch"]  # no window step counted or timed
    rc, out = run([BIN / "scalebench", "profile", "show", keys[1], "-o", "json"], env, 120)
    assert rc == 0, out
    shown = json.loads(out[out.index("{"):])
    assert shown["cell"]["gpus"] == 2 and shown["profile"]["ops"][0]["name"] == \
        json.loads(sorted((home / "results" / DAG_ID).glob("*/g2*/attempt-1/metrics.json"))[0].read_text())[
            "profile"]["ops"][0]["name"]
    rc, out = run([BIN / "scalebench", "profile", "diff", keys[0], keys[1]], env, 120)
    assert rc == 2 and "a diff compares one benchmark at one GPU count" in out and "Traceback" not in out
