"""A streamed history CSV fixes its columns before its first row: the metric and share names of
the newest nights; an older night's other metric or share is kept in its `other` column."""
import csv
import io

from scalebench.report.exports import csv_chunks, history_header, history_rows


def summary(night, metrics, shares=None, marks=None):
    return {"night": night, "benchmark": "b", "gpus": 2, "precision": "fp32", "run_id": "r", "run_type": "scheduled",
            "profile": "nightly", "host": "h", "cells": 3, "valid": 3, "retried": 0, "reruns": 0, "basis": "throughput",
            "figures": {"relative_time": 0.6}, "relative_time_ci": [0.58, 0.62], "metrics": metrics,
            "step_shares": shares or {"compute": 0.9}, "image_digest": "sha256:x", "marks": marks}


def test_an_older_nights_metric_outside_the_newest_names_is_kept_in_other():
    old = summary("2026-01-01", {"map": 0.41, "old_metric": 0.2}, marks=[{"kind": "alert", "text": "slower"}])
    new = summary("2026-11-28", {"map": 0.43})
    header = history_header([new])
    assert header[-1] == "other" and "metric_map" in header and "metric_old_metric" not in header
    text = "".join(csv_chunks(header, history_rows([old, new], header), per_chunk=1))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["metric_map"] for r in rows] == ["0.41", "0.43"] and rows[0]["other"] == "metric_old_metric=0.2"
    assert rows[1]["other"] == "" and rows[0]["marks"] == "alert: slower" and rows[0]["relative_time_ci_low"] == "0.58"
    assert rows[0]["relative_time"] == "0.6" and rows[0]["share_compute"] == "0.9"
