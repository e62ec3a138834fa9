import json
import pickle

import numpy as np
import pytest

from scalebench_kit import cifar10, datasets
from scalebench_kit.contract import ContractError, contract_errors, load_result, write_result
from scalebench_kit.events import EventLog, read_events
from scalebench_kit.metrics import macro_precision_recall
from tests.conftest import sample_cell, sample_contract


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


def test_event_log_writes_json_lines_on_rank_zero_only(tmp_path):
    EventLog(tmp_path / "e.jsonl", rank=0, echo=False).log("epoch_stop", 1, loss=0.5)
    EventLog(tmp_path / "e.jsonl", rank=1, echo=False).log("epoch_stop", 1, loss=0.7)
    events = read_events(tmp_path / "e.jsonl")
    assert [(e["key"], e["value"], e["loss"]) for e in events] == [("epoch_stop", 1, 0.5)]
    with pytest.raises(ValueError, match="unknown event key 'epoch_end'"):
        EventLog(tmp_path / "e.jsonl").log("epoch_end")
    line = (tmp_path / "e.jsonl").read_text().splitlines()[0]
    assert json.loads(line) == events[0] and set(events[0]) == {"key", "time", "value", "rank", "loss"}
