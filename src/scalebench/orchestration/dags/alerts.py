"""Delivering alerts, the report DAG's `send_alerts`: each night's confirmed regressions into
their alert groups (scalebench.store.alert_groups), one message per group owed one tonight
(scalebench.analysis.alert_groups decides, scalebench.report.alert_messages writes it) through
the Airflow notifier include/configs/alerts.yaml picks (the providers' HttpNotifier,
SlackWebhookNotifier or SmtpNotifier) and to each matching route, marked told once the main
channel took it; a new image's group starts its bisection. Regression alerts wait for the
complete night; at the report's cron time (the night's deadline) the recorded benchmarks'
regressions go out anyway, and a night with benchmarks not recorded or cells without a valid
result sends one broken-night alert naming them."""
from __future__ import annotations

from typing import Callable, Sequence

from scalebench.core.config import AlertConfig, Configs


def group_messages(groups, cfg: AlertConfig, night: str, details: list[dict], ended: list[dict],
                   moved: Sequence[dict] = ()) -> list[tuple[int, str, dict]]:
    """One night's regressions into their alert groups, then one message per group that is owed
    one tonight: (group id, reason, message). A group is told once when it opens, again when it
    gains a benchmark, changes state (fixed included), has some figures back, or stays new for
    remind_after_days; later nights of its figures add nothing. `moved`: figures flagged tonight,
    which join their image's open group (so it is fixed only when they are back)."""
    from scalebench.analysis.alert_groups import owed
    from scalebench.core.alert_rules import group_key
    from scalebench.core.verdicts import REASONS
    from scalebench.report.alert_messages import group_message

    groups.record_night(night, details, ended, moved)
    tonight: dict[str, list[dict]] = {}
    for d in details:
        tonight.setdefault(group_key(d.get("suspect"), d["benchmark"]), []).append(d)
    out = []
    for g in groups.needing_news():
        why = owed(g, night, cfg.remind_after_days)
        if not why:
            continue
        alerts = tonight.get(g["key"]) if REASONS[why.reason].with_tonight and g["state"] != "fixed" else None
        out.append((g["id"], why.reason, group_message(g, why.reason, night, alerts, cfg)))
    return out


def start_bisects(groups, messages: list[tuple[int, str, dict]], cfg: AlertConfig,
                  images_of: Callable[[str], list[dict]], trigger: Callable[[str, dict], str], profile: str) -> None:
    """For each group opened tonight whose suspect is an image: the scalebench_bisect DAG over
    the repository's tags built between the previous and the new image (by creation time), once,
    at its worst figure's GPU count (that figure's bisect hint); the line (started, or why not)
    goes into the group's events and its message."""
    from scalebench.cell.images import tags_between
    from scalebench.core.config import image_repository
    from scalebench.core.dag_ids import BISECT_DAG_ID
    from scalebench.core.verdicts import NEW

    if not cfg.auto_bisect:
        return
    for group_id, reason, doc in messages:
        worst = max(doc["alerts"], key=lambda d: d.get("change") or 0.0)  # tonight's figures of a new group
        hint = worst.get("bisect") if reason == NEW else None
        if hint is None or any(e["kind"] == "bisect" for e in groups.group(group_id)["events"]):
            continue  # not an image, or started (or said why not) already: a group still unsent is "new" again
        conf = hint["conf"]
        repo = image_repository(worst["suspect"]["new_image"])
        try:
            found = tags_between(images_of(repo), conf["good"], conf["bad"])
            if isinstance(found, str):
                line = f"bisect not started: {found} in {repo}"
            else:
                run_id = trigger(BISECT_DAG_ID, {**conf, "candidates": found[:62], "profile": profile, "pairs": 5,
                                                 "alert_group": group_id})
                line = (f"bisect started: {BISECT_DAG_ID} run {run_id} over {len(found)} tag(s) built between "
                        f"{conf['good']} and {conf['bad']}: {', '.join(found[:62])}")
        except Exception as exc:  # no engine here, the API refused: said, and the alert still goes out
            line = f"bisect not started: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        groups.add_event(group_id, "bisect", line)
        doc["group"]["bisect"] = line
        doc["text"] += f"\n{line}"


def to_send(night: dict, deadline: bool) -> tuple[list[dict], dict | None]:
    """(regression alerts, broken-night alert body) one report run sends for a night: regressions
    once the night is complete, or at its deadline for what did record (a complete night sent
    them when it completed); what is missing or failed, at the deadline."""
    regressions = night["alert_details"] if night["complete"] != deadline else []
    from scalebench.report.alert_messages import broken_night

    return regressions, broken_night(night) if deadline else None


def notifier(cfg: AlertConfig, doc: dict):
    """The configured Airflow notifier, carrying `doc`; None when alerts are switched off. Chat
    text is escaped as Slack needs, a mail's HTML comes from an autoescaping template
    (scalebench.report.alert_messages): free text in a message is never markup."""
    from scalebench.report.alert_messages import mail_html, slack_text, subject

    if cfg.notifier == "webhook":
        from airflow.providers.http.notifications.http import HttpNotifier

        return HttpNotifier(http_conn_id=cfg.connection, endpoint=cfg.endpoint, json=doc,
                            headers={"Content-Type": "application/json"})
    if cfg.notifier == "slack":
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        return SlackWebhookNotifier(slack_webhook_conn_id=cfg.connection, text=slack_text(doc["text"], (doc.get("report", ""),)))
    if cfg.notifier == "email":
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        return SmtpNotifier(smtp_conn_id=cfg.connection, to=cfg.to, subject=subject(doc), html_content=mail_html(doc))
    return None


def deliver(cfg: AlertConfig, doc: dict, context) -> dict | None:
    """One message through the configured notifier; None when alerts are off."""
    n = notifier(cfg, doc)
    if n is None:
        return None
    # notify(), not __call__: the payload is data and must not be rendered as a Jinja template
    n.notify(context)
    return doc


def deliver_alone(channel: str, cfg: AlertConfig, doc: dict, context, log) -> tuple[dict | None, str | None]:
    """One message to one channel, whatever the others do: (the document, or None when alerts are
    off; the error's first line when it failed, logged with the channel's name)."""
    try:
        return deliver(cfg, doc, context), None
    except Exception as exc:  # a channel's connection, host or credentials: the others still go
        error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        log(f"alert channel {channel} ({cfg.notifier}, connection {cfg.connection}) failed: {error}")
        return None, error


def send_group(groups, cfg: AlertConfig, group_id: int, reason: str, message: dict, night: str, context, *,
               stack_of: dict[str, str], log, only: str | None = None) -> list[str]:
    """A group's message to each of its channels (the main one and each route that wants it), each
    alone: one that fails is kept on the group as owed and named in the returned lines, and never
    stops the others; the group is told once the main channel took it. `only`: a retry to that channel."""
    from scalebench.store.alert_groups import MAIN

    failed = []
    channels = [(name, channel) for name, channel in cfg.channels(message["group"]["benchmarks"], stack_of)
                if (name == only if only is not None else name == MAIN or not groups.took(group_id, name, reason))]
    for name, channel in channels:  # chosen before any is sent: telling the main one moves what "took" means
        doc, error = deliver_alone(name, channel, message, context, log)
        if doc is None and error is None:
            continue  # notifier none: nothing sent, nothing owed to a channel
        groups.record_delivery(group_id, name, night, reason, error)
        if error is not None:
            failed.append(f"alert group #{group_id}: {reason} message not delivered to {name}: {error}")
        elif name == MAIN:
            groups.mark_notified(group_id, night, reason)
            log(f"night {night}: alert group #{group_id}: {reason} message sent by the {cfg.notifier} notifier")
    return failed


def send_night(night: dict, deadline: bool, cfg: AlertConfig, groups, context, *, stack_of: dict[str, str],
               profile: str, images_of: Callable[[str], list[dict]], trigger: Callable[[str, dict], str],
               log=print) -> list[dict]:
    """One night of a report run (a write_report summary): its regressions into their groups and
    the groups' messages to the main channel and each matching route, each channel alone (a group is
    told once the main channel took it; a route that failed is retried the next night); a fix no
    open group holds said as before, and at the deadline what broke. A channel that failed is named
    in night["undelivered"]. Returns the messages the main channel took."""
    from scalebench.core.verdicts import NO_BETTER
    from scalebench.report.alert_messages import broken_message, fixed_message, group_message

    label, told = night["night"], []
    regressions, broken = to_send(night, deadline)
    in_time = night["complete"] != deadline  # once per night, as the regressions are
    ended = night.get("fixed_details", []) if in_time else []
    grouped = {g["key"] for g in groups.groups(state="open")}
    moved = night.get("moved_details", []) if in_time else []
    messages = group_messages(groups, cfg, label, regressions, ended, moved)
    start_bisects(groups, messages, cfg, images_of, trigger, profile)
    failed: list[str] = []
    for group_id, reason, message in messages:
        failed += send_group(groups, cfg, group_id, reason, message, label, context, stack_of=stack_of, log=log)
        if groups.group(group_id)["notified_night"] == label:
            told.append(message)
    sent_tonight = {group_id for group_id, _, _ in messages}
    for owed in groups.undelivered():  # a route that failed before, and has no newer message tonight
        group = groups.group(owed["group_id"])
        if owed["group_id"] in sent_tonight or owed["channel"] == "main" or group is None:
            continue
        retry = group_message(group, owed["reason"], label, None, cfg)
        failed += send_group(groups, cfg, owed["group_id"], owed["reason"], retry, label, context, stack_of=stack_of,
                             log=log, only=owed["channel"])
    if regressions:
        log(f"night {label}: {len(regressions)} alert(s) "
            + (f"sent by the {cfg.notifier} notifier" if told else
               "not sent (notifier: none)" if cfg.notifier == "none" else
               "not sent: the main channel failed" if any(" to main: " in f for f in failed) else
               "in groups already told"))
    # a partial fix, or an end of a regression that no open group holds, is said as before ("still
    # regressed" is no news to the channel: its group stays open and says so)
    closed = {e["line"] for e in ended if e["key"] in grouped}
    loose = [f["line"] for f in night.get("fixed", []) if f["line"] not in closed
             and f["verdict"] != NO_BETTER] if in_time else []
    if loose:
        doc, error = deliver_alone("main", cfg, fixed_message(label, loose, cfg), context, log)
        failed += [f"fixed message not delivered to main: {error}"] if error else []
        log(f"night {label}: {len(loose)} regression(s) ended or partly fixed "
            + (f"(sent by the {cfg.notifier} notifier)" if doc else f"(not sent: {error or 'notifier none'})"))
    if broken:
        doc, error = deliver_alone("main", cfg, broken_message(label, broken, cfg), context, log)
        failed += [f"broken-night message not delivered to main: {error}"] if error else []
        log(f"night {label} is broken: " + "; ".join(broken["lines"]) + " (broken-night alert "
            + (f"sent by the {cfg.notifier} notifier)" if doc else f"not sent: {error or 'notifier none'})"))
        night["broken"] = broken["lines"]
    if failed:
        night["undelivered"] = failed
    return told


def send_nights(summary: dict, context) -> dict:
    """The report DAG's send_alerts: every night of the run (`send_night`), with the configs, the
    store's groups, this worker's Docker engine for a bisection's tags and the REST API to start it."""
    from scalebench.orchestration.dags.dag_specs import default_profile
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    configs = Configs()
    cfg = with_report_url(configs.alerts())
    stack_of = {b: bench.stack for b, bench in configs.load_all()[0].items()}  # for the alert routes
    groups = AlertGroups(Store())
    sent = {}
    for night in summary["nights"]:
        told = send_night(night, summary["deadline"], cfg, groups, context, stack_of=stack_of,
                          profile=default_profile(configs.fleet),  # as the bisect DAG's form defaults
                          images_of=_engine_images, trigger=_trigger)
        regressions, _ = to_send(night, summary["deadline"])
        if regressions:
            sent[night["night"]] = len(regressions) if told else 0
    return {**summary, "sent": sent}


def with_report_url(cfg: AlertConfig) -> AlertConfig:
    """alerts.yaml's report_url, or where unset the report pages under the address the UI is
    reached at (Airflow's [api] base_url, which `make airflow` and the stack set)."""
    if cfg.report_url:
        return cfg
    from airflow.configuration import conf

    from scalebench.report.alert_messages import DEFAULT_REPORTS, REPORTS_PATH

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return cfg.model_copy(update={"report_url": base + REPORTS_PATH if base else DEFAULT_REPORTS})


def _engine_images(repository: str) -> list[dict]:
    """The repository's images on this worker's Docker engine."""
    from scalebench.cell.engine import Engine
    from scalebench.cell.images import repository_images

    return repository_images(Engine(), repository)


def _trigger(dag_id: str, conf: dict) -> str:
    from scalebench.orchestration.notes import trigger

    return trigger(dag_id, conf)
