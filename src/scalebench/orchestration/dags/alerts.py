"""Delivering confirmed regressions: include/configs/alerts.yaml picks one of Airflow's own
notifiers (the providers' HttpNotifier, SlackWebhookNotifier or SmtpNotifier) and the Airflow
connection it uses. Each alert carries its figure, the baseline, the reruns and a link to the
night's report. Regression alerts wait for the complete night; at the report's cron time (the
night's deadline) the recorded benchmarks' regressions go out anyway, and a night with benchmarks
not recorded or cells without a valid result sends one broken-night alert naming them."""
from __future__ import annotations

import json
from typing import Callable

from scalebench.core.config import AlertConfig


def bisect_hint(detail: dict, cfg: AlertConfig) -> dict | None:
    """For a regression that came with a new image: the bisect DAG to trigger (its link and conf)
    and the same as a command, between the previous and the new image."""
    suspect = detail.get("suspect") or {}
    if suspect.get("kind") != "image" or not suspect.get("previous_image") or not suspect.get("new_image"):
        return None
    good, bad = (suspect[k].rsplit(":", 1)[-1] if "@" not in suspect[k] else suspect[k]
                 for k in ("previous_image", "new_image"))
    conf = {"benchmark": detail["benchmark"], "gpus": detail["gpus"], "good": good, "bad": bad, "candidates": []}
    airflow = cfg.report_url.rstrip("/").rsplit("/", 1)[0]
    return {"dag": f"{airflow}/dags/scalebench_bisect", "conf": conf,
            "command": f"scalebench bisect {detail['benchmark']} --gpus {detail['gpus']} --good {good} --bad {bad} "
                       "--candidates <the tags built between them>"}


def payload(night: str, details: list[dict], cfg: AlertConfig) -> dict:
    link = f"{cfg.report_url.rstrip('/')}/{night}/"
    details = [{**d, "bisect": hint} if (hint := bisect_hint(d, cfg)) else d for d in details]
    return {"source": "scalebench", "night": night, "report": link, "count": len(details), "alerts": details,
            "text": f"scalebench: {len(details)} confirmed regression(s) on night {night} ({link})\n"
                    + "\n".join(f"- {d['line']}" + (f"\n  bisect: {d['bisect']['dag']} ({d['bisect']['command']})"
                                                    if d.get("bisect") else "") for d in details)}


def group_messages(groups, cfg: AlertConfig, night: str, details: list[dict], ended: list[dict]
                   ) -> list[tuple[int, str, dict]]:
    """One night's regressions into their alert groups (scalebench.store.alert_groups), then one
    message per group that is owed one tonight: (group id, reason, message). A group is told once
    when it opens, again when it gains a benchmark, changes state (fixed included) or stays new
    for remind_after_days; later nights of its figures add nothing."""
    from scalebench.analysis.alert_groups import message_text, owed
    from scalebench.core.alert_rules import group_key

    groups.record_night(night, details, ended)
    link = f"{cfg.report_url.rstrip('/')}/{night}/"
    tonight: dict[str, list[dict]] = {}
    for d in details:
        tonight.setdefault(group_key(d.get("suspect"), d["benchmark"]), []).append(d)
    out = []
    for g in groups.needing_news():
        why = owed(g, night, cfg.remind_after_days)
        if not why:
            continue
        alerts = tonight.get(g["key"]) if why.reason in ("new", "grew") and g["state"] != "fixed" else None
        doc = payload(night, alerts or [dict(f, night=f["last_night"]) for f in g["figures"]], cfg)
        doc["kind"] = "fixed" if why.reason == "fixed" else "regression"
        doc["group"] = {k: g[k] for k in ("id", "key", "state", "owner", "suspect", "benchmarks", "first_night",
                                          "last_night", "what_changed")} | {"reason": why.reason}
        doc["text"] = message_text(g, why.reason, link) + "".join(
            f"\nbisect: {a['bisect']['dag']} ({a['bisect']['command']})" for a in doc["alerts"][:1] if a.get("bisect"))
        out.append((g["id"], why.reason, doc))
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

    if not cfg.auto_bisect:
        return
    for group_id, reason, doc in messages:
        worst = max(doc["alerts"], key=lambda d: d.get("change") or 0.0)  # tonight's figures of a new group
        hint = worst.get("bisect") if reason == "new" else None
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


def fixed_payload(night: str, lines: list[str], cfg: AlertConfig) -> dict:
    """The night a change ended a confirmed regression (or part of it): said once, as its alert was."""
    link = f"{cfg.report_url.rstrip('/')}/{night}/"
    return {"source": "scalebench", "kind": "fixed", "night": night, "report": link, "count": len(lines),
            "fixed": lines, "text": f"scalebench: {len(lines)} regression(s) ended or partly fixed on night {night} "
                                    f"({link})\n" + "\n".join(f"- {x}" for x in lines)}


def broken_night(night: dict) -> dict | None:
    """What is missing from a night (a write_report summary) and why; None when nothing is."""
    if not night["missing"] and not night["failed"]:
        return None
    lines = [f"{b}: no run recorded by the report's deadline (its run is still going, stuck or never started)"
             for b in night["missing"]]
    lines += [f"{f['benchmark']}: {f['label']}: {f['status']} ({f['reason']})" for f in night["failed"]]
    return {"missing": night["missing"], "failed": night["failed"], "lines": lines}


def broken_payload(night: str, broken: dict, cfg: AlertConfig) -> dict:
    link = f"{cfg.report_url.rstrip('/')}/{night}/"
    head = (f"scalebench: night {night} is broken: {len(broken['missing'])} benchmark(s) not recorded, "
            f"{len(broken['failed'])} cell(s) without a valid result ({link})")
    return {"source": "scalebench", "kind": "broken_night", "night": night, "report": link, **broken,
            "text": head + "\n" + "\n".join(f"- {x}" for x in broken["lines"])}


def to_send(night: dict, deadline: bool) -> tuple[list[dict], dict | None]:
    """(regression alerts, broken-night alert body) one report run sends for a night: regressions
    once the night is complete, or at its deadline for what did record (a complete night sent
    them when it completed); what is missing or failed, at the deadline."""
    regressions = night["alert_details"] if night["complete"] != deadline else []
    return regressions, broken_night(night) if deadline else None


def notifier(cfg: AlertConfig, doc: dict):
    """The configured Airflow notifier, carrying `doc`; None when alerts are switched off."""
    if cfg.notifier == "webhook":
        from airflow.providers.http.notifications.http import HttpNotifier

        return HttpNotifier(http_conn_id=cfg.connection, endpoint=cfg.endpoint, json=doc,
                            headers={"Content-Type": "application/json"})
    if cfg.notifier == "slack":
        from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

        return SlackWebhookNotifier(slack_webhook_conn_id=cfg.connection, text=doc["text"])
    if cfg.notifier == "email":
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        return SmtpNotifier(smtp_conn_id=cfg.connection, to=cfg.to, subject=doc["text"].splitlines()[0],
                            html_content="<pre>" + json.dumps(doc, indent=2) + "</pre>")
    return None


def send(cfg: AlertConfig, night: str, details: list[dict], context) -> dict | None:
    """Send one night's confirmed regressions; returns what was sent (None: nothing to send, or off)."""
    return deliver(cfg, payload(night, details, cfg), context) if details else None


def deliver(cfg: AlertConfig, doc: dict, context) -> dict | None:
    """One message through the configured notifier; None when alerts are off."""
    n = notifier(cfg, doc)
    if n is None:
        return None
    # notify(), not __call__: the payload is data and must not be rendered as a Jinja template
    n.notify(context)
    return doc
