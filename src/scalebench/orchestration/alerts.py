"""Delivering confirmed regressions: include/configs/alerts.yaml picks one of Airflow's own
notifiers (the providers' HttpNotifier, SlackWebhookNotifier or SmtpNotifier) and the Airflow
connection it uses. Each alert carries its figure, the baseline, the reruns and a link to the
night's report. Only the complete nightly report sends (regression alerts wait for the night)."""
from __future__ import annotations

import json

from scalebench.core.config import AlertConfig


def payload(night: str, details: list[dict], cfg: AlertConfig) -> dict:
    link = f"{cfg.report_url.rstrip('/')}/{night}/"
    return {"source": "scalebench", "night": night, "report": link, "count": len(details), "alerts": details,
            "text": f"scalebench: {len(details)} confirmed regression(s) on night {night} ({link})\n"
                    + "\n".join(f"- {d['line']}" for d in details)}


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
    if not details:
        return None
    doc = payload(night, details, cfg)
    n = notifier(cfg, doc)
    if n is None:
        return None
    # notify(), not __call__: the payload is data and must not be rendered as a Jinja template
    n.notify(context)
    return doc
