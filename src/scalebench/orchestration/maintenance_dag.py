"""The weekly maintenance DAG: `scalebench prune` at the fleet's retention age, so attempt
folders and task logs stop growing; result rows, record files and reports are kept."""
from __future__ import annotations

from airflow.sdk import DAG, task

from scalebench.orchestration.dag_factory import nightly

MAINTENANCE_DAG_ID = "scalebench_maintenance"
MAINTENANCE_CRON = "0 5 * * 0"  # Sundays 05:00 UTC, after the night's cells and before the report


def build_maintenance_dag() -> DAG:
    with DAG(
        dag_id=MAINTENANCE_DAG_ID,
        description="Remove bulky attempt files and task logs older than the fleet's retention_days",
        schedule=nightly(MAINTENANCE_CRON),
        catchup=False,
        max_active_runs=1,
        tags=["scalebench", "maintenance"],
        params={"older_than_days": None, "dry_run": False},
    ) as dag:

        @task
        def prune(**context) -> dict:
            from scalebench.core import paths
            from scalebench.core.config import Configs
            from scalebench.store.prune import prune as prune_files

            p = context["params"]
            days = p["older_than_days"] or Configs().fleet.retention_days
            found = prune_files(paths.results_dir(), paths.airflow_logs_dir(), days, dry_run=p["dry_run"])
            summary = found.summary(days, p["dry_run"])
            print(f"prune: {summary}")
            return summary

        prune()
    return dag
