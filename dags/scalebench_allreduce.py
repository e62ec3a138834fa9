"""Airflow DAG scalebench_allreduce: each host's all-reduce bus bandwidth, weekly (see
scalebench.orchestration.dags.allreduce_dag)."""
from scalebench.orchestration.dags.allreduce_dag import build_allreduce_dag

dag = build_allreduce_dag()
