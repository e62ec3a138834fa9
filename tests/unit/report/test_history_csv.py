"""A streamed history CSV fixes its columns before its first row: the metric and share names of
the newest nights; an older night's other metric or share is kept in its `other` column. Read as
the page reads it: from the store (Store.summary_arrays), on each engine, each number as it was
stored."""
import csv
import io

from scalebench.report.exports import CSV_JSON, CSV_PLAIN, csv_chunks, history_header, history_row, history_rows
from scalebench.store.results import Store


def summary(night, metrics, shares=None):
    return {"night": night, "benchmark": "b", "gpus": 2, "precision": "fp32", "dag_id": "d", "run_id": "r",
            "run_type": "scheduled", "profile": "nightly", "host": "h", "cells": 3, "valid": 3, "retried": 0,
            "reruns": 0, "basis": "throughput", "figures": {"relative_time": 0.6, "images_per_s": 1234.5678901234567},
            "relative_time_ci": [0.58, 0.6200000000000001], "metrics": metrics, "step_shares": shares or {"compute": 0.9},
            "image_digest": "sha256:x", "fingerprint": None}


def test_an_older_nights_metric_outside_the_newest_names_is_kept_in_other(both_stores):
    store = Store(both_stores)
    old = summary("2026-01-01", {"map": 0.41, "old_metric": 0.2})
    new = summary("2026-11-28", {"map": 0.43})
    for s in (old, new):
        store.save_summaries("b", s["night"], [s])
    store.save_marks("2026-01-01", {("b", 2, "fp32"): [{"kind": "alert", "text": "slower, 12 %"}]})
    header = history_header([new])
    assert header[-1] == "other" and "metric_map" in header and "metric_old_metric" not in header
    text = "".join(csv_chunks(header, history_rows(store.summary_arrays("b", CSV_JSON, CSV_PLAIN), header), per_chunk=1))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["metric_map"] for r in rows] == ["0.41", "0.43"] and rows[0]["other"] == "metric_old_metric=0.2"
    assert rows[1]["other"] == "" and rows[0]["marks"] == "alert: slower, 12 %" and rows[1]["marks"] == ""
    assert rows[0]["relative_time_ci_high"] == "0.6200000000000001" and rows[0]["images_per_s"] == "1234.5678901234567"
    assert rows[0]["relative_time"] == "0.6" and rows[0]["share_compute"] == "0.9" and rows[0]["image_digest"] == "sha256:x"
    # the same values, column by column, as a summary read whole and flattened (what `scalebench history -o csv` writes)
    whole = [history_row(s) for s in store.summaries(benchmark="b")]
    for got, want in zip(rows, whole):
        assert {k: got[k] for k in want if k in got} == {k: "" if v is None else str(v) for k, v in want.items() if k in got}
