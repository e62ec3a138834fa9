"""Where each training step's time goes, per rank.

A step runs from the end of the previous one (or `start()`) to `step_done()`. Inside it the
trainer measures what it can separate: data wait (blocked on the loader, plus the copy to the
device), compute (forward, backward, optimiser) and exposed gradient synchronisation (the part
of the all-reduce not hidden behind the backward pass). What is left is `other`, the
unattributed rest, stated rather than spread over the parts, so the parts always add up to the
step. A part the framework does not expose is None, with the reason in `method`.

The first `warmup_steps` steps are warm-up: recorded apart, never summed into the steady
figures. Per-epoch fixed costs (sampler set-up, loader start) have their own bucket.
With a `Progress`, the timer also prints a progress line at a fixed interval, from the times it
took anyway (no device synchronisation of its own). Standard library only: this module runs in
every image and on bare GPU hosts.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Iterable, Iterator

from .names import PROGRESS_EVERY_ENV, PROGRESS_EVERY_S, PROGRESS_PREFIX

PARTS = ("data_wait_s", "compute_s", "sync_s", "other_s")


class Progress:
    """'step i of N, images/s, time left' every `every_s` seconds of the step timer's clock; the
    rate is over the steady steps since the last line (warm-up steps are reported, never rated)."""

    def __init__(self, total_steps: int, samples_per_step: int, every_s: float | None = None,
                 emit: Callable[[str], None] = lambda line: print(line, flush=True)):
        self.total_steps, self.samples_per_step, self.emit = total_steps, samples_per_step, emit
        self.every_s = float(os.environ.get(PROGRESS_EVERY_ENV, PROGRESS_EVERY_S)) if every_s is None else every_s
        self._since: tuple[float, int] | None = None  # (clock, steps done) at the last line

    def step(self, now: float, done: int, steady: bool = True) -> None:
        if self._since is None:
            self._since = (now, done)
            return
        t0, d0 = self._since
        if not steady:  # compiling, allocating: no rate to tell yet; the steady window starts after it
            if now - t0 >= self.every_s:
                self.emit(f"{PROGRESS_PREFIX} step {done} of {self.total_steps} (warm-up)")
            self._since = (now, done)
            return
        if now - t0 < self.every_s or done == d0:
            return
        rate = (done - d0) / (now - t0)
        left = max(self.total_steps - done, 0) / rate
        self.emit(f"{PROGRESS_PREFIX} step {done} of {self.total_steps} ({100 * done / self.total_steps:.0f}%), "
                  f"{rate * self.samples_per_step:.1f} images/s, {_duration(left)} left")
        self._since = (now, done)


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600} h {s % 3600 // 60} min" if s >= 3600 else f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


class StepTimer:
    def __init__(self, warmup_steps: int, progress: Progress | None = None):
        self.warmup_steps = warmup_steps
        self.progress = progress       # rank 0's progress lines (None on the other ranks)
        self.steps: list[dict[str, float | None]] = []  # each step's parts (None: not measured)
        self._step_s: list[float] = []  # each step's whole time
        self.fixed: list[float] = []   # per-epoch fixed costs, one entry per epoch
        self._t: float | None = None

    def start(self) -> None:
        self._t = time.perf_counter()
        if self.progress:
            self.progress.step(self._t, len(self.steps))

    @property
    def step_began(self) -> float:
        """perf_counter() at the start of the step in progress."""
        if self._t is None:
            raise RuntimeError("StepTimer: start() before the first step")
        return self._t

    def epoch_fixed(self, seconds: float) -> None:
        self.fixed.append(seconds)

    def step_done(self, data_wait_s: float | None = None, compute_s: float | None = None,
                  sync_s: float | None = None) -> None:
        now = time.perf_counter()
        step = now - self.step_began
        known = sum(v for v in (data_wait_s, compute_s, sync_s) if v is not None)
        self.steps.append({"step_s": step, "data_wait_s": data_wait_s, "compute_s": compute_s, "sync_s": sync_s,
                           "other_s": step - known})
        self._step_s.append(step)
        self._t = now
        if self.progress:
            self.progress.step(now, len(self.steps), steady=len(self.steps) > self.warmup_steps)

    @property
    def step_times(self) -> list[float]:
        return list(self._step_s)

    @property
    def warmup_s(self) -> float:
        return float(sum(self.step_times[: self.warmup_steps]))

    @property
    def train_s(self) -> float:
        return float(sum(self.step_times[self.warmup_steps:]))

    @property
    def timed_steps(self) -> int:
        return max(len(self.steps) - self.warmup_steps, 0)

    def summary(self, rank: int = 0) -> dict:
        """This rank's steady figures: sums over the timed steps, None for a part not measured."""
        timed = self.steps[self.warmup_steps:]
        out: dict = {"rank": rank, "pid": os.getpid(), "timed_steps": len(timed),
                     "step_s": round(sum(self._step_s[self.warmup_steps:]), 4)}
        for part in PARTS:
            vals = [s[part] for s in timed]
            known = [v for v in vals if v is not None]
            out[part] = None if len(known) < len(vals) else round(max(sum(known), 0.0), 4)
        out["epoch_fixed_s"] = round(sum(self.fixed), 4)
        out["warmup_s"] = round(self.warmup_s, 4)
        return out


def combine_ranks(ranks: list[dict], method: dict[str, str]) -> dict:
    """The cell's breakdown from every rank's summary. The slowest rank (largest steady step
    time) decides the step, so its parts are the cell's figures; every rank is kept."""
    ranks = sorted(ranks, key=lambda r: r["rank"])
    slowest = max(ranks, key=lambda r: r["step_s"])
    step = slowest["step_s"]
    shares = {part.removesuffix("_s"): (round(slowest[part] / step, 4) if slowest[part] is not None and step > 0
                                        else None) for part in PARTS}
    return {
        "ranks": len(ranks),  # processes (one drives every replica under tf.distribute)
        "slowest_rank": slowest["rank"],
        "timed_steps": slowest["timed_steps"],
        "step_s": step,
        **{part: slowest[part] for part in PARTS},
        "epoch_fixed_s": slowest["epoch_fixed_s"],
        "shares": shares,
        "per_rank": ranks,
        "method": method,
    }


def delayed(batches: Iterable, seconds: float) -> Iterator:
    """Test-only loader: sleeps `seconds` before each batch (cell.json test_hooks.data_delay_s),
    so a known data wait can be checked against the breakdown."""
    for batch in batches:
        time.sleep(seconds)
        yield batch
