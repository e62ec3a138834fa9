"""The Keras trainer in the real TensorFlow image without Airflow: a bf16 cell on 2 CPU device
slots, on a split that leaves a smaller last batch (the whole split each epoch), evaluated after
each epoch as the weekly run is. The DAG test runs fp32 only: on a CPU without AVX512-BF16 a bf16 ResNet50 step is several
times an fp32 one, so this cell is kept to a few steps."""
import math
import os
import subprocess

import pytest

from scalebench_kit import cifar10
from scalebench_kit.contract import load_result, write_json_atomic
from tests.support.engine import docker_ready
from tests.support.samples import sample_cell, sample_spec

IMAGE = "scalebench/tensorflow:cpu"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not docker_ready(IMAGE) and os.environ.get("CI") != "true",
                                                   reason=f"needs a Docker engine and {IMAGE} (make images)")]


@pytest.mark.timeout(600)
def test_a_bf16_cell_computes_in_bfloat16_under_mirrored_strategy_on_2_devices(tmp_path):
    data, out = tmp_path / "data", tmp_path / "out"
    cifar10.write_synthetic(data, train_images=35, test_images=16, seed=0)  # 2 x 16 + a last batch of 3 (+1 repeat)
    out.mkdir()
    n, batch = 2, 8
    cell = sample_cell(gpus=n, epochs=2, precision="bf16", per_device_batch=batch, global_batch=batch * n)
    write_json_atomic(out / "cell.json", sample_spec(
        cell,
        training={"per_device_batch": batch, "global_batch": batch * n, "scaling_mode": "weak",
                  "lr_policy": {"rule": "linear", "base_lr": 0.01, "reference_batch": 256}, "lr": 0.01 * batch * n / 256,
                  "warmup_steps": 2, "epochs": 2, "max_steps_per_epoch": None, "precision": "bf16",
                  "eval_each_epoch": True},
        data={"name": "cifar10", "format": "cifar10-python", "path": "/data", "fingerprint": "sha256:test",
              "train_limit": None, "test_limit": None, "image_size": None},
        model={"name": "resnet50_keras_cifar10", "architecture": "ResNet50", "num_classes": 10}))
    proc = subprocess.run(["docker", "run", "--rm", "-v", f"{data}:/data:ro", "-v", f"{out}:/results", IMAGE,
                           "python", "-m", "trainers.resnet50_keras"], capture_output=True, text=True, timeout=560)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    doc = load_result(out / "metrics.json")
    assert doc["devices"]["world_size"] == n and doc["model"]["strategy"] == "MirroredStrategy"
    assert doc["training"]["precision"] == "bf16" and doc["timing"]["steps"] == 2 * 3
    # evaluated after each epoch outside the timed steps (time to accuracy), the last one the cell's metrics
    assert [e["epoch"] for e in doc["evaluations"]] == [1, 2] and doc["evaluations"][-1]["metrics"] == doc["metrics"]
    assert doc["evaluations"][0]["train_s"] == pytest.approx(doc["timing"]["epoch_s"][0], abs=1e-3)
    assert doc["epoch"]["covered_images"] == 35 and doc["epoch"]["last_batch"] == 4 and doc["epoch"]["repeated_images"] == 1
    p = doc["precision"]  # Keras' mixed_bfloat16 policy on CPU: an inner convolution computed in bfloat16
    assert p["requested"] == "bf16" and p["observed_dtype"] == "bfloat16", p
    assert p["switches"]["dtype_policy"] == "mixed_bfloat16", p
    assert all(math.isfinite(x) for x in doc["loss_curve"]), doc["loss_curve"]  # fp32 master weights, no overflow
    print(f"\nbf16 on {n} devices: {doc['timing']['steps']} steps, train {doc['timing']['train_s']:.1f} s")


@pytest.mark.timeout(300)
def test_a_planted_slowdown_in_one_tensorflow_operation_is_named_first_by_the_profile_diff(tmp_path):
    """The TensorFlow family's planted cause: the kit's hold trainer in this image, profiled through
    TensorFlow's profiler and its own op table, once plain and once as an image built 1.25x slower
    would run it (its extra time spent in a matrix multiply each step): the diff names that
    operation first, within 10 points of its planted share (all of the slowdown). The torch
    family's is the image-change DAG's A/B (tests/integration/dags/test_image_change.py)."""
    from scalebench.analysis.profile_diff import diff
    from tests.support.planted import PLANTED, hold_profile

    a, b = hold_profile(IMAGE, tmp_path / "a", 1.0), hold_profile(IMAGE, tmp_path / "b", PLANTED)
    assert a.get("ops") and a["traces"] and b.get("ops") and b["traces"], (a, b)
    d = diff(a, b)
    first = d.changes[0]
    assert "MatMul" in first.name and abs(first.share - 1.0) <= 0.10, [c.line() for c in d.changes[:5]]
    print(f"\nTensorFlow planted MatMul: {first.line()}; step {d.step_before_s * 1e3:.1f} -> {d.step_after_s * 1e3:.1f} ms")
