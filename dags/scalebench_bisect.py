"""Airflow DAG scalebench_bisect: which image first made a benchmark slower (scalebench.orchestration.dags.bisect_dag)."""
from scalebench.orchestration.dags.bisect_dag import build_bisect_dag

dag = build_bisect_dag()
