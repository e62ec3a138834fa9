"""Airflow DAGs: one per benchmark config in include/configs/benchmarks/ (scalebench.orchestration.dag_factory)."""
from scalebench.orchestration.dag_factory import build_all

globals().update(build_all())
