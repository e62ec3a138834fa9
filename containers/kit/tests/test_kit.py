import json
import os
import pickle
import time

import numpy as np
import pytest

from scalebench_kit import cifar10, datasets, timing
from scalebench_kit.contract import ContractError, contract_errors, load_result, write_result
from scalebench_kit.events import EventLog, read_events
from scalebench_kit.metrics import macro_precision_recall
from tests.support.samples import sample_cell, sample_contract


def test_synthetic_cifar10_is_in_the_real_python_format(tmp_path):
    out = cifar10.write_synthetic(tmp_path, train_images=50, test_images=20, seed=3)
    assert sorted(p.name for p in out.iterdir()) == sorted(cifar10.EXPECTED_FILES)
    # Read the way the CIFAR-10 page documents it: pickle with encoding="bytes".
    with open(out / "data_batch_1", "rb") as fh:
        batch = pickle.load(fh, encoding="bytes")
    assert set(batch) == {b"data", b"labels", b"filenames", b"batch_label"}
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (10, 3072)
    with open(out / "batches.meta", "rb") as fh:
        assert pickle.load(fh, encoding="bytes")[b"label_names"][0] == b"airplane"
    x, y = cifar10.read_split(tmp_path, "train")
    assert x.shape == (50, 32, 32, 3) and y.shape == (50,) and set(y) <= set(range(10))
    xt, _ = cifar10.read_split(tmp_path, "test", limit=7)
    assert xt.shape == (7, 32, 32, 3)


def test_synthetic_classes_are_learnable(tmp_path):
    cifar10.write_synthetic(tmp_path, train_images=400, test_images=200, seed=0)
    x, y = cifar10.read_split(tmp_path, "train")
    xt, yt = cifar10.read_split(tmp_path, "test")
    centroids = np.stack([x[y == k].reshape(-1, 3072).mean(0) for k in range(10)])
    pred = np.argmin(((xt.reshape(-1, 1, 3072) - centroids[None]) ** 2).sum(-1), axis=1)
    assert (pred == yt).mean() > 0.9  # a nearest-centroid model already separates them


def test_fingerprint_changes_with_the_data(tmp_path):
    datasets.write_synthetic(tmp_path / "a", "cifar10-python", train_images=20, test_images=10, seed=1)
    datasets.write_synthetic(tmp_path / "b", "cifar10-python", train_images=20, test_images=10, seed=2)
    fa = datasets.fingerprint(tmp_path / "a", "cifar10-python")
    assert fa == datasets.fingerprint(tmp_path / "a", "cifar10-python")
    assert fa != datasets.fingerprint(tmp_path / "b", "cifar10-python")
    (tmp_path / "a" / cifar10.DIRNAME / "test_batch").unlink()
    assert datasets.missing_files(tmp_path / "a", "cifar10-python")[0].endswith("test_batch")
    with pytest.raises(ValueError, match="unknown dataset format 'voc'"):
        datasets.missing_files(tmp_path, "voc")


def test_macro_precision_recall_on_known_values():
    # class 0: tp1 fp0 fn0; class 1: tp0 fp0 fn1; class 2: tp2 fp1 fn0
    got = macro_precision_recall([0, 1, 2, 2], [0, 2, 2, 2], 3)
    assert got["precision"] == pytest.approx((1 + 0 + 2 / 3) / 3)
    assert got["recall"] == pytest.approx((1 + 0 + 1) / 3)
    assert got["accuracy"] == pytest.approx(0.75)


def test_contract_rejects_nan_out_of_range_and_missing_fields(tmp_path):
    good = sample_contract(sample_cell())
    assert contract_errors(good) == []
    bad = sample_contract(sample_cell())
    bad["metrics"]["precision"] = 1.7
    bad["timing"]["train_s"] = float("nan")
    del bad["devices"]["world_size"]
    errors = " | ".join(contract_errors(bad))
    assert "metrics/precision: 1.7 is greater than the maximum of 1" in errors
    assert "timing/train_s: not a finite number" in errors
    assert "'world_size' is a required property" in errors
    with pytest.raises(ContractError, match="metrics.json: does not match the result contract"):
        write_result(tmp_path, bad)
    assert not (tmp_path / "metrics.json").exists()
    write_result(tmp_path, good)
    assert load_result(tmp_path / "metrics.json")["metrics"] == good["metrics"]


def test_event_log_lines_carry_rank_world_size_and_pid_and_every_rank_writes(tmp_path, capsys):
    EventLog(tmp_path / "e.jsonl", rank=0, world_size=2).log("epoch_stop", 1, loss=0.5)
    EventLog(tmp_path / "e.jsonl", rank=1, world_size=2).log("epoch_stop", 1, loss=0.7)
    events = read_events(tmp_path / "e.jsonl")
    assert [(e["key"], e["rank"], e["world_size"], e["loss"]) for e in events] == [
        ("epoch_stop", 0, 2, 0.5), ("epoch_stop", 1, 2, 0.7)]
    assert all(e["pid"] == os.getpid() for e in events)
    assert capsys.readouterr().out.count(":::SCALEBENCH") == 1  # only rank 0 echoes to the log
    with pytest.raises(ValueError, match="unknown event key 'epoch_end'"):
        EventLog(tmp_path / "e.jsonl").log("epoch_end")
    line = (tmp_path / "e.jsonl").read_text().splitlines()[0]
    assert json.loads(line) == events[0]
    assert set(events[0]) == {"key", "time", "value", "rank", "world_size", "pid", "loss"}


def test_step_timer_parts_add_up_to_the_step_and_warmup_is_kept_apart(monkeypatch):
    clock = iter([0.0, 1.0, 1.5, 2.0, 10.0, 10.5, 11.0, 11.2])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    t = timing.StepTimer(warmup_steps=1)
    t.start()
    t.step_done(data_wait_s=0.1, compute_s=0.8, sync_s=0.0)    # 1.0 s: warm-up
    t.step_done(data_wait_s=0.1, compute_s=0.3, sync_s=0.05)   # 0.5 s
    t.step_done(data_wait_s=0.2, compute_s=0.2, sync_s=0.1)    # 0.5 s
    t.epoch_fixed(7.5)
    t.start()
    t.step_done(data_wait_s=0.0, compute_s=0.4, sync_s=None)   # 0.5 s, sync not measured
    assert t.warmup_s == 1.0 and t.train_s == 1.5 and t.timed_steps == 3
    s = t.summary(rank=3)
    assert s["rank"] == 3 and s["pid"] == os.getpid() and s["timed_steps"] == 3
    assert s["step_s"] == 1.5 and s["data_wait_s"] == 0.3 and s["compute_s"] == 0.9
    assert s["sync_s"] is None  # one step without it: the sum would be a lie
    assert s["other_s"] == pytest.approx(1.5 - 0.3 - 0.9 - 0.15) and s["epoch_fixed_s"] == 7.5


def test_the_slowest_rank_decides_the_cell_breakdown_and_every_rank_is_kept():
    ranks = [{"rank": 1, "pid": 11, "timed_steps": 4, "step_s": 10.0, "data_wait_s": 1.0, "compute_s": 6.0,
              "sync_s": 2.5, "other_s": 0.5, "epoch_fixed_s": 0.2, "warmup_s": 1.0},
             {"rank": 0, "pid": 10, "timed_steps": 4, "step_s": 9.0, "data_wait_s": 0.5, "compute_s": 7.0,
              "sync_s": 1.0, "other_s": 0.5, "epoch_fixed_s": 0.1, "warmup_s": 1.0}]
    b = timing.combine_ranks(ranks, {"sync_s": "how"})
    assert b["ranks"] == 2 and b["slowest_rank"] == 1 and b["step_s"] == 10.0 and b["sync_s"] == 2.5
    assert b["shares"] == {"data_wait": 0.1, "compute": 0.6, "sync": 0.25, "other": 0.05}
    assert [r["pid"] for r in b["per_rank"]] == [10, 11] and b["method"] == {"sync_s": "how"}


def test_the_test_only_delay_sleeps_before_each_batch(monkeypatch):
    slept = []
    monkeypatch.setattr(timing.time, "sleep", slept.append)
    assert list(timing.delayed([1, 2, 3], 0.25)) == [1, 2, 3] and slept == [0.25] * 3


def test_gpu_sampler_reads_utilisation_and_memory_through_nvml(monkeypatch):
    """No GPU here: a stand-in pynvml module with NVML's call names and return shapes."""
    import types

    from scalebench_kit import gpu_monitor

    calls = {"util": 0}

    def utilisation(handle):
        calls["util"] += 1
        return types.SimpleNamespace(gpu=50 + 10 * handle)

    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUtilizationRates=utilisation,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=(1 + h) * 2**30),
        nvmlSystemGetDriverVersion=lambda: "580.1", nvmlDeviceGetName=lambda h: b"NVIDIA H200")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    with gpu_monitor.sample_gpus("gpu", [0, 1], interval_s=0.01) as sampler:
        while calls["util"] < 6:
            time.sleep(0.01)
    s = sampler.summary()
    assert s["devices"]["0"]["util_mean_pct"] == 50 and s["devices"]["1"]["util_max_pct"] == 60
    assert s["devices"]["1"]["memory_max_mib"] == 2048 and s["devices"]["0"]["samples"] >= 3
    assert sampler.fingerprint() == {"driver": "580.1", "nvml_devices": ["NVIDIA H200", "NVIDIA H200"]}
    with gpu_monitor.sample_gpus("cpu", [0]) as none:
        pass
    assert none.summary() is None and none.fingerprint() == {}  # CPU hosts: absent, no pynvml import


def test_the_contract_knows_every_precision_preset_and_its_dtype():
    from scalebench_kit.contract import schema
    from scalebench_kit.names import COMPUTE_DTYPE, PRECISIONS
    from scalebench_kit.precision import PrecisionError, record, requested

    doc = schema()
    assert doc["$defs"]["training"]["properties"]["precision"]["enum"] == list(PRECISIONS) == list(COMPUTE_DTYPE)
    assert doc["result"]["properties"]["precision"]["properties"]["requested"]["enum"] == list(PRECISIONS)
    assert sorted(doc["result"]["properties"]["precision"]["properties"]["expected_dtype"]["enum"]) == \
        sorted(set(COMPUTE_DTYPE.values()))
    assert record("bf16", "bfloat16", "conv", {})["expected_dtype"] == "bfloat16"
    assert requested({"training": {}}) == "fp32"  # a cell spec from before presets
    with pytest.raises(PrecisionError, match="training.precision 'fp8'"):
        requested({"training": {"precision": "fp8"}})


def test_progress_lines_come_at_the_interval_from_the_timers_own_clock(monkeypatch):
    clock = iter([0.0, 1.0, 2.0, 10.5, 11.0, 21.0])  # start, then five steps: perf_counter as the timer reads it
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    lines = []
    t = timing.StepTimer(warmup_steps=1, progress=timing.Progress(100, 32, every_s=10, emit=lines.append))
    t.start()
    for _ in range(5):
        t.step_done()
    # the warm-up step (1 s) is not rated; 10 s after it 3 steady steps: 0.3 steps/s; 10 s later 1 more
    assert lines == ["scalebench progress: step 4 of 100 (4%), 9.6 images/s, 5 min 20 s left",
                     "scalebench progress: step 5 of 100 (5%), 3.2 images/s, 15 min 50 s left"]
    assert t.timed_steps == 4 and t.train_s == 20.0  # the figures are the timer's, progress changes none of them


def test_a_long_warm_up_is_reported_without_a_rate():
    lines = []
    p = timing.Progress(50, 8, every_s=5, emit=lines.append)
    p.step(0.0, 0)
    p.step(40.0, 1, steady=False)  # a first step that compiled for 40 s
    p.step(41.0, 2)
    p.step(46.0, 7)
    assert lines == ["scalebench progress: step 1 of 50 (warm-up)",
                     "scalebench progress: step 7 of 50 (14%), 8.0 images/s, 43 s left"]


def test_progress_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SCALEBENCH_PROGRESS_EVERY_S", "2.5")
    assert timing.Progress(10, 1).every_s == 2.5
    monkeypatch.delenv("SCALEBENCH_PROGRESS_EVERY_S")
    assert timing.Progress(10, 1).every_s == 30.0
