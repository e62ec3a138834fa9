import datetime as dt
import json

import pytest

from scalebench.regress import Gates
from scalebench.report import Options, average_row, build, write_report
from scalebench.store import Store
from tests.conftest import sample_cell, sample_contract

NIGHT = "2026-11-28"


def record(store, gpus, epochs, repeat, train_s, run_id="scheduled__n1", night=NIGHT, run_type="scheduled",
           bench="resnet50_keras_cifar10", digest="sha256:def", **metrics):
    cell = sample_cell(gpus=gpus, epochs=epochs, repeat=repeat, run_id=run_id, night=night, run_type=run_type,
                       benchmark=bench, dag_id=f"scalebench_{bench}")
    contract = sample_contract(cell, train_s=train_s, **metrics)
    contract["provenance"]["image_digest"] = digest
    store.record_attempt(cell, 1, "valid", contract=contract)
    return cell


def doc_for(store, night=NIGHT, **opts):
    return build(store.figures(up_to_night=night), night, Options(**opts), store.runs(), {})


def test_relative_time_speedup_efficiency_and_ci_on_known_inputs():
    store = Store()
    for rep, (t1, t2, t4) in enumerate([(100, 60, 40), (90, 61, 40), (130, 20, 400)], start=1):
        record(store, 1, 3, rep, t1)
        record(store, 2, 3, rep, t2)
        record(store, 4, 3, rep, t4)
    [row] = doc_for(store)["rows"]
    assert row["relative_time"] == {1: 1.0, 2: pytest.approx(0.6), 4: pytest.approx(0.4)}
    assert row["speedup"][4] == pytest.approx(2.5) and row["efficiency"][2] == pytest.approx(1 / 1.2)
    lo, hi = row["relative_time_ci"][2]
    assert lo <= 0.6 <= hi and lo > 0
    assert row["iqr_s"][1] == pytest.approx(20.0)  # quartiles of 90, 100, 130 (inclusive method)


def test_relative_time_is_per_epoch_count_then_averaged_and_the_average_row():
    store = Store()
    for e, t1, t2 in ((10, 100, 50), (20, 200, 160)):
        record(store, 1, e, 1, t1)
        record(store, 2, e, 1, t2)
    [row] = doc_for(store)["rows"]
    assert row["relative_time"][2] == pytest.approx((0.5 + 0.8) / 2)
    avg = average_row([{"relative_time": {2: 0.66, 4: 0.48}}, {"relative_time": {2: 0.89, 4: 0.91}},
                       {"relative_time": {2: 0.5}}])
    assert avg[2] == pytest.approx((0.66 + 0.89 + 0.5) / 3) and avg[4] == pytest.approx((0.48 + 0.91) / 2)


def test_accuracy_verdicts_equivalent_worse_and_inconclusive():
    store = Store()
    for rep, (p1, p2, p4) in enumerate([(0.800, 0.801, 0.70), (0.802, 0.799, 0.71), (0.801, 0.800, 0.69)], start=1):
        record(store, 1, 3, rep, 100, precision=p1)
        record(store, 2, 3, rep, 60, precision=p2)
        record(store, 4, 3, rep, 40, precision=p4)
    record(store, 3, 3, 1, 50, precision=0.8)
    [row] = doc_for(store)["rows"]
    v = row["verdicts"]["precision"]
    assert v[2].kind == "equivalent" and v[4].kind == "worse" and v[3].kind == "inconclusive"
    assert v[4].text().startswith("worse by 10.1 pt (90% CI")
    assert v[3].text() == "inconclusive (n too small: 3 vs 1 repeats)"


def test_conclusions_are_written_from_the_numbers():
    store = Store()
    for b, (t2, t4) in {"a_small": (80, 70), "b_mid": (60, 45), "c_big": (55, 30)}.items():
        for rep in (1, 2):
            record(store, 1, 3, rep, 100, bench=b, run_id=f"scheduled__{b}")
            record(store, 2, 3, rep, t2, bench=b, run_id=f"scheduled__{b}")
            record(store, 4, 3, rep, t4, bench=b, run_id=f"scheduled__{b}")
    doc = build(store.figures(), NIGHT, Options(), store.runs(), {"a_small": 1e6, "b_mid": 2e7, "c_big": 6e7})
    c = doc["conclusions"]
    assert c[0] == ("Averaged over 3 benchmarks, training took 65.0% at 2 GPUs, 48.3% at 4 GPUs of the 1-GPU time "
                    "(the study reported 66.2%, 51.2%).")
    assert c[1] == "The largest saving: c_big at 4 GPUs, 30.0% of the 1-GPU time (speedup 3.33x, efficiency 83%)."
    # 3 benchmarks in perfect rank order: rho = 1, yet an exact p of 2/6 -- too few to claim it
    assert c[2] == ("More complex models gain more: not supported (Spearman's rho between parameter count and 4-GPU "
                    "efficiency +1.00, p = 0.33, 3 benchmarks).")
    assert c[3] == ("Accuracy: 12 of 12 comparisons with 1 GPU are equivalent within ±1 point (two one-sided tests, "
                    "90% CI); none is significantly worse.")


def test_no_saving_is_said_plainly():
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 1, 113.5)
    assert doc_for(store)["conclusions"][1] == ("No benchmark trained faster with more devices; the smallest slow-down: "
                                                "resnet50_keras_cifar10 at 2 GPUs, 113.5% of the 1-GPU time "
                                                "(speedup 0.88x, efficiency 44%).")


def test_a_ratio_against_a_mismatched_baseline_is_refused():
    store = Store()
    record(store, 1, 3, 1, 100, digest="sha256:old")
    record(store, 2, 3, 1, 50, digest="sha256:new")
    doc = doc_for(store)
    [row] = doc["rows"]
    assert 2 not in row["relative_time"] and row["refused"] == ["2 GPUs · 3 epochs · repeat 1"]


def test_partial_until_every_scheduled_benchmark_recorded():
    store = Store()
    record(store, 1, 3, 1, 100)
    store.record_run(dag_id="d", run_id="scheduled__n1", benchmark="resnet50_keras_cifar10", run_type="scheduled",
                     night=NIGHT, counts={})
    partial = doc_for(store, expected=["resnet50_keras_cifar10", "unet_torch_voc2007"])
    assert not partial["complete"] and partial["missing"] == ["unet_torch_voc2007"]
    store.record_run(dag_id="d2", run_id="scheduled__u1", benchmark="unet_torch_voc2007", run_type="scheduled",
                     night=NIGHT, counts={})
    assert doc_for(store, expected=["resnet50_keras_cifar10", "unet_torch_voc2007"])["complete"]


def test_a_confirmed_throughput_regression_is_alerted_and_manual_runs_do_not_feed_the_baseline():
    store = Store()
    start = dt.date(2026, 11, 1)
    for i in range(22):
        night = (start + dt.timedelta(days=i)).isoformat()
        ips_factor = 0.85 if i >= 20 else 1.0 + 0.01 * ((-1) ** i)
        cell = sample_cell(gpus=2, run_id=f"scheduled__{night}", night=night, run_type="scheduled")
        contract = sample_contract(cell)
        contract["timing"]["images_per_s"] = 1000 * ips_factor
        store.record_attempt(cell, 1, "valid", contract=contract)
        manual = sample_cell(gpus=2, run_id=f"manual__{night}", night=night, run_type="manual")
        contract = sample_contract(manual)
        contract["timing"]["images_per_s"] = 10.0  # an experiment: never a baseline, never judged
        store.record_attempt(manual, 1, "valid", contract=contract)
    first = doc_for(store, night="2026-11-21", gates=Gates())
    assert first["alerts"] == [] and len(first["flagged"]) == 1 and "images_per_s" in first["flagged"][0]
    second = doc_for(store, night="2026-11-22", gates=Gates())
    assert len(second["alerts"]) == 1 and second["alerts"][0].startswith("resnet50_keras_cifar10 2 GPUs images_per_s: 850")


def test_report_files_plots_index_and_invalid_cells(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 1, 55)
    bad = sample_cell(gpus=2, epochs=3, repeat=2, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
    store.record_attempt(bad, 1, "invalid", reason="validation_failed", message="precision 1.7")
    md = write_report(store, isolated_state / "reports" / NIGHT, night=NIGHT, opts=Options(expected=["x"]))
    text = md.read_text()
    assert "| resnet50_keras_cifar10 | inconclusive at 2 | inconclusive at 2 | – | 100.0% | 55.0% |" in text
    assert "2 GPUs · 3 epochs · repeat 2: invalid (validation_failed)" in text
    assert "**Partial report**: scheduled runs not yet recorded for this night: x." in text
    for png in ("speedup.png", "relative_time.png", "accuracy.png", "breakdown.png", "trend.png"):
        assert (md.parent / png).read_bytes()[:4] == b"\x89PNG"
    assert "<table>" in (md.parent / "report.html").read_text()
    index = json.loads((md.parent.parent / "index.json").read_text())
    assert index == [{"night": NIGHT, "complete": False, "alerts": 0, "benchmarks": 1}]


def test_scheduled_runs_feed_the_table_and_manual_runs_get_their_own_section(isolated_state):
    store = Store()
    for g, t in ((1, 100), (2, 60)):
        record(store, g, 3, 1, t)  # the scheduled run of the night
    record(store, 1, 3, 1, 10, run_id="manual__try", run_type="manual")  # faster, but a manual trial
    failed = sample_cell(gpus=2, run_id="manual__try", night=NIGHT, run_type="manual")
    store.record_attempt(failed, 1, "failed", reason="killed", exit_code=137, message="ended by SIGKILL")
    never = sample_cell(gpus=4, run_id="manual__try", night=NIGHT, run_type="manual")
    store.record_missing(never)
    doc = doc_for(store)
    assert doc["source"] == "scheduled"
    [row] = doc["rows"]
    assert row["run_id"] == "scheduled__n1" and row["relative_time"][2] == pytest.approx(0.6)
    [manual] = doc["manual_runs"]
    assert (manual["run_id"], manual["cells"], manual["valid"]) == ("manual__try", 3, 1)
    assert manual["not_valid"] == [{"label": "2 GPUs · 3 epochs · repeat 1", "status": "failed", "reason": "killed"},
                                   {"label": "4 GPUs · 3 epochs · repeat 1", "status": "missing",
                                    "reason": "never started"}]
    md = write_report(store, isolated_state / "r", night=NIGHT, opts=Options(expected=["resnet50_keras_cifar10"]))
    text = md.read_text()
    section = text[text.index("## Manual runs of this night"):]
    assert "- resnet50_keras_cifar10 run manual__try: 1 of 3 cells valid" in section
    assert "  - 2 GPUs · 3 epochs · repeat 1: failed (killed)" in section
    assert "<li>2 GPUs · 3 epochs · repeat 1: failed (killed)</li>" in (md.parent / "report.html").read_text()
    assert "Manual runs only" not in text


def test_a_night_with_only_manual_runs_is_reported_from_them_and_says_so(isolated_state):
    store = Store()
    for g, t in ((1, 100), (2, 80)):
        record(store, g, 3, 1, t, run_id="manual__demo", run_type="manual")
    doc = doc_for(store)
    assert doc["source"] == "manual" and doc["rows"][0]["relative_time"][2] == pytest.approx(0.8)
    text = write_report(store, isolated_state / "r", night=NIGHT, opts=Options()).read_text()
    assert "**Manual runs only**" in text


def test_a_config_that_does_not_load_is_named_in_the_report(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    opts = Options(config_errors={"unet_torch_voc2007": "unet.yaml: field 'per_gpu_batch': greater than 0 (got -3)"})
    text = write_report(store, isolated_state / "r", night=NIGHT, opts=opts).read_text()
    assert "**Config error**: benchmark `unet_torch_voc2007` does not load and did not run: unet.yaml" in text
