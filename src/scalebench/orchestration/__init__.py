"""Layer 5, the only package that imports Airflow (with `scalebench.cli`), in three rooms:
`dags` (the DAG builders and their tasks: benchmarks, report, maintenance, bisect; alerts),
`cell_operator` (the operator that runs one cell's container) and `ui` (the web app the Airflow
plugin mounts, its templates and static files); `notes` (task notes through the REST API) is what
the DAG tasks and the operator share."""
