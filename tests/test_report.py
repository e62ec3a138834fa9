import pytest

from scalebench.report import average_row, scaling_rows, write_report
from scalebench.store import Store
from tests.conftest import sample_cell, sample_contract


def _store_with(times: dict[tuple[int, int, int], float], run_id="manual__r1", bench_over=None) -> Store:
    """times: (gpus, epochs, repeat) -> train seconds."""
    store = Store()
    for (g, e, r), t in times.items():
        cell = sample_cell(gpus=g, epochs=e, repeat=r, run_id=run_id, **(bench_over or {}))
        store.record_attempt(cell, 1, "valid", contract=sample_contract(cell, train_s=t, precision=0.5 + g / 100))
    return store


def test_relative_time_speedup_and_efficiency_on_known_inputs():
    # medians over 3 repeats: 1 GPU 100 s, 2 GPUs 60 s, 4 GPUs 40 s (outlier repeats ignored by the median)
    store = _store_with({(1, 3, 1): 100, (1, 3, 2): 90, (1, 3, 3): 130,
                         (2, 3, 1): 60, (2, 3, 2): 61, (2, 3, 3): 20,
                         (4, 3, 1): 40, (4, 3, 2): 40, (4, 3, 3): 400})
    [row] = scaling_rows(store.cells())
    assert row["relative_time"] == {1: 1.0, 2: pytest.approx(0.6), 4: pytest.approx(0.4)}
    assert row["speedup"][2] == pytest.approx(1 / 0.6) and row["speedup"][4] == pytest.approx(2.5)
    assert row["efficiency"][2] == pytest.approx(1 / 1.2) and row["efficiency"][4] == pytest.approx(0.625)
    assert row["metrics"][2]["precision"] == pytest.approx(0.52)


def test_relative_time_is_per_epoch_count_then_averaged():
    store = _store_with({(1, 10, 1): 100, (2, 10, 1): 50, (1, 20, 1): 200, (2, 20, 1): 160})
    [row] = scaling_rows(store.cells())
    assert row["relative_time"][2] == pytest.approx((0.5 + 0.8) / 2)


def test_average_row_is_the_studys_average_of_relative_times():
    rows = [{"relative_time": {1: 1.0, 2: 0.66, 4: 0.48}}, {"relative_time": {1: 1.0, 2: 0.89, 4: 0.91}},
            {"relative_time": {1: 1.0, 2: 0.5}}]
    avg = average_row(rows)
    assert avg[2] == pytest.approx((0.66 + 0.89 + 0.5) / 3) and avg[4] == pytest.approx((0.48 + 0.91) / 2)


def test_report_files_and_invalid_cells_listed(isolated_state):
    store = _store_with({(1, 3, 1): 100, (2, 3, 1): 55})
    bad = sample_cell(gpus=2, epochs=3, repeat=2, run_id="manual__r1")
    store.record_attempt(bad, 1, "invalid", reason="validation_failed", message="precision 1.7")
    md = write_report(store.cells(), isolated_state / "out")
    text = md.read_text()
    assert "| resnet50_keras_cifar10 | smoke | weak | 100.0% | 55.0% |" in text
    assert "2 GPUs · 3 epochs · repeat 2: invalid (validation_failed)" in text
    assert (md.parent / "speedup.png").read_bytes()[:4] == b"\x89PNG"
    assert "<table>" in (md.parent / "report.html").read_text()
