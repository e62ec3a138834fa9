"""The profiling window's goals, measured with the UNet trainer in scalebench/torch:cpu (one CPU
slot, synthetic VOC data; `make images` first). Prints what docs/measurements.md keeps:

1. the timed figures of profiled and unprofiled runs of the same cell, alternating, judged by the
   project's own equivalence test (analysis.stats.equivalence, a 5 % margin of images/s);
2. what the window adds to a cell's wall time (its profile_start to profile_stop over the run)
   at about a nightly cell's step count (108 timed steps, the nightly profile's 5 window steps);
3. a planted 1024 x 1024 matrix product (the trainer's test hook) against the plain step: how
   often `profile diff` names aten::mm first, and the share of the slowdown it gives it; then per
   framework family (scalebench/torch:cpu, scalebench/tensorflow:cpu) the hold trainer's planted
   matrix multiply (all of a 1.25x slowdown: tests/support/planted.py): named first within 10
   points of its planted 100 %;
4. `scalebench profile diff A B` on two real attempt folders, end to end (a new process).

    .venv/bin/python bench/profiling.py [--pairs 10] [--planted-only]   (--planted-only: the families' planted pairs alone)
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IMAGE = "scalebench/torch:cpu"


def run_cell(data: Path, out: Path, epochs: int, profile_steps: int | None = None, **hooks) -> dict:
    from scalebench_kit.contract import write_json_atomic
    from tests.support.samples import sample_cell, sample_spec

    out.mkdir(parents=True)
    cell = sample_cell(gpus=1, epochs=epochs, benchmark="unet_torch_voc2007", dag_id="scalebench_unet_torch_voc2007",
                       per_device_batch=4, global_batch=4)
    write_json_atomic(out / "cell.json", sample_spec(
        cell, training={"per_device_batch": 4, "global_batch": 4, "scaling_mode": "weak",
                        "lr_policy": {"rule": "linear", "base_lr": 0.002, "reference_batch": 4}, "lr": 0.002,
                        "warmup_steps": 2, "epochs": epochs, "max_steps_per_epoch": None,
                        "profile_steps": profile_steps},
        data={"name": "voc2007", "format": "vocdevkit-2007-seg", "path": "/data", "fingerprint": "sha256:bench",
              "train_limit": None, "test_limit": None, "image_size": 48},
        model={"name": "unet_torch_voc2007", "architecture": "UNet", "num_classes": 21}, test_hooks=hooks))
    done = subprocess.run(["docker", "run", "--rm", "-e", "OMP_NUM_THREADS=1", "-v", f"{data}:/data:ro", "-v",
                           f"{out}:/results", IMAGE, "torchrun", "--standalone", "--nproc-per-node=1", "-m",
                           "trainers.unet_voc"], capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"{out}: the trainer failed: {done.stderr[-2000:]}")
    return json.loads((out / "metrics.json").read_text())


def window_share(out: Path) -> tuple[float, float]:
    """(the window's seconds, the run's seconds) from the attempt's events."""
    from scalebench_kit.events import read_events
    from scalebench_kit.events import window_share as share

    got = share(read_events(out / "events.jsonl"))
    if got is None:
        raise SystemExit(f"{out}: no whole profiling window in events.jsonl")
    return got


def main() -> None:
    from scalebench.analysis.profile_diff import diff
    from scalebench.analysis.stats import equivalence
    from scalebench_kit import voc_seg

    pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 10
    work = Path(tempfile.mkdtemp(prefix="bench-profiling-"))
    data = work / "data"
    voc_seg.write_synthetic(data, train_images=72, test_images=31, size=48, seed=1)
    print(f"work folder {work}; {pairs} pairs each")

    if "--planted-only" in sys.argv:
        return planted_families(work, pairs)
    plain, profiled, window = [], [], []
    for i in range(pairs):  # alternating, so a drift of the machine falls on both sides
        plain.append(run_cell(data, work / f"eq-plain-{i}", 6)["timing"]["images_per_s"])
        doc = run_cell(data, work / f"eq-profiled-{i}", 6, profile_steps=5)
        profiled.append(doc["timing"]["images_per_s"])
        window.append(window_share(work / f"eq-profiled-{i}"))
    margin = 0.05 * statistics.fmean(plain)
    verdict = equivalence(plain, profiled, margin, floor=None, ceiling=None)
    print(f"1. images/s unprofiled {statistics.fmean(plain):.2f} (sd {statistics.stdev(plain):.2f}), profiled "
          f"{statistics.fmean(profiled):.2f} (sd {statistics.stdev(profiled):.2f}): {verdict.kind} within a margin "
          f"of {margin:.2f} (5 %); 90% CI of the difference {verdict.ci}")
    shares = [w / total for w, total in window]
    print(f"2. the window (5 steps, its warm-up step and the trace's export) took {statistics.fmean(w for w, _ in window):.2f} s "
          f"of a {statistics.fmean(t for _, t in window):.1f} s run at 108 timed steps: {statistics.fmean(shares):.1%} "
          f"(largest {max(shares):.1%})")

    named, lines = 0, []
    for i in range(pairs):
        a = run_cell(data, work / f"pl-plain-{i}", 1, profile_steps=8)["profile"]
        b = run_cell(data, work / f"pl-planted-{i}", 1, profile_steps=8, planted_matmul=1024)["profile"]
        first = diff(a, b).top(1)[0]
        named += first.name == "aten::mm"
        lines.append(f"{first.name} {first.delta_s * 1e3:+.1f} ms, {first.share:.0%}")
    print(f"3. the planted aten::mm named first in {named} of {pairs} pairs: " + "; ".join(lines))
    planted_families(work, pairs)

    cli = Path(sys.executable).with_name("scalebench")
    took = []
    for _ in range(3):
        t = time.perf_counter()
        done = subprocess.run([str(cli), "profile", "diff", str(work / "pl-plain-0"), str(work / "pl-planted-0")],
                              capture_output=True, text=True)
        took.append(time.perf_counter() - t)
        assert done.returncode == 0, done.stderr
    print(f"4. scalebench profile diff on two attempt folders: {statistics.median(took):.2f} s (median of 3: "
          + ", ".join(f"{x:.2f}" for x in took) + ")")


def planted_families(work: Path, pairs: int) -> None:
    from scalebench.analysis.profile_diff import diff
    from tests.support.planted import PLANTED, hold_profile

    for family, image, want in (("torch", IMAGE, "aten::mm"), ("TensorFlow", "scalebench/tensorflow:cpu", "MatMul")):
        named, lines = 0, []
        for i in range(pairs):  # the hold trainer's planted matrix multiply: all of the slowdown (100 %)
            a = hold_profile(image, work / f"hold-{family}-plain-{i}", 1.0)
            b = hold_profile(image, work / f"hold-{family}-planted-{i}", PLANTED)
            first = diff(a, b).top(1)[0]
            named += want in first.name and abs((first.share or 0) - 1.0) <= 0.10
            lines.append(f"{first.share:.0%}")
        print(f"3. {family}: the hold trainer's planted {want} (100 % of the slowdown) named first, within 10 points, "
              f"in {named} of {pairs} pairs; its shares: " + ", ".join(lines))


if __name__ == "__main__":
    main()
