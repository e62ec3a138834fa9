"""A trainer that trains nothing: it holds its cell's devices for a set time and reports a valid
contract. The orchestrator's own benchmarks and drills use it (GPU packing, restarts) to drive
the real scheduler, pools, leases, validation and recording without paying for training.

    python -m scalebench_kit.hold --epoch-seconds S [--relative 1,0.66,0.56,0.51] [--step-seconds 1]
        [--test-slowdown F [--test-slowdown-gpus 1,2] [--test-slowdown-reruns all|none|1,2]]
    python -m scalebench_kit.hold --planned 1=15x0.03,4=15x0.034 [--capped]
        [--planned-full 1=7x0.9,4=2x1.0 --accuracy iou:1=0.8,4=0.77 [--accuracy-sd 0.003] [--time-sd 0.01]]

Hold time = S x the cell's epochs x relative[gpus - 1] (default: the study's relative training
times at 1-4 GPUs), spent in steps of --step-seconds; the first two steps are warm-up.
--planned (a rehearsal of a night's plan): at G devices, the cell's epochs of STEPS steps each
of SECONDS, the cell's own warm-up steps first; --capped records the epochs as capped. A
rehearsal plants a regression by writing hold-slowdown.json ({"benchmark", "gpus", "factor"})
into the cells' cache folder: the system got slower, the config and image did not. A rehearsed
week plants accuracies (--accuracy METRIC:G=LEVEL,...): a nightly cell reports its GPU count's
level; a weekly accuracy run's cell (run type accuracy) holds the --planned-full steps, its
final METRIC is the level plus seeded noise (--accuracy-sd), reached along level x (1 - exp(-3
e / E)) with an evaluation after every epoch e of E, and its step time varies by --time-sd. An image
built with SCALEBENCH_TEST_IMAGE_SLOWDOWN=F in its environment is F times slower: the image
did it (the image-change tests and the bisect drill build such tags), and the extra time is spent
in one named framework operation (a matrix multiply: `aten::mm` in a torch image, `MatMul` in a
TensorFlow one), so a profiled A/B of the two images can name it. A cell that asks for a
profiling window (training.profile_steps) gets one after its steps, through the framework's own
profiler (scalebench_kit.profiling), each step running one small named operation besides.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Callable

from .epochs import epoch_plan
from .precision import not_observed, requested
from .runtime import Cell, Progress, StepTimer, combine_ranks, main_guard, system_fingerprint

STUDY_RELATIVE = (1.0, 0.662, 0.557, 0.512)  # the study's mean relative training time at 1-4 GPUs
METHOD = {"compute_s": "sleeping: the hold trainer occupies its devices and computes nothing",
          "data_wait_s": "none: no data", "sync_s": "none: no gradients"}
NO_MODEL = "none: the hold trainer runs no model"


def hold_seconds(epoch_s: float, epochs: int, gpus: int, relative: tuple[float, ...] = STUDY_RELATIVE) -> float:
    return epoch_s * epochs * relative[min(gpus, len(relative)) - 1]


def _slowed(gpus: int, rerun: bool, args) -> bool:
    def within(spec: str) -> bool:
        return spec == "all" or str(gpus) in spec.split(",")

    return (not args.test_slowdown_gpus or within(args.test_slowdown_gpus)) and (
        not rerun or within(args.test_slowdown_reruns))


def planned_steps(spec: str, gpus: int) -> tuple[int, float]:
    """(steps per epoch, seconds per step) at `gpus` devices from "1=15x0.03,4=15x0.034"."""
    table = {int(g): v for g, v in (kv.split("=") for kv in spec.split(","))}
    if gpus not in table:
        raise ValueError(f"--planned has no entry for {gpus} devices: {spec!r}")
    steps, seconds = table[gpus].split("x")
    return int(steps), float(seconds)


SLOWDOWN_FILE = "hold-slowdown.json"
IMAGE_SLOWDOWN_ENV = "SCALEBENCH_TEST_IMAGE_SLOWDOWN"


def image_slowdown() -> float:
    """The factor an image was built with (test only: a slower image); 1.0 in every real image."""
    return float(os.environ.get(IMAGE_SLOWDOWN_ENV) or 1.0)


class HoldOps:
    """The framework operations a hold step runs: `touch()`, one small reduction every step (a
    profile always has an operation), and `busy(seconds)`, matrix multiplies until that much wall
    time has passed (an image's planted slowdown). torch where the image has it, else TensorFlow;
    neither: the time is slept and no profiler can run."""

    def __init__(self):
        self.backend, self.touch, self._mm = None, lambda: None, None
        try:
            import torch

            from .profiling import TorchProfiler

            a = torch.ones(1024, 1024)
            self.backend, self.touch, self._mm = TorchProfiler(torch, False), lambda: a.sum(), lambda: torch.mm(a, a)
        except ImportError:
            try:
                import tensorflow as tf

                from .profiling import TFProfiler

                b = tf.ones((1024, 1024))  # as tf.functions: TensorFlow's profiler leaves small eager ops out
                self.backend, self.touch = TFProfiler(tf), tf.function(lambda: tf.reduce_sum(b))
                self._mm = tf.function(lambda: tf.linalg.matmul(b, b))
            except ImportError:
                pass
        if self._mm is not None:  # the first call pays for thread pools and tracing, outside any step
            self.touch()
            self._mm()

    def busy(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        if self._mm is None:
            time.sleep(max(seconds, 0.0))
            return
        while time.perf_counter() < end:
            self._mm()


def hold_steps(timer: StepTimer, steps: int, total: float, extra: float, ops: HoldOps | None) -> None:
    """`steps` steps of (total + extra) / steps each, `extra` spent in the planted operation. Each
    step runs to its own deadline: a slow warm-up step must not shorten the timed ones."""
    timer.start()
    for _ in range(steps):
        began = time.perf_counter()
        if ops is not None:
            ops.touch()
            ops.busy(extra / steps)
        time.sleep(max(began + (total + extra) / steps - time.perf_counter(), 0.0))
        timer.step_done(data_wait_s=0.0, compute_s=time.perf_counter() - began, sync_s=0.0)


def profile_window(cell: Cell, ops: HoldOps, step: Callable[[], None]) -> dict | None:
    """The cell's profiling window after its timed steps when it asks for one (the contract's
    `profile`), else None."""
    steps = cell.training.get("profile_steps")
    if not steps:
        return None
    from .profiling import slowest, window

    cell.events.log("profile_start", steps)
    if ops.backend is None:
        got = {"rank": 0, "why_not": "no framework profiler in this image (neither torch nor TensorFlow)"}
    else:
        got = window(ops.backend, steps, step, cell.results_dir, 0)
    cell.events.log("profile_stop", got.get("step_s"), why_not=got.get("why_not"))
    return slowest([got])


def planted_slowdown(benchmark: str, gpus: int) -> float:
    """The factor a rehearsal planted for this benchmark and device count (1.0: none)."""
    path = Path(os.environ.get("SCALEBENCH_CACHE_DIR", "/cache")) / SLOWDOWN_FILE
    if not path.exists():
        return 1.0
    doc = json.loads(path.read_text())
    return float(doc["factor"]) if (doc["benchmark"], int(doc["gpus"])) == (benchmark, gpus) else 1.0


def planted_accuracy(spec: str, gpus: int) -> tuple[str, float]:
    """(metric, level) at `gpus` devices from "iou:1=0.8,4=0.77"."""
    metric, levels = spec.split(":", 1)
    table = {int(g): float(v) for g, v in (kv.split("=") for kv in levels.split(","))}
    if gpus not in table:
        raise ValueError(f"--accuracy has no level for {gpus} devices: {spec!r}")
    return metric, table[gpus]


def curve(final: float, epochs: int) -> list[float]:
    """The planted metric after each epoch: final x (1 - exp(-3 e / E)), normalised to end at final."""
    raw = [1 - math.exp(-3 * e / epochs) for e in range(1, epochs + 1)]
    return [final * r / raw[-1] for r in raw]


def rehearse(cell: Cell, spec: str, capped: bool, accuracy: str | None = None, weekly: bool = False,
             accuracy_sd: float = 0.0, time_sd: float = 0.0, train_images: int | None = None) -> None:
    """Hold for the cell's planned steps at the planted step time, timed as a trainer times them;
    with `accuracy`, report the planted metric; `weekly`: with noise, evaluated after every epoch."""
    train, n = cell.training, cell.devices["count"]
    per_epoch, step_s = planned_steps(spec, n)
    rng = random.Random(f"{cell.spec['cell']['seed']}/{cell.spec['cell'].get('repeat')}/{n}")
    step_s *= planted_slowdown(cell.spec["cell"]["benchmark"], n) * image_slowdown() * (
        1 + (rng.gauss(0, time_sd) if weekly else 0.0))
    timer = StepTimer(train["warmup_steps"], Progress(per_epoch * train["epochs"], train["global_batch"]))
    cell.events.log("model_ready", steps=per_epoch * train["epochs"], step_s=step_s)
    epoch_s = []
    for _ in range(train["epochs"]):
        began = time.perf_counter()
        timer.start()
        for _ in range(per_epoch):
            t = time.perf_counter()
            time.sleep(step_s)
            timer.step_done(data_wait_s=0.0, compute_s=time.perf_counter() - t, sync_s=0.0)
        epoch_s.append(time.perf_counter() - began)
    cell.events.log("train_stop", timer.train_s)
    # the epoch as the plan has it: the split the stand-in stands for (--train-images), else its steps
    images = train_images or per_epoch * train["global_batch"]
    plan = epoch_plan(images, train["global_batch"], per_epoch if capped else None, shards=n)
    metrics, evaluations = {"precision": 0.5, "recall": 0.5}, []
    if accuracy:  # the planted level (a nightly cell), or its noisy curve with every epoch evaluated (weekly)
        metric, level = planted_accuracy(accuracy, n)
        values = curve(min(max(level + (rng.gauss(0, accuracy_sd) if weekly else 0.0), 0.0), 1.0), train["epochs"])
        metrics = {metric: values[-1]}
        evaluations = [{"epoch": e + 1, "train_s": round(sum(epoch_s[:e + 1]), 4), "metrics": {metric: v}}
                       for e, v in enumerate(values)] if weekly else []
    cell.finish(system=system_fingerprint("none", "0"), world_size=n, device_names=[f"slot {d}" for d in
                cell.devices["ids"]], setup_s=0.0, timer=timer, epoch_s=epoch_s, eval_s=0.0,
                loss_curve=[1.0] * train["epochs"], metrics=metrics, evaluations=evaluations,
                breakdown=combine_ranks([timer.summary(r) for r in range(n)], METHOD), extra={"epoch": plan},
                precision=not_observed(requested(cell.spec), NO_MODEL))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planned", help="G=STEPSxSECONDS,...: a rehearsal's planned steps per epoch and step time")
    ap.add_argument("--capped", action="store_true", help="with --planned: the plan caps its epochs")
    ap.add_argument("--planned-full", help="G=STEPSxSECONDS,...: the same for a weekly accuracy run's cell")
    ap.add_argument("--accuracy", help="with --planned: METRIC:G=LEVEL,... the planted final metric per device count")
    ap.add_argument("--train-images", type=int, help="with --planned-full: the train split a weekly cell's epoch covers")
    ap.add_argument("--accuracy-sd", type=float, default=0.0, help="with --accuracy: noise of a repeat's level")
    ap.add_argument("--time-sd", type=float, default=0.0, help="with --planned: noise of a repeat's step time")
    ap.add_argument("--epoch-seconds", type=float)
    ap.add_argument("--relative", default=",".join(map(str, STUDY_RELATIVE)))
    ap.add_argument("--step-seconds", type=float, default=1.0)
    # test only: a deliberately slowed cell, for the regression drills (rerun confirmation)
    ap.add_argument("--test-slowdown", type=float, default=1.0,
                    help="test only: every step takes this many times longer (throughput falls by it)")
    ap.add_argument("--test-slowdown-gpus", default="", help="test only: slow only these GPU counts (1,2)")
    ap.add_argument("--test-slowdown-reruns", default="all",
                    help="test only: the GPU counts whose reruns are slowed too (all, none or 1,2)")
    args = ap.parse_args()
    cell = Cell()
    if args.planned:
        if args.planned_full and cell.spec["cell"]["run_type"] == "accuracy":  # the weekly run: full passes
            return rehearse(cell, args.planned_full, False, args.accuracy, True, args.accuracy_sd, args.time_sd,
                            args.train_images)
        return rehearse(cell, args.planned, args.capped, args.accuracy)
    if args.epoch_seconds is None:
        ap.error("give --epoch-seconds or --planned")
    train, n = cell.training, cell.devices["count"]
    total = hold_seconds(args.epoch_seconds, train["epochs"], n, tuple(float(x) for x in args.relative.split(",")))
    steps = max(int(round(total / args.step_seconds)), 3)
    if _slowed(n, cell.spec["cell"].get("role") == "rerun", args):
        total *= args.test_slowdown
    extra = total * (image_slowdown() - 1)  # the image's planted slowdown: spent in a named operation
    ops = HoldOps() if extra > 0 or train.get("profile_steps") else None
    timer = StepTimer(2)
    cell.events.log("model_ready", steps=steps, hold_s=round(total + extra, 3))
    hold_steps(timer, steps, total, extra, ops)
    cell.events.log("train_stop", timer.train_s)

    def one_step() -> None:  # as a timed step: the small operation, the planted one, the hold
        assert ops is not None
        ops.touch()
        ops.busy(extra / steps)
        time.sleep(total / steps)

    profile = profile_window(cell, ops, one_step) if ops is not None else None
    ranks = [timer.summary(r) for r in range(n)]  # one process stands for every rank of the cell
    cell.finish(system=system_fingerprint("none", "0"), world_size=n, device_names=[f"slot {d}" for d in
                cell.devices["ids"]], setup_s=0.0, timer=timer, epoch_s=[round((total + extra) / train["epochs"], 4)] *
                train["epochs"], eval_s=0.0, loss_curve=[1.0] * train["epochs"], metrics={"precision": 0.5, "recall": 0.5},
                breakdown=combine_ranks(ranks, METHOD), precision=not_observed(requested(cell.spec), NO_MODEL),
                extra={"profile": profile} if profile is not None else None)


if __name__ == "__main__":
    main_guard(main)
