"""The nightly report DAG: runs on new results (any benchmark's Asset) or on its nightly cron.

write_report -> check_regressions. A report made before every scheduled benchmark of the
night has recorded says it is partial; alerts fail check_regressions only from the complete
report, so Airflow's usual alerting (email, callbacks) fires once the night is in.
"""
from __future__ import annotations

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException
from airflow.timetables.assets import AssetOrTimeSchedule
from airflow.timetables.trigger import CronTriggerTimetable

from .config import Configs
from .dag_factory import START, results_asset

REPORT_DAG_ID = "scalebench_nightly_report"
REPORT_CRON = "0 7 * * *"


def build_report_dag(configs: Configs | None = None) -> DAG:
    configs = configs or Configs()
    assets = [results_asset(b) for b in sorted(configs.benchmarks)]
    any_asset = assets[0]
    for a in assets[1:]:
        any_asset = any_asset | a
    with DAG(
        dag_id=REPORT_DAG_ID,
        description="Aggregate stored cells into the night's scaling report, and alert on regressions",
        schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(REPORT_CRON, timezone="UTC"), assets=any_asset),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=["scalebench", "report"],
        params={"night": None},
    ) as dag:

        @task
        def write_report(**context) -> dict:
            import json

            from .report import write_report as write
            from .store import Store

            night = context["params"].get("night") or context["dag_run"].run_after.date().isoformat()
            path = write(Store(), night=night)
            doc = json.loads((path.parent / "table.json").read_text())
            print(f"report for night {night} ({'complete' if doc['complete'] else 'partial'}): {path}")
            return {"night": night, "path": str(path), "complete": doc["complete"], "missing": doc["missing"],
                    "alerts": doc["alerts"]}

        @task
        def check_regressions(summary: dict) -> None:
            if not summary["complete"]:
                print(f"night {summary['night']} is partial (missing {summary['missing']}): alerts wait for the "
                      f"complete report; {len(summary['alerts'])} pending")
                return
            if summary["alerts"]:
                raise AirflowFailException(f"{len(summary['alerts'])} confirmed regression(s) on night "
                                           f"{summary['night']}: " + "; ".join(summary["alerts"]))
            print(f"night {summary['night']}: no regression")

        check_regressions(write_report())
    return dag
