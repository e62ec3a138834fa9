"""The pages inside the Airflow UI: the FastAPI routers (webapp), the values the templates show
(pages), the Jinja2 templates and the static scripts and styles."""
