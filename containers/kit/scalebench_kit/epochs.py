"""What an epoch is: the one definition the trainers run and the planner (`scalebench plan`,
config checks) counts with, so a plan and the cell that runs it cannot disagree.
Standard library only."""
from __future__ import annotations


def epoch_plan(images: int, global_batch: int, max_steps: int | None = None) -> dict:
    """An epoch is one pass over the train split: floor(images / global batch) steps, at least 1,
    the remainder dropped (and recorded, so a changing epoch across GPU counts is visible).
    `max_steps` caps it: a capped epoch is that many steps of a pass, and the cell's timing basis
    becomes steady throughput (its steps no longer cover the split)."""
    steps = max(images // global_batch, 1)
    plan = {"train_images": images, "global_batch": global_batch, "steps_per_epoch": steps,
            "dropped_images": max(images - steps * global_batch, 0)}
    if max_steps and max_steps <= steps:  # a cap equal to the pass still fixes the steps
        plan.update(steps_per_epoch=max_steps, capped_by_max_steps_per_epoch=max_steps)
    return plan


def timed_steps(plan: dict, epochs: int, warmup_steps: int) -> int:
    """Steps that count towards the figures: every step after the warm-up ones."""
    return max(epochs * plan["steps_per_epoch"] - warmup_steps, 0)
