"""`scalebench compare RUN_A RUN_B`: a candidate image's run against the nightly one, per cell,
with the report's statistics."""
import random

import pytest

from scalebench.cli import main
from scalebench.analysis.compare import CompareError, compare
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract


def seed(store, run_id, slower_at_2=1.0, digest="sha256:def", precision=0.80, seed_=0):
    rng = random.Random(seed_)
    for gpus in (1, 2):
        for r in (1, 2, 3):
            cell = sample_cell(gpus, 3, r, run_id=run_id)
            t = 100.0 / gpus * (slower_at_2 if gpus == 2 else 1.0) * (1 + rng.gauss(0, 0.01))
            c = sample_contract(cell, train_s=t, precision=precision + rng.gauss(0, 0.002))
            c["timing"]["images_per_s"] = 1000 / t
            c["provenance"]["image_digest"] = digest
            store.record_attempt(cell, 1, "valid", contract=c)


def test_a_slower_candidate_is_named_per_cell_with_its_ci_and_accuracy_verdict(isolated_state, capsys):
    store = Store()
    seed(store, "manual__nightly")
    seed(store, "manual__candidate", slower_at_2=1.2, digest="sha256:" + "9" * 64, seed_=1)
    cmp = compare(store, "manual__nightly", "manual__candidate")
    one, two = cmp.cells
    assert (one.gpus, two.gpus) == (1, 2) and one.repeats == (3, 3)
    assert one.verdict == "no significant difference" or abs(one.ratio - 1) < 0.03
    assert two.ratio == pytest.approx(1.2, abs=0.04) and two.ratio_ci[0] > 1 and two.verdict.startswith("B slower by")
    assert two.accuracy["precision"].kind == "equivalent"
    assert cmp.changed.startswith("image digest sha256:def -> sha256:9999")
    assert main(["compare", "manual__nightly", "manual__candidate"]) == 0
    out = capsys.readouterr().out
    assert "systems differ in: image digest" in out and "B slower by" in out and "precision: equivalent" in out


def test_unknown_runs_are_refused_by_name(isolated_state, capsys):
    seed(Store(), "manual__nightly")
    with pytest.raises(CompareError, match="run 'nope': no stored cells"):
        compare(Store(), "manual__nightly", "nope")
    assert main(["compare", "manual__nightly", "nope"]) == 2
    assert "scalebench: run 'nope': no stored cells" in capsys.readouterr().err
