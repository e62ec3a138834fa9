"""Alert groups: one group per change, the messages a group is owed, the states a person sets and
what the closed ones do to the baselines. The month runs the report's own build over hand-made
nights (image A, then B slower at 2-4 GPUs on two benchmarks, then C back at A's level) and the
report DAG's own group_messages against a real store, counting what would be delivered."""
import datetime as dt
import random

import pytest

from scalebench.analysis.alert_groups import baseline_effects, owed
from scalebench.core.alert_rules import AlertStateError, check_change, group_key
from scalebench.core.config import AlertConfig
from scalebench.orchestration.dags.alerts import group_messages
from scalebench.report.build import build, with_alert_groups
from scalebench.report.model import Options
from tests.unit.analysis.test_history import IMAGE_A, IMAGE_B, nights_of, study

IMAGE_C = {**IMAGE_A, "image": "scalebench/torch:c", "image_digest": "sha256:" + "c" * 64, "framework_version": "2.6.1"}
SLOW = 1 / 0.85  # B: each step of 2-4 GPUs 15 % longer


@pytest.fixture
def store(tmp_path):
    from scalebench.store.db import upgrade
    from scalebench.store.results import Store

    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)
    return Store(url)


def month(nights=40, b_from=25, c_from=33):
    """Two benchmarks on image A, B from night `b_from` (2-4 GPUs slower), C from `c_from` (as A)."""
    days = nights_of(nights)
    rng = random.Random(11)
    cells = []
    for bench in ("b", "c"):
        cells += study(bench, days[:b_from], rng, cv=0.01, fingerprint=IMAGE_A)
        cells += study(bench, days[b_from:c_from], rng, cv=0.01, slow=lambda i, g: SLOW if g > 1 else 1.0,
                       fingerprint=IMAGE_B)
        cells += study(bench, days[c_from:], rng, cv=0.01, fingerprint=IMAGE_C)
    return days, cells


def report(cells, night, store):
    return build([c for c in cells if c["night"] <= night], night, with_alert_groups(Options(), store), [])


def run_night(cells, night, store, cfg=AlertConfig(notifier="webhook")):
    """What the report DAG's send_alerts does for a complete night: the messages, each marked sent."""
    from scalebench.store.alert_groups import AlertGroups

    rep = report(cells, night, store)
    groups = AlertGroups(store)
    sent = group_messages(groups, cfg, night, rep.alert_details, rep.fixed_details, rep.moved_details)
    for gid, reason, _ in sent:
        groups.mark_notified(gid, night, reason)
    return rep, [(gid, reason) for gid, reason, _ in sent], [doc for *_, doc in sent]


def test_a_month_sends_one_message_per_thing_that_happened_to_one_group(store):
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month()
    said = {}
    for i, night in enumerate(days[25:], start=25):
        if i == 30:  # before night 30's report a person takes it
            AlertGroups(store).set(1, "alice", state="triaged", owner="alice", note="looking at the NCCL bump")
        rep, sent, docs = run_night(cells, night, store)
        said[i] = sent
        if i == 26:
            assert len(rep.alert_details) >= 6  # 2-4 GPUs of two benchmarks (and their efficiency)
            [doc] = docs
            assert {(a["benchmark"], a["gpus"]) for a in doc["alerts"] if a["metric"] == "images_per_s"} == \
                {(b, g) for b in "bc" for g in (2, 3, 4)}
            assert doc["text"].startswith("scalebench: new regression group #1:") and "image scalebench/torch:b" in doc["text"]
    assert said[26] == [(1, "new")]                     # one group, one message on its first alert
    assert said[27] == said[28] == []                   # later nights add figures, no message
    assert said[29] == [(1, "reminder")]                # still new three days after it was sent
    assert said[30] == [(1, "state")]                   # triaged
    assert said[31] == said[32] == []
    assert said[33] == []                               # image C: back, to be confirmed by the next night
    assert said[34] == [(1, "fixed")]                   # every figure back two nights: image C fixed it
    assert all(said[i] == [] for i in range(35, 40))
    [group] = AlertGroups(store).groups()
    assert group["state"] == "fixed" and group["owner"] == "alice" and group["benchmarks"] == ["b", "c"]
    assert "regression ended with image scalebench/torch:c" in group["fixed_by"]
    kinds = [(e["kind"], e["to"]) for e in AlertGroups(store).group(1)["events"] if e["kind"] != "notified"]
    assert kinds[0] == ("opened", "new") and ("owner", None) in kinds and ("state", "triaged") in kinds
    assert kinds[-1] == ("state", "fixed")


def test_the_same_night_twice_changes_nothing(store):
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month()
    for night in days[25:28]:
        run_night(cells, night, store)
    before = AlertGroups(store).group(1)
    _, sent, _ = run_night(cells, days[27], store)  # a late run regenerates night 27
    assert sent == [] and AlertGroups(store).group(1)["figures"] == before["figures"]


def test_invalid_puts_the_nights_back_into_the_baseline(store):
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month(c_from=40)
    for night in days[25:29]:
        run_night(cells, night, store)
    without = [j for j in report(cells, days[28], store).judged
               if j.key.benchmark == "b" and j.key.gpus == 4 and j.key.metric == "images_per_s"]
    AlertGroups(store).set(1, "bob", state="invalid", note="a noisy neighbour, not the image")
    judged = [j for j in report(cells, days[28], store).judged
              if j.key.benchmark == "b" and j.key.gpus == 4 and j.key.metric == "images_per_s"]
    assert any(j.alert for j in without) and not any(j.flagged or j.alert for j in judged)
    # the slow nights joined the baseline: the last night's baseline is lower than before
    assert judged[-1].baseline < without[-1].baseline


def test_accepted_restarts_the_baseline_at_the_groups_first_night(store):
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month(c_from=40)
    for night in days[25:29]:
        run_night(cells, night, store)
    first = AlertGroups(store).group(1)["first_night"]
    AlertGroups(store).set(1, "carol", state="accepted", note="the new default: fp8 allreduce")
    rep, sent, _ = run_night(cells, days[29], store)
    judged = [j for j in rep.judged if j.key.benchmark == "b" and j.key.gpus == 4 and j.key.metric == "images_per_s"]
    assert judged[0].night.isoformat() == first and all(j.note.startswith("building baseline") for j in judged[1:])
    assert not rep.alert_details and sent == [(1, "state")]  # accepted is said once; nothing alerts


@pytest.mark.parametrize("group, night, reason", [
    ({"notified_state": None, "state": "new"}, "2026-01-01", "new"),
    ({"notified_state": "new", "state": "triaged"}, "2026-01-02", "state"),
    ({"notified_state": "triaged", "state": "fixed"}, "2026-01-02", "fixed"),
    ({"notified_state": "new", "state": "new", "benchmarks": ["b", "c"], "notified_benchmarks": ["b"]}, "2026-01-02",
     "grew"),
    ({"notified_state": "new", "state": "new", "notified_night": "2026-01-01"}, "2026-01-03", ""),
    ({"notified_state": "new", "state": "new", "notified_night": "2026-01-01"}, "2026-01-04", "reminder"),
    ({"notified_state": "triaged", "state": "triaged", "notified_night": "2026-01-01"}, "2026-01-09", ""),
    ({"notified_state": "invalid", "state": "invalid", "notified_night": "2026-01-01"}, "2026-01-09", ""),
    # one figure of two back tonight: said once, as "partly"; the night after, nothing new
    ({"notified_state": "triaged", "state": "triaged", "figures": [{"back_night": "2026-01-05"}, {}]}, "2026-01-05",
     "partly"),
    ({"notified_state": "triaged", "state": "triaged", "figures": [{"back_night": "2026-01-05"}, {}]}, "2026-01-06", ""),
])
def test_what_a_group_is_owed(group, night, reason):
    doc = {"benchmarks": ["b"], "notified_benchmarks": ["b"], "notified_night": "2026-01-01", "figures": [], **group}
    assert owed(doc, night, remind_after_days=3).reason == reason


@pytest.mark.parametrize("state, owner, note, field", [
    ("closed", None, None, "state"),
    ("triaged", None, None, "owner"),
    (None, "", None, "owner"),
    (None, "x" * 101, None, "owner"),
    (None, "eve\n<script>", None, "owner"),
    (None, None, "n" * 2001, "note"),
])
def test_a_bad_change_names_its_field(state, owner, note, field):
    with pytest.raises(AlertStateError, match=f"^{field}: "):
        check_change(state, owner, note)


def test_group_keys_and_the_baseline_effects_of_closed_groups():
    assert group_key({"kind": "image", "new_image": "r/t@sha256:b", "text": "image r:t"}, "x") == "image:r/t@sha256:b"
    assert group_key({"kind": "config", "text": "config_sha 1 -> 2"}, "x") == "config:config_sha 1 -> 2"
    assert group_key(None, "unet") == "benchmark:unet"
    fig = {"benchmark": "b", "gpus": 2, "precision": "bf16", "metric": "images_per_s", "first_night": "2026-01-10",
           "last_night": "2026-01-12"}
    shifts, invalid = baseline_effects([{"id": 4, "first_night": "2026-01-09", "figures": [fig]}],
                                       [{"id": 5, "first_night": "2026-01-10", "figures": [fig]}])
    [shift] = shifts
    assert (shift.benchmark, shift.since, shift.gpus, shift.metric) == ("b", dt.date(2026, 1, 9), (2,), "images_per_s")
    assert invalid == {("b", 2, "bf16", "images_per_s"): [(dt.date(2026, 1, 3), dt.date(2026, 1, 12))]}


IMAGES = [{"tags": ["a"], "created": "2026-11-01T00:00:00Z"}, {"tags": ["n1", "sha256-0123456789ab"],
                                                                "created": "2026-11-02T00:00:00Z"},
          {"tags": ["n2"], "created": "2026-11-03T00:00:00Z"}, {"tags": ["b"], "created": "2026-11-04T00:00:00Z"},
          {"tags": ["later"], "created": "2026-11-05T00:00:00Z"}]


@pytest.mark.parametrize("good, bad, found", [
    ("a", "b", ["n1", "n2"]),                    # by creation time, oldest first; kept digest tags never
    ("n2", "b", "no tag was built between n2 and b"),
    ("b", "a", "b was not built before a"),
    ("a", "gone", "the engine holds no image tagged gone"),
])
def test_the_candidates_of_a_bisection_are_the_tags_built_between(good, bad, found):
    from scalebench.cell.images import tags_between

    assert tags_between(IMAGES, good, bad) == found


def test_a_new_image_group_starts_its_bisection_once_and_says_so(store):
    from scalebench.orchestration.dags.alerts import start_bisects
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month(c_from=40)
    cfg = AlertConfig(notifier="webhook")
    detail_night = days[26]
    rep = report(cells, detail_night, store)
    for d in rep.alert_details:  # the images as an engine keeps them: a tag per build
        d["suspect"] = {**d["suspect"], "previous_image": "scalebench/torch:a", "new_image": "scalebench/torch:b"}
    groups = AlertGroups(store)
    messages = group_messages(groups, cfg, detail_night, rep.alert_details, [])
    triggered = []
    start_bisects(groups, messages, cfg, lambda repo: IMAGES,
                  lambda dag, conf: triggered.append((dag, conf)) or "manual__1", "smoke")
    [(dag, conf)] = triggered
    assert dag == "scalebench_bisect" and (conf["good"], conf["bad"], conf["candidates"]) == ("a", "b", ["n1", "n2"])
    assert conf["benchmark"] in ("b", "c") and conf["profile"] == "smoke" and conf["alert_group"] == 1
    [(_, reason, doc)] = messages
    assert reason == "new" and doc["text"].endswith("over 2 tag(s) built between a and b: n1, n2")
    assert groups.group(1)["events"][-1]["kind"] == "bisect"
    for mark in messages:
        groups.mark_notified(mark[0], detail_night, mark[1])
    later = group_messages(groups, cfg, days[27], report(cells, days[27], store).alert_details, [])
    start_bisects(groups, later, cfg, lambda repo: IMAGES, lambda dag, conf: triggered.append(conf) or "x", "smoke")
    assert later == [] and len(triggered) == 1  # once per group
    # a "new" message again (its channel had not taken the first one) starts no second bisection
    start_bisects(groups, messages, cfg, lambda repo: IMAGES, lambda dag, conf: triggered.append(conf) or "x", "smoke")
    assert len(triggered) == 1


@pytest.mark.parametrize("images_of, auto, says", [
    (lambda repo: IMAGES[3:], True, "bisect not started: the engine holds no image tagged a in scalebench/torch"),
    (lambda repo: (_ for _ in ()).throw(ConnectionError("no Docker engine")), True,
     "bisect not started: ConnectionError: no Docker engine"),
    (lambda repo: IMAGES, False, None),
])
def test_without_candidates_or_an_engine_the_group_says_why(store, images_of, auto, says):
    from scalebench.orchestration.dags.alerts import start_bisects
    from scalebench.store.alert_groups import AlertGroups

    days, cells = month(c_from=40)
    rep = report(cells, days[26], store)
    for d in rep.alert_details:
        d["suspect"] = {**d["suspect"], "previous_image": "scalebench/torch:a", "new_image": "scalebench/torch:b"}
    groups = AlertGroups(store)
    messages = group_messages(groups, AlertConfig(notifier="webhook", auto_bisect=auto), days[26], rep.alert_details, [])
    start_bisects(groups, messages, AlertConfig(notifier="webhook", auto_bisect=auto), images_of,
                  lambda dag, conf: pytest.fail("no bisection to start"), "smoke")
    assert messages[0][2]["group"].get("bisect") == says


def test_the_bisect_dags_result_lands_in_the_group_that_started_it(store, monkeypatch):
    from types import SimpleNamespace

    from scalebench.analysis.bisect import Bisection
    from scalebench.orchestration.dags.bisect_dag import result
    from scalebench.store.alert_groups import AlertGroups
    from tests.unit.analysis.test_bisect import TAGS, run as bisect_run

    monkeypatch.setattr("scalebench.store.results.Store", lambda *a, **k: store)
    days, cells = month(c_from=40)
    run_night(cells, days[26], store)
    b = bisect_run(Bisection("b", 4, TAGS[:5]), lambda im: 800.0 if TAGS.index(im) >= 2 else 1000.0)
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API", "http://notes:secret@localhost:8080")
    for by in ("mallory", None):  # a person with only the trigger right on the bisect DAG, or no one named
        result.function({"bisect_id": "b-4g", "state": b.to_json()}, params={"alert_group": 1},
                        dag_run=SimpleNamespace(run_id="manual__bisect", triggering_user_name=by))
        assert [e for e in AlertGroups(store).group(1)["events"] if e["kind"] == "bisect"] == []
    lines = result.function({"bisect_id": "b-4g", "state": b.to_json()}, params={"alert_group": 1},
                            dag_run=SimpleNamespace(run_id="manual__bisect", triggering_user_name="notes"))
    [event] = [e for e in AlertGroups(store).group(1)["events"] if e["kind"] == "bisect"]
    assert event["note"] == "bisect manual__bisect: " + "; ".join(lines) and TAGS[2] in event["note"]


def detail(gpus: int, night: str, suspect: str | None = "scalebench/torch:b") -> dict:
    doc = {"benchmark": "b", "gpus": gpus, "precision": "bf16", "metric": "images_per_s", "change": 0.1,
           "line": f"b {gpus} GPUs images_per_s slower on {night}"}
    if suspect:
        doc["suspect"] = {"kind": "image", "text": f"image {suspect}", "new_image": suspect}
    return doc


def back(gpus: int, night: str) -> dict:
    return {"key": "image:scalebench/torch:b", "benchmark": "b", "gpus": gpus, "precision": "bf16",
            "metric": "images_per_s", "verdict": "regression fixed", "line": f"b {gpus} GPUs back on {night}"}


def test_a_group_is_fixed_only_when_every_figure_is_back_and_a_slip_back_reopens_it(store):
    """Two figures of one image: the first back leaves the group open ("partly fixed: 1 of 2
    figures back", said once); the second closes it; the first slipping back three nights later
    reopens that group in the state it had, with its suspect, and opens no new one."""
    from scalebench.report.alert_messages import message_text, progress
    from scalebench.store.alert_groups import AlertGroups

    groups = AlertGroups(store)
    groups.record_night("2026-01-02", [detail(2, "2026-01-02"), detail(4, "2026-01-02")])
    groups.mark_notified(1, "2026-01-02", "new")
    groups.set(1, "alice", state="triaged", owner="alice")
    groups.mark_notified(1, "2026-01-02", "state")
    groups.record_night("2026-01-05", [detail(2, "2026-01-05")], [back(4, "2026-01-05")])
    g = groups.group(1)
    assert g["state"] == "triaged" and progress(g) == "partly fixed: 1 of 2 figures back"
    assert owed(g, "2026-01-05").reason == "partly" and not owed(g, "2026-01-06")
    text = message_text(g, "partly", "http://r")
    assert "partly fixed: 1 of 2 figures back" in text and "- back on 2026-01-05: b 4 GPUs images_per_s" in text
    groups.record_night("2026-01-06", [], [back(2, "2026-01-06")])
    assert groups.group(1)["state"] == "fixed"
    groups.record_night("2026-01-06", [], [back(2, "2026-01-06")])  # the same night again: nothing new
    assert [e["kind"] for e in groups.group(1)["events"]].count("state") == 2  # triaged, fixed
    # the 2-GPU figure slips back within a week: the same group, reopened as triaged
    touched = groups.record_night("2026-01-09", [detail(2, "2026-01-09")])
    g = groups.group(1)
    assert touched == [1] and len(groups.groups()) == 1 and g["state"] == "triaged"
    assert g["events"][-1]["note"].startswith("reopened: back on 2026-01-06, regressed again on 2026-01-09")
    assert progress(g) == "partly fixed: 1 of 2 figures back"  # the 4-GPU figure is still back
    # after a week, a slower night is a new group
    groups.record_night("2026-01-10", [], [back(2, "2026-01-10")])
    groups.record_night("2026-01-20", [detail(2, "2026-01-20")])
    assert len(groups.groups()) == 2


def test_alerts_show_says_which_figures_are_back(capsys):
    from scalebench.cli import main
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store())
    groups.record_night("2026-01-02", [detail(2, "2026-01-02"), detail(4, "2026-01-02")])
    groups.record_night("2026-01-05", [detail(2, "2026-01-05")], [back(4, "2026-01-05")])
    assert main(["alerts", "show", "1"]) == 0
    out = capsys.readouterr().out
    assert "partly fixed: 1 of 2 figures back" in out
    assert "- back on 2026-01-05: b 4 GPUs images_per_s slower on 2026-01-02" in out  # its last alert, and when back
    assert "- b 2 GPUs images_per_s slower on 2026-01-05" in out


def test_a_group_a_person_set_fixed_while_a_figure_was_out_reopens_when_it_is_still_regressed(store):
    from scalebench.store.alert_groups import AlertGroups

    groups = AlertGroups(store)
    groups.record_night("2026-01-02", [detail(2, "2026-01-02"), detail(4, "2026-01-02")])
    groups.set(1, "alice", state="triaged", owner="alice")
    with pytest.raises(AlertStateError, match="fixed needs a note"):
        groups.set(1, "alice", state="fixed")
    groups.set(1, "alice", state="fixed", note="the driver rollback should do it")
    assert groups.group(1)["state"] == "fixed"
    groups.record_night("2026-01-03", [detail(2, "2026-01-03")])  # the next night: still slower
    g = groups.group(1)
    assert g["state"] == "triaged" and len(groups.groups()) == 1
    assert g["events"][-1]["note"].startswith("reopened: set fixed while this figure was not back; still regressed")


def test_a_group_holds_the_figures_its_image_moved_and_is_fixed_only_when_they_are_back(store):
    """Image B slows 2 GPUs by 10 % (alerts) and 4 GPUs by 6 % (flagged, never alerted on its own):
    the 4-GPU figure joins B's group, so C fixing 2 GPUs alone leaves the group open; the 4-GPU
    figure judged better by a later change is back, and the group is fixed."""
    from scalebench.core.alert_rules import group_key
    from scalebench.store.alert_groups import AlertGroups

    groups = AlertGroups(store)
    b = {"kind": "image", "text": "image t:b (was t:a)", "previous_image": "t:a", "new_image": "t:b"}
    fig = {"benchmark": "x", "precision": "fp32", "metric": "images_per_s"}
    alert = {**fig, "gpus": 2, "change": 0.1, "line": "2 GPUs 10 % slower", "suspect": b}
    moved = {**fig, "gpus": 4, "change": 0.06, "line": "4 GPUs 6 % slower, flagged",
             "key": group_key({"kind": "image", "new_image": "t:b"}, "x")}
    elsewhere = {**moved, "benchmark": "y", "key": moved["key"]}  # a benchmark the group does not hold joins nothing
    [gid] = groups.record_night("2026-11-01", [alert], moved=[moved, elsewhere])
    assert {(f["benchmark"], f["gpus"]) for f in groups.group(gid)["figures"]} == {("x", 2), ("x", 4)}
    fixed_2 = {**fig, "gpus": 2, "key": group_key(b, "x"), "verdict": "regression fixed", "line": "2 GPUs fixed by C"}
    groups.record_night("2026-11-05", [], [fixed_2])
    assert groups.group(gid)["state"] == "new"  # 4 GPUs is still out
    better_4 = {**fig, "gpus": 4, "key": None, "verdict": "improvement", "line": "4 GPUs better with D"}
    groups.record_night("2026-11-07", [], [better_4])
    g = groups.group(gid)
    assert g["state"] == "fixed" and all(f["back_night"] for f in g["figures"])


def test_the_cli_records_the_account_it_runs_as_not_what_user_says(monkeypatch):
    import os
    import pwd

    from scalebench.cli import main
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store())
    groups.record_night("2026-01-02", [detail(2, "2026-01-02")])
    monkeypatch.setenv("USER", "anyone")
    monkeypatch.setenv("LOGNAME", "anyone")
    assert main(["alerts", "set", "1", "triaged", "--owner", "dana", "--who", "dana"]) == 0
    [event] = [e for e in groups.group(1)["events"] if e["kind"] == "state"]
    assert event["who"] == f"{pwd.getpwuid(os.geteuid()).pw_name} (for dana)"
