"""Airflow DAGs: one per benchmark config in include/configs/benchmarks/ (scalebench.orchestration.dags.dag_factory)."""
from airflow.sdk import get_parsing_context

from scalebench.orchestration.dags.dag_factory import build_all

# a task process needs only its own DAG: building the others is seconds of CPU per task on a busy host
globals().update(build_all(only=get_parsing_context().dag_id))
