"""A cell's accuracy checks: after each epoch when the cell asks (`eval_each_epoch`: time to
accuracy) and once after training. One bookkeeping for every trainer, so an evaluation is
never inside the timed steps and each one is logged and recorded the same way.
Standard library only."""
from __future__ import annotations

import time
from typing import Callable

from .events import EventLog


class Evaluations:
    """`rows` is the result's `evaluations` ({epoch, train_s, metrics}, one per scored epoch, the
    final score as the last epoch's row) and `seconds` its `eval_s` (every evaluation's time)."""

    def __init__(self, events: EventLog, training: dict):
        self.events = events
        self.each_epoch = bool(training.get("eval_each_epoch"))
        self.epochs = int(training["epochs"])
        self.rows: list[dict] = []
        self.seconds = 0.0

    def after_epoch(self, epoch: int, train_s: float, evaluate: Callable[[], dict]) -> dict | None:
        """Score after `epoch` (1-based; `train_s`: training time so far) when the cell asks for
        it; the last epoch is left to `final`. None when no evaluation is due."""
        if not (self.each_epoch and epoch < self.epochs):
            return None
        scored = self._timed(evaluate)
        self._row(epoch, train_s, scored)
        self.events.log("metric", scored, epoch=epoch)
        return scored

    def final(self, train_s: float, evaluate: Callable[[], dict]) -> dict:
        """The cell's metrics, between the `eval_start` and `eval_stop` events."""
        self.events.log("eval_start")
        metrics = self._timed(evaluate)
        if self.each_epoch:
            self._row(self.epochs, train_s, metrics)
        self.events.log("eval_stop", self.seconds, **metrics)
        return metrics

    def _timed(self, evaluate: Callable[[], dict]) -> dict:
        t0 = time.perf_counter()
        try:
            return evaluate()
        finally:
            self.seconds += time.perf_counter() - t0

    def _row(self, epoch: int, train_s: float, metrics: dict) -> None:
        self.rows.append({"epoch": epoch, "train_s": round(train_s, 4), "metrics": metrics})
