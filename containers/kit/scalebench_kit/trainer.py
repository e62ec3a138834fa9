"""The skeleton every trainer shares: a trainer is its model, its data and its step; the run
around them is here, the same for every stack.

    run = TrainerRun(BREAKDOWN_METHOD)               # run_start, init_start
    fw = run.use(TorchDDP(torch, run.cell.devices))  # or TFDistribute: ranks, gathering, shutdown
    ...read the data...      run.data_ready(images, **fields)
    ...build the model...    run.model_ready(params, **fields)   # init_stop: the setup time
    with run.training(steps_per_epoch):              # the step timer, evaluations, GPU sampling
        for epoch in run.epochs():                   # epoch_start
            ...each step...  run.step_done(data_wait_s=..., compute_s=..., sync_s=...)
            run.epoch_done(epoch, loss, score)       # epoch_stop, then an evaluation when due
    metrics = run.final(score)                       # train_stop, eval_start/eval_stop
    run.profile(one_step)                            # when asked: the profiling window, after every figure
    run.finish(metrics=metrics, model={...}, precision={...}, extra={...})
    run.leave()                                      # the process ends here, before main's objects are torn down

`finish` gathers every rank's step breakdown, writes the result contract (rank 0) and shuts the
run down cleanly (a torchrun launch meets at a final barrier); `leave` ends the process. A framework object (torch_ddp,
tf_distribute) holds what differs between families. Standard library only.
"""
from __future__ import annotations

import math
import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn, Protocol

from .evaluation import Evaluations
from .gpu_monitor import sample_gpus
from .runtime import Cell, Progress, StepTimer, combine_ranks, system_fingerprint


class Framework(Protocol):
    rank: int
    world: int
    strategy: str

    def gather(self, mine: list) -> list: ...
    def device_names(self) -> list[str]: ...
    def system(self) -> dict: ...
    def shut_down(self, cell: Cell) -> None: ...
    def profiler(self): ...


class TrainerRun:
    def __init__(self, breakdown_method: dict[str, str], cell: Cell | None = None):
        self.cell = cell or Cell()
        self.cell.events.log("init_start")
        self.breakdown_method = breakdown_method
        self.fw: Framework | None = None
        self.setup_s = 0.0
        self.epoch_s: list[float] = []
        self.loss_curve: list[float] = []
        self.epoch_started = 0.0  # perf_counter at the current epoch's start
        self.steps_per_epoch = 0
        self.profiled: dict | None = None  # this rank's profile summary, when the cell asked for one

    @property
    def events(self):
        return self.cell.events

    @property
    def train(self) -> dict:
        return self.cell.training

    def use(self, fw):
        """The framework of this run; the global batch must be the per-device batch x the world."""
        self.fw = fw
        train = self.train
        if train["global_batch"] != train["per_device_batch"] * fw.world:
            raise RuntimeError(f"global batch {train['global_batch']} != per-device batch {train['per_device_batch']} "
                               f"x {fw.world} replicas")
        return fw

    @property
    def framework(self) -> Framework:
        if self.fw is None:
            raise RuntimeError("TrainerRun.use(framework) was not called")
        return self.fw

    def data_ready(self, images: int, **fields) -> None:
        self.events.log("data_ready", images, **fields)

    def model_ready(self, params: int, **fields) -> None:
        """The model is built: the setup time ends here (init_stop)."""
        self.events.log("model_ready", params, **fields)
        self.setup_s = self.cell.elapsed()
        self.events.log("init_stop", self.setup_s)

    @contextmanager
    def training(self, steps_per_epoch: int) -> Iterator[TrainerRun]:
        """The step timer (progress lines from rank 0), the evaluations and the GPU sampler (rank 0
        samples every device of the run) for the duration of the `with`."""
        fw, train = self.framework, self.train
        self.steps_per_epoch = steps_per_epoch
        self.timer = StepTimer(train["warmup_steps"],
                               Progress(steps_per_epoch * train["epochs"], train["global_batch"]) if fw.rank == 0 else None)
        self.evals = Evaluations(self.events, train)
        self.gpus = sample_gpus(self.cell.devices["kind"], list(range(fw.world)) if fw.rank == 0 else [])
        with self.gpus:
            yield self

    def epochs(self) -> Iterator[int]:
        """Each epoch's index from 0, its start logged (epoch_start is 1-based)."""
        for epoch in range(self.train["epochs"]):
            self.epoch_start(epoch)
            yield epoch

    def epoch_start(self, epoch: int) -> float:
        self.epoch_started = time.perf_counter()
        self.events.log("epoch_start", epoch + 1)
        return self.epoch_started

    def step_done(self, *, data_wait_s: float, compute_s: float, sync_s: float | None, loss: float | None = None
                  ) -> None:
        """One step timed; warmup_stop when the warm-up steps are done. `loss`: checked finite."""
        self.timer.step_done(data_wait_s=data_wait_s, compute_s=compute_s, sync_s=sync_s)
        if loss is not None and not math.isfinite(loss):
            raise FloatingPointError(f"loss is {loss} at step {len(self.timer.steps)}")
        if len(self.timer.steps) == self.timer.warmup_steps:
            self.events.log("warmup_stop", self.timer.warmup_s)

    def epoch_done(self, epoch: int, loss: float, score: Callable[[], dict] | None = None) -> None:
        """epoch_stop with the epoch's mean loss, then (outside the timed steps) an evaluation when
        the cell asks for one after each epoch."""
        self.epoch_s.append(time.perf_counter() - self.epoch_started)
        self.loss_curve.append(float(loss))
        self.events.log("epoch_stop", epoch + 1, loss=self.loss_curve[-1], seconds=self.epoch_s[-1])
        if score is not None:
            self.evals.after_epoch(epoch + 1, sum(self.epoch_s), score)

    def profile(self, step: Callable[[], None]) -> None:
        """When the cell asks (training.profile_steps): that many more calls of `step` (one
        training step, untimed) through the framework's profiler, on every rank, after the timed
        steps and the evaluation (no figure moves); each rank's summary kept for `finish`
        (profiling.window)."""
        steps = self.train.get("profile_steps")
        if not steps:
            return
        from .profiling import window

        self.events.log("profile_start", steps)
        self.profiled = window(self.framework.profiler(), steps, step, self.cell.results_dir, self.framework.rank)
        self.events.log("profile_stop", self.profiled.get("step_s"), why_not=self.profiled.get("why_not"))

    def final(self, score: Callable[[], dict]) -> dict:
        """Training is over (train_stop); the cell's metrics."""
        self.events.log("train_stop", self.timer.train_s)
        return self.evals.final(sum(self.epoch_s), score)

    def finish(self, *, metrics: dict, model: dict, precision: dict | None, extra: dict | None = None,
               system: dict | None = None, before_shut_down: Callable[[], None] | None = None) -> None:
        """Every rank's step breakdown gathered, the result contract written (rank 0), the run shut
        down on every rank. `system`: the trainer's own fingerprint fields (e.g. its library
        versions); `before_shut_down`: what must stop before the process group goes (loader workers)."""
        fw, cell = self.framework, self.cell
        mine = self.timer.summary(fw.rank)
        self.events.log("step_breakdown", mine["step_s"], **mine)  # every rank's own figures in the log
        gathered = fw.gather([{**mine, "profile": self.profiled}] if self.profiled is not None else [mine])
        breakdown = combine_ranks([{k: v for k, v in r.items() if k != "profile"} for r in gathered],
                                  self.breakdown_method)
        if self.profiled is not None:
            from .profiling import slowest

            extra = {**(extra or {}), "profile": slowest([r["profile"] for r in gathered])}
        if self.gpus.summary():
            breakdown["gpu"] = self.gpus.summary()
        fingerprint = system_fingerprint(**fw.system(), **(system or {}), topology=cell.devices.get("topology"),
                                         **self.gpus.fingerprint())
        cell.finish(system=fingerprint, world_size=fw.world, device_names=fw.device_names(), setup_s=self.setup_s,
                    timer=self.timer, epoch_s=self.epoch_s, eval_s=self.evals.seconds, loss_curve=self.loss_curve,
                    metrics=metrics, breakdown=breakdown, evaluations=self.evals.rows,
                    model={"strategy": fw.strategy, **model}, extra=extra, precision=precision)
        if before_shut_down is not None:
            before_shut_down()
        fw.shut_down(cell)

    @staticmethod
    def leave() -> NoReturn:
        """End the process now, after `finish`: the result is written and the run shut down, so
        nothing is left to save. The interpreter's teardown of the framework's objects is skipped:
        a tf.data input stream cancels its in-flight work there (20-60 s measured on a 2-core host
        for Model Garden's), holding the cell's devices and the next cell for nothing."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
