"""One timing basis per row: capped epochs are compared by throughput, full passes by time, a mix not at all."""
import pytest

from scalebench.analysis.basis import basis_of, time_value
from scalebench.report.figures import bench_row
from scalebench.report.model import Options
from tests.support.samples import sample_cell


def cell(gpus, repeat, *, train_s, images_per_s, capped, step_s=None, timed=55):
    timing = {"epoch": {"steps_per_epoch": 15, "global_batch": 16 * gpus, **({"capped_by_max_steps_per_epoch": 15} if capped else {})},
              "breakdown": {"timed_steps": timed, "step_s": step_s} if step_s else {}}
    figure = {"attempt": 1, "train_s": train_s, "images_per_s": images_per_s, "metrics": {"precision": 0.5},
              "image_digest": "sha256:a", "config_sha": "c", "timing": timing, "fingerprint": {}}
    return {**sample_cell(gpus=gpus, repeat=repeat, profile="nightly"), "night": "2026-12-01", "role": "measure",
            "rerun_of": None, "status": "valid", "reason": None, "figure": figure}


def test_capped_rows_use_the_slowest_ranks_throughput():
    # the same 55 steps at every GPU count: 4 GPUs process 4x the samples; the slowest rank's steps decide
    cells = [cell(1, r, train_s=10.0, images_per_s=88.0, capped=True, step_s=10.0) for r in (1, 2, 3)]
    cells += [cell(4, r, train_s=12.5, images_per_s=280.0, capped=True, step_s=12.5 + r / 10) for r in (1, 2, 3)]
    assert basis_of(cells) == ("throughput", None)
    assert time_value(cells[0], "throughput") == pytest.approx(10.0 / (55 * 16))
    row = bench_row("resnet50_keras_cifar10", cells, Options(n_boot=200))
    assert row.key.timing_basis == "throughput"
    # r(4) = X(1) / X(4) = (16 x 55 / 10) / (64 x 55 / 12.7): the time ratio would say 127 %
    assert row.relative_time[4] == pytest.approx(12.7 / 10 / 4)
    assert row.efficiency[4] == pytest.approx(1 / (12.7 / 10 / 4) / 4)
    assert row.train_s[4] == 12.5 and row.images_per_s[4] == 280.0


def test_full_passes_keep_training_time_and_a_mix_has_no_ratio():
    full = [cell(1, 1, train_s=10.0, images_per_s=100.0, capped=False), cell(2, 1, train_s=6.0, images_per_s=160.0,
                                                                           capped=False)]
    row = bench_row("resnet50_keras_cifar10", full, Options(n_boot=200))
    assert row.key.timing_basis == "train time" and row.relative_time[2] == pytest.approx(0.6)
    mixed = [full[0], cell(2, 1, train_s=6.0, images_per_s=160.0, capped=True, step_s=6.0)]
    basis, why = basis_of(mixed)
    assert basis is None and why == "epochs capped at 2 GPU(s) and full passes at 1 GPU(s): no ratio across timing bases"
    row = bench_row("resnet50_keras_cifar10", mixed, Options(n_boot=200))
    assert row.relative_time == {} and row.basis_refusal == why and row.key.timing_basis == "mixed"
