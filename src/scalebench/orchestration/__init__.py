"""Layer 5, the only package that imports Airflow (with `scalebench.cli`): the DAG factory, the
cell operator, the report and maintenance DAGs, task notes, alerts and the UI's web app."""
