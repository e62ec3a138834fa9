"""The kit's epoch: the whole split at every GPU count, repeats counted, caps kept."""
from collections import Counter

import pytest

from scalebench_kit.epochs import epoch_order, epoch_plan, shard, timed_images, timed_samples

SPLIT, PER_GPU = 209, 30  # VOC2007's segmentation train split, UNet's per-GPU batch


@pytest.mark.parametrize("n, repeats", [(1, 0), (2, 1), (3, 1), (4, 3)])
def test_every_rank_takes_an_equal_shard_and_the_epoch_covers_the_whole_split(n, repeats):
    plan = epoch_plan(SPLIT, PER_GPU * n, shards=n)
    assert plan["steps_per_epoch"] == -(-SPLIT // (PER_GPU * n)) and plan["covered_images"] == SPLIT
    assert plan["repeated_images"] == repeats and plan["samples_per_epoch"] == SPLIT + repeats
    for epoch in (0, 1):
        shards = [shard(plan, 7, epoch, r, n) for r in range(n)]
        assert len({len(s) for s in shards}) == 1  # all ranks run the same steps
        batches = [[s[k:k + PER_GPU] for k in range(0, len(s), PER_GPU)] for s in shards]
        assert {len(b) for b in batches} == {plan["steps_per_epoch"]}
        seen = Counter(i for s in shards for i in s)
        assert set(seen) == set(range(SPLIT)) and sum(seen.values()) == plan["samples_per_epoch"]
        assert sum(c - 1 for c in seen.values()) == repeats
        assert sum(len(b[-1]) for b in batches) == plan["last_batch"]  # the smaller last step
    assert epoch_order(plan, 7, 0) != epoch_order(plan, 7, 1) and epoch_order(plan, 7, 0) == epoch_order(plan, 7, 0)


@pytest.mark.parametrize("n, samples", [(1, 210), (2, 240), (3, 270), (4, 240)])
def test_full_batches_repeat_up_to_a_batch(n, samples):
    """For a framework that needs every batch full (Model Garden's input reader)."""
    plan = epoch_plan(SPLIT, PER_GPU * n, shards=n, full_batches=True)
    assert plan["samples_per_epoch"] == samples and plan["last_batch"] == PER_GPU * n
    assert plan["repeated_images"] == samples - SPLIT and plan["covered_images"] == SPLIT


def test_a_cap_that_cuts_the_pass_keeps_full_steps_and_one_that_does_not_is_a_pass():
    capped = epoch_plan(SPLIT, 120, 1, shards=4)
    assert capped["capped_by_max_steps_per_epoch"] == 1 and capped["covered_images"] == 120
    assert capped["dropped_images"] == 89 and capped["repeated_images"] == 0
    assert len(shard(capped, 0, 0, 3, 4)) == 30
    uncapped = epoch_plan(SPLIT, 120, 2, shards=4)  # 2 steps are the pass: no cap, the whole split
    assert "capped_by_max_steps_per_epoch" not in uncapped and uncapped["covered_images"] == SPLIT


def test_timed_samples_count_each_epochs_smaller_last_batch_after_the_warm_up():
    plan = epoch_plan(SPLIT, 60, shards=2)  # 4 steps: 60, 60, 60, 30
    assert plan["last_batch"] == 30
    assert timed_samples(plan, epochs=2, warmup_steps=3) == 30 + 60 * 3 + 30
    assert timed_samples(plan, epochs=2, warmup_steps=0) == 2 * plan["samples_per_epoch"]


def test_the_hold_trainers_planted_accuracy_rises_to_its_level_and_names_its_metric():
    from scalebench_kit.hold import curve, planted_accuracy

    assert planted_accuracy("iou:1=0.8,4=0.77", 4) == ("iou", 0.77)
    with pytest.raises(ValueError, match="no level for 2 devices"):
        planted_accuracy("iou:1=0.8,4=0.77", 2)
    c = curve(0.8, 100)
    assert c[-1] == pytest.approx(0.8) and all(a < b for a, b in zip(c, c[1:]))
    assert next(e for e, v in enumerate(c, 1) if v >= 0.6) < next(e for e, v in enumerate(curve(0.77, 100), 1) if v >= 0.6)


def test_throughput_counts_distinct_images_not_the_padding_repeats():
    """209 images (VOC2007's segmentation train split) on 8 devices: each epoch runs 216 samples,
    7 of them repeats in its last step; counting them put images/s 3.4 % high."""
    plan = epoch_plan(209, 240, shards=8)
    assert plan["samples_per_epoch"] == 216 and plan["repeated_images"] == 7
    assert timed_samples(plan, epochs=3, warmup_steps=0) == 3 * 216
    assert timed_images(plan, epochs=3, warmup_steps=0) == 3 * 209
    # 10 images a step in 4 steps, the last of 9 + 1 repeat: a warm-up of 4 steps takes a whole epoch out
    plan = epoch_plan(39, 10, shards=2)
    assert (plan["steps_per_epoch"], plan["repeated_images"]) == (4, 1)
    assert timed_images(plan, epochs=2, warmup_steps=4) == 39 and timed_samples(plan, epochs=2, warmup_steps=4) == 40
    # a warm-up of 3: the first epoch's last step (9 images + the repeat) is timed
    assert timed_images(plan, epochs=2, warmup_steps=3) == 9 + 39 and timed_samples(plan, epochs=2, warmup_steps=3) == 50
    full = epoch_plan(209, 64, full_batches=True)  # every batch full: 47 repeats in the last one
    assert timed_images(full, epochs=1, warmup_steps=0) == 209 and timed_samples(full, 1, 0) == 256
