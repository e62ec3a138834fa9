"""Airflow DAG scalebench_nightly_report: aggregates stored cells into the report.

Runs when any benchmark DAG records new results (its Asset) and every night on a cron,
whichever comes first. The report is kept per night under .state/reports/<date>/.
"""
from scalebench.orchestration.dags.report_dag import build_report_dag

dag = build_report_dag()
