"""Airflow DAG scalebench_maintenance: weekly `scalebench prune` (see scalebench.store.prune)."""
from scalebench.orchestration.dags.maintenance_dag import build_maintenance_dag

dag = build_maintenance_dag()
