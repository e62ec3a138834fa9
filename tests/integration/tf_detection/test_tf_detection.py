"""The TensorFlow Model Garden detection image without Airflow: the VOC -> tf.Example converter
read back by Model Garden's own decoder, and the epoch definition."""
import json
import os
import subprocess

import pytest

from scalebench_kit import voc_det
from scalebench_kit.epochs import epoch_plan
from tests.support import ROOT
from tests.support.engine import docker_ready

IMAGE = "scalebench/tf-detection:cpu"
DAG = "scalebench_frcnn_tf_voc2007"
requires_image = pytest.mark.skipif(not docker_ready(IMAGE) and os.environ.get("CI") != "true",
                                    reason=f"needs a Docker engine and {IMAGE} (make images)")

ROUND_TRIP = r"""
import json, sys
from pathlib import Path
import tensorflow as tf
from official.vision.dataloaders.tf_example_decoder import TfExampleDecoder
from scalebench_kit import voc_det
from trainers.voc_tfrecord import convert_cached

splits = {"train": voc_det.read_split("/data", "trainval"), "test": voc_det.read_split("/data", "test")}
folder, ids, cached = convert_cached(tf, splits, "sha256:test", Path("/cache"))
again = convert_cached(tf, splits, "sha256:test", Path("/cache"))[2]
out = {"cached_first": cached, "cached_again": again, "ids": ids, "records": {}}
decoder = TfExampleDecoder(include_mask=False)
for split in splits:
    rows = []
    for raw in tf.data.TFRecordDataset(str(folder / f"{split}.tfrecord")):
        d = decoder.decode(raw)
        rows.append({"source_id": d["source_id"].numpy().decode(), "height": int(d["height"]),
                     "width": int(d["width"]), "classes": d["groundtruth_classes"].numpy().tolist(),
                     "boxes": d["groundtruth_boxes"].numpy().tolist(), "image_shape": d["image"].shape.as_list()})
    out["records"][split] = rows
print(json.dumps(out))
"""


@requires_image
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tfrecords_decode_back_through_model_gardens_decoder(tmp_path):
    voc_det.write_synthetic(tmp_path / "data", train_images=5, test_images=3, size=96, seed=4)
    (tmp_path / "cache").mkdir()
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path / 'data'}:/data:ro",
                           "-v", f"{tmp_path / 'cache'}:/cache", "-v",
                           f"{ROOT / 'containers/tf-detection/trainers/voc_tfrecord.py'}:/opt/scalebench/trainers/voc_tfrecord.py:ro",
                           IMAGE, "python", "-c", ROUND_TRIP], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cached_first"] is False and out["cached_again"] is True  # converted once per fingerprint
    for split, voc_split in (("train", "trainval"), ("test", "test")):
        records = voc_det.read_split(tmp_path / "data", voc_split)
        assert len(out["records"][split]) == len(records)
        for row, (_, a) in zip(out["records"][split], records):
            assert out["ids"][split][row["source_id"]] == a.image_id
            assert (row["height"], row["width"], row["image_shape"]) == (96, 96, [96, 96, 3])
            keep = [i for i in range(len(a.labels)) if split == "test" or not a.difficult[i]]
            assert row["classes"] == a.labels[keep].tolist()
            # the decoder gives normalised ymin, xmin, ymax, xmax
            want = [[y1 / 96, x1 / 96, y2 / 96, x2 / 96] for x1, y1, x2, y2 in a.boxes[keep].tolist()]
            assert sum(row["boxes"], []) == pytest.approx(sum(want, []), abs=1e-6)


def test_model_gardens_epoch_is_whole_passes_of_full_batches():
    """Model Garden's reader keeps every batch full: the epoch counts what it takes from the next pass."""
    plan = epoch_plan(16, 3, shards=3, full_batches=True)
    assert plan["steps_per_epoch"] == 6 and plan["samples_per_epoch"] == 18 and plan["repeated_images"] == 2
    assert plan["covered_images"] == 16 and plan["dropped_images"] == 0


@pytest.fixture(scope="module")
def frcnn_run(tmp_path_factory):
    """One `airflow dags test` of the real Faster R-CNN DAG at 1 and 2 devices, shared by the tests below."""
    from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run

    home = tmp_path_factory.mktemp("frcnn")
    env = airflow_env(home, ("frcnn_tf_voc2007",))
    prepare_homes(env)
    conf = {"gpu_counts": [1, 2], "profile": "smoke", "profile_ops": True}  # the window after the figures too
    rc, log = run([BIN / "airflow", "dags", "test", DAG, "-c", json.dumps(conf)], env, timeout=1500)
    (home / "dags-test.log").write_text(log)
    assert rc == 0 and "all 2 cells valid" in log, log[-5000:]
    return home, env



@requires_image
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_faster_rcnn_trains_under_mirrored_strategy_on_1_and_2_devices(frcnn_run):
    home, _ = frcnn_run
    contracts = sorted((home / "results" / DAG).glob("*/g*/attempt-1/metrics.json"))
    assert [p.parent.parent.name for p in contracts] == ["g1-fp32-e2-r1", "g2-fp32-e2-r1"]
    for path in contracts:
        doc = json.loads(path.read_text())
        n = doc["cell"]["gpus"]
        assert doc["devices"]["world_size"] == n and doc["model"]["strategy"] == "MirroredStrategy"
        assert doc["model"]["architecture"] == "FasterRCNN-ResNet50-FPN" and doc["model"]["parameters"] > 40e6
        assert doc["epoch"] == epoch_plan(16, n, shards=n, full_batches=True) and doc["epoch"]["covered_images"] == 16
        # evaluated after each epoch (the weekly run's time to accuracy), the last one the cell's metrics
        assert [e["epoch"] for e in doc["evaluations"]] == [1, 2] and doc["evaluations"][-1]["metrics"] == doc["metrics"]
        assert 0 < doc["evaluations"][0]["train_s"] < doc["evaluations"][1]["train_s"] <= sum(doc["timing"]["epoch_s"]) + 1e-3
        losses = doc["step_losses"]
        assert len(losses) == doc["timing"]["steps"] == 2 * 16 // n >= 16
        quarter = len(losses) // 4
        assert sum(losses[-quarter:]) / quarter < sum(losses[:quarter]) / quarter, losses  # it learns
        b = doc["timing"]["breakdown"]
        assert b["ranks"] == 1 and b["sync_s"] is None and b["data_wait_s"] is not None
        config = json.loads((path.parent / doc["model"]["resolved_config_file"]).read_text())
        assert config["task"]["model"]["num_classes"] == 21 and config["runtime"]["mixed_precision_dtype"] == "float32"
        assert config["task"]["init_checkpoint"] is None  # nothing downloaded
        prof = doc["profile"]  # the Model Garden task's train_step through TensorFlow's profiler
        assert "why_not" not in prof and prof["steps"] == 2 and prof["ops"], prof
        assert any("Conv2D" in o["name"] for o in prof["ops"]) and prof["traces"][0].endswith(".xplane.pb.gz")
        print(f"\n{n} device(s): train {doc['timing']['train_s']:.1f} s, warm-up {doc['timing']['warmup_s']:.1f} s, "
              f"total {doc['timing']['total_s']:.1f} s, loss {losses[0]:.2f} -> {losses[-1]:.2f}, {doc['metrics']}")


@requires_image
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_saved_raw_detections_rescored_by_the_kit_give_the_contracts_metrics(frcnn_run):
    from scalebench_kit.metrics import detection_scores

    home, env = frcnn_run
    [data] = (home / "data" / "synthetic").glob("voc2007-vocdevkit-2007-det-*")
    truths = voc_det.truths(voc_det.read_split(data, "test"))
    for path in sorted((home / "results" / DAG).glob("*/g*/attempt-1/metrics.json")):
        doc = json.loads(path.read_text())
        lines = (path.parent / doc["detections_file"]).read_text().splitlines()
        detections = [json.loads(line) for line in lines]
        assert len(detections) == doc["metrics"]["detections"]
        again = detection_scores(detections, truths, 21, score_threshold=doc["metrics"]["score_threshold"])
        assert again == pytest.approx(doc["metrics"])


@requires_image
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_detection_row_is_reported(frcnn_run):
    from tests.support.airflow_home import BIN, run

    home, env = frcnn_run
    rc, out = run([BIN / "scalebench", "report", "--out", str(home / "report")], env, 120)
    assert rc == 0, out
    text = (home / "report" / "report.md").read_text()
    assert "| frcnn_tf_voc2007 |" in text and "mAP@0.5" in text
    assert "frcnn_tf_voc2007: an epoch covers a different part" not in text  # 16 steps at 1 GPU, 8 at 2
