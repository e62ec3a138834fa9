"""Airflow plugin: the scalebench report pages in the Airflow UI (nav entry 'Scaling report').

Thin entry file only; the app lives in the installed scalebench package (scalebench.orchestration.webapp).
"""
from airflow.plugins_manager import AirflowPlugin

from scalebench.orchestration.webapp import create_app


class ScalebenchReportsPlugin(AirflowPlugin):
    name = "scalebench_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/scalebench", "name": "scalebench reports"}]
    external_views = [{"name": "Scaling report", "href": "/scalebench/latest", "url_route": "scalebench-report",
                       "destination": "nav", "category": "browse"}]
