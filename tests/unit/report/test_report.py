import datetime as dt
import json

import pytest

from scalebench.analysis.regress import Gates
from scalebench.report.model import Options
from scalebench.report.figures import average_row
from scalebench.report.build import build, write_report
from scalebench.report.render import markdown
from scalebench.store.results import Store
from tests.support.samples import sample_benchmark, sample_cell, sample_contract

NIGHT = "2026-11-28"


def record(store, gpus, epochs, repeat, train_s, run_id="scheduled__n1", night=NIGHT, run_type="scheduled",
           bench="resnet50_keras_cifar10", digest="sha256:def", parameters=None, **metrics):
    cell = sample_cell(gpus=gpus, epochs=epochs, repeat=repeat, run_id=run_id, night=night, run_type=run_type,
                       benchmark=bench, dag_id=f"scalebench_{bench}")
    contract = sample_contract(cell, train_s=train_s, **metrics)
    contract["provenance"]["image_digest"] = digest
    if parameters:
        contract["model"]["parameters"] = parameters
    store.record_attempt(cell, 1, "valid", contract=contract)
    return cell


def doc_for(store, night=NIGHT, **opts):
    return build(store.figures(up_to_night=night), night, Options(**opts), store.runs())


def test_relative_time_speedup_efficiency_and_ci_on_known_inputs():
    store = Store()
    for rep, (t1, t2, t4) in enumerate([(100, 60, 40), (90, 61, 40), (130, 20, 400)], start=1):
        record(store, 1, 3, rep, t1)
        record(store, 2, 3, rep, t2)
        record(store, 4, 3, rep, t4)
    [row] = doc_for(store).rows
    assert row.relative_time == {1: 1.0, 2: pytest.approx(0.6), 4: pytest.approx(0.4)}
    assert row.speedup[4] == pytest.approx(2.5) and row.efficiency[2] == pytest.approx(1 / 1.2)
    lo, hi = row.relative_time_ci[2]
    assert lo <= 0.6 <= hi and lo > 0
    assert row.iqr_s[1] == pytest.approx(20.0)  # quartiles of 90, 100, 130 (inclusive method)


def test_relative_time_is_per_epoch_count_then_averaged_and_the_average_row():
    store = Store()
    for e, t1, t2 in ((10, 100, 50), (20, 200, 160)):
        record(store, 1, e, 1, t1)
        record(store, 2, e, 1, t2)
    [row] = doc_for(store).rows
    assert row.relative_time[2] == pytest.approx((0.5 + 0.8) / 2)
    avg = average_row([{2: 0.66, 4: 0.48}, {2: 0.89, 4: 0.91}, {2: 0.5}])
    assert avg[2] == pytest.approx((0.66 + 0.89 + 0.5) / 3) and avg[4] == pytest.approx((0.48 + 0.91) / 2)


def test_accuracy_verdicts_equivalent_worse_and_inconclusive():
    store = Store()
    for rep, (p1, p2, p4) in enumerate([(0.800, 0.801, 0.70), (0.802, 0.799, 0.71), (0.801, 0.800, 0.69)], start=1):
        record(store, 1, 3, rep, 100, precision=p1)
        record(store, 2, 3, rep, 60, precision=p2)
        record(store, 4, 3, rep, 40, precision=p4)
    record(store, 3, 3, 1, 50, precision=0.8)
    [row] = doc_for(store).rows
    v = row.verdicts["precision"]
    assert v[2].kind == "equivalent" and v[4].kind == "worse" and v[3].kind == "inconclusive"
    assert v[4].text().startswith("worse by 10.1 pt (90% CI")
    assert v[3].text() == "inconclusive (n too small: 3 vs 1 repeats)"


def test_conclusions_are_written_from_the_numbers():
    store = Store()
    for b, (t2, t4) in {"a_small": (80, 70), "b_mid": (60, 45), "c_big": (55, 30)}.items():
        for rep in (1, 2):
            acc = {"precision": 0.5 + 0.001 * rep, "recall": 0.4 + 0.001 * rep}  # repeats vary, GPU counts agree
            record(store, 1, 3, rep, 100, bench=b, run_id=f"scheduled__{b}", **acc)
            record(store, 2, 3, rep, t2, bench=b, run_id=f"scheduled__{b}", **acc)
            record(store, 4, 3, rep, t4, bench=b, run_id=f"scheduled__{b}", **acc)
    sizes = {"a_small": 1e6, "b_mid": 2e7, "c_big": 6e7}
    configured = {b: sample_benchmark(b, metrics=["precision", "recall"]) for b in sizes}  # "accuracy" is not reported
    doc = build(store.figures(), NIGHT, Options(benchmarks=configured, expected=[]), store.runs(),
                lambda bench, run_id: sizes.get(bench))
    c = doc.conclusions
    # scheduled nights only: nothing is set beside the study's averages, and accuracy is not answered
    assert c[0] == ("The study's averages (66.2% at 2 GPUs, 55.7% at 3 GPUs, 51.2% at 4 GPUs) are relative times to "
                    "train the same epochs: no weekly run with full passes at more than one GPU count in the last 120 "
                    "nights to set beside them.")
    assert c[1].startswith("Does accuracy suffer? Not answered: no weekly accuracy run in the last 120 nights")
    assert c[2] == ("Tonight, averaged over 3 benchmarks: relative time 65.0% at 2 GPUs, 48.3% at 4 GPUs of 1 GPU "
                    "(timed by train time; the nightly profile's capped epochs measure steady-state throughput, not "
                    "the study's time to train the same epochs).")
    assert c[3] == "The largest saving: c_big (fp32) at 4 GPUs, 30.0% of the 1-GPU time (speedup 3.33x, efficiency 83%)."
    # 3 benchmarks in perfect rank order: rho = 1, yet an exact p of 2/6 -- too few to claim it
    assert c[4] == ("More complex models gain more: not supported (Spearman's rho between parameter count and 4-GPU "
                    "efficiency +1.00, p = 0.33, 3 benchmarks).")
    assert c[5] == ("Nightly accuracy, a smoke signal only: 12 of 12 comparisons with 1 GPU are equivalent within ±1 "
                    "point (two one-sided tests, 90% CI); none is significantly worse.")


def test_no_saving_is_said_plainly():
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 1, 113.5)
    assert doc_for(store).conclusions[3] == ("No benchmark trained faster with more devices; the smallest slow-down: "
                                                "resnet50_keras_cifar10 (fp32) at 2 GPUs, 113.5% of the 1-GPU time "
                                                "(speedup 0.88x, efficiency 44%).")


def test_a_ratio_against_a_mismatched_baseline_is_refused():
    store = Store()
    record(store, 1, 3, 1, 100, digest="sha256:old")
    record(store, 2, 3, 1, 50, digest="sha256:new")
    doc = doc_for(store)
    [row] = doc.rows
    assert 2 not in row.relative_time and row.refused == ["2 GPUs · fp32 · 3 epochs · repeat 1"]


def test_partial_until_every_scheduled_benchmark_recorded():
    store = Store()
    record(store, 1, 3, 1, 100)
    store.record_run(dag_id="d", run_id="scheduled__n1", benchmark="resnet50_keras_cifar10", run_type="scheduled",
                     night=NIGHT, counts={})
    partial = doc_for(store, expected=["resnet50_keras_cifar10", "unet_torch_voc2007"])
    assert not partial.complete and partial.missing == ["unet_torch_voc2007"]
    store.record_run(dag_id="d2", run_id="scheduled__u1", benchmark="unet_torch_voc2007", run_type="scheduled",
                     night=NIGHT, counts={})
    assert doc_for(store, expected=["resnet50_keras_cifar10", "unet_torch_voc2007"]).complete


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
    assert first.alerts == [] and len(first.flagged) == 1 and "images_per_s" in first.flagged[0]
    second = doc_for(store, night="2026-11-22", gates=Gates())
    assert len(second.alerts) == 1 and second.alerts[0].startswith("resnet50_keras_cifar10 2 GPUs fp32 images_per_s: 850")


def test_report_files_plots_index_and_invalid_cells(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 1, 55)
    bad = sample_cell(gpus=2, epochs=3, repeat=2, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
    store.record_attempt(bad, 1, "invalid", reason="validation_failed", message="precision 1.7")
    md = write_report(store, night=NIGHT, opts=Options(expected=["x"]))  # published: with the index
    text = md.read_text()
    # no config metrics given: every accuracy metric the cells report is shown (here precision, recall, accuracy)
    assert "| benchmark | dtype | timed by | precision verdict | recall verdict | accuracy verdict | 1 GPU | 2 GPU |" in text
    assert "| resnet50_keras_cifar10 | fp32 | train time | inconclusive at 2 | inconclusive at 2 | inconclusive at 2 | 100.0% | 55.0% |" in text
    assert "2 GPUs · fp32 · 3 epochs · repeat 2: invalid (validation_failed)" in text
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
    assert doc.source == "scheduled"
    [row] = doc.rows
    assert row.run_id == "scheduled__n1" and row.relative_time[2] == pytest.approx(0.6)
    [manual] = doc.manual_runs
    assert (manual["run_id"], manual["cells"], manual["valid"]) == ("manual__try", 3, 1)
    assert manual["not_valid"] == [{"label": "2 GPUs · fp32 · 3 epochs · repeat 1", "status": "failed", "reason": "killed"},
                                   {"label": "4 GPUs · fp32 · 3 epochs · repeat 1", "status": "missing",
                                    "reason": "never started"}]
    md = write_report(store, isolated_state / "r", night=NIGHT, opts=Options(expected=["resnet50_keras_cifar10"]))
    text = md.read_text()
    section = text[text.index("## Manual runs of this night"):]
    assert "- resnet50_keras_cifar10 run manual__try: 1 of 3 cells valid" in section
    assert "  - 2 GPUs · fp32 · 3 epochs · repeat 1: failed (killed)" in section
    assert "<li>2 GPUs · fp32 · 3 epochs · repeat 1: failed (killed)</li>" in (md.parent / "report.html").read_text()
    assert "Manual runs only" not in text


def test_a_night_with_only_manual_runs_is_reported_from_them_and_says_so(isolated_state):
    store = Store()
    for g, t in ((1, 100), (2, 80)):
        record(store, g, 3, 1, t, run_id="manual__demo", run_type="manual")
    doc = doc_for(store)
    assert doc.source == "manual" and doc.rows[0].relative_time[2] == pytest.approx(0.8)
    text = write_report(store, isolated_state / "r", night=NIGHT, opts=Options()).read_text()
    assert "**Manual runs only**" in text


def test_a_config_that_does_not_load_is_named_in_the_report(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    opts = Options(config_errors={"unet_torch_voc2007": "unet.yaml: field 'per_gpu_batch': greater than 0 (got -3)"})
    text = write_report(store, isolated_state / "r", night=NIGHT, opts=opts).read_text()
    assert "**Config error**: benchmark `unet_torch_voc2007` does not load and did not run: unet.yaml" in text


def test_train_s_and_its_iqr_are_taken_over_the_same_repeats():
    """Both at the longest epoch count; before, the median pooled every epoch count."""
    store = Store()
    for rep, (short, long_) in enumerate([(10, 100), (12, 110), (14, 130), (16, 150)], start=1):
        record(store, 1, 10, rep, short)
        record(store, 1, 20, rep, long_)
    [row] = doc_for(store).rows
    assert row.train_epochs == {1: 20}
    assert row.train_s[1] == 120.0  # median of 100, 110, 130, 150
    assert row.iqr_s[1] == pytest.approx(135.0 - 107.5)  # inclusive quartiles of the same four


def _exact_bootstrap_quantiles(pairs, level=0.95):
    """The bootstrap distribution of the averaged ratio by full enumeration, as a reference that
    can be checked by hand: with the 1-GPU side constant at 100, an epoch count's ratio is the
    median of 3 resampled times over 100: the smallest with probability 7/27, the middle 13/27,
    the largest 7/27. The average's distribution is the convolution over epoch counts."""
    dist = {0.0: 1.0}
    for _, tn in pairs:
        lo, mid, hi = sorted(tn)
        step = {lo / 100: 7 / 27, mid / 100: 13 / 27, hi / 100: 7 / 27}
        nxt: dict[float, float] = {}
        for a, pa in dist.items():
            for b, pb in step.items():
                nxt[a + b] = nxt.get(a + b, 0.0) + pa * pb
        dist = nxt
    cum, out = 0.0, []
    values = sorted(dist)
    for q in ((1 - level) / 2, 1 - (1 - level) / 2):
        cum = 0.0
        for v in values:  # the smallest value whose cumulative probability reaches q
            cum += dist[v]
            if cum >= q - 1e-12:
                out.append(v / len(pairs))
                break
    return tuple(out)


def test_relative_time_ci_is_the_bootstrap_of_the_averaged_ratio():
    from scalebench.analysis.stats import bootstrap_mean_ratio_ci, bootstrap_ratio_ci

    pairs = [([100, 100, 100], [40, 60, 80]), ([100, 100, 100], [50, 65, 90]),
             ([100, 100, 100], [45, 55, 85]), ([100, 100, 100], [30, 70, 75])]
    exact = _exact_bootstrap_quantiles(pairs)
    lo, hi = bootstrap_mean_ratio_ci(pairs, n_boot=20000)
    assert lo == pytest.approx(exact[0], abs=0.012) and hi == pytest.approx(exact[1], abs=0.012)
    # averaging each epoch count's interval ends (the old way) is wider than the interval of the average
    ends = [bootstrap_ratio_ci(t1, tn, n_boot=20000) for t1, tn in pairs]
    old = (sum(e[0] for e in ends) / 4, sum(e[1] for e in ends) / 4)
    assert old[0] < exact[0] - 0.03 and old[1] > exact[1] + 0.03, (old, exact)


def test_model_size_comes_from_the_benchmarks_own_run(isolated_state):
    """Scheduled run ids repeat across DAGs sharing a cron time: the lookup must use the benchmark too."""
    from scalebench.report.build import build_report

    store = Store()
    run = "scheduled__2026-11-28T01:00:00+00:00"
    for b, params, (t2, t4) in (("a", 1_000, (90, 80)), ("b", 50_000, (60, 45)), ("c", 9_000_000, (55, 30))):
        for g, t in ((1, 100), (2, t2), (4, t4)):
            record(store, g, 3, 1, t, run_id=run, bench=b, parameters=params)
    rep = build_report(store, NIGHT, Options())
    assert {r.benchmark: r.parameters for r in rep.rows} == {"a": 1_000, "b": 50_000, "c": 9_000_000}
    assert "rho between parameter count and 4-GPU efficiency +1.00" in rep.conclusions[4]


def test_spearman_with_a_constant_side_has_no_p_value_and_says_why():
    from scalebench.report.prose import conclusions
    from scalebench.analysis.stats import spearman

    assert spearman([1, 2, 3], [0.5, 0.5, 0.5]) == (None, None)
    store = Store()
    for b, t4 in (("a", 50), ("b", 40), ("c", 30)):
        record(store, 1, 3, 1, 100, bench=b, run_id=f"scheduled__{b}")
        record(store, 4, 3, 1, t4, bench=b, run_id=f"scheduled__{b}")
    rep = build(store.figures(), NIGHT, Options(), store.runs(), lambda bench, run_id: 23_608_202)
    assert rep.conclusions[4] == ("Whether more complex models gain more cannot be tested: all 3 benchmarks have the "
                                  "same parameter count, so the rank correlation is undefined (no rho, no p-value).")
    assert conclusions(rep.rows, rep.average, Options()) == rep.conclusions


def test_report_out_dir_writes_only_inside_it(tmp_path):
    store = Store()
    record(store, 1, 3, 1, 100)
    out = tmp_path / "mine" / "report"
    write_report(store, out, night=NIGHT, opts=Options())
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["report"]
    assert {"report.md", "report.html", "table.json", "speedup.png"} <= {p.name for p in out.iterdir()}


def test_a_configured_metric_is_reported_never_dropped():
    store = Store()
    for g, m in ((1, 0.61), (2, 0.60)):
        record(store, g, 3, 1, 100 / g, map50=m)
    rep = doc_for(store, benchmarks={"resnet50_keras_cifar10": sample_benchmark("resnet50_keras_cifar10",
                                                                                metrics=["map50"], time_to_accuracy=None,
                                                                                bounds={"map50": (0, 1)})})
    assert rep.metrics == ["map50"] and rep.rows[0].metrics == {"map50": {1: 0.61, 2: 0.60}}
    text = __import__("scalebench.report.render", fromlist=["markdown"]).markdown(rep)
    assert "| benchmark | dtype | timed by | mAP@0.5 verdict | 1 GPU | 2 GPU |" in text


def test_table_json_keeps_its_keys(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 1, 60)
    md = write_report(store, night=NIGHT, opts=Options())
    doc = json.loads((md.parent / "table.json").read_text())
    assert {"night", "generated", "complete", "expected", "missing", "gpu_counts", "rows", "average", "conclusions",
            "alerts", "flagged", "series", "table_checks", "plots"} <= set(doc)
    assert {"benchmark", "relative_time", "relative_time_ci", "speedup", "efficiency", "train_s", "iqr_s",
            "metrics", "verdicts_text", "not_valid", "refused"} <= set(doc["rows"][0])
    assert (isolated_state / "reports" / "index.json").exists()


def test_step_breakdown_table_and_the_sentence_on_what_grows_with_the_gpu_count():
    store = Store()
    for n, train_s in ((1, 100.0), (2, 60.0), (4, 40.0)):
        record(store, n, 3, 1, train_s)  # sample breakdown: sync share 0.1 x (n - 1), data wait 5 %, other 2 %
    rep = doc_for(store)
    [row] = rep.rows
    assert row.step_shares[4] == {"data_wait": 0.05, "compute": pytest.approx(0.63), "sync": 0.3, "other": 0.02}
    assert row.step_s[2]["sync"] == pytest.approx(0.1 * 60.0 / 20)  # per steady step: 20 timed steps
    sentence = next(c for c in rep.conclusions if c.startswith("resnet50_keras_cifar10 (fp32):"))
    assert sentence == ("resnet50_keras_cifar10 (fp32): sync is 30% of the step at 4 devices, 0% at 1; data wait flat (5%); "
                        "compute falls from 93% to 63%; unattributed time flat (2%).")
    from scalebench.report.render import markdown
    text = markdown(rep)
    table = text.split("## Where a steady step goes")[1]
    assert "| resnet50_keras_cifar10 | fp32 | 4 | 0.100 (5%) | 1.260 (63%) | 0.600 (30%) | 0.040 (2%) |" in table


def test_a_part_the_framework_does_not_expose_is_said_not_guessed():
    store = Store()
    for n in (1, 2):
        cell = sample_cell(gpus=n, epochs=3, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
        contract = sample_contract(cell, train_s=50.0)
        b = contract["timing"]["breakdown"]
        b["compute_s"] += b["sync_s"]
        b["sync_s"], b["shares"]["sync"] = None, None
        b["shares"]["compute"] = round(b["compute_s"] / b["step_s"], 4)
        store.record_attempt(cell, 1, "valid", contract=contract)
    rep = doc_for(store)
    assert rep.rows[0].step_s[2]["sync"] is None
    sentence = next(c for c in rep.conclusions if c.startswith("resnet50_keras_cifar10 (fp32):"))
    assert sentence == ("resnet50_keras_cifar10 (fp32): no part of the step grows with the GPU count (data wait 5%, "
                        "compute 93%, unattributed time 2% at 2 devices) (sync not exposed by this framework).")


def test_time_to_accuracy_is_the_first_evaluation_reaching_the_target():
    store = Store()
    for n, reached in ((1, [0.2, 0.55, 0.7]), (2, [0.1, 0.3, 0.45])):
        cell = sample_cell(gpus=n, epochs=3, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
        contract = sample_contract(cell, train_s=30.0)
        contract["evaluations"] = [{"epoch": e + 1, "train_s": 10.0 * (e + 1), "metrics": {"iou": v}}
                                   for e, v in enumerate(reached)]
        store.record_attempt(cell, 1, "valid", contract=contract)
    from scalebench.core.config import AccuracyTarget

    target = AccuracyTarget(metric="iou", target=0.5)
    rep = doc_for(store, benchmarks={"resnet50_keras_cifar10": sample_benchmark(
        "resnet50_keras_cifar10", metrics=["iou"], bounds={"iou": (0, 1)}, time_to_accuracy=target)})
    assert rep.rows[0].time_to_accuracy == {1: 20.0, 2: None} and rep.rows[0].tta_target == "IoU >= 0.5"
    from scalebench.report.render import markdown
    assert ("- resnet50_keras_cifar10 (fp32) (IoU >= 0.5): 1 GPU: 20.0 s (training 30.0 s), 2 GPUs: not reached"
            in markdown(rep))
    assert doc_for(store).rows[0].time_to_accuracy == {}  # no target configured: nothing claimed


def test_an_epoch_that_does_not_fall_with_the_global_batch_is_flagged():
    store = Store()
    for n, steps in ((1, 16), (2, 8), (4, 16)):  # at 4 GPUs a step-based trainer kept 16 "epoch" steps
        cell = sample_cell(gpus=n, epochs=3, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
        contract = sample_contract(cell, train_s=30.0 / n)
        contract["epoch"] = {"train_images": 16, "global_batch": n, "steps_per_epoch": steps, "dropped_images": 0}
        store.record_attempt(cell, 1, "valid", contract=contract)
    rep = doc_for(store)
    assert rep.rows[0].steps_per_epoch == {1: 16, 2: 8, 4: 16} and rep.rows[0].epoch_mismatch == [4]
    assert ("resnet50_keras_cifar10 (fp32): an epoch covers a different part of the train split at 4 GPUs than at 1 "
            "(16 samples in 16 steps at 1 GPUs, 16 samples in 8 steps at 2 GPUs, 64 samples in 16 steps at 4 GPUs; "
            "more than 1% of the split apart)") in " ".join(rep.conclusions)


@pytest.mark.parametrize("bench, split, per_gpu, flagged", [
    ("unet_torch_voc2007", 209, 30, [4]),           # 180 / 180 / 180 / 120 images
    ("resnet50_keras_cifar10", 50000, 800, [3, 4]),  # 49,600 / 49,600 / 48,000 / 48,000
])
@pytest.mark.parametrize("whole_split", [False, True])
def test_the_old_dropped_remainder_is_flagged_and_the_whole_split_plan_is_not(bench, split, per_gpu, flagged,
                                                                               whole_split):
    """Full passes as the kit planned them before (floor(N / batch) steps, the remainder dropped:
    a different share of the split at each GPU count, more than 1 % of it here) are flagged and
    marked suspect; the kit's whole-split plan covers every image at every GPU count and is not."""
    from scalebench_kit.epochs import epoch_plan

    def dropped_remainder(n):
        steps = split // (per_gpu * n)
        return {"train_images": split, "global_batch": per_gpu * n, "steps_per_epoch": steps,
                "dropped_images": split - steps * per_gpu * n}

    store = Store()
    for n in (1, 2, 3, 4):
        cell = sample_cell(gpus=n, epochs=3, run_id="scheduled__n1", night=NIGHT, run_type="scheduled",
                           benchmark=bench, dag_id=f"scalebench_{bench}")
        contract = sample_contract(cell, train_s=30.0 / n)
        contract["epoch"] = epoch_plan(split, per_gpu * n, shards=n) if whole_split else dropped_remainder(n)
        store.record_attempt(cell, 1, "valid", contract=contract)
    [row] = doc_for(store).rows
    expected = [] if whole_split else flagged
    assert row.epoch_mismatch == expected
    assert all(any("samples in" in w for w in row.suspect[n]) for n in expected)  # left out of the average
    if whole_split:
        assert set(row.samples_per_epoch.values()) == {split}


def test_each_table_is_its_list_of_columns():
    """A new column is one entry: the rendered header and every line follow the column list."""
    from scalebench.core.tables import Column
    from scalebench.report.render import detail_columns, markdown, step_columns, study_columns, table

    store = Store()
    for g in (1, 2):
        record(store, g, 3, 1, 100 / g)
    rep = doc_for(store)
    md = markdown(rep)
    for columns in (study_columns(rep), detail_columns(rep), step_columns()):
        assert "| " + " | ".join(c.header for c in columns) + " |" in md
    extra = [*detail_columns(rep), Column("images/s per GPU", lambda it: 50.0 / it[1], lambda v: f"{v:.1f}")]
    lines = table(extra, [(r, n) for r in rep.rows for n in sorted(r.train_s)])
    assert lines[0].endswith("| images/s per GPU |") and lines[2].endswith("| 50.0 |") and lines[3].endswith("| 25.0 |")


def test_a_metric_at_its_floor_or_without_variance_is_uninformative_never_equivalent():
    """A detector that finds nothing scores 0 at every GPU count: two repeats must not make that
    'equivalent'. Counted apart in the conclusions."""
    from scalebench.analysis.stats import equivalence

    store = Store()
    for rep in (1, 2):
        for g in (1, 2):
            record(store, g, 3, rep, 100 / g, precision=0.0, recall=0.0, map50=0.0)
    rep_ = doc_for(store)
    v = rep_.rows[0].verdicts
    # precision, recall and map50 at 0; the sample's accuracy is 0.5 in every repeat: no variance
    assert {m: per[2].kind for m, per in v.items()} == dict.fromkeys(["precision", "recall", "accuracy", "map50"],
                                                                     "uninformative")
    assert v["precision"][2].text() == "uninformative (at its floor 0 on both sides)"
    assert v["accuracy"][2].why == "no variance: every repeat gave the same value on both sides"
    assert "| resnet50_keras_cifar10 | fp32 | train time |" + " uninformative |" * 4 + " 100.0% | 50.0% |" in markdown(rep_)
    assert any(c.startswith("Accuracy comparisons that say nothing, counted apart: 4 (resnet50_keras_cifar10 (fp32) "
                            "accuracy, resnet50_keras_cifar10 (fp32) map50") for c in rep_.conclusions)
    assert not any(c.startswith("Nightly accuracy") for c in rep_.conclusions)
    assert equivalence([1.0, 1.0], [1.0, 1.0], 0.01).why == "at its ceiling 1 on both sides"
    assert equivalence([0.5, 0.5], [0.5, 0.5], 0.01).kind == "uninformative"
    assert equivalence([0.5, 0.501], [0.5, 0.501], 0.01).kind == "equivalent"


def test_the_weekly_accuracy_run_is_reported_beside_the_nightly_table_and_a_skipped_run_is_not_missing(isolated_state):
    store = Store()
    for g, t in ((1, 100), (2, 60)):
        record(store, g, 3, 1, t)  # tonight's nightly run of resnet50
    store.record_run(dag_id="scalebench_resnet50_keras_cifar10", run_id="scheduled__n1", benchmark="resnet50_keras_cifar10",
                     run_type="scheduled", night=NIGHT, counts={"valid": 2})
    week = "2026-11-22"
    for g, prec in ((1, 0.62), (2, 0.61)):  # unet's weekly accuracy run, six nights before
        cell = sample_cell(gpus=g, epochs=100, run_id="scheduled__w1", night=week, run_type="accuracy",
                           profile="full", benchmark="unet_torch_voc2007", dag_id="scalebench_unet_torch_voc2007_accuracy")
        store.record_attempt(cell, 1, "valid", contract=sample_contract(cell, train_s=900 / g, precision=prec))
    why = "weekly accuracy window on gpu-node-1, Sat 2026-11-28 18:00 to Mon 2026-11-30 18:00 UTC"
    store.record_run(dag_id="scalebench_unet_torch_voc2007", run_id="scheduled__n1u", benchmark="unet_torch_voc2007",
                     run_type="scheduled", night=NIGHT, counts={"skipped": why})
    opts = Options(expected=["resnet50_keras_cifar10", "unet_torch_voc2007"])
    doc = build(store.figures(up_to_night=NIGHT), NIGHT, opts, store.runs(NIGHT))
    assert doc.complete and doc.skipped == {"unet_torch_voc2007": why}
    assert [r.benchmark for r in doc.rows] == ["resnet50_keras_cifar10"] and not doc.manual_runs
    [weekly] = doc.accuracy_rows
    assert (weekly.benchmark, weekly.profile, weekly.run_type, weekly.train_epochs) == \
        ("unet_torch_voc2007", "full", "accuracy", {1: 100, 2: 100})
    assert weekly.metrics["precision"] == {1: 0.62, 2: 0.61}
    text = markdown(doc)
    assert f"**Skipped**: unet_torch_voc2007's scheduled run planned no cells ({why})." in text
    assert "a smoke signal only" in text
    section = text[text.index("## Weekly accuracy run (full profile)"):text.index("## Detail per GPU count")]
    assert "| unet_torch_voc2007 | fp32 | scheduled__w1 | 2 | 100 | 450 |" in section
    assert "0.610 (inconclusive)" in section  # one repeat: no interval, never "equivalent"
    assert json.loads(json.dumps(doc.to_json(), default=str))["accuracy_rows"][0]["benchmark"] == "unet_torch_voc2007"
    # a night after: no nightly figures yet, the weekly run is still the latest
    later = build(store.figures(up_to_night="2026-11-29"), "2026-11-29", opts, store.runs("2026-11-29"))
    assert [r.run_id for r in later.accuracy_rows] == ["scheduled__w1"] and later.missing == opts.expected


def test_a_cells_other_attempts_are_listed_and_the_newest_valid_one_is_the_figure():
    store = Store()
    for g in (1, 2):
        record(store, g, 3, 1, 10.0 / g)
    cell = sample_cell(gpus=2, epochs=3, repeat=1, run_id="scheduled__n1", night=NIGHT, run_type="scheduled")
    store.record_attempt(cell, 2, "failed", reason="lease_lost")
    store.record_attempt(cell, 3, "valid", contract=sample_contract(cell, train_s=4.0, attempt=3))
    [row] = doc_for(store).rows
    assert row.train_s[2] == pytest.approx(4.0)  # attempt 3, not attempt 1's 5.0
    assert row.retried == [{"label": cell["label"], "figure": 3,
                            "others": ["attempt 1 valid", "attempt 2 failed (lease_lost)"]}]
    text = markdown(doc_for(store))
    assert (f"- resnet50_keras_cifar10 (fp32): {cell['label']}: attempt 3 is the figure; attempt 1 valid; "
            "attempt 2 failed (lease_lost)") in text


def test_plots_name_rows_in_full_and_an_empty_chart_says_why_in_words(tmp_path):
    from scalebench.report import plots

    store = Store()
    long_name = "maskrcnn_mmdet_voc2012"
    for g, t in ((1, 100), (2, 60)):
        record(store, g, 3, 1, t, bench=long_name, run_id="manual__only", run_type="manual")
    rep = doc_for(store)
    labels = plots.breakdown(rep, tmp_path / "breakdown.png")
    assert labels == [f"{long_name} (fp32)\n1 GPU", f"{long_name} (fp32)\n2 GPUs"]  # never cut to 14 characters
    said = plots.trend(rep, tmp_path / "trend.png")  # manual runs only: no scheduled night to trend
    assert said == ["No scheduled night in the lookback window: no nightly trend to draw (manual runs never feed it)."]
    assert (tmp_path / "trend.png").read_bytes()[:4] == b"\x89PNG"


def test_a_cell_valid_after_a_crash_at_teardown_counts_and_is_listed_with_the_crash(isolated_state):
    store = Store()
    record(store, 1, 3, 1, 100)
    record(store, 2, 3, 2, 56)  # an ordinary valid cell beside it: not listed
    crashed = sample_cell(gpus=2, epochs=3, repeat=1, run_id="scheduled__n1", night=NIGHT, run_type="scheduled",
                          benchmark="resnet50_keras_cifar10", dag_id="scalebench_resnet50_keras_cifar10")
    contract = sample_contract(crashed, train_s=55)
    contract["provenance"]["image_digest"] = "sha256:def"
    line = "cell x attempt 1 valid, then crashed at teardown: teardown_crash, exit code 1: rank 1 ended by SIGABRT"
    store.record_attempt(crashed, 1, "valid", contract=contract, reason="teardown_crash", message=line, exit_code=1)
    [row] = doc_for(store).rows
    assert row.valid == 3 and row.not_valid == [] and row.teardown == [{"label": crashed["label"], "message": line}]
    text = markdown(doc_for(store))
    listed = text.split("## Cells valid after a crash at teardown", 1)[1].split("\n## ", 1)[0]
    assert [ln for ln in listed.splitlines() if ln.startswith("- ")] == [f"- {row.name}: {crashed['label']}: ` {line} `"]


def test_container_text_in_the_report_is_shown_literally_never_a_link_or_an_image(isolated_state, tmp_path):
    """A teardown message quotes the container's last lines: Markdown in them stays text in
    report.md and report.html."""
    from scalebench.report.build import write_report

    store = Store()
    record(store, 1, 3, 1, 100)
    crashed = sample_cell(gpus=2, epochs=3, repeat=1, run_id="scheduled__n1", night=NIGHT, run_type="scheduled",
                          benchmark="resnet50_keras_cifar10", dag_id="scalebench_resnet50_keras_cifar10")
    evil = ("teardown_crash: last lines: [click](http://evil.example) ![x](http://evil.example/p.png) "
            "<http://evil.example> **loud** `tick` <b>b</b>\nnext line")
    store.record_attempt(crashed, 1, "valid", contract=sample_contract(crashed, train_s=55), reason="teardown_crash",
                         message=evil, exit_code=1)
    html = (write_report(store, tmp_path / "r", NIGHT).parent / "report.html").read_text()
    assert "evil.example" in html and 'href="http://evil' not in html and "<img src=\"http://evil" not in html
    assert "<strong>loud" not in html and "<b>b</b>" not in html and "[click](http://evil.example)" in html
