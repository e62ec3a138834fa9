"""The history's older nights are written as JSON by the database (summary_arrays: SQLite's
json_array, PostgreSQL's json_build_array); each array must say what the page's own row of the
same summary says (pages.chart_row of iter_summaries), on both engines."""
import json

import pytest

from scalebench.core.figures import FIGURE_NAMES
from scalebench.orchestration.ui import pages
from scalebench.store.results import Store


def _summary(gpus: int, precision: str, **over) -> dict:
    row = {"gpus": gpus, "precision": precision, "dag_id": "scalebench_b", "run_id": "scheduled__x", "run_type": "scheduled",
           "profile": "nightly", "host": "gpu-node-1", "cells": 3, "valid": 2, "retried": 1, "reruns": 0,
           "basis": "train time", "relative_time_ci": [0.61, 0.66], "metrics": {"iou": 0.71, "loss": 0.25},
           "step_shares": {"compute": 0.8, "sync": 0.15, "data_wait": 0.05}, "image_digest": "sha256:ab\"c<d>",
           "fingerprint": {"driver": "550"}, "figures": {f: None for f in FIGURE_NAMES}}
    row["figures"].update({"images_per_s": 123.25, "relative_time": 0.64})
    return {**row, **over}


def test_the_databases_arrays_equal_the_pages_rows(both_stores):
    store = Store(both_stores)
    store.save_summaries("b", "2026-11-27", [_summary(1, "fp32"), _summary(2, "bf16", metrics=None, step_shares=None,
                                                                         basis=None, image_digest=None)])
    store.save_summaries("b", "2026-11-28", [_summary(4, "fp32")])
    store.save_marks("2026-11-28", {("b", 4, "fp32"): [{"kind": "alert", "text": "slower by 12 % \"quoted\" <b>"}]})
    expected = [(s["night"], pages.chart_row(s)) for s in store.iter_summaries(benchmark="b", columns=pages.CHART_FIELDS)]
    got = [(night, json.loads(text)) for night, text in store.summary_arrays("b", pages.CHART_COLUMNS, ("night",))]
    assert got == expected and len(got) == 3
    assert [n for n, _ in store.summary_arrays("b", ["gpus"], ("night",), since="2026-11-28")] == ["2026-11-28"]
    assert [n for n, _ in store.summary_arrays("b", ["gpus"], ("night",), before="2026-11-28")] == ["2026-11-27"] * 2


@pytest.mark.parametrize("value", [None, {}], ids=["none", "empty"])
def test_empty_json_as_the_page_reads_it(both_stores, value):
    store = Store(both_stores)
    store.save_summaries("b", "2026-11-27", [_summary(1, "fp32", metrics=value)])
    [(text,)] = store.summary_arrays("b", ["metrics"])
    assert json.loads(text) == [value]


def test_the_span_of_one_benchmark_is_its_entry_in_every_benchmarks_span(both_stores):
    store = Store(both_stores)
    store.save_summaries("b", "2026-11-27", [_summary(1, "fp32")])
    store.save_summaries("b", "2026-11-29", [_summary(1, "fp32")])
    store.save_summaries("a", "2026-11-28", [_summary(2, "fp32")])
    every = store.summary_span()
    assert every == {"a": ("2026-11-28", "2026-11-28"), "b": ("2026-11-27", "2026-11-29")}
    assert store.summary_span("b") == {"b": every["b"]} and store.summary_span("c") == {}
