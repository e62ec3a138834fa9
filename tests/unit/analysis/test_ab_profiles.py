"""An alert's same-night A/B profiles its last pair (one cell per image), and where the step's time
went reaches every place a person looks: the alert's line and message, the stored alert group
and its page (the diff table, each trace for download), the run's figures tab. What an A/B
without a usable profile says."""
import datetime as dt
import gzip
import json
import random

import pytest

from scalebench.analysis.profile_diff import ab_diff, ab_words
from scalebench.analysis.reruns import more_pairs, plan_reruns
from scalebench.analysis.regress import Gates
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract

TONIGHT = dt.date(2026, 11, 30)
BENCH = "resnet50_keras_cifar10"
OLD = {"image": "scalebench/tensorflow:a", "image_ref": "scalebench/tensorflow:sha256-aaaaaaaaaaaa",
       "image_digest": "sha256:" + "a" * 64}
NEW = {"image": "scalebench/tensorflow:b", "image_ref": "scalebench/tensorflow:sha256-bbbbbbbbbbbb",
       "image_digest": "sha256:" + "b" * 64}
RUN = f"scheduled__{TONIGHT.isoformat()}"
# the previous image's profiled step: 100 ms; the new one's: 150 ms, 45 of them in one more matrix multiply
A_PROFILE = {"rank": 0, "steps": 5, "step_s": 0.100, "traces": ["profile/rank0/trace.json.gz"], "kernels": [],
             "ops": [{"name": "aten::convolution", "self_s": 0.060, "calls": 3.0, "share": 0.6},
                     {"name": "aten::add", "self_s": 0.010, "calls": 5.0, "share": 0.1}]}
B_PROFILE = {**A_PROFILE, "step_s": 0.150,
             "ops": [{"name": "aten::convolution", "self_s": 0.062, "calls": 3.0, "share": 0.41},
                     {"name": "aten::mm", "self_s": 0.045, "calls": 40.0, "share": 0.3},
                     {"name": "aten::add", "self_s": 0.010, "calls": 5.0, "share": 0.07}]}


def record(store, cell, ips, image, profile=None):
    contract = sample_contract(cell)
    contract["provenance"].update(image)
    contract["timing"]["images_per_s"] = ips
    if profile is not None:
        contract["profile"] = profile
    store.record_attempt(cell, 1, "valid", contract=contract)


@pytest.fixture
def ab_night(isolated_state):
    """20 nights at 1000 images/s on image a; tonight's scheduled run on image b at 800 flags its
    figure, whose A/B (5 + 5, a at 1000, b at 800) runs with its last pair profiled."""
    store, rng = Store(), random.Random(1)
    for i in range(20, 0, -1):
        night = (TONIGHT - dt.timedelta(days=i)).isoformat()
        record(store, sample_cell(gpus=1, run_id=f"scheduled__{night}", night=night, run_type="scheduled"),
               1000 * (1 + rng.gauss(0, 0.01)), OLD)
    planned = [sample_cell(gpus=1, repeat=r, run_id=RUN, night=TONIGHT.isoformat(), run_type="scheduled")
               for r in (1, 2, 3)]
    for c in planned:
        record(store, c, 800.0, NEW)
    cells, [line] = plan_reruns(store, planned, 3, ab_pairs=5, profile_steps=5)
    for c in cells:
        previous = c["role"] == "ab_previous"
        record(store, {**c, "night": TONIGHT.isoformat()}, (1000.0 if previous else 800.0) * (1 + rng.gauss(0, 0.005)),
               OLD if previous else NEW, (A_PROFILE if previous else B_PROFILE) if c.get("profile_steps") else None)
    return store, planned, cells, line


def test_only_the_ab_s_last_pair_is_profiled_and_the_added_pairs_are_not(ab_night):
    store, planned, cells, line = ab_night
    profiled = [c for c in cells if c.get("profile_steps")]
    assert sorted(c["role"] for c in profiled) == ["ab_previous", "rerun"] and {c["profile_steps"] for c in profiled} == {5}
    assert {c["label"].rsplit(" ", 1)[-1] for c in profiled} == {"5"}  # pair 5 of 5: after the A/B's other cells
    assert cells.index(profiled[0]) >= 8 and "the last pair profiled (5 steps each)" in line
    # more pairs (an unknown A/B) are never profiled again: the first pairs' profiles already exist
    added, _ = more_pairs(store, planned, cells[:4], Gates(ab_max_pairs=8))
    assert not any(c.get("profile_steps") for c in added)


def test_the_diff_of_the_profiled_pair_names_the_planted_operation_first_with_its_share(ab_night):
    store, _, cells, _ = ab_night
    from scalebench.store.profiles import cells_profiles

    profiles = cells_profiles(store.engine, [c["key"] for c in cells])
    assert len(profiles) == 2 and {p["attempt"] for p in profiles.values()} == {1}
    found = ab_diff([{**c, "night": TONIGHT.isoformat()} for c in cells], profiles)
    assert found["top"][0] == "aten::mm +45 ms per step, 90% of the slowdown (new)"
    assert found["top"][1].startswith("aten::convolution +2 ms per step, 4% of the slowdown")
    assert found["diff"]["unexplained_s"] == pytest.approx(0.003) and found["night"] == TONIGHT.isoformat()
    assert found["a"]["traces"] == found["b"]["traces"] == ["profile/rank0/trace.json.gz"]
    assert ab_words(found).startswith("; where the step's time went (the A/B's profiled pair, operations): aten::mm +45 ms")
    # on a GPU both sides have device kernels: the step's time is theirs (an operation's host time is its launch)
    a_key = found["a"]["key"]
    b_key = found["b"]["key"]
    kernels = {a_key: {**profiles[a_key], "kernels": [{"name": "conv2d_fprop", "self_s": 0.06, "calls": 1.0, "share": 0.6}]},
               b_key: {**profiles[b_key], "kernels": [{"name": "conv2d_fprop", "self_s": 0.06, "calls": 1.0, "share": 0.4},
                                                     {"name": "sgemm_128x64", "self_s": 0.05, "calls": 1.0, "share": 0.3}]}}
    on_gpu = ab_diff(cells, kernels)
    assert on_gpu["diff"]["kind"] == "kernel" and on_gpu["top"][0].startswith("sgemm_128x64 +50 ms per step")
    assert "(the A/B's profiled pair, device kernels): sgemm_128x64" in ab_words(on_gpu)
    # a side whose window failed: said, never a diff; an A/B from before profiling: nothing said
    broken = {**profiles, b_key: {"why_not": "the profiler recorded no operation"}}
    assert ab_diff(cells, broken)["why_not"] == "B: the profiler recorded no operation"
    assert ab_words(ab_diff(cells, broken)) == "; no profile: B: the profiler recorded no operation"
    assert ab_diff(cells, {}) is None and ab_words(None) == ""


def test_the_alert_its_message_the_alert_page_and_the_run_tab_say_where_the_time_went(ab_night, monkeypatch):
    from scalebench.core.attempt_folders import attempt_dir
    from scalebench.core.config import AlertConfig
    from scalebench.orchestration.ui import triage
    from scalebench.report.alert_messages import group_message
    from scalebench.report.build import build_report, options_from_configs
    from scalebench.store.alert_groups import AlertGroups
    from tests.unit.orchestration.test_pages import open_app

    store, _, cells, _ = ab_night
    opts = options_from_configs()
    opts.expected = [BENCH]
    rep = build_report(store, TONIGHT.isoformat(), opts)
    [detail] = [d for d in rep.alert_details if d["metric"] == "images_per_s"]
    assert detail["confirmed_by"] == "A/B" and detail["profile_diff"]["top"][0].startswith("aten::mm +45 ms per step")
    assert "; where the step's time went (the A/B's profiled pair, operations): aten::mm +45 ms per step, 90% of the " \
        "slowdown" in detail["line"]
    groups = AlertGroups(store)
    groups.record_night(TONIGHT.isoformat(), rep.alert_details)
    [group] = groups.groups()
    msg = group_message(group, "new", TONIGHT.isoformat(), rep.alert_details, AlertConfig(notifier="none"))
    assert "aten::mm +45 ms per step, 90% of the slowdown" in msg["text"]  # the message names the operation
    # the group keeps the diff; its page shows the table and each trace for download
    [figure] = [f for f in groups.group(group["id"])["figures"] if f["metric"] == "images_per_s"]
    assert figure["profile_diff"]["top"] == detail["profile_diff"]["top"]
    monkeypatch.setattr(triage, "may_edit", lambda user: False)
    client = open_app()
    page = client.get(f"/alerts/{group['id']}").text
    assert "Where the step&#39;s time went: resnet50_keras_cifar10 at 1 GPU(s), fp32" in page
    assert "<td>aten::mm</td>" in page and "90%" in page and "A trace 1" in page and "B trace 1" in page
    # the run's figures tab: the same table; the trace link serves the file kept in the attempt folder
    run = client.get("/runs", params={"dag_id": cells[0]["dag_id"], "run_id": RUN}).text
    assert "Where the step&#39;s time went: the A/B at 1 GPU(s), fp32" in run and "<td>aten::mm</td>" in run
    b = next(c for c in cells if c.get("profile_steps") and c["role"] == "rerun")
    folder = attempt_dir(b, 1)
    (folder / "profile" / "rank0").mkdir(parents=True)
    (folder / "cell.json").write_text(json.dumps({"cell": {"key": b["key"]}}))
    (folder / "profile" / "rank0" / "trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    got = client.get(f"/api/cells/{b['key']}/traces/0")
    assert got.status_code == 200 and gzip.decompress(got.content) == b'{"traceEvents": []}'
    assert f"attempt1-trace.json.gz" in got.headers["content-disposition"]
    a = next(c for c in cells if c.get("profile_steps") and c["role"] == "ab_previous")
    for path in (f"/api/cells/{a['key']}/traces/0",   # its folder is gone: said, nothing else served
                 f"/api/cells/{b['key']}/traces/1",   # no second trace
                 f"/api/cells/{cells[0]['key']}/traces/0" if not cells[0].get("profile_steps") else "/api/cells/0/traces/0"):
        assert client.get(path).status_code in (404, 422), path
