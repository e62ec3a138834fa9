"""The profiling window's summaries: TensorFlow's op table (its converter's Google Charts JSON)
read into operations and kernels, and the per-step summary both families share."""
import json

import pytest

from scalebench_kit.profiling import summarise, tf_op_totals

COLS = [{"id": i, "label": i, "type": "string"} for i in
        ("rank", "host_or_device", "type", "operation", "occurrences", "total_self_time")]


def gviz(rows):
    return {"cols": COLS, "rows": [{"c": [{"v": v} for v in r]} for r in rows]}


def test_tensorflows_op_table_becomes_host_ops_and_device_kernels_without_idle():
    with_idle = gviz([(1, "Host", "IDLE", "IDLE", 0, 900.0), (2, "Host", "_MklMatMul", "dense/MatMul", 3, 516.0)])
    without = gviz([(1, "Host", "_MklMatMul", "dense/MatMul", 3, 516.0),
                    (2, "Device", "Conv2D", "conv1/Conv2D", 3, 300.0),
                    (3, "Host", "_MklMatMul", "dense/MatMul", 3, 4.0)])  # the same op listed twice: summed
    totals = {t["name"]: t for t in tf_op_totals(json.dumps([with_idle, without]).encode())}
    assert set(totals) == {"dense/MatMul (_MklMatMul)", "conv1/Conv2D (Conv2D)"}
    mm, conv = totals["dense/MatMul (_MklMatMul)"], totals["conv1/Conv2D (Conv2D)"]
    assert mm["calls"] == 6 and mm["self_s"] == pytest.approx(520e-6) and mm["device_self_s"] == 0
    assert conv["device_self_s"] == pytest.approx(300e-6) and conv["self_s"] == 0


def test_a_summary_is_per_step_sorted_by_self_time_and_shares_the_step():
    totals = [{"name": "a", "calls": 6, "self_s": 0.03, "device_self_s": 0.0},
              {"name": "b", "calls": 3, "self_s": 0.06, "device_self_s": 0.0},
              {"name": "c", "calls": 3, "self_s": 0.0, "device_self_s": 0.0}]
    got = summarise(totals, 3, 0.1, "self_s")
    assert [r["name"] for r in got] == ["b", "a"]  # nothing for an op without self time
    assert got[0] == {"name": "b", "self_s": 0.02, "calls": 1.0, "share": 0.2}


def test_the_windows_share_is_the_slowest_ranks_window_over_its_run():
    from scalebench_kit.events import window_share

    def ev(key, t, rank):
        return {"key": key, "time": t, "rank": rank}

    events = [ev("run_start", 100.0, 0), ev("run_start", 100.5, 1), ev("profile_start", 150.0, 0),
              ev("profile_start", 150.0, 1), ev("profile_stop", 152.0, 0), ev("profile_stop", 154.0, 1),
              ev("run_stop", 160.0, 0), ev("run_stop", 160.5, 1)]
    assert window_share(events) == (4.0, 60.0)  # rank 1: 4 s of its 60 s run
    assert window_share([e for e in events if e["key"] != "profile_stop" or e["rank"] == 0]) == (2.0, 60.0)
    assert window_share([e for e in events if not e["key"].startswith("profile")]) is None
    assert window_share([e for e in events if e["key"] != "run_stop"]) is None  # a run not over: nothing to share
