"""TrainerRun, the skeleton the four trainers share, driven without a framework: a stand-in for a
two-rank family (its gather returns a second rank's summary) and a step that only sleeps. The
result it writes must pass the contract, and the events must come in the order the orchestrator
and the report read them."""
import time

import pytest

from scalebench_kit.contract import load_result, write_json_atomic
from scalebench_kit.events import read_events
from scalebench_kit.precision import record
from scalebench_kit.trainer import TrainerRun
from tests.support.samples import sample_cell, sample_spec

METHOD = {"data_wait_s": "sleep", "compute_s": "sleep", "sync_s": "none", "other_s": "rest", "epoch_fixed_s": "none"}


class TwoRanks:
    """Rank 0 of a two-rank launch whose other rank was 10 % slower."""
    rank, world, strategy = 0, 2, "FakeParallel"

    def __init__(self):
        self.calls = []

    def gather(self, mine):
        other = {**mine[0], "rank": 1, "step_s": mine[0]["step_s"] * 1.1}
        return [*mine, other]

    def device_names(self):
        return ["cpu:0", "cpu:1"]

    def system(self):
        return {"framework": "fake", "framework_version": "1.0"}

    def shut_down(self, cell):
        self.calls.append("shut_down")


@pytest.fixture
def run(tmp_path, monkeypatch):
    cell = sample_cell(gpus=2, epochs=2)
    spec = sample_spec(cell)
    spec["training"]["global_batch"] = 2 * spec["training"]["per_device_batch"]
    write_json_atomic(tmp_path / "cell.json", spec)
    monkeypatch.setenv("SCALEBENCH_RESULTS_DIR", str(tmp_path))
    return TrainerRun(METHOD)


def _train(run, fw, steps=3, scored=None):
    run.use(fw)
    run.data_ready(24, test_images=8)
    run.model_ready(1234, strategy=fw.strategy)
    with run.training(steps):
        for epoch in run.epochs():
            run.timer.epoch_fixed(0.0)
            run.timer.start()
            for _ in range(steps):
                time.sleep(0.01)
                run.step_done(data_wait_s=0.002, compute_s=0.007, sync_s=0.0, loss=1.0)
            run.epoch_done(epoch, 1.0 / (epoch + 1), scored)
    return run.final(lambda: {"accuracy": 0.5})


def test_a_run_through_the_skeleton_writes_a_valid_result_with_every_rank_and_event_in_order(run, tmp_path):
    fw, order = TwoRanks(), []
    metrics = _train(run, fw)
    run.finish(metrics=metrics, model={"architecture": "toy"}, precision=record("fp32", "float32", "toy layer", {}),
               extra={"note": "x"},
               system={"toy": "2"}, before_shut_down=lambda: order.append("loader workers"))
    doc = load_result(tmp_path / "metrics.json")  # the contract's own checks
    assert doc["devices"]["world_size"] == 2 and doc["devices"]["names"] == ["cpu:0", "cpu:1"]
    assert doc["model"]["strategy"] == "FakeParallel" and doc["model"]["architecture"] == "toy"
    assert doc["system"]["framework"] == "fake" and doc["system"]["toy"] == "2" and doc["note"] == "x"
    assert doc["timing"]["steps"] == 6 and doc["timing"]["warmup_steps"] == 2 and doc["timing"]["timed_steps"] == 4
    assert doc["loss_curve"] == [1.0, 0.5] and len(doc["timing"]["epoch_s"]) == 2
    breakdown = doc["timing"]["breakdown"]
    assert breakdown["ranks"] == 2 and [r["rank"] for r in breakdown["per_rank"]] == [0, 1]  # both ranks kept
    assert breakdown["slowest_rank"] == 1 and breakdown["method"] == METHOD  # the slower rank decides
    assert order + fw.calls == ["loader workers", "shut_down"]  # workers stop before the group goes
    kinds = [e["key"] for e in read_events(tmp_path / "events.jsonl")]
    assert kinds == ["run_start", "init_start", "data_ready", "model_ready", "init_stop", "epoch_start",
                     "warmup_stop", "epoch_stop", "epoch_start", "epoch_stop", "train_stop", "eval_start",
                     "eval_stop", "step_breakdown", "run_stop"]


def test_a_global_batch_that_is_not_per_device_batch_times_the_world_is_refused(run):
    fw = TwoRanks()
    fw.world = 3
    with pytest.raises(RuntimeError, match=r"global batch 32 != per-device batch 16 x 3 replicas"):
        run.use(fw)


def test_a_non_finite_loss_stops_the_run_at_its_step(run):
    run.use(TwoRanks())
    with run.training(3):
        for _ in run.epochs():
            run.timer.start()
            run.step_done(data_wait_s=0.0, compute_s=0.0, sync_s=None, loss=1.0)
            with pytest.raises(FloatingPointError, match="loss is nan at step 2"):
                run.step_done(data_wait_s=0.0, compute_s=0.0, sync_s=None, loss=float("nan"))
            break


def test_an_evaluation_after_each_epoch_stays_out_of_the_epochs_time(run, tmp_path):
    import json

    spec = tmp_path / "cell.json"
    doc = json.loads(spec.read_text())
    doc["training"]["eval_each_epoch"] = True
    write_json_atomic(spec, doc)
    run = TrainerRun(METHOD)

    def slow_score():
        time.sleep(0.3)
        return {"accuracy": 0.25}

    _train(run, TwoRanks(), steps=2, scored=slow_score)
    assert max(run.epoch_s) < 0.3 and run.evals.seconds >= 0.3
    assert [r["epoch"] for r in run.evals.rows] == [1, 2]


class Profiled(TwoRanks):
    """TwoRanks whose profiler runs the window's steps and reports two operations; its other rank's
    window was 10 % slower (or, with `fail`, the backend raised)."""

    def __init__(self, fail=None):
        super().__init__()
        self.fail, self.steps = fail, 0

    def gather(self, mine):
        other = {**mine[0], "rank": 1, "step_s": mine[0]["step_s"] * 1.1}
        if "profile" in mine[0]:
            other["profile"] = {**mine[0]["profile"], "rank": 1}
            if "step_s" in mine[0]["profile"]:
                other["profile"]["step_s"] = mine[0]["profile"]["step_s"] * 1.1
        return [*mine, other]

    def profiler(self):
        fw = self

        class Backend:
            def run(self, steps, step, trace_dir):
                if fw.fail:
                    raise fw.fail
                step()
                fw.steps += 1
                t0 = time.perf_counter()
                for _ in range(steps):
                    step()
                    fw.steps += 1
                active = time.perf_counter() - t0
                trace = trace_dir / "trace.json"
                trace.write_text('{"traceEvents": []}')
                return ([{"name": "aten::mm", "calls": 2 * steps, "self_s": 0.004 * steps, "device_self_s": 0.0},
                         {"name": "aten::add", "calls": steps, "self_s": 0.001 * steps, "device_self_s": 0.0}],
                        [trace], active)
        return Backend()


def _profiled_run(tmp_path, fw, steps=3):
    import json

    spec = tmp_path / "cell.json"
    doc = json.loads(spec.read_text())
    doc["training"]["profile_steps"] = steps
    write_json_atomic(spec, doc)
    run = TrainerRun(METHOD)
    metrics = _train(run, fw)
    run.profile(lambda: time.sleep(0.005))
    run.finish(metrics=metrics, model={"architecture": "toy"}, precision=record("fp32", "float32", "toy", {}))
    return load_result(tmp_path / "metrics.json")


def test_the_profiling_window_runs_after_every_figure_and_keeps_the_slowest_ranks_summary(run, tmp_path):
    fw = Profiled()
    doc = _profiled_run(tmp_path, fw)
    assert fw.steps == 4 and doc["timing"]["steps"] == 6  # one warm-up and three profiled steps, none timed
    p = doc["profile"]
    assert p["rank"] == 1 and set(p["ranks"]) == {"0", "1"} and p["ranks"]["1"] > p["ranks"]["0"] and not p["missing"]
    assert [o["name"] for o in p["ops"]] == ["aten::mm", "aten::add"] and p["kernels"] == []
    mm = p["ops"][0]
    assert mm["calls"] == 2 and mm["self_s"] == pytest.approx(0.004)
    assert mm["share"] == pytest.approx(0.004 / p["ranks"]["0"], rel=1e-3)
    assert p["traces"] == ["profile/rank0/trace.json.gz"] and (tmp_path / p["traces"][0]).exists()
    kinds = [e["key"] for e in read_events(tmp_path / "events.jsonl")]
    assert kinds.index("eval_stop") < kinds.index("profile_start") < kinds.index("profile_stop") < kinds.index("run_stop")


def test_a_window_that_fails_leaves_the_cell_valid_and_says_why(run, tmp_path):
    doc = _profiled_run(tmp_path, Profiled(fail=RuntimeError("CUPTI is busy")))
    assert doc["profile"] == {"why_not": "rank 0: RuntimeError: CUPTI is busy; rank 1: RuntimeError: CUPTI is busy"}
    assert doc["metrics"] == {"accuracy": 0.5} and doc["timing"]["steps"] == 6


def test_a_trace_over_the_cap_is_dropped_and_its_summary_kept(tmp_path, monkeypatch):
    from scalebench_kit import profiling

    monkeypatch.setattr(profiling, "TRACE_CAP_BYTES", 10)

    class Big:
        def run(self, steps, step, trace_dir):
            (trace_dir / "trace.json").write_text("x" * 100_000 + "".join(map(str, range(20_000))))
            return [{"name": "op", "calls": steps, "self_s": 0.01 * steps, "device_self_s": 0.002 * steps}], \
                [trace_dir / "trace.json"], 0.05 * steps
    got = profiling.window(Big(), 2, lambda: None, tmp_path, 0)
    assert got["traces"] == [] and "over the 0 MiB cap: dropped" in got["notes"][0]
    assert got["ops"][0]["name"] == "op" and got["kernels"][0]["self_s"] == pytest.approx(0.002)
    assert not list((tmp_path / "profile").rglob("trace.json*"))


LEAVE = """
import sys, time
from scalebench_kit.trainer import TrainerRun

class SlowTeardown:  # as a tf.data stream cancelling its in-flight work when main's frame goes
    def __del__(self):
        time.sleep(60)

def main():
    stream = SlowTeardown()
    print("result written", end="")  # unflushed: leave() must not lose it
    TrainerRun.leave()

main()
"""


def test_leave_ends_the_process_with_success_before_mains_objects_are_torn_down():
    import os
    import subprocess
    import sys

    from tests.support import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT / "containers" / "kit")}
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", LEAVE], env=env, capture_output=True, text=True, timeout=50)
    assert (proc.returncode, proc.stdout) == (0, "result written")
    assert time.monotonic() - t < 30  # the 60 s destructor never ran
