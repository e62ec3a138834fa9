"""Planning tonight's reruns from the store: plain reruns for a flagged figure on an unchanged
image, a same-night A/B in balanced order when the flag came with a new image, plain reruns (said)
when the previous image is gone, and more pairs while the A/B says unknown."""
import datetime as dt
import random

import pytest

from scalebench.analysis.regress import Gates
from scalebench.analysis.reruns import more_pairs, plan_reruns
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract

TONIGHT = dt.date(2026, 11, 30)
OLD = {"image": "scalebench/tensorflow:a", "image_ref": "scalebench/tensorflow:sha256-aaaaaaaaaaaa",
       "image_digest": "sha256:" + "a" * 64}
NEW = {"image": "scalebench/tensorflow:b", "image_ref": "scalebench/tensorflow:sha256-bbbbbbbbbbbb",
       "image_digest": "sha256:" + "b" * 64}


def record(store, night, repeat, ips, image, role="measure", run_id=None, gpus=1, **over):
    cell = sample_cell(gpus=gpus, repeat=repeat, run_id=run_id or f"scheduled__{night}", night=night,
                       run_type="scheduled", role=role, **over)
    contract = sample_contract(cell)
    contract["provenance"].update(image)
    contract["timing"]["images_per_s"] = ips
    store.record_attempt(cell, 1, "valid", contract=contract)
    return cell


@pytest.fixture
def tonight(isolated_state):
    """20 nights at 1000 images/s on image A; tonight three cells at 800 on `image`."""
    def make(image):
        store, rng = Store(), random.Random(1)
        for i in range(20, 0, -1):
            record(store, (TONIGHT - dt.timedelta(days=i)).isoformat(), 1, 1000 * (1 + rng.gauss(0, 0.01)), OLD)
        planned = [record(store, TONIGHT.isoformat(), r, 800.0, image, run_id="manual__tonight") for r in (1, 2, 3)]
        return store, planned
    return make


def test_a_flag_on_an_unchanged_image_gets_plain_reruns(tonight):
    store, planned = tonight(OLD)
    cells, flagged = plan_reruns(store, planned, 3)
    assert [c["role"] for c in cells] == ["rerun"] * 3 and len(flagged) == 1 and "A/B" not in flagged[0]


def test_a_flag_on_a_new_image_gets_an_ab_with_the_previous_image_in_balanced_order(tonight):
    store, planned = tonight(NEW)
    cells, [line] = plan_reruns(store, planned, 3, ab_pairs=5)
    assert [c["role"] for c in cells] == ["ab_previous", "rerun", "rerun", "ab_previous"] * 2 + ["ab_previous", "rerun"]
    assert {c["image"] for c in cells if c["role"] == "ab_previous"} == {OLD["image_ref"]}
    assert not any("image" in c for c in cells if c["role"] == "rerun")  # tonight's image: the task's own
    assert len({c["key"] for c in cells}) == 10 and {c["rerun_of"] for c in cells} == {planned[0]["key"]}
    assert "with image scalebench/tensorflow:b (was scalebench/tensorflow:a)" in line
    assert "A/B with the previous image scalebench/tensorflow:a (run as scalebench/tensorflow:sha256-aaaaaaaaaaaa)" in line


def test_a_previous_image_that_is_gone_gets_plain_reruns_and_says_so(tonight):
    store, planned = tonight(NEW)
    cells, [line] = plan_reruns(store, planned, 3, image_available=lambda ref: False)
    assert [c["role"] for c in cells] == ["rerun"] * 3
    assert "the previous image scalebench/tensorflow:sha256-aaaaaaaaaaaa is gone from this engine: no A/B" in line


def test_an_unknown_ab_adds_pairs_up_to_the_cap(tonight):
    store, planned = tonight(NEW)
    cells, _ = plan_reruns(store, planned, 3, ab_pairs=5)
    rng = random.Random(2)
    for c in cells:  # the two images 3 % apart with 4 % noise: neither "worse" nor "same" after 5 + 5
        level = 1000.0 if c["role"] == "ab_previous" else 970.0
        contract = sample_contract(c)
        contract["provenance"].update(OLD if c["role"] == "ab_previous" else NEW)
        contract["timing"]["images_per_s"] = level * (1 + rng.gauss(0, 0.04))
        store.record_attempt({**c, "night": TONIGHT.isoformat()}, 1, "valid", contract=contract)
    added, [why] = more_pairs(store, planned, cells, Gates(ab_max_pairs=8))
    assert "A/B unknown after 5 + 5 cells" in why and why.endswith(": 3 more pairs")
    assert [c["role"] for c in added] == ["rerun", "ab_previous", "ab_previous", "rerun", "rerun", "ab_previous"]
    assert not {c["key"] for c in added} & {c["key"] for c in cells}


def test_a_previous_image_of_another_repository_gets_plain_reruns(tonight):
    store, planned = tonight({**NEW, "image": "other/stack:b"})
    cells, [line] = plan_reruns(store, planned, 3)
    assert [c["role"] for c in cells] == ["rerun"] * 3 and "is of another repository than other/stack:b" in line


def test_an_ab_whose_previous_image_did_not_run_says_so_and_is_judged_against_the_baseline(tonight):
    from scalebench.analysis.reruns import verdicts

    store, planned = tonight(NEW)
    cells, _ = plan_reruns(store, planned, 3, ab_pairs=5)
    for c in cells:  # the host's engine had pruned the previous image; tonight's reruns are slow too
        c = {**c, "night": TONIGHT.isoformat()}
        if c["role"] == "ab_previous":
            store.record_attempt(c, 1, "failed", reason="image_missing", message="image ... is not on the Docker engine")
        else:
            contract = sample_contract(c)
            contract["provenance"].update(NEW)
            contract["timing"]["images_per_s"] = 800.0
            store.record_attempt(c, 1, "valid", contract=contract)
    v = verdicts(store, planned, cells)
    [line] = v["confirmed"]  # five slow reruns against the baseline confirm it, as plain reruns would
    assert "; the previous image's cells have no valid result (image_missing): no A/B, judged against the baseline" \
        in line


def short_baseline(store, gpus=(1, 2)):
    """Two nights on image A, tonight on B at the same level, at each GPU count: a short baseline."""
    for i in (2, 1):
        for n in gpus:
            record(store, (TONIGHT - dt.timedelta(days=i)).isoformat(), 1, 1000.0 * n, OLD, gpus=n)
    return [record(store, TONIGHT.isoformat(), 1, 1000.0 * n, NEW, gpus=n, run_id="manual__tonight") for n in gpus]


def test_a_new_image_on_a_short_baseline_gets_an_ab_at_every_gpu_count_though_nothing_looks_off(isolated_state):
    store = Store()
    planned = short_baseline(store)
    cells, lines = plan_reruns(store, planned, 3, ab_pairs=5)
    assert sorted({c["gpus"] for c in cells}) == [1, 2] and len(cells) == 20
    assert all("not judged: no A/B ran and the baseline holds 2 of 5 nights" in line for line in lines), lines


def test_short_baseline_abs_stay_within_what_the_nights_budget_leaves_largest_count_first(isolated_state):
    store = Store()
    planned = short_baseline(store)
    asked = []

    def budget():
        asked.append(1)
        return 25.0, {1: 20.0, 2: 20.0}  # room for one: 2 GPUs first

    cells, lines = plan_reruns(store, planned, 3, ab_pairs=5, short_ab=budget)
    assert {c["gpus"] for c in cells} == {2} and asked == [1]
    [unfit] = [line for line in lines if "does not fit" in line]
    assert "1 GPU" in unfit and "its A/B (20 min) does not fit what the night's budget leaves (5 min)" in unfit


def test_a_short_baseline_whose_previous_image_is_gone_runs_nothing_and_says_so(isolated_state):
    store = Store()
    planned = short_baseline(store, gpus=(1,))
    cells, [line] = plan_reruns(store, planned, 3, ab_pairs=5, image_available=lambda ref: False)
    assert cells == [] and line.endswith(f"the previous image {OLD['image_ref']} is gone from this engine: no A/B, "
                                         "and a short baseline cannot judge reruns: not judged tonight"), line
