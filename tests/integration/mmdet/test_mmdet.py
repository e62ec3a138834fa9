"""The three mmdetection rows end to end: one `airflow dags test` of each real DAG (smoke, torchrun +
mmengine over gloo; Faster R-CNN on 1 and 2 emulated devices, the mask models on 2: the
single-process launcher is the same mmengine code for every model) shared by the tests below; and, without
Airflow, mmdet's own COCO reader and pycocotools on the kit's converted VOC2012 instances."""
import json
import os
import subprocess

import pytest
import yaml

from scalebench_kit import masks, voc_det, voc_ins
from scalebench_kit.epochs import epoch_plan
from scalebench_kit.events import read_events
from scalebench_kit.contract import write_json_atomic
from scalebench_kit.metrics import detection_scores, instance_scores
from tests.support import ROOT
from tests.support.engine import docker_ready

IMAGE = "scalebench/mmdet:cpu"
BENCHMARKS = {"frcnn_mmdet_voc2007": "FasterRCNN", "maskrcnn_mmdet_voc2012": "MaskRCNN",
              "msrcnn_mmdet_voc2012": "MaskScoringRCNN"}
GPU_COUNTS = {"frcnn_mmdet_voc2007": [1, 2], "maskrcnn_mmdet_voc2012": [2], "msrcnn_mmdet_voc2012": [2]}
PROFILED = "maskrcnn_mmdet_voc2012"  # its run is triggered with profile_ops: the window after its figures
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not docker_ready(IMAGE) and os.environ.get("CI") != "true",
                                                   reason=f"needs a Docker engine and {IMAGE} (make images)")]


@pytest.fixture(scope="module")
def mmdet_runs(tmp_path_factory):
    """One Airflow home; each mmdetection DAG run once (smoke, GPU_COUNTS). Returns the home,
    its environment and each DAG run's exit code and log, so one failing DAG fails its own tests."""
    from tests.support.airflow_home import airflow_env, prepare_homes
    from tests.support.nights import run_steps

    home = tmp_path_factory.mktemp("mmdet")
    env = airflow_env(home, tuple(BENCHMARKS))
    prepare_homes(env)
    steps = [["dags", "test", f"scalebench_{bench}", "-c",
              json.dumps({"gpu_counts": GPU_COUNTS[bench], "profile": "smoke", "seed": 0,
                          "profile_ops": bench == PROFILED})] for bench in BENCHMARKS]
    done = run_steps(env, steps, timeout=3000)  # the three runs in one process: Airflow starts once
    done += [(1, "the sequence stopped before this run")] * (len(steps) - len(done))
    runs = dict(zip(BENCHMARKS, done))
    for bench, (_, log) in runs.items():
        (home / f"dags-test-{bench}.log").write_text(log)
    return home, env, runs


def contracts(home, bench):
    return sorted((home / "results" / f"scalebench_{bench}").glob("*/g*/attempt-1/metrics.json"))


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("bench", BENCHMARKS)
def test_each_detector_trains_under_torchrun(mmdet_runs, bench):
    home, _, runs = mmdet_runs
    rc, log = runs[bench]
    counts = GPU_COUNTS[bench]
    assert rc == 0 and f"all {len(counts)} cells valid" in log, log[-5000:]
    paths = contracts(home, bench)
    assert [p.parent.parent.name for p in paths] == [f"g{n}-fp32-e1-r1" for n in counts]
    for path in paths:
        doc = json.loads(path.read_text())
        n = doc["cell"]["gpus"]
        assert doc["devices"]["world_size"] == n
        assert doc["model"]["strategy"] == ("MMDistributedDataParallel" if n > 1 else BENCHMARKS[bench])
        assert doc["model"]["launcher"] == ("pytorch" if n > 1 else "none")
        assert doc["epoch"] == epoch_plan(16, n, shards=n) and doc["epoch"]["covered_images"] == 16
        losses = doc["step_losses"]
        assert len(losses) == doc["timing"]["steps"] == 16 // n
        quarter = len(losses) // 4
        assert sum(losses[-quarter:]) / quarter < sum(losses[:quarter]) / quarter, losses  # it learns
        # the LR is the policy's, unscaled by mmdet, constant
        assert doc["model"]["effective_lr"] == pytest.approx(doc["training"]["lr"]) and not doc["model"]["auto_scale_lr"]

        b = doc["timing"]["breakdown"]
        assert b["ranks"] == n and [r["rank"] for r in b["per_rank"]] == list(range(n))
        for r in b["per_rank"]:
            assert (r["sync_s"] > 0) == (n > 1), r  # gradients cross processes through gloo
            assert r["data_wait_s"] > 0 and r["other_s"] <= 0.05 * r["step_s"], r
        events = read_events(path.parent / "events.jsonl")
        pids = {e["rank"]: e["pid"] for e in events}
        assert sorted(pids) == list(range(n)) and len(set(pids.values())) == n  # one process per rank, all logging
        assert sorted(r["pid"] for r in b["per_rank"]) == sorted(pids.values())
        assert {e["world_size"] for e in events} == {n}

        config = (path.parent / doc["model"]["resolved_config_file"]).read_text()
        assert "RepeatDataset" not in config and "ConcatDataset" not in config and "val_dataloader" not in config
        assert "init_cfg=None" in config and "num_classes=20" in config and "param_scheduler = []" in config
        print(f"\n{bench} {n} device(s): setup {doc['timing']['setup_s']:.1f} s, train {doc['timing']['train_s']:.1f} s "
              f"({b['step_s'] / b['timed_steps']:.2f} s/step, shares {b['shares']}), eval {doc['timing']['eval_s']:.1f} s,"
              f" total {doc['timing']['total_s']:.1f} s, loss {losses[0]:.2f} -> {losses[-1]:.2f}")


def truths_of(home, bench):
    """The test split's ground truth, read by the kit from the synthetic tree the DAG wrote."""
    if bench == "frcnn_mmdet_voc2007":
        [data] = (home / "data" / "synthetic").glob("voc2007-vocdevkit-2007-det-*")
        return voc_det.truths(voc_det.read_split(data, "test"))
    [data] = (home / "data" / "synthetic").glob("voc2012-vocdevkit-2012-ins-*")
    return voc_ins.truths(voc_ins.to_coco(data, "val"))


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("bench", BENCHMARKS)
def test_saved_raw_detections_rescored_by_the_kit_give_the_contracts_metrics(mmdet_runs, bench):
    home, _, runs = mmdet_runs
    assert runs[bench][0] == 0, runs[bench][1][-3000:]
    truths = truths_of(home, bench)
    for path in contracts(home, bench):
        doc = json.loads(path.read_text())
        lines = (path.parent / doc["detections_file"]).read_text().splitlines()
        detections = [json.loads(line) for line in lines]
        assert len(detections) == doc["metrics"]["detections"] > 0  # raw detections kept, even untrained ones
        assert {d["image_id"] for d in detections} <= {t["image_id"] for t in truths}
        assert all(1 <= d["label"] <= 20 for d in detections)
        score = detection_scores if bench == "frcnn_mmdet_voc2007" else instance_scores
        again = score(detections, truths, 21, score_threshold=doc["metrics"]["score_threshold"])
        assert again == pytest.approx(doc["metrics"])
        if bench != "frcnn_mmdet_voc2007":
            assert {"mask_iou", "mask_map50", "mask_map"} <= set(doc["metrics"])
            h, w = masks.decode(detections[0]["mask"]).shape
            assert (h, w) == (128, 128)  # masks in original image pixels


@pytest.mark.timeout(3600)
def test_the_weekly_runs_evaluation_after_each_epoch_stays_out_of_the_timed_steps(mmdet_runs, tmp_path):
    """The full profile sets eval_each_epoch, the smoke DAG does not: the smoke run's own 2-device
    Faster R-CNN cell again, at 2 epochs with an evaluation after each, under the same torchrun."""
    home, _, runs = mmdet_runs
    assert runs["frcnn_mmdet_voc2007"][0] == 0, runs["frcnn_mmdet_voc2007"][1][-3000:]
    [done] = [p for p in contracts(home, "frcnn_mmdet_voc2007") if p.parent.parent.name.startswith("g2-")]
    spec = json.loads((done.parent / "cell.json").read_text())
    spec["training"].update(epochs=2, eval_each_epoch=True)
    write_json_atomic(tmp_path / "cell.json", spec)
    [data] = (home / "data" / "synthetic").glob("voc2007-vocdevkit-2007-det-*")  # the dataset the DAG mounted
    entrypoint = yaml.safe_load((ROOT / "include/configs/benchmarks/frcnn_mmdet_voc2007.yaml").read_text())["entrypoint"]
    proc = subprocess.run(["docker", "run", "--rm", "-e", "OMP_NUM_THREADS=1", "-v", f"{data}:/data:ro",
                           "-v", f"{tmp_path}:/results", IMAGE, *[p.format(gpus=2) for p in entrypoint]],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["timing"]["steps"] == 2 * 8 and doc["training"]["eval_each_epoch"] is True
    rows = doc["evaluations"]
    assert [r["epoch"] for r in rows] == [1, 2] and rows[-1]["metrics"] == doc["metrics"]
    assert rows[0]["train_s"] == pytest.approx(doc["timing"]["epoch_s"][0], abs=1e-3)
    assert rows[1]["train_s"] == pytest.approx(sum(doc["timing"]["epoch_s"]), abs=1e-3)
    # rank 0 scored epoch 1 after it ended and before epoch 2 began; the steps' clock never saw it
    at = {(e["key"], e.get("epoch", e["value"])): e["time"] for e in read_events(tmp_path / "events.jsonl")
          if e["rank"] == 0 and e["key"] in ("epoch_stop", "metric", "epoch_start")}
    assert sorted(at, key=at.get) == [("epoch_start", 1), ("epoch_stop", 1), ("metric", 1), ("epoch_start", 2),
                                      ("epoch_stop", 2)], at
    between = at[("epoch_start", 2)] - at[("epoch_stop", 1)]
    assert sum(doc["timing"]["epoch_s"]) < at[("epoch_stop", 2)] - at[("epoch_start", 1)] - 0.9 * between
    assert doc["timing"]["eval_s"] >= at[("metric", 1)] - at[("epoch_stop", 1)] - 0.05


@pytest.mark.timeout(3600)
def test_a_profiled_cell_runs_mmengines_train_step_through_torch_profiler_on_every_rank(mmdet_runs):
    home, env, runs = mmdet_runs
    assert runs[PROFILED][0] == 0, runs[PROFILED][1][-3000:]
    [path] = (home / "results" / f"scalebench_{PROFILED}").glob("*/g2*/attempt-1/metrics.json")
    doc = json.loads(path.read_text())
    prof = doc["profile"]
    assert "why_not" not in prof and prof["steps"] == 2 and set(prof["ranks"]) == {"0", "1"}, prof
    names = [o["name"] for o in prof["ops"]]
    assert any(n.startswith("aten::") and "conv" in n for n in names), names
    assert all((path.parent / "profile" / f"rank{r}" / "trace.json.gz").stat().st_size > 0 for r in (0, 1))
    events = [json.loads(line)["key"] for line in (path.parent / "events.jsonl").read_text().splitlines()]
    assert events.index("eval_stop") < events.index("profile_start") < events.index("run_stop")
    others = [json.loads(p.read_text()) for b in BENCHMARKS if b != PROFILED
              for p in (home / "results" / f"scalebench_{b}").glob("*/g*/attempt-1/metrics.json")]
    assert others and all("profile" not in d for d in others)  # no profile_ops, no window


def test_the_report_has_the_mmdetection_rows(mmdet_runs):
    from tests.support.airflow_home import BIN, run

    home, env, runs = mmdet_runs
    assert all(rc == 0 for rc, _ in runs.values())
    rc, out = run([BIN / "scalebench", "report", "--out", str(home / "report")], env, 120)
    assert rc == 0, out
    text = (home / "report" / "report.md").read_text()
    for bench in BENCHMARKS:
        assert f"| {bench} |" in text
    assert "mask IoU" in text and "mask mAP@[.5:.95]" in text


COCO_CHECK = r"""
import json, sys
import numpy as np
from pycocotools import mask as coco_mask
from mmdet.datasets import CocoDataset
from mmdet.utils import register_all_modules
from scalebench_kit import masks, voc_ins
from scalebench_kit.voc_seg import CLASSES

register_all_modules()
coco = voc_ins.to_coco("/data", "train")
json.dump(coco, open("/tmp/train.json", "w"))
ds = CocoDataset(ann_file="/tmp/train.json", data_prefix=dict(img="/data/VOCdevkit/VOC2012/JPEGImages/"),
                 metainfo=dict(classes=CLASSES[1:]), test_mode=True, pipeline=[])
out = {"images": len(ds), "instances": [], "rle_agree": True}
for i in range(len(ds)):
    info = ds.get_data_info(i)
    out["instances"].append([[inst["bbox_label"], inst["bbox"]] for inst in info["instances"]])
for a in coco["annotations"]:
    ours = masks.decode(a["segmentation"])
    theirs = coco_mask.decode(coco_mask.frPyObjects(a["segmentation"], *a["segmentation"]["size"])).astype(bool)
    packed = coco_mask.encode(np.asfortranarray(ours.astype(np.uint8)))
    out["rle_agree"] &= bool((ours == theirs).all() and packed["counts"].decode() == masks.compress(ours)["counts"]
                             and (masks.decode(packed) == ours).all())
print(json.dumps(out))
"""


@pytest.mark.timeout(300)
def test_mmdets_coco_reader_and_pycocotools_agree_with_the_kits_conversion(tmp_path):
    voc_ins.write_synthetic(tmp_path, train_images=6, test_images=2, size=64, seed=5)
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{tmp_path}:/data:ro", IMAGE, "python", "-c", COCO_CHECK],
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rle_agree"]  # our RLE, pycocotools' decode and its compressed string are the same masks
    assert out["images"] == 6
    for got, image_id in zip(out["instances"], voc_ins.split_ids(tmp_path, "train")):
        want = voc_ins.read_instances(tmp_path, image_id)
        assert [label for label, _ in got] == [i.label - 1 for i in want]  # mmdet's labels are 0-based
        assert sum((box for _, box in got), []) == pytest.approx(sum((i.bbox for i in want), []))


@pytest.mark.timeout(300)
def test_the_kits_coco_map_is_pycocotools_cocoeval_on_random_boxes_and_masks():
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{here}:/check:ro", IMAGE, "python", "/check/coco_map_check.py"],
                          capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {r["kind"] for r in rows} == {"bbox", "mask"} and len(rows) == 12
    for r in rows:
        assert r["kit"] == pytest.approx(r["pycocotools"], abs=1e-12), r
    assert min(r["kit"] for r in rows) > 0.05  # scenes where detections do match: not a comparison of zeros


AMP_ON_CPU = """
import json, torch
from mmengine.optim import AmpOptimWrapper
from trainers.mmdet_train import optim_wrapper
cfg = optim_wrapper({"lr": 0.02, "precision": "bf16"}, "cuda")  # what a GPU host's bf16 cell builds
cfg.pop("type")
optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=cfg["optimizer"]["lr"])
try:
    AmpOptimWrapper(optimizer=optimizer, dtype=cfg["dtype"], loss_scale=cfg["loss_scale"])
    print(json.dumps({"built": True}))
except AssertionError as exc:
    print(json.dumps({"built": False, "error": str(exc)}))
"""


@pytest.mark.timeout(120)
def test_mmengines_amp_wrapper_asserts_cuda_as_the_cpu_refusal_says():
    proc = subprocess.run(["docker", "run", "--rm", IMAGE, "python", "-c", AMP_ON_CPU], capture_output=True, text=True,
                          timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # mmengine 0.10.7: "``AmpOptimizerWrapper`` is only available training on gpu, npu, mlu or musa"
    assert out["built"] is False and "only available training on gpu" in out["error"], out
