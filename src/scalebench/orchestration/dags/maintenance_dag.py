"""The weekly maintenance DAG: `scalebench prune` at the fleet's retention age, so attempt
folders and task logs stop growing; result rows, record files and reports are kept."""
from __future__ import annotations

from airflow.sdk import DAG, Param, task

from scalebench.core.dag_ids import MAINTENANCE_DAG_ID
from scalebench.orchestration.dags.dag_specs import DagSpec, nightly, open_dag

MAINTENANCE_CRON = "0 5 * * 0"  # Sundays 05:00 UTC, after the night's cells and before the report


@task
def prune(**context) -> dict:
    """Remove the bulky files older than the param (or the fleet's retention_days); a dry run only lists them."""
    from scalebench.core import paths
    from scalebench.core.config import Configs
    from scalebench.store.prune import held_cells, prune as prune_files

    p = context["params"]
    days = p["older_than_days"] or Configs().fleet.retention_days
    found = prune_files(paths.results_dir(), paths.airflow_logs_dir(), days, dry_run=p["dry_run"],
                        held=held_cells())
    summary = found.summary(days, p["dry_run"])
    print(f"prune: {summary}")
    return summary


def build_maintenance_dag() -> DAG:
    with open_dag(DagSpec(
        MAINTENANCE_DAG_ID, "Remove bulky attempt files and task logs older than the fleet's retention_days",
        nightly(MAINTENANCE_CRON), ("scalebench", "maintenance"),
        params={
            "older_than_days": Param(None, type=["null", "number"], minimum=1, title="Older than (days)",
                                     description="Remove files older than this; empty: the fleet's retention_days. "
                                                 "At least 1: younger files may belong to a running cell."),
            "dry_run": Param(False, type="boolean", title="Dry run", description="List, remove nothing."),
        },
    )) as dag:
        prune()
    return dag
