"""What every trainer needs besides its framework: cell spec in, timing, result out."""
from __future__ import annotations

import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any

from .contract import CONTRACT_VERSION, load_cell_spec, write_result
from .names import CELL_SPEC_FILE, EVENTS_FILE, TRAINER_FAILED
from .epochs import epoch_plan, timed_images, timed_samples  # noqa: F401  (trainers import epoch_plan from here)
from .events import EventLog
from .timing import Progress, StepTimer, combine_ranks  # noqa: F401  (trainers import them from here)

RESULTS_DIR_ENV = "SCALEBENCH_RESULTS_DIR"
FINAL_BARRIER_S = 300.0  # how long a rank waits at the end for the others (rank 0 writes the result meanwhile)


def system_fingerprint(framework: str, framework_version: str, **extra: Any) -> dict:
    return {
        "framework": framework,
        "framework_version": framework_version,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count() or 1,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        **extra,
    }


class Cell:
    """The running cell: reads cell.json from the results folder, logs events, writes metrics.json."""

    def __init__(self, results_dir: str | Path | None = None):
        self.t0 = time.perf_counter()
        self.results_dir = Path(results_dir or os.environ.get(RESULTS_DIR_ENV, "/results"))
        self.spec = load_cell_spec(self.results_dir / CELL_SPEC_FILE)
        self.rank = int(os.environ.get("RANK", "0"))
        # the processes of the run: the launcher's (torchrun sets WORLD_SIZE), else this one, which
        # holds every replica (tf.distribute's MirroredStrategy): the run is over when each has logged
        # its run_stop success, which the orchestrator's teardown judgement reads
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.events = EventLog(self.results_dir / EVENTS_FILE, rank=self.rank, world_size=self.world_size)
        self.events.log("run_start", self.spec["cell"]["key"], label=self.spec["cell"]["label"])

    @property
    def training(self) -> dict:
        return self.spec["training"]

    @property
    def devices(self) -> dict:
        return self.spec["devices"]

    @property
    def test_hooks(self) -> dict:
        """Test-only options from cell.json (e.g. data_delay_s); the orchestrator never sets them."""
        return self.spec.get("test_hooks") or {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def finish(self, *, system: dict, world_size: int, device_names: list[str], setup_s: float,
               timer: StepTimer, epoch_s: list[float], eval_s: float, loss_curve: list[float],
               metrics: dict, breakdown: dict, model: dict | None = None, samples_per_step: int | None = None,
               evaluations: list[dict] | None = None, extra: dict | None = None,
               precision: dict | None = None) -> Path | None:
        """Write the result contract (rank 0 only); returns the metrics.json path. `precision`:
        scalebench_kit.precision.record(...) of what ran."""
        if self.rank != 0:
            return None
        plan: dict = (extra or {}).get("epoch") or {}
        planned = bool(plan) and not samples_per_step and len(timer.steps) == len(epoch_s) * plan["steps_per_epoch"]
        samples = (samples_per_step * timer.timed_steps if samples_per_step else
                   timed_samples(plan, len(epoch_s), timer.warmup_steps) if planned
                   else self.training["global_batch"] * timer.timed_steps)
        # throughput counts distinct images; the padding repeats are recorded apart
        images = timed_images(plan, len(epoch_s), timer.warmup_steps) if planned else samples
        doc = {
            "contract_version": CONTRACT_VERSION,
            "cell": self.spec["cell"],
            "devices": {**self.devices, "world_size": world_size, "names": device_names},
            "training": self.training,
            "data": self.spec["data"],
            "model": {**self.spec["model"], **(model or {})},
            "provenance": self.spec["provenance"],
            "system": system,
            "timing": {
                "setup_s": round(setup_s, 4),
                "warmup_s": round(timer.warmup_s, 4),
                "train_s": round(timer.train_s, 4),
                "eval_s": round(eval_s, 4),
                "total_s": round(self.elapsed(), 4),
                "epoch_s": [round(t, 4) for t in epoch_s],
                "steps": len(timer.step_times),
                "timed_steps": timer.timed_steps,
                "warmup_steps": timer.warmup_steps,
                "images_per_s": round(images / timer.train_s, 3) if timer.train_s > 0 else 0.0,
                "padded_samples": samples - images,
                "breakdown": breakdown,
            },
            "evaluations": evaluations or [],
            "loss_curve": [float(v) for v in loss_curve],
            "metrics": metrics,
            "precision": precision,
            **(extra or {}),  # trainer-specific records (e.g. detections_file, the epoch definition)
        }
        path = write_result(self.results_dir, doc)
        self.events.log("run_stop", "success", total_s=doc["timing"]["total_s"])
        if self.world_size == 1:  # one process: the run is over; a launcher's ranks meet in shut_down
            self.teardown_fault()
        return path

    def teardown_fault(self) -> None:
        """Test hook `teardown: hang | abort`: the fault the orchestrator's teardown judgement must
        survive, injected after every rank's run_stop (the teardown drill's "before" and the tests)."""
        fault = self.test_hooks.get("teardown")
        if fault == "hang":
            time.sleep(24 * 3600)
        elif fault == "abort":
            os.abort()

    def shut_down(self, torch, world: int, device=None, timeout_s: float = FINAL_BARRIER_S) -> None:
        """A distributed run's end, the same on every rank, after `finish`: every rank meets the
        others at a final barrier (bounded: a rank that never comes is an error, not a hang), so no
        rank tears the group down while another still uses it; each rank other than 0 then logs its
        run_stop (rank 0 logged it with the result) and the process group is destroyed. Stop the
        threads and loader workers the run started before (the GPU sampler's `with`,
        `stop_loader_workers`): nothing may still run when the group goes."""
        if world > 1:
            from datetime import timedelta

            on = {"device_ids": [device.index]} if device is not None and device.type == "cuda" else {}
            torch.distributed.barrier(async_op=True, **on).wait(timeout=timedelta(seconds=timeout_s))
        if self.rank != 0:
            self.events.log("run_stop", "success")
        if world > 1:
            if self.rank == 1:
                self.teardown_fault()
            torch.distributed.destroy_process_group()


def stop_loader_workers(loader) -> None:
    """End a DataLoader's persistent worker processes now, as the loader's own iterator does when
    it is collected (`_shutdown_workers`: each worker told to stop, then joined), instead of at
    interpreter exit, after the process group is gone."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    if hasattr(loader, "_iterator"):
        loader._iterator = None


def main_guard(fn) -> None:
    """Run a trainer's main(); on error log it as an event and exit non-zero with the message."""
    try:
        fn()
    except Exception as exc:  # the orchestrator classifies failures from the exit code + output
        print(f"{TRAINER_FAILED} {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
