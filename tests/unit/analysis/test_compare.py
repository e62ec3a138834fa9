"""`scalebench compare RUN_A RUN_B`: a candidate image's run against the nightly one, per cell,
with the report's statistics."""
import random

import pytest

from scalebench.cli import main
from scalebench.analysis.compare import CompareError, compare
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract


def seed(store, run_id, slower_at_2=1.0, digest="sha256:def", precision=0.80, seed_=0, **cell_fields):
    rng = random.Random(seed_)
    for gpus in (1, 2):
        for r in (1, 2, 3):
            cell = sample_cell(gpus, 3, r, run_id=run_id, **cell_fields)
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


def test_two_nights_are_compared_per_benchmark_between_the_runs_their_reports_read(isolated_state, capsys):
    import csv
    import io

    store = Store()
    seed(store, "scheduled__27", night="2026-11-27", run_type="scheduled")
    seed(store, "manual__27", slower_at_2=3.0, night="2026-11-27", run_type="manual", seed_=2)  # not the night's figure
    seed(store, "scheduled__28", slower_at_2=1.25, digest="sha256:" + "7" * 64, night="2026-11-28", run_type="scheduled",
         seed_=1)
    seed(store, "scheduled__28u", night="2026-11-28", run_type="scheduled", benchmark="unet_torch_voc2007",
         dag_id="scalebench_unet_torch_voc2007")
    assert main(["compare", "--nights", "2026-11-27", "2026-11-28", "-o", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["benchmark"], r["gpus"], r["run_a"], r["run_b"]) for r in rows] == [
        ("resnet50_keras_cifar10", "1", "scheduled__27", "scheduled__28"),
        ("resnet50_keras_cifar10", "2", "scheduled__27", "scheduled__28")]
    assert float(rows[1]["ratio"]) == pytest.approx(1.25, abs=0.04) and rows[1]["verdict"].startswith("B slower by")
    assert rows[1]["systems_differ_in"].startswith("image digest sha256:def -> sha256:7777")
    assert main(["compare", "--nights", "2026-11-27", "2026-11-28"]) == 0
    out = capsys.readouterr().out
    assert "night A = 2026-11-27, night B = 2026-11-28" in out and "only on night B: unet_torch_voc2007" in out
    assert main(["compare", "--nights", "2026-11-01", "2026-11-02"]) == 2
    assert "nights 2026-11-01 and 2026-11-02: no stored run" in capsys.readouterr().err
