"""Airflow plugin: the scalebench pages in the Airflow UI. Browse > Scaling report and Scaling
history; a "Scaling history" tab on every DAG (a benchmark's opens its history, the report and
maintenance DAGs say what they are) and a "Scaling figures" tab on every DAG run (its cells, failed
first, each linked to its task log).

Thin entry file only; the app lives in the installed scalebench package (scalebench.orchestration.ui.webapp).
"""
from airflow.plugins_manager import AirflowPlugin

from scalebench.orchestration.ui.webapp import create_app


class ScalebenchReportsPlugin(AirflowPlugin):
    name = "scalebench_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/scalebench", "name": "scalebench reports"}]
    external_views = [
        {"name": "Scaling report", "href": "/scalebench/latest", "url_route": "scalebench-report",
         "destination": "nav", "category": "browse"},
        {"name": "Scaling history", "href": "/scalebench/benchmarks", "url_route": "scalebench-benchmarks",
         "destination": "nav", "category": "browse"},
        # the UI fills {DAG_ID} and {RUN_ID} (URL-encoded) on the DAG's and the DAG run's pages
        {"name": "Scaling history", "href": "/scalebench/dags?dag_id={DAG_ID}", "url_route": "scalebench-history",
         "destination": "dag"},
        {"name": "Scaling figures", "href": "/scalebench/runs?dag_id={DAG_ID}&run_id={RUN_ID}",
         "url_route": "scalebench-run", "destination": "dag_run"},
    ]
