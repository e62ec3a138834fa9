"""Airflow DAGs: one per benchmark config in include/configs/benchmarks/ (scalebench.orchestration.dags.dag_factory)."""
from scalebench.orchestration.dags.dag_factory import build_all

globals().update(build_all())
