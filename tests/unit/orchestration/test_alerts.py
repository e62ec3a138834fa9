"""Confirmed regressions are delivered through an Airflow notifier, here the http provider's
HttpNotifier, against a local HTTP receiver: in-process through the report DAG's own send_night
over a real store's groups, and by `airflow dags test` of the real nightly report DAG over a
seeded store whose night holds a regression confirmed by reruns."""
import datetime as dt
import json
import random

import pytest
import yaml

from scalebench.core.config import AlertConfig, load_alerts
from scalebench.orchestration.dags.alerts import send_night
from scalebench.core.config import ConfigError
from tests.support import ROOT, new_config_tree
from tests.support.receiver import Receiver
from tests.support.samples import sample_cell, sample_contract

CONFIGS = ROOT / "include" / "configs"
BENCH = "resnet50_keras_cifar10"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


DETAIL = {"benchmark": BENCH, "gpus": 2, "metric": "images_per_s", "host": "local", "night": "2026-11-30",
          "value": 80.0, "baseline": 100.0, "change": 0.2, "z": 9.0, "reruns": [79.0, 81.0, 80.5], "rerun_p": 0.0006,
          "confirmed_by": "reruns", "line": f"{BENCH} 2 GPUs images_per_s: 80 vs baseline 100 (+20.0% worse)"}


@pytest.fixture
def groups(tmp_path):
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.db import upgrade
    from scalebench.store.results import Store

    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)
    return AlertGroups(Store(url))


def send(cfg: AlertConfig, groups, details: list[dict], night: str = "2026-11-30") -> list[dict]:
    """A complete night through the report DAG's send_night: what the main channel took."""
    summary = {"night": night, "complete": True, "missing": [], "failed": [], "alert_details": details,
               "fixed": [], "fixed_details": []}
    return send_night(summary, False, cfg, groups, {}, stack_of={BENCH: "keras"}, profile="smoke",
                      images_of=lambda repo: pytest.fail("no image to look up"),
                      trigger=lambda dag, conf: pytest.fail("no bisection to start"))


def test_the_webhook_notifier_posts_the_alert_with_figure_baseline_reruns_and_link(receiver, monkeypatch, groups):
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", f"http://127.0.0.1:{receiver.port}")
    cfg = AlertConfig(notifier="webhook", endpoint="hooks/scalebench", report_url="http://airflow.example:8080/scalebench")
    [doc] = send(cfg, groups, [DETAIL])
    [got] = receiver.received
    assert got["path"] == "/hooks/scalebench" and got["type"] == "application/json"
    assert got["body"] == doc and got["body"]["report"] == "http://airflow.example:8080/scalebench/2026-11-30/"
    [alert] = got["body"]["alerts"]
    assert (alert["value"], alert["baseline"], alert["reruns"]) == (80.0, 100.0, [79.0, 81.0, 80.5])
    assert got["body"]["text"].splitlines()[1] == f"- {DETAIL['line']}"
    assert got["body"]["group"]["reason"] == "new" and groups.group(1)["notified_state"] == "new"  # told
    assert send(cfg, groups, [DETAIL], "2026-12-01") == [] and len(receiver.received) == 1  # no news the next night


def test_no_alert_or_notifier_none_sends_nothing(receiver, monkeypatch, groups):
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", f"http://127.0.0.1:{receiver.port}")
    assert send(AlertConfig(notifier="webhook"), groups, []) == []
    assert send(AlertConfig(notifier="none"), groups, [DETAIL]) == []
    assert receiver.received == [] and groups.group(1)["notified_state"] is None  # still owed its first message


@pytest.mark.parametrize("complete,deadline,missing,regressions_sent,broken_sent", [
    (True, False, [], True, False),     # the night completed: its regressions go out
    (False, False, ["b"], False, False),  # partial before the deadline: everything waits
    (False, True, ["b"], True, True),   # the deadline: what recorded, and what is missing
    (True, True, [], False, False),     # the deadline of a complete, healthy night: sent when it completed
])
def test_what_a_report_run_sends(complete, deadline, missing, regressions_sent, broken_sent):
    from scalebench.orchestration.dags.alerts import to_send

    night = {"complete": complete, "missing": missing, "failed": [], "alert_details": [DETAIL]}
    regressions, broken = to_send(night, deadline)
    assert (regressions == [DETAIL], broken is not None) == (regressions_sent, broken_sent)


def test_alert_config_names_the_file_and_field(tmp_path):
    assert load_alerts(tmp_path).notifier == "none"  # no file: alerts stay in the report
    (tmp_path / "alerts.yaml").write_text("notifier: pager\n")
    with pytest.raises(ConfigError, match=r"alerts.yaml.*notifier.*'webhook', 'slack', 'email' or 'none'"):
        load_alerts(tmp_path)
    assert load_alerts(CONFIGS).notifier == "none"  # the shipped file loads


def seed_confirmed_regression(store, night: dt.date) -> None:
    """20 scheduled nights of the benchmark at 100 images/s, then a night at 80 with three reruns at 80."""
    from scalebench.core.cells import cell_key

    rng = random.Random(1)
    for i in range(20, -1, -1):
        day = (night - dt.timedelta(days=i)).isoformat()
        run_id = f"scheduled__{day}"
        for gpus in (1, 2):
            cell = sample_cell(gpus, 1, run_id=run_id, dag_id=f"scalebench_{BENCH}", run_type="scheduled", night=day)
            level = 100.0 * gpus * (0.8 if i == 0 and gpus == 2 else 1.0)
            c = sample_contract(cell)
            c["timing"]["images_per_s"] = level * (1 + rng.gauss(0, 0.01))
            store.record_attempt(cell, 1, "valid", contract=c)
            if i == 0 and gpus == 2:
                for k in (1, 2, 3):
                    rerun = {**cell, "key": cell_key({**cell, "repeat": 100 + k}), "role": "rerun",
                             "rerun_of": cell["key"], "label": f"{cell['label']} · rerun {k}"}
                    c = sample_contract(rerun)
                    c["timing"]["images_per_s"] = level * (1 + rng.gauss(0, 0.01))
                    store.record_attempt(rerun, 1, "valid", contract=c)
        store.record_run(dag_id=f"scalebench_{BENCH}", run_id=run_id, benchmark=BENCH, run_type="scheduled",
                         night=day, counts={"valid": 2})


@pytest.mark.slow
def test_the_nightly_report_dag_sends_a_confirmed_regression_to_the_webhook(receiver, tmp_path):
    from scalebench.store.results import Store
    from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run

    configs = tmp_path / "configs"
    new_config_tree(configs)
    for bench in (BENCH, "unet_torch_voc2007"):  # the UNet is scheduled too and records nothing: missing
        (configs / "benchmarks" / f"{bench}.yaml").write_text((CONFIGS / "benchmarks" / f"{bench}.yaml").read_text())
    (configs / "alerts.yaml").write_text(yaml.safe_dump({"notifier": "webhook", "connection": "scalebench_alerts",
                                                         "endpoint": "alerts"}))
    home = tmp_path / "state"
    env = {**airflow_env(home), "SCALEBENCH_CONFIG_DIR": str(configs),
           "AIRFLOW_CONN_SCALEBENCH_ALERTS": f"http://127.0.0.1:{receiver.port}"}
    prepare_homes(env)
    night = dt.date(2026, 11, 30)
    store = Store(f"sqlite:///{home / 'results.db'}")
    seed_confirmed_regression(store, night)
    lost = sample_cell(3, 1, run_id=f"scheduled__{night}", dag_id=f"scalebench_{BENCH}", run_type="scheduled",
                       night=night.isoformat())
    store.record_attempt(lost, 1, "failed", reason="oom", exit_code=137, message="killed by the kernel")
    # deadline: judged as the cron run is, while the UNet has not recorded
    rc, log = run([BIN / "airflow", "dags", "test", "scalebench_nightly_report", "-c",
                   json.dumps({"night": night.isoformat(), "deadline": True})], env, 600)
    (tmp_path / "dags-test.log").write_text(log)
    assert "1 alert(s) sent by the webhook notifier" in log, log[-4000:]
    assert "state=failed" in log and "1 confirmed regression(s)" in log  # check_regressions still fails the run
    assert "broken night: 2 problem(s)" in log
    got, broken = receiver.received
    assert broken["body"]["kind"] == "broken_night" and broken["body"]["missing"] == ["unet_torch_voc2007"]
    assert broken["body"]["lines"] == [
        "unet_torch_voc2007: no run recorded by the report's deadline (its run is still going, stuck or never started)",
        f"{BENCH}: 3 GPUs · fp32 · 1 epoch · repeat 1: failed (oom)"]
    assert got["path"] == "/alerts" and got["body"]["night"] == "2026-11-30"
    assert got["body"]["group"]["reason"] == "new" and got["body"]["group"]["benchmarks"] == [BENCH]  # its alert group
    [alert] = got["body"]["alerts"]
    assert (alert["benchmark"], alert["gpus"], alert["metric"]) == (BENCH, 2, "images_per_s")
    assert alert["confirmed_by"] == "reruns" and len(alert["reruns"]) == 3 and alert["rerun_p"] < 0.01
    assert alert["baseline"] == pytest.approx(200, rel=0.03) and alert["value"] == pytest.approx(160, rel=0.03)


MMDET = ("frcnn_mmdet_voc2007", "maskrcnn_mmdet_voc2012")


def seed_month(store, first: dt.date, nights: int, b_from: int, c_from: int, nightly: bool = False) -> None:
    """Two benchmarks of one image line, 1-4 GPUs a night: image a, then b (2-4 GPUs 15 % slower
    from night `b_from`), then c (back at a's level from night `c_from`); `nightly`: a new image
    every night (tag nightly-MMDD, its own digest) built from a's, then b's, then c's code."""
    rng = random.Random(5)
    for i in range(nights):
        day = (first + dt.timedelta(days=i)).isoformat()
        run_id = f"scheduled__{day}"
        tag = "a" if i < b_from else "b" if i < c_from else "c"
        for bench in MMDET:
            for gpus in (1, 2, 3, 4):
                cell = sample_cell(gpus, 1, run_id=run_id, dag_id=f"scalebench_{bench}", benchmark=bench,
                                   run_type="scheduled", night=day)
                c = sample_contract(cell)
                name = f"nightly-{day[5:7]}{day[8:]}" if nightly else tag
                c["provenance"].update(image=f"scalebench/mmdet:{name}", image_digest="sha256:" + (name * 64)[:64])
                c["system"].update(framework="pytorch", framework_version={"a": "2.5", "b": "2.6", "c": "2.6.1"}[tag])
                slow = 0.85 if tag == "b" and gpus > 1 else 1.0
                c["timing"]["images_per_s"] = 100.0 * gpus * slow * (1 + rng.gauss(0, 0.01))
                store.record_attempt(cell, 1, "valid", contract=c)
            store.record_run(dag_id=f"scalebench_{bench}", run_id=run_id, benchmark=bench, run_type="scheduled",
                             night=day, counts={"valid": 4})


@pytest.mark.slow
def test_a_month_through_the_report_dag_sends_one_message_per_thing_that_happened(receiver, tmp_path):
    """A new image every night (the normal case for a team that rebuilds nightly), no A/B: the
    baseline builds across images; the build of night 25 slows 3 GPU counts of two benchmarks:
    one group named by that build, one message on its first alert, none the next night, a
    reminder three days later while it is new, one when a person triages it (`scalebench alerts
    set`), one when the fixing build's nights confirm it (the build of night 33 and the next,
    every figure back); counted at the webhook."""
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store
    from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run
    from tests.support.nights import run_steps

    configs = tmp_path / "configs"
    new_config_tree(configs)
    for bench in MMDET:
        (configs / "benchmarks" / f"{bench}.yaml").write_text((CONFIGS / "benchmarks" / f"{bench}.yaml").read_text())
    (configs / "alerts.yaml").write_text(yaml.safe_dump({  # and every message of a group with Mask R-CNN to its team
        "notifier": "webhook", "connection": "scalebench_alerts", "endpoint": "alerts", "auto_bisect": False,
        "routes": [{"benchmarks": ["maskrcnn_mmdet_voc2012"], "connection": "scalebench_alerts", "endpoint": "masks"}]}))
    home = tmp_path / "state"
    env = {**airflow_env(home), "SCALEBENCH_CONFIG_DIR": str(configs),
           "AIRFLOW_CONN_SCALEBENCH_ALERTS": f"http://127.0.0.1:{receiver.port}"}
    prepare_homes(env)
    first = dt.date(2026, 10, 1)
    store = Store(f"sqlite:///{home / 'results.db'}")
    seed_month(store, first, 35, b_from=25, c_from=33, nightly=True)
    steps, nights = [], (26, 27, 29, 30, 34)
    for i in nights:
        if i == 30:  # before night 30's report a person takes the group
            steps.append(["run", str(BIN / "scalebench"), "alerts", "set", "1", "triaged", "--owner", "dana",
                          "--note", "mmcv ops"])
        steps.append(["dags", "test", "scalebench_nightly_report", "-c",
                      json.dumps({"night": (first + dt.timedelta(days=i)).isoformat()})])
    # the five DAG runs in one process (tests/support/nights.py), each step announced at /step
    done = run_steps(env, steps, f"http://127.0.0.1:{receiver.port}/step", 900)
    for k, (_, log) in enumerate(done):
        (tmp_path / f"step-{k}.log").write_text(log)
    assert len(done) == len(steps) and all(rc == 0 for step, (rc, _) in zip(steps, done) if step[0] == "run"), done
    reports = [log for step, (_, log) in zip(steps, done) if step[0] == "dags"]
    assert all("DagRun Finished" in log for log in reports), [log[-3000:] for log in reports]
    said, night = {}, None
    for m in receiver.received:  # each message under the report night whose step announced itself last
        if m["path"] == "/step":
            night = nights[len(said)] if m["body"]["argv"][0] == "dags" else None
            said.update({night: []} if night else {})
        else:
            assert night is not None, m  # nothing is sent outside a report's run
            said[night].append(m)
    for i, got in said.items():
        assert [m["body"] for m in got if m["path"] == "/masks"] == [m["body"] for m in got if m["path"] == "/alerts"]
        said[i] = [(m["body"]["group"]["id"], m["body"]["group"]["reason"]) for m in got if m["path"] == "/alerts"]
    assert said == {26: [(1, "new")], 27: [], 29: [(1, "reminder")], 30: [(1, "state")], 34: [(1, "fixed")]}
    new = next(m["body"] for m in receiver.received if m["path"] == "/alerts")
    assert {(a["benchmark"], a["gpus"]) for a in new["alerts"] if a["metric"] == "images_per_s"} == \
        {(b, g) for b in MMDET for g in (2, 3, 4)}
    assert new["group"]["benchmarks"] == sorted(MMDET) and "image scalebench/mmdet:nightly-1026" in new["text"]
    assert "regression ended with image scalebench/mmdet:nightly-1103" in receiver.received[-1]["body"]["text"]
    assert len(receiver.received) == 8 + len(steps)  # four messages, each to both channels; the steps' markers
    [group] = AlertGroups(store).groups()
    assert (group["state"], group["owner"]) == ("fixed", "dana")
    shown = run([BIN / "scalebench", "alerts", "show", "1", "-o", "json"], env, 60)
    doc = json.loads(shown[1])
    assert doc["state"] == "fixed" and [e["note"] for e in doc["events"] if e["kind"] == "notified"] == \
        ["new", "reminder", "state", "fixed"]


MARKUP = {"owner": '<a href="http://evil.example">click</a>', "note": "<img src=x onerror=alert(1)> & <|link>"}


def markup_message() -> dict:
    from scalebench.report.alert_messages import group_message

    group = {"id": 7, "key": "benchmark:b", "state": "triaged", "owner": MARKUP["owner"], "suspect": MARKUP["note"],
             "benchmarks": ["b"], "first_night": "2026-11-30", "last_night": "2026-11-30", "what_changed": None,
             "notified_benchmarks": [], "figures": [{**DETAIL, "line": f"b 2 GPUs: {MARKUP['note']}",
                                                      "last_night": "2026-11-30"}]}
    return group_message(group, "state", "2026-11-30", None, AlertConfig(notifier="email", to=["t@example.com"]))


def test_a_mail_carries_free_text_as_text_never_as_markup(monkeypatch):
    """Owner and note with markup, through Airflow's SMTP notifier to a local SMTP server, read back."""
    import email

    from scalebench.orchestration.dags.alerts import deliver
    from tests.support.mail import MailCatcher

    catcher = MailCatcher()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", f"smtp://127.0.0.1:{catcher.port}?disable_tls=true&"
                                                              "disable_ssl=true&from_email=scalebench%40example.com")
        cfg = AlertConfig(notifier="email", to=["team@example.com"])
        assert deliver(cfg, markup_message(), context={})
        [raw] = catcher.messages
    finally:
        catcher.stop()
    mail = email.message_from_bytes(raw)
    html = next(p for p in mail.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert "regression group #7 is triaged (owner &lt;a href=" in html and "<a href=\"http://evil" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;|link&gt;" in html and "<img" not in html
    assert "\n" not in mail["Subject"] and mail["Subject"].startswith("scalebench: regression group #7 is triaged")


def test_slack_text_escapes_what_slack_would_read_as_a_link_or_a_mention():
    from scalebench.orchestration.dags.alerts import notifier

    doc = markup_message()
    n = notifier(AlertConfig(notifier="slack"), doc)
    text = n.text.replace(f"<{doc['report']}>", "")  # the one link: the report's
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; &lt;|link&gt;" in text and "<" not in text and ">" not in text


def test_alert_links_follow_the_address_the_ui_is_reached_at(monkeypatch):
    """report_url unset: the links use Airflow's base_url (what `make airflow` set from
    SCALEBENCH_BASE_URL or SCALEBENCH_BIND); set in alerts.yaml: that."""
    from scalebench.orchestration.dags.alerts import with_report_url
    from scalebench.report.alert_messages import report_link

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://gpu-server.corp:8080/")
    assert report_link(with_report_url(AlertConfig(notifier="webhook")), "2026-12-01") == \
        "http://gpu-server.corp:8080/scalebench/2026-12-01/"
    kept = AlertConfig(notifier="webhook", report_url="https://reports.example/scalebench")
    assert report_link(with_report_url(kept), "2026-12-01") == "https://reports.example/scalebench/2026-12-01/"


def store_of(groups):
    from scalebench.store.results import Store

    return Store(str(groups.engine.url))


def test_each_alert_channel_fails_alone_is_kept_on_the_group_and_retried_the_next_night(receiver, monkeypatch, groups,
                                                                                          tmp_path):
    """Main channel and two routes, one route's host down: the main channel and the other route
    take the group's message, the group is told, the broken-night message still goes; the route
    that failed is named (log, night, events, the store's undelivered list) and retried alone the
    next night, until its host is back; the main channel down: not told, retried, and a route that
    took the message does not get it twice."""
    from scalebench.orchestration.dags.alerts import send_night
    from scalebench.report.build import write_report

    up, down = f"http://127.0.0.1:{receiver.port}", "http://127.0.0.1:9"  # the discard port: nothing listens
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", up)
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_A", up)
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_B", down)
    cfg = AlertConfig(notifier="webhook", endpoint="main", routes=[
        {"benchmarks": [BENCH], "connection": "team_a", "endpoint": "a"},
        {"name": "team-b", "benchmarks": [BENCH], "connection": "team_b", "endpoint": "b"}])
    said: list[str] = []

    def night_of(day: str, details: list[dict], deadline: bool = False, missing=()) -> dict:
        summary = {"night": day, "complete": not missing, "missing": list(missing), "failed": [],
                   "alert_details": details, "fixed": [], "fixed_details": []}
        send_night(summary, deadline, cfg, groups, {}, stack_of={BENCH: "keras"}, profile="smoke", log=said.append,
                   images_of=lambda repo: [], trigger=lambda dag, conf: pytest.fail("no bisection"))
        return summary

    def paths() -> list[str]:
        return [m["path"] for m in receiver.received]

    first = night_of("2026-11-30", [DETAIL], deadline=True, missing=["unet_torch_voc2007"])
    assert paths() == ["/main", "/a", "/main"]  # the group to main and team_a, then the broken night to main
    assert "team-b" in first["undelivered"][0] and "ConnectionError" in first["undelivered"][0]
    assert any(line.startswith("alert channel team-b (webhook, connection team_b) failed") for line in said)
    assert groups.group(1)["notified_state"] == "new"  # the main channel took it
    [owed] = groups.undelivered()
    assert (owed["channel"], owed["reason"], owed["since"]) == ("team-b", "new", "2026-11-30")
    assert [e["note"].split(":")[0] for e in groups.group(1)["events"] if e["kind"] == "undelivered"] == ["team-b"]
    night_of("2026-12-01", [])  # still down: owed again, nothing to the others
    assert paths() == ["/main", "/a", "/main"] and groups.undelivered()[0]["since"] == "2026-11-30"
    report = (write_report(store_of(groups), tmp_path / "report", "2026-12-01")).read_text()  # its alert section
    [line] = [x for x in report.splitlines() if x.startswith("- NOT DELIVERED")]
    assert line.startswith("- NOT DELIVERED: ` alert channel team-b: group #1's new message not delivered since "
                           "2026-11-30 (ConnectionError") and line.endswith("; retried each night `")
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_B", up)
    second = night_of("2026-12-02", [])
    assert paths()[3:] == ["/b"] and receiver.received[3]["body"]["group"]["reason"] == "new"
    assert groups.undelivered() == [] and "undelivered" not in second
    night_of("2026-12-03", [])  # three days after the first message: every channel's reminder, once
    assert paths()[4:] == ["/main", "/a", "/b"] and {m["body"]["group"]["reason"] for m in receiver.received[4:]} == \
        {"reminder"}


def test_the_main_channel_down_leaves_the_group_untold_and_a_route_is_not_told_twice(receiver, monkeypatch, groups):
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", "http://127.0.0.1:9")
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_A", f"http://127.0.0.1:{receiver.port}")
    cfg = AlertConfig(notifier="webhook", endpoint="main",
                      routes=[{"benchmarks": [BENCH], "connection": "team_a", "endpoint": "a"}])
    summary = {"night": "2026-11-30", "complete": True, "missing": [], "failed": [], "alert_details": [DETAIL],
               "fixed": [], "fixed_details": []}
    kw = dict(stack_of={BENCH: "keras"}, profile="smoke", images_of=lambda repo: [], trigger=lambda d, c: "",
              log=lambda line: None)
    assert send_night(summary, False, cfg, groups, {}, **kw) == []
    assert [m["path"] for m in receiver.received] == ["/a"] and groups.group(1)["notified_state"] is None
    assert "to main" in summary["undelivered"][0]
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_ALERTS", f"http://127.0.0.1:{receiver.port}")
    later = {**summary, "night": "2026-12-01", "alert_details": []}
    [told] = send_night(later, False, cfg, groups, {}, **kw)
    assert told["group"]["reason"] == "new" and [m["path"] for m in receiver.received] == ["/a", "/main"]
    assert groups.group(1)["notified_state"] == "new" and groups.undelivered() == []


def test_route_names_are_their_own():
    with pytest.raises(ValueError, match="each route needs its own name"):
        AlertConfig(notifier="webhook", routes=[{"benchmarks": [BENCH], "connection": "c"},
                                                {"stacks": ["keras"], "connection": "c"}])
    assert [n for n, _ in AlertConfig(notifier="webhook", routes=[
        {"benchmarks": [BENCH], "connection": "c", "endpoint": "/x"}]).channels([BENCH], {})] == ["main", "c/x"]


@pytest.mark.parametrize("free, shown", [
    ("*bold* _it_ ~gone~ `code`", "\u200b*\u200bbold\u200b*\u200b \u200b_\u200bit\u200b_\u200b "
                                  "\u200b~\u200bgone\u200b~\u200b \u200b`\u200bcode\u200b`\u200b"),
    ("&lt;!channel&gt; <!here> <@U123>", "&amp;lt;!channel&amp;gt; &lt;!here&gt; &lt;@U123&gt;"),
    ("see https://evil.example/x and @channel", "see https\u200b://evil.example/x and @\u200bchannel"),
])
def test_slack_text_shows_free_text_literally_and_only_our_report_link_as_a_link(free, shown):
    from scalebench.report.alert_messages import slack_text

    report = "https://airflow.example.com/scalebench/2026-11-30/"
    got = slack_text(f"group #1 ({report}): owner {free}", (report,))
    assert got == f"group #1 (<{report}>): owner {shown}"
