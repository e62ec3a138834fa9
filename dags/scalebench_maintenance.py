"""Airflow DAG scalebench_maintenance: weekly `scalebench prune` (see scalebench.prune)."""
from scalebench.maintenance_dag import build_maintenance_dag

dag = build_maintenance_dag()
