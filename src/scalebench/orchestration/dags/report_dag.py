"""The nightly report DAG: runs on new results (any benchmark's Asset) or on its nightly cron.

write_report -> send_alerts -> check_regressions. A report made before every scheduled benchmark
of the night has recorded says it is partial; the complete report sends its confirmed
regressions through the notifier of include/configs/alerts.yaml and fails check_regressions, so
alerts fire once the night is in. The cron run is the night's deadline: a night still partial
then sends the regressions of the benchmarks that did record, and any night with benchmarks not
recorded or cells without a valid result sends one broken-night alert and fails the run.
"""
from __future__ import annotations

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.timetables.assets import AssetOrTimeSchedule

from scalebench.core import nights
from scalebench.core.config import Configs
from scalebench.core.dag_ids import REPORT_DAG_ID
from scalebench.orchestration.dags.benchmark_tasks import results_asset
from scalebench.orchestration.dags.dag_specs import DagSpec, nightly, open_dag

REPORT_CRON = "0 7 * * *"


def nights_to_report(triggering_asset_events, night_param: str | None, run_after) -> list[str]:
    """The nights the benchmark runs behind these asset events belong to (a run that records late
    regenerates its own night's report); without events, the `night` param, else the cron's day."""
    found = {str(e.extra["night"]) for events in (triggering_asset_events or {}).values() for e in events
             if (e.extra or {}).get("night")}
    return sorted(found) or [night_param or nights.night_at(run_after)]


@task
def write_report(**context) -> dict:
    """The report of each night this DAG run is for: the nights of the benchmark runs that
    triggered it (a late run regenerates its own night), else the `night` param, else today."""
    from scalebench.report.build import publish
    from scalebench.store.results import Store

    store = Store()
    summaries = []
    for night in nights_to_report(context["triggering_asset_events"], context["params"].get("night"),
                                  context["dag_run"].run_after):
        rep, path = publish(store, night)
        print(f"report for night {night} ({'complete' if rep.complete else 'partial'}): {path}")
        failed = [{"benchmark": r.benchmark, **x} for r in rep.rows for x in r.not_valid
                  if rep.source == "scheduled"]  # a manual trial's failures break no night
        summaries.append({"night": night, "path": str(path), "complete": rep.complete, "missing": rep.missing,
                          "failed": failed, "alerts": rep.alerts, "alert_details": rep.alert_details,
                          "fixed": rep.fixed, "fixed_details": rep.fixed_details,
                          "moved_details": rep.moved_details})
    deadline = (str(context["dag_run"].run_type).split(".")[-1].lower() == "scheduled"
                or bool(context["params"].get("deadline")))
    return {"nights": summaries, "deadline": deadline}

@task
def send_alerts(summary: dict, **context) -> dict:
    """Each night's confirmed regressions into their alert groups, one message per group owed one
    (new, grown, changed state, partly fixed, fixed, reminder) and, at the deadline, what broke,
    through the configured Airflow notifier (scalebench.orchestration.dags.alerts)."""
    from scalebench.orchestration.dags.alerts import send_nights

    return send_nights(summary, context)


@task
def check_regressions(summary: dict) -> None:
    alerts, broken, undelivered = [], [], []
    for night in summary["nights"]:
        broken += [f"{night['night']}: {x}" for x in night.get("broken", [])]
        undelivered += [f"{night['night']}: {x}" for x in night.get("undelivered", [])]
        if not night["complete"] and not summary["deadline"]:
            print(f"night {night['night']} is partial (missing {night['missing']}): alerts wait for the "
                  f"complete report or the deadline; {len(night['alerts'])} pending")
            continue
        alerts += [f"{night['night']}: {a}" for a in night["alerts"]]
        print(f"night {night['night']}: {len(night['alerts']) or 'no'} regression(s)")
    if alerts or broken or undelivered:
        raise AirflowFailException("; ".join(
            ([f"{len(alerts)} confirmed regression(s): " + "; ".join(alerts)] if alerts else [])
            + ([f"broken night: {len(broken)} problem(s): " + "; ".join(broken)] if broken else [])
            + ([f"alert delivery: {len(undelivered)} message(s) not delivered (retried the next night): "
                + "; ".join(undelivered)] if undelivered else [])))


def build_report_dag(configs: Configs | None = None) -> DAG:
    configs = configs or Configs()
    good, broken = configs.load_all()  # a broken benchmark config must not take the report down
    assets = [results_asset(b) for b in sorted([*good, *broken])]
    any_asset = assets[0]
    for a in assets[1:]:
        any_asset = any_asset | a
    with open_dag(DagSpec(
        REPORT_DAG_ID, "Aggregate stored cells into the night's scaling report, and alert on regressions",
        AssetOrTimeSchedule(timetable=nightly(REPORT_CRON), assets=any_asset), ("scalebench", "report"),
        params={"night": Param(None, type=["null", "string"], title="Night (YYYY-MM-DD)"),
                "deadline": Param(False, type="boolean", title="Deadline",
                                  description="Judge the night now, as the cron run does: send what recorded and "
                                              "one alert for benchmarks not recorded or cells that failed.")},
    )) as dag:
        check_regressions(send_alerts(write_report()))
    return dag
