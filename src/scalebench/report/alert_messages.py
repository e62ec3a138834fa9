"""The texts and documents of the alerts: a group's message (what happened to it, then its
figures), the bisect hint an image regression carries, the message of a fix no open group holds,
and the broken-night message. Built here from what the report and the groups already decided;
sent by `scalebench.orchestration.dags.alerts`. A message is data: a JSON document whose `text`
is what a chat or mail channel shows."""
from __future__ import annotations

from scalebench.analysis.alert_groups import figures_back
from scalebench.core.config import AlertConfig
from scalebench.core.verdicts import GREW, GROUP_FIXED, NEW, PARTLY, REASONS, REMINDER, STATE

GROUP_FIELDS = ("id", "key", "state", "owner", "suspect", "benchmarks", "first_night", "last_night", "what_changed")


REPORTS_PATH = "/scalebench"  # the report pages under the UI's address
DEFAULT_REPORTS = "http://localhost:8080" + REPORTS_PATH  # the UI's address when nothing sets one (make airflow's)


def reports_at(cfg: AlertConfig) -> str:
    """The report pages' address: alerts.yaml's report_url, resolved from Airflow's base_url by the
    sender where the file leaves it unset (scalebench.orchestration.dags.alerts)."""
    return (cfg.report_url or DEFAULT_REPORTS).rstrip("/")


def report_link(cfg: AlertConfig, night: str) -> str:
    return f"{reports_at(cfg)}/{night}/"


def progress(group: dict) -> str | None:
    """"partly fixed: 2 of 3 figures back" for an open group some of whose figures are back, else None."""
    back = figures_back(group)
    return f"partly fixed: {back[0]} of {back[1]} figures back" if back else None


def figure_line(figure: dict) -> str:
    """A group's figure as its messages and the command line list it: its latest line, and when it came back."""
    return (f"back on {figure['back_night']}: " if figure.get("back_night") else "") + figure["line"]


def message_text(group: dict, reason: str, link: str) -> str:
    """A group's message text: what happened to the group (the reason it is owed one), then its figures."""
    suspect = group["suspect"] or f"no change of image or config (benchmark {', '.join(group['benchmarks'])})"
    joined = sorted(set(group["benchmarks"]) - set(group["notified_benchmarks"]))
    head = {
        NEW: f"new regression group #{group['id']}: {len(group['figures'])} figure(s) of "
               f"{', '.join(group['benchmarks'])} with {suspect}",
        GREW: f"regression group #{group['id']} now also slows {', '.join(joined)}",
        STATE: f"regression group #{group['id']} is {group['state']}"
                 + (f" (owner {group['owner']})" if group["owner"] else ""),
        GROUP_FIXED: f"regression group #{group['id']} fixed: regression ended"
                 + (f" ({group['fixed_by']})" if group.get("fixed_by") else ""),
        REMINDER: f"regression group #{group['id']} is still new (first night {group['first_night']}): "
                    "nobody has triaged it",
        PARTLY: f"regression group #{group['id']} {progress(group)}",
    }[reason]
    lines = [f"scalebench: {head} ({link})"]
    lines += [f"- {figure_line(f)}" for f in group["figures"]]
    if group.get("what_changed"):
        lines.append(f"what changed: {group['what_changed']}")
    return "\n".join(lines)


def bisect_hint(detail: dict, cfg: AlertConfig) -> dict | None:
    """For a regression that came with a new image: the bisect DAG to trigger (its link and conf)
    and the same as a command, between the previous and the new image."""
    suspect = detail.get("suspect") or {}
    if suspect.get("kind") != "image" or not suspect.get("previous_image") or not suspect.get("new_image"):
        return None
    good, bad = (suspect[k].rsplit(":", 1)[-1] if "@" not in suspect[k] else suspect[k]
                 for k in ("previous_image", "new_image"))
    conf = {"benchmark": detail["benchmark"], "gpus": detail["gpus"], "good": good, "bad": bad, "candidates": []}
    airflow = reports_at(cfg).rsplit("/", 1)[0]
    return {"dag": f"{airflow}/dags/scalebench_bisect", "conf": conf,
            "command": f"scalebench bisect {detail['benchmark']} --gpus {detail['gpus']} --good {good} --bad {bad} "
                       "--candidates <the tags built between them>"}


def group_message(group: dict, reason: str, night: str, alerts: list[dict] | None, cfg: AlertConfig) -> dict:
    """The message a group is owed tonight for `reason`: tonight's alerts of the group when it is
    new or grew (each with its bisect hint), else its figures as last alerted; the group's fields
    and the text."""
    details = alerts or [dict(f, night=f["last_night"]) for f in group["figures"]]
    details = [{**d, "bisect": hint} if (hint := bisect_hint(d, cfg)) else d for d in details]
    link = report_link(cfg, night)
    text = message_text(group, reason, link) + "".join(
        f"\nbisect: {a['bisect']['dag']} ({a['bisect']['command']})" for a in details[:1] if a.get("bisect"))
    return {"source": "scalebench", "kind": REASONS[reason].payload_kind, "night": night,
            "report": link, "count": len(details), "alerts": details,
            "group": {k: group[k] for k in GROUP_FIELDS} | {"reason": reason}, "text": text}


def fixed_message(night: str, lines: list[str], cfg: AlertConfig) -> dict:
    """The night a change ended a confirmed regression (or part of it) that no open group holds: said once."""
    link = report_link(cfg, night)
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


def broken_message(night: str, broken: dict, cfg: AlertConfig) -> dict:
    link = report_link(cfg, night)
    head = (f"scalebench: night {night} is broken: {len(broken['missing'])} benchmark(s) not recorded, "
            f"{len(broken['failed'])} cell(s) without a valid result ({link})")
    return {"source": "scalebench", "kind": "broken_night", "night": night, "report": link, **broken,
            "text": head + "\n" + "\n".join(f"- {x}" for x in broken["lines"])}


def subject(doc: dict) -> str:
    """A mail's subject: the text's first line, on one line (no header can be smuggled in)."""
    first = (doc.get("text") or "scalebench").splitlines()[0] if doc.get("text") else "scalebench"
    return " ".join(first.split())[:200]


def mail_html(doc: dict) -> str:
    """The mail's HTML, from an autoescaping template: a group's owner, a note or a benchmark's
    title is shown as text, never as markup."""
    import json

    from scalebench.report.render import template

    return template("alert_mail.html").render(subject=subject(doc), body=doc.get("text", ""), report=doc.get("report", ""),
                                              document=json.dumps(doc, indent=2, default=str))


ZWSP = "\u200b"  # a zero-width space: splits what Slack would read as markup, shows nothing


def slack_text(text: str, links: tuple[str, ...] = ()) -> str:
    """Text as Slack's mrkdwn shows it literally: &, < and > escaped (no <link>, <!channel> or
    <@user>), the marks of bold, italics, strike and code (* _ ~ `) kept from pairing up, no bare
    URL or @channel / @here / @everyone made live; then our own `links` (the report's) made links."""
    import re

    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = re.sub(r"([*_~`])", rf"{ZWSP}\1{ZWSP}", out)
    out = re.sub(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)", rf"\1{ZWSP}:", out)  # scheme://: no auto-link
    out = re.sub(r"(?i)@(channel|here|everyone)\b", rf"@{ZWSP}\1", out)
    for link in links:
        if link:
            inert = slack_text(link)
            out = out.replace(inert, f"<{link.replace('>', '%3E').replace('|', '%7C')}>")
    return out
