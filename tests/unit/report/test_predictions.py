"""Predictions through the report: frozen each night from the nights before it, never rewritten,
judged by the first night that measures their target, and shown in the report's section."""
import datetime as dt
import math

import pytest

from scalebench.report.build import publish
from scalebench.report.model import Options
from scalebench.store.predictions import Predictions
from scalebench.store.results import Store
from tests.support.samples import sample_breakdown, sample_cell, sample_contract

BENCH = "resnet50_keras_cifar10"
FIRST = dt.date(2026, 11, 1)


def night_of(i: int) -> str:
    return (FIRST + dt.timedelta(days=i)).isoformat()


def record(store, i: int, counts, ips=lambda n: 100.0 * n * (1 - 0.04 * math.log2(n)), digest="sha256:a"):
    night = night_of(i)
    run_id = f"scheduled__{night}T01:00:00+00:00"
    for gpus in counts:
        for rep in (1, 2):
            cell = sample_cell(gpus=gpus, repeat=rep, run_id=run_id, night=night, run_type="scheduled")
            c = sample_contract(cell)
            c["provenance"]["image_digest"] = digest
            c["timing"]["images_per_s"] = ips(gpus)
            c["timing"]["breakdown"] = sample_breakdown(gpus, 20 * 16 * gpus / ips(gpus), sync_share=0.02 * (gpus - 1))
            store.record_attempt(cell, 1, "valid", contract=c)
    store.record_run(dag_id=f"scalebench_{BENCH}", run_id=run_id, benchmark=BENCH, run_type="scheduled", night=night,
                     counts={})


@pytest.fixture
def store(isolated_state):
    return Store()


def frozen(store, night):
    return {(f["gpus"], f["hosts"]): f for f in Predictions(store).frozen(benchmark=BENCH, night=night)}


def test_a_night_freezes_from_the_nights_before_it_and_judges_the_held_out_count(store):
    for i in range(5):
        record(store, i, (1, 2, 4))
    rep, path = publish(store, night_of(4), Options(expected=[BENCH]))
    got = frozen(store, night_of(4))
    assert set(got) == {(4, 1), (8, 1), (4, 2)}
    held = got[(4, 1)]
    assert held["role"] == "held_out" and held["fitted_counts"] == [1, 2] and held["night"] == night_of(4)
    assert held["fitted_nights"] == [night_of(i) for i in range(4)]  # never the night it is judged by
    assert held["judged_night"] == night_of(4) and held["measured_images_per_s"] == pytest.approx(400 * 0.92)
    assert held["measured_efficiency"] == pytest.approx(0.92)
    assert got[(8, 1)]["fitted_counts"] == [1, 2, 4] and got[(8, 1)]["judged_night"] is None
    assert got[(4, 2)]["images_per_s"] is None and "link speed" in got[(4, 2)]["line"]  # no link_gbps, no sweep
    text = path.read_text()
    assert "## What more GPUs would give" in text and "8 GPUs: " in text
    assert f"frozen predictions of {BENCH}, judged: 1, median error" in text
    [row] = rep.predictions["rows"]
    assert row["counts"] == [1, 2, 4] and row["nights"] == 5


def test_a_frozen_prediction_is_never_rewritten_and_a_later_night_that_measures_8_judges_it(store):
    for i in range(4):
        record(store, i, (1, 2, 4))
    publish(store, night_of(4), Options(expected=[BENCH]))
    before = frozen(store, night_of(4))
    record(store, 3, (4,), ips=lambda n: 50.0 * n)  # a late, much slower cell of an earlier night
    publish(store, night_of(4), Options(expected=[BENCH]))
    assert frozen(store, night_of(4)) == before  # the same rows, the same figures
    record(store, 5, (1, 2, 4, 8))  # a host with 8 devices joins
    publish(store, night_of(5), Options(expected=[BENCH]))
    eight = frozen(store, night_of(4))[(8, 1)]
    assert eight["judged_night"] == night_of(5) and eight["measured_efficiency"] == pytest.approx(0.88)
    assert abs(eight["efficiency"] - 0.88) < 0.1  # judged, whatever its error: the report's running error says it


def test_a_new_image_starts_the_fit_again(store):
    for i in range(3):
        record(store, i, (1, 2, 4))
    record(store, 3, (1, 2), digest="sha256:b")
    publish(store, night_of(4), Options(expected=[BENCH]))
    got = frozen(store, night_of(4))
    assert got[(2, 1)]["fitted_nights"] == [night_of(3)] and got[(2, 1)]["fitted_counts"] == [1]


def test_scalebench_predict_prints_what_the_report_predicts(store, capsys, tmp_path):
    import json

    from scalebench.cli import main

    for i in range(5):
        record(store, i, (1, 2, 4))
    rep, _ = publish(store, night_of(4), Options(expected=[BENCH]))
    assert main(["predict", BENCH, "--gpus", "8", "-o", "json"]) == 0
    [got] = json.loads(capsys.readouterr().out)
    shown = rep.predictions["rows"][0]["predictions"][0]
    assert (got["gpus"], got["hosts"], got["precision"]) == (8, 1, "fp32")
    assert got["images_per_s"] == pytest.approx(shown["images_per_s"]) and got["limit"] == shown["limit"]
    table = tmp_path / "points.csv"
    table.write_text("gpus,per_gpu_batch,images_per_s\n1,16,100\n2,16,196\n4,16,368\n")
    assert main(["predict", "--from-table", str(table), "--gpus", "8"]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs" in out and "aggregate fit" in out
    table.write_text("gpus,images_per_s\n2,196\n4,368\n")
    assert main(["predict", "--from-table", str(table), "--gpus", "8"]) == 2
    assert "no row at 1 GPU" in capsys.readouterr().err


def test_two_hosts_from_a_table_take_the_bus_bandwidths_and_a_refusal_exits_non_zero(tmp_path, capsys):
    import json

    from scalebench.cli import main

    table = tmp_path / "points.csv"
    table.write_text("gpus,per_gpu_batch,images_per_s,params\n1,16,100,25000000\n2,16,196,\n4,16,368,\n")
    two = ["predict", "--from-table", str(table), "--gpus", "4", "--hosts", "2", "-o", "json"]
    assert main(two) == 1  # nothing to price the ring across hosts with: refused, and said why
    assert "two hosts need the gradient size" in json.loads(capsys.readouterr().out)["why_not"]
    assert main(two + ["--busbw", "80", "--link-gbps", "100"]) == 0
    assumed = json.loads(capsys.readouterr().out)
    assert main(two + ["--busbw", "80,3"]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["images_per_s"] < assumed["images_per_s"]  # 3 GB/s measured across, 12.5 assumed
    assert "assumed at 100 Gbit/s, not measured" in " ".join(assumed["notes"])
    assert main(two + ["--busbw", "80", "--link-gbps", "100", "--link-efficiency", "0.9"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert given["images_per_s"] > assumed["images_per_s"] and "reaches 90% of its line rate (given)" in \
        " ".join(given["notes"]) and "reaches 50% of its line rate (assumed" in " ".join(assumed["notes"])
    # a table's multi-host row is fitted on: no bandwidth asked for, nothing assumed
    hosts = tmp_path / "hosts.csv"
    hosts.write_text("gpus,hosts,per_gpu_batch,images_per_s\n1,1,16,100\n2,1,16,196\n4,1,16,368\n4,2,16,662\n")
    assert main(["predict", "--from-table", str(hosts), "--gpus", "4", "--hosts", "4", "-o", "json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert 0 < fitted["images_per_s"] < 2 * 662 and "fitted on the 2-host row(s)" in " ".join(fitted["notes"])
    assert "assumed" not in " ".join(fitted["notes"])
    assert "at the measured 3 GB/s" in " ".join(measured["notes"])
    # the ring's extra time across hosts is named as such; the growth without a breakdown never as a sync
    assert measured["limit"].startswith("overhead grows with N") and "the ring across hosts'" in measured["limit"]
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal of a bad option value
        main(["predict", "--from-table", str(table), "--gpus", "8", "--busbw", "80,x"])
    assert refused.value.code == 2
    assert "--busbw: 'x' is not a number" in capsys.readouterr().err
    assert main(["predict", BENCH, "--gpus", "8", "--busbw", "80"]) == 2  # nights carry their own sweeps
    assert "--busbw, --link-gbps and --link-efficiency go with --from-table" in capsys.readouterr().err


def test_the_history_page_embeds_the_frozen_predictions_beside_the_measured_nights(store):
    import json
    import re

    from scalebench.report.summary import summarize_night
    from tests.unit.orchestration.test_pages import open_app

    for i in range(5):
        record(store, i, (1, 2, 4))
        summarize_night(store, BENCH, night_of(i))
    publish(store, night_of(4), Options(expected=[BENCH]))
    page = open_app().get(f"/benchmarks/{BENCH}", params={"all": 1}).text
    doc = json.loads(re.search(r'id="history-data">(.*?)</script>', page, re.S).group(1))
    held = frozen(store, night_of(4))[(4, 1)]
    assert [night_of(4), 4, "fp32", held["images_per_s"], held["line"]] in doc["predicted"]
    assert all(p[0] == night_of(4) for p in doc["predicted"])  # drawn on the night each was frozen
