"""What an epoch is: the one definition the trainers run and the planner (`scalebench plan`,
config checks) counts with, so a plan and the cell that runs it cannot disagree.
Standard library only (the torch sampler takes the torch module as an argument)."""
from __future__ import annotations

import random

# how an epoch's last step is filled
SMALLER_LAST = "smaller last batch"        # the split rounded up to equal shards, the last batch smaller
FULL_BATCHES = "full batches"              # every batch full: the stream runs on into the next pass


def epoch_plan(images: int, global_batch: int, max_steps: int | None = None, *, shards: int = 1,
               full_batches: bool = False) -> dict:
    """An epoch is one pass over the whole train split at every GPU count: ceil(images / global
    batch) steps. The last batch is smaller, rounded up so each of `shards` ranks takes the same
    number of images (at most shards - 1 repeated); a framework that needs every batch full
    (`full_batches`) repeats up to a batch's worth instead. Repeats are counted in the plan.
    `max_steps` caps it where the cap cuts the pass (max_steps x batch <= images): a capped epoch
    is that many full steps, and the cell's timing basis becomes steady throughput."""
    steps = max(-(-images // global_batch), 1)
    if max_steps and max_steps * global_batch <= images:
        return {"train_images": images, "global_batch": global_batch, "steps_per_epoch": max_steps,
                "samples_per_epoch": max_steps * global_batch, "covered_images": max_steps * global_batch,
                "repeated_images": 0, "dropped_images": images - max_steps * global_batch,
                "last_batch": global_batch, "capped_by_max_steps_per_epoch": max_steps}
    samples = steps * global_batch if full_batches else -(-images // shards) * shards
    samples = max(samples, shards)
    return {"train_images": images, "global_batch": global_batch, "steps_per_epoch": steps,
            "samples_per_epoch": samples, "covered_images": images, "repeated_images": samples - images,
            "dropped_images": 0, "last_batch": samples - (steps - 1) * global_batch,
            "last_step": FULL_BATCHES if full_batches else SMALLER_LAST}


def timed_steps(plan: dict, epochs: int, warmup_steps: int) -> int:
    """Steps that count towards the figures: every step after the warm-up ones."""
    return max(epochs * plan["steps_per_epoch"] - warmup_steps, 0)


def timed_samples(plan: dict, epochs: int, warmup_steps: int) -> int:
    """Samples the timed steps processed (repeats included): each epoch's last step has the
    plan's last batch, every other step a global batch."""
    sizes = [plan["global_batch"]] * (plan["steps_per_epoch"] - 1) + [plan.get("last_batch", plan["global_batch"])]
    return sum((sizes * epochs)[warmup_steps:])


def timed_images(plan: dict, epochs: int, warmup_steps: int) -> int:
    """Distinct images the timed steps trained on, the count throughput is made of: the timed
    samples less the repeats in each timed last step (the padding that evens the shards, or fills
    the last batch), which do work but add no image to the pass."""
    per_epoch = plan["steps_per_epoch"]
    timed_last_steps = sum(1 for e in range(epochs) if (e + 1) * per_epoch - 1 >= warmup_steps)
    return timed_samples(plan, epochs, warmup_steps) - plan.get("repeated_images", 0) * timed_last_steps


def epoch_order(plan: dict, seed: int, epoch: int) -> list[int]:
    """One epoch's sample order: a seeded shuffle of the split, cut to a capped epoch's samples or
    padded by repeating its first images up to the plan's samples per epoch."""
    order = list(range(plan["train_images"]))
    random.Random(seed * 100_003 + epoch).shuffle(order)
    want = plan["samples_per_epoch"]
    return (order * -(-want // len(order)))[:want]


def shard(plan: dict, seed: int, epoch: int, rank: int, world: int) -> list[int]:
    """Rank r's indices of one epoch: every world-th of the epoch's order from r, so the ranks'
    k-th batches together are the k-th global batch and all ranks run the same number of steps."""
    return epoch_order(plan, seed, epoch)[rank::world]


def epoch_sampler(torch, plan: dict, seed: int, rank: int, world: int):
    """A torch Sampler over `shard` (set_epoch as DistributedSampler has it; mmengine's
    DistSamplerSeedHook calls it)."""

    class EpochSampler(torch.utils.data.Sampler):
        def __init__(self):
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            return iter(shard(plan, seed, self.epoch, rank, world))

        def __len__(self) -> int:
            return len(range(rank, plan["samples_per_epoch"], world))

    return EpochSampler()
