"""A new image is the prime suspect, end to end with the kit's hold trainer.

Five tags of one image repository are built FROM the torch image: sbtest-1 and sbtest-2 as fast
as the base, sbtest-3 to sbtest-5 20 % slower (a setting baked into the image that the hold trainer
reads) and with one extra package installed from a local wheel.
- The benchmark's config moves from sbtest-2 to sbtest-3 (a new tag of the same repository): one
  `airflow dags test` against 20 seeded nights on sbtest-2. Its figure is flagged against the old
  baseline, the rerun step runs an A/B of both images on the host, *Changes tonight* says
  "regression (confirmed)" with the A/B's numbers and the package diff, and the alert goes out
  naming the operation the slower image planted (its hold steps spend the extra time in a matrix
  multiply): the A/B's last pair is profiled.
- `scalebench bisect` over the five tags names sbtest-3 in at most three steps.
"""
import datetime as dt
import json
import os
import random

import pytest

from scalebench.core.cells import plan
from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run
from tests.support.drill_configs import hold_benchmark, write_hold_configs
from tests.support.engine import requires_docker
from tests.support.samples import sample_cell, sample_contract
from tests.support.test_images import REPO, build_tag, remove_images

BENCH = "imaged"
DAG = f"scalebench_{BENCH}"
HOLD_S, STEP_S = 1.0, 0.25  # four steps of 0.25 s (two of them warm-up)
SLOW = 1.25                # a step takes 1.25 times as long: throughput 20 % lower
TAGS = {"sbtest-1": (1.0, False), "sbtest-2": (1.0, False), "sbtest-3": (SLOW, True), "sbtest-4": (SLOW, True),
        "sbtest-5": (SLOW, True)}
HISTORY_NIGHTS = 20


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    digests = {tag: build_tag(tag, slow, extra, root / tag) for tag, (slow, extra) in TAGS.items()}
    yield digests
    remove_images(list(digests.values()))


def seed_history(store, configs_dir, today: dt.date, good: str, digest: str, ref: str) -> float:
    """20 scheduled nights at 1 GPU on the good image (1 % noise); returns the level (images/s)."""
    from scalebench.core.config import Configs

    os.environ["SCALEBENCH_CONFIG_DIR"] = str(configs_dir)
    try:
        configs = Configs()
        bench = configs.benchmark(BENCH)
        rng = random.Random(0)
        level = None
        for i in range(HISTORY_NIGHTS, 0, -1):
            night = (today - dt.timedelta(days=i)).isoformat()
            for c in plan(bench, configs.fleet, profile="smoke", run_id=f"scheduled__{night}", gpu_counts=[1],
                          run_type="scheduled", night=night, repeats=3):
                level = c["global_batch"] / STEP_S
                contract = sample_contract(sample_cell(c["gpus"], c["epochs"]))
                contract["provenance"].update(image=good, image_ref=ref, image_digest=digest,
                                              resolved_config=bench.resolved("smoke").summary(c["precision"]))
                contract["system"].update(framework="none", framework_version="0")
                contract["timing"].update(images_per_s=level * (1 + rng.gauss(0, 0.01)), train_s=HOLD_S)
                store.record_attempt(c, 1, "valid", contract=contract)
    finally:
        del os.environ["SCALEBENCH_CONFIG_DIR"]
    return level


@pytest.fixture(scope="module")
def night_on_new_image(images, tmp_path_factory):
    from scalebench.cell.engine import Engine
    from scalebench.cell.images import keep_reference
    from scalebench.store.results import Store

    root = tmp_path_factory.mktemp("image-change")
    doc = hold_benchmark(BENCH, {(1, 2): HOLD_S}, retries=0, hold_args=("--step-seconds", str(STEP_S)))
    doc["images"] = {"cpu": f"{REPO}:sbtest-3", "gpu": f"{REPO}:sbtest-3"}  # the config moved to the new tag
    configs = write_hold_configs(root / "configs", {BENCH: doc})
    home = root / "state"
    env = {**airflow_env(home), "SCALEBENCH_CONFIG_DIR": str(configs)}
    prepare_homes(env)
    store = Store(f"sqlite:///{home / 'results.db'}")
    good = f"{REPO}:sbtest-2"
    ref = keep_reference(Engine(), good)  # as the operator kept it when the baseline ran
    level = seed_history(store, configs, dt.datetime.now(dt.timezone.utc).date(), good, images["sbtest-2"], ref)
    rc, log = run([BIN / "airflow", "dags", "test", DAG, "-c",
                   json.dumps({"gpu_counts": [1], "profile": "smoke", "repeats": 3})], env, 900)
    (root / "dags-test.log").write_text(log)
    assert rc == 0 and "state=success" in log, log[-5000:]
    return store, level, log, env, configs


@requires_docker
@pytest.mark.slow
def test_the_rerun_step_runs_an_ab_of_the_previous_and_the_new_image(night_on_new_image, images):
    store, level, log, _, _ = night_on_new_image
    assert "flagged, A/B: " in log and "A/B with the previous image scalebench/torch:sbtest-2 (run as " \
        "scalebench/torch:sha256-" in log, log[-5000:]
    cells = [c for c in store.cells(benchmark=BENCH) if not c["run_id"].startswith("scheduled__")]
    previous = [c for c in cells if c["role"] == "ab_previous"]
    new = [c for c in cells if c["role"] == "rerun"]
    assert len(previous) == len(new) == 5 and all(c["status"] == "valid" for c in previous + new)
    assert {c["figure"]["image_digest"] for c in previous} == {images["sbtest-2"]}
    assert {c["figure"]["image_digest"] for c in new} == {images["sbtest-3"]}
    assert max(c["figure"]["images_per_s"] for c in new) < 0.9 * min(c["figure"]["images_per_s"] for c in previous)
    # the last pair ran a profiling window after its timed steps, one cell per image
    profiled = store.contract  # (the newest valid attempt's contract of a cell)
    windows = {c["role"]: profiled(c["key"]).get("profile") for c in previous + new if profiled(c["key"]).get("profile")}
    assert set(windows) == {"ab_previous", "rerun"} and all(w.get("ops") for w in windows.values()), windows
    # both images' package lists were read once inside them and kept by digest
    extra = store.image_packages(images["sbtest-3"])["packages"]["python"]
    assert extra.get("scalebench-test-extra") == "1.0"
    assert "scalebench-test-extra" not in store.image_packages(images["sbtest-2"])["packages"]["python"]


@requires_docker
@pytest.mark.slow
def test_changes_tonight_confirm_the_regression_with_the_ab_and_the_package_diff_and_the_alert_goes_out(
        night_on_new_image, monkeypatch):
    from scalebench.core.config import AlertConfig
    from scalebench.orchestration.dags.alerts import send_night
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.report.build import build_report, options_from_configs
    from scalebench.report.render import markdown
    from tests.support.receiver import Receiver

    store, _, _, _, configs = night_on_new_image
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(configs))
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    opts = options_from_configs()
    opts.expected = [BENCH]
    # the manual run stands for tonight's scheduled one (as the rerun step judged it)
    real = store.figures

    def as_scheduled(**kw):
        return [{**c, "run_type": "scheduled"} for c in real(**kw)]

    monkeypatch.setattr(store, "figures", as_scheduled)
    rep = build_report(store, today, opts)
    [change] = rep.changes_tonight
    assert change["verdict"] == "regression (confirmed)" and change["alerted"]
    assert change["change"].startswith("image scalebench/torch:sbtest-3 (was scalebench/torch:sbtest-2)")
    assert "scalebench-test-extra (new) 1.0" in change["what_changed"] and "config: unchanged" in change["what_changed"]
    [ab] = [n for n in change["numbers"] if "images_per_s" in n]
    assert "A/B: image scalebench/torch:sbtest-3 " in ab and "% slower than image scalebench/torch:sbtest-2 " in ab
    assert ", 5 + 5 cells)" in ab
    text = markdown(rep)
    assert "## Changes tonight" in text and "**regression (confirmed)** (alerted)" in text
    [detail] = [d for d in rep.alert_details if d["metric"] == "images_per_s"]
    assert detail["confirmed_by"] == "A/B" and detail["ab"]["verdict"] == "worse" and detail["ab"]["p"] <= 0.01
    assert detail["line"].startswith(f"{BENCH} 1 GPU fp32 images_per_s: regressed with image scalebench/torch:sbtest-3")
    # the planted cause: the slower image spends its whole slowdown in one matrix multiply per step (the
    # hold trainer's aten::mm); the A/B's profiled pair names it first, within 10 points of its planted 100 %
    first = detail["profile_diff"]["diff"]["changes"][0]
    assert first["name"] == "aten::mm" and abs(first["share"] - 1.0) <= 0.10, detail["profile_diff"]
    assert "where the step's time went (the A/B's profiled pair, operations): aten::mm +" in detail["line"]
    print(f"\ntorch planted aten::mm through the DAG's A/B: {detail['profile_diff']['top'][0]}")
    receiver = Receiver()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", f"http://127.0.0.1:{receiver.port}")
        night = {"night": today, "complete": True, "missing": [], "failed": [], "alert_details": rep.alert_details,
                 "fixed": [], "fixed_details": []}
        sent = send_night(night, False, AlertConfig(notifier="webhook", endpoint="/hooks/scalebench", auto_bisect=False),
                          AlertGroups(store), {}, stack_of={BENCH: "torch"}, profile="smoke",
                          images_of=lambda repo: [], trigger=lambda dag, conf: "")
    finally:
        receiver.close()
    assert sent and len(receiver.received) == 1
    body = receiver.received[0]["body"]
    assert "regressed with image scalebench/torch:sbtest-3" in body["text"] and "scalebench-test-extra" in body["text"]
    assert "aten::mm +" in body["text"]  # the message names the operation
    # linked to the bisect DAG, between the previous image (as kept by digest) and the new one
    hint = next(a["bisect"] for a in body["alerts"] if a["metric"] == "images_per_s")
    # (each by the tag it is kept under: its digest, which a later build under the same tag cannot move)
    assert hint["dag"].endswith("/dags/scalebench_bisect") and f"scalebench bisect {BENCH} --gpus 1" in body["text"]
    assert hint["conf"]["good"].startswith("sha256-") and hint["conf"]["bad"].startswith("sha256-")
    assert hint["conf"]["good"] != hint["conf"]["bad"]


@requires_docker
@pytest.mark.slow
def test_bisect_over_five_tags_names_the_third_in_at_most_three_steps(night_on_new_image, images):
    store, _, _, env, _ = night_on_new_image
    rc, out = run([BIN / "scalebench", "bisect", BENCH, "--gpus", "1", "--good", "sbtest-1", "--bad", "sbtest-5",
                   "--candidates", "sbtest-2", "sbtest-3", "sbtest-4", "--profile", "smoke", "-o", "json"], env, 1500)
    assert rc == 0, out[-5000:]
    doc, _ = json.JSONDecoder().raw_decode(out[out.index("{"):])
    assert [c["image"] for c in doc["culprits"]] == [f"{REPO}:sbtest-3"] and len(doc["steps"]) <= 3
    assert doc["culprits"][0]["previous"] == f"{REPO}:sbtest-2" and not doc["unresolved"]
    assert any("scalebench-test-extra (new) 1.0" in line for line in doc["lines"])
    stored = store.bisect_steps(doc["bisect_id"])
    assert [s["step"] for s in stored] == list(range(1, len(doc["steps"]) + 1))
    assert all(s["run_id"] for s in stored)
    # the steps' cells are stored, never a figure of the night: the report's table has no row from them
    bisect_cells = [c for c in store.cells(benchmark=BENCH) if c["role"] == "bisect"]
    assert len(bisect_cells) == 5 * sum(len(s["images"]) for s in doc["steps"])
