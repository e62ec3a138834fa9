"""The pages inside the Airflow UI: the app (webapp) and its routers of one concern each (browsing,
triage, reports), what they share (shared), the values the templates show (pages), the Jinja2
templates and the static scripts and styles."""
