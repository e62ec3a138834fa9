"""Same-night rerun confirmation, end to end: one `airflow dags test` of a real benchmark DAG whose
cells (the kit's hold trainer) are deliberately slowed by 40 % against a seeded scheduled
history. At 1 GPU the reruns are slowed too: the flag is confirmed. At 2 GPUs only the flagged
cell was slow and its reruns are not: the flag is cleared."""
import datetime as dt
import json
import random
from pathlib import Path

import pytest

from scalebench.core.cells import plan
from scalebench.core.config import Configs
from tests.support.engine import requires_docker
from tests.support.samples import sample_cell, sample_contract
from tests.support.drill_configs import hold_benchmark, write_hold_configs
from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run

BENCH = "slowed"
DAG = f"scalebench_{BENCH}"
RERUNS = 3
HOLD_S = 4.0
HISTORY_NIGHTS = 20


def seed_history(store, configs_dir: Path, today: dt.date) -> dict[int, float]:
    """20 scheduled nights of the benchmark at its unslowed throughput (1 % noise); returns it per GPU count."""
    import os

    import docker

    os.environ["SCALEBENCH_CONFIG_DIR"] = str(configs_dir)
    try:
        configs = Configs()
        bench = configs.benchmark(BENCH)
        rng = random.Random(0)
        level = {}
        digest = docker.from_env().images.get(bench.images["cpu"]).id
        for i in range(HISTORY_NIGHTS, 0, -1):
            night = (today - dt.timedelta(days=i)).isoformat()
            for c in plan(bench, configs.fleet, profile="smoke", run_id=f"scheduled__{night}", gpu_counts=[1, 2],
                          run_type="scheduled", night=night):
                level[c["gpus"]] = c["global_batch"] / 1.0  # the hold trainer: one step of 1 s per global batch
                contract = sample_contract(sample_cell(c["gpus"], c["epochs"]))
                contract["provenance"].update(image=bench.images["cpu"], image_digest=digest)  # tonight's system
                contract["provenance"]["resolved_config"] = bench.resolved("smoke").summary(c["precision"])  # the same plan
                contract["system"].update(framework="none", framework_version="0")
                contract["timing"].update(images_per_s=level[c["gpus"]] * (1 + rng.gauss(0, 0.01)), train_s=HOLD_S)
                store.record_attempt(c, 1, "valid", contract=contract)
    finally:
        del os.environ["SCALEBENCH_CONFIG_DIR"]
    return level


@pytest.fixture(scope="module")
def rerun_run(tmp_path_factory):
    from scalebench.store.results import Store

    root = tmp_path_factory.mktemp("reruns")
    doc = hold_benchmark(BENCH, {(1, 2): HOLD_S, (2, 2): HOLD_S}, retries=0,
                         hold_args=("--test-slowdown", "1.4", "--test-slowdown-reruns", "1"))
    doc["confirm_reruns"] = RERUNS
    configs = write_hold_configs(root / "configs", {BENCH: doc})
    home = root / "state"
    env = {**airflow_env(home), "SCALEBENCH_CONFIG_DIR": str(configs)}
    prepare_homes(env)
    store = Store(f"sqlite:///{home / 'results.db'}")
    level = seed_history(store, configs, dt.datetime.now(dt.timezone.utc).date())
    rc, log = run([BIN / "airflow", "dags", "test", DAG, "-c", json.dumps({"gpu_counts": [1, 2], "profile": "smoke"})],
                  env, 900)
    (root / "dags-test.log").write_text(log)
    assert rc == 0 and "state=success" in log, log[-5000:]
    return store, level, log


@requires_docker
@pytest.mark.slow
def test_both_slowed_figures_are_flagged_and_rerun_three_times(rerun_run):
    store, _, log = rerun_run
    assert log.count(f"flagged, {RERUNS} reruns: {BENCH} ") == 2, log[-5000:]
    cells = store.cells(benchmark=BENCH)
    measured = {c["key"]: c for c in cells if c["role"] == "measure" and not c["run_id"].startswith("scheduled__")}
    reruns = [c for c in cells if c["role"] == "rerun"]
    assert len(reruns) == 2 * RERUNS and all(c["status"] == "valid" for c in reruns)
    assert {c["rerun_of"] for c in reruns} == set(measured)
    # placements are recorded; with free slots a rerun avoids its flagged cell's devices
    by_key = {k: c["figure"]["placement"]["device_ids"] for k, c in measured.items()}
    moved = [c for c in reruns if c["figure"]["placement"]["device_ids"] != by_key[c["rerun_of"]]]
    assert moved, [(c["label"], c["figure"]["placement"]) for c in reruns]


@requires_docker
@pytest.mark.slow
def test_slowed_reruns_confirm_the_flag_and_fast_reruns_clear_it(rerun_run):
    store, level, log = rerun_run
    confirmed = [line for line in log.splitlines() if "confirmed by reruns: " in line]
    cleared = [line for line in log.splitlines() if "cleared by reruns: " in line]
    assert len(confirmed) == 1 and f"{BENCH} 1 GPU fp32 images_per_s" in confirmed[0] and ": confirmed (" in confirmed[0]
    assert len(cleared) == 1 and f"{BENCH} 2 GPUs fp32 images_per_s" in cleared[0] and ": cleared (" in cleared[0]
    reruns = {c["gpus"]: [] for c in store.cells(benchmark=BENCH)}
    for c in store.cells(benchmark=BENCH):
        if c["role"] == "rerun":
            reruns[c["gpus"]].append(c["figure"]["images_per_s"])
    assert max(reruns[1]) < 0.8 * level[1]           # slowed: 1 / 1.4 of the baseline
    assert min(reruns[2]) > 0.95 * level[2]          # not slowed


@requires_docker
@pytest.mark.slow
def test_the_report_alerts_the_confirmed_figure_with_its_reruns_and_not_the_cleared_one(rerun_run):
    """The nightly report decides with the same reruns (had the run been the scheduled one)."""
    from scalebench.report.build import build
    from scalebench.report.model import Options

    store, _, _ = rerun_run
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    cells = [{**c, "run_type": "scheduled"} for c in store.figures(up_to_night=today)]
    rep = build(cells, today, Options(), [])
    assert len(rep.alerts) == 1 and f"{BENCH} 1 GPU fp32 images_per_s" in rep.alerts[0] and "reruns " in rep.alerts[0]
    [detail] = rep.alert_details
    assert detail["confirmed_by"] == "reruns" and len(detail["reruns"]) == RERUNS and detail["rerun_p"] < 0.01
    assert any(f"{BENCH} 2 GPUs fp32 images_per_s" in line for line in rep.cleared)
    assert not any("2 GPUs fp32 images_per_s" in a for a in rep.alerts)
    # the reruns are not part of the study's table
    [row] = rep.rows
    assert row.cells == 2
