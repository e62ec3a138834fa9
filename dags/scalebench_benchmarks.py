"""Airflow DAGs: one per benchmark config in include/configs/benchmarks/ (scalebench.dag_factory)."""
from scalebench.dag_factory import build_all

globals().update(build_all())
