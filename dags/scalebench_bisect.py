"""Airflow DAG scalebench_bisect: which image first made a benchmark slower (scalebench.orchestration.bisect_dag)."""
from scalebench.orchestration.bisect_dag import build_bisect_dag

dag = build_bisect_dag()
