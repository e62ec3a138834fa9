"""The hold trainer (scalebench_kit.hold): holds a cell's devices for the time it is told and
writes a contract that passes the same validation as a real trainer's."""
import json
import os
import subprocess
import sys
import time

import pytest

from scalebench.cell.validation import validate_result
from scalebench_kit.contract import read_json, write_json_atomic
from scalebench_kit.hold import hold_seconds
from tests.support import ROOT
from tests.support.samples import sample_cell, sample_spec


@pytest.mark.parametrize("gpus", [1, 3])
def test_hold_sleeps_epochs_times_relative_time_and_its_contract_validates(tmp_path, gpus):
    cell = sample_cell(gpus=gpus, epochs=2)
    write_json_atomic(tmp_path / "cell.json", sample_spec(cell))
    env = {**os.environ, "SCALEBENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "containers" / "kit")}
    t = time.monotonic()
    subprocess.run([sys.executable, "-m", "scalebench_kit.hold", "--epoch-seconds", "1", "--step-seconds", "0.25"],
                   env=env, check=True, timeout=60)
    took = time.monotonic() - t
    want = hold_seconds(1, 2, gpus)
    assert want <= took < 3 * want + 30  # it slept at least its time; a loaded machine may add a lot
    doc = read_json(tmp_path / "metrics.json")
    assert doc["timing"]["warmup_s"] + doc["timing"]["train_s"] == pytest.approx(want, rel=0.25)
    verdict = validate_result(cell, doc, ["precision", "recall"], {"precision": (0, 1), "recall": (0, 1)})
    assert verdict.success, verdict.failures


@pytest.mark.parametrize("role, reruns_slowed, slowed", [("measure", "1", True), ("rerun", "1", True),
                                                         ("rerun", "2", False), ("rerun", "none", False)])
def test_the_test_only_slowdown_lowers_throughput_not_the_step_count(tmp_path, role, reruns_slowed, slowed):
    cell = sample_cell(gpus=1, epochs=1)
    spec = sample_spec(cell)
    spec["cell"]["role"] = role
    write_json_atomic(tmp_path / "cell.json", spec)
    env = {**os.environ, "SCALEBENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "containers" / "kit")}
    subprocess.run([sys.executable, "-m", "scalebench_kit.hold", "--epoch-seconds", "1.2", "--step-seconds", "0.3",
                    "--test-slowdown", "1.5", "--test-slowdown-reruns", reruns_slowed], env=env, check=True, timeout=60)
    timing = read_json(tmp_path / "metrics.json")["timing"]
    assert timing["steps"] == 4
    assert timing["images_per_s"] == pytest.approx(16 / (0.3 * (1.5 if slowed else 1.0)), rel=0.08)


def test_a_profiled_hold_cell_says_why_it_has_no_profile_where_no_framework_is_and_the_image_slowdown_holds(tmp_path):
    """Outside an image (neither torch nor TensorFlow here) the planted operation is slept and the
    window says why there is no profile; the cell stays valid and its figures are the timed ones.
    In an image the window profiles the planted matrix multiply (tests/integration/dags/test_image_change.py)."""
    cell = sample_cell(gpus=1, epochs=1)
    spec = sample_spec(cell)
    spec["training"]["profile_steps"] = 2
    write_json_atomic(tmp_path / "cell.json", spec)
    env = {**os.environ, "SCALEBENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "containers" / "kit"),
           "SCALEBENCH_TEST_IMAGE_SLOWDOWN": "1.25"}
    subprocess.run([sys.executable, "-m", "scalebench_kit.hold", "--epoch-seconds", "1.2", "--step-seconds", "0.3"],
                   env=env, check=True, timeout=60)
    doc = read_json(tmp_path / "metrics.json")
    assert doc["profile"] == {"why_not": "rank 0: no framework profiler in this image (neither torch nor TensorFlow)"}
    assert doc["timing"]["images_per_s"] == pytest.approx(16 / (0.3 * 1.25), rel=0.08)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    keys = [e["key"] for e in events]
    assert keys.index("train_stop") < keys.index("profile_start") < keys.index("profile_stop")  # after the timed steps
    verdict = validate_result(cell, doc, ["precision", "recall"], {"precision": (0, 1), "recall": (0, 1)})
    assert verdict.success, verdict.failures


class _SlowFirstOps:
    """A planted operation whose first call takes 0.5 s (a cold thread pool), then as asked."""

    def __init__(self):
        self.calls = 0

    def touch(self):
        pass

    def busy(self, seconds):
        self.calls += 1
        time.sleep(0.5 if self.calls == 1 else seconds)


def test_a_slow_warm_up_step_does_not_shorten_the_timed_steps():
    """The planted slowdown's steps keep their length after a slow first step (it once borrowed
    the time back from the timed steps, hiding the image's slowdown from the A/B)."""
    from scalebench_kit.hold import hold_steps
    from scalebench_kit.timing import StepTimer

    timer = StepTimer(2)
    hold_steps(timer, 6, 0.3, 0.3, _SlowFirstOps())  # 0.1 s a step, half of it planted
    assert timer.step_times[0] >= 0.5
    assert timer.train_s == pytest.approx(4 * 0.1, rel=0.15)
