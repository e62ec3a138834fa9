"""The nightly report DAG: runs on new results (Assets) or on its nightly cron."""
from __future__ import annotations

from airflow.sdk import DAG, task
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
        description="Aggregate stored cells into the scaling report (Markdown, HTML, plot)",
        schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(REPORT_CRON, timezone="UTC"), assets=any_asset),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        tags=["scalebench", "report"],
    ) as dag:

        @task
        def write_report(**context) -> str:
            from .report import write_report as write
            from .store import Store

            night = context["dag_run"].run_after.date().isoformat()
            path = write(Store().cells(), night=night)
            print(f"report for night {night}: {path}")
            return str(path)

        write_report()
    return dag
