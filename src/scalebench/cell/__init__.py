"""Layer 2: one cell's work outside Airflow: container settings, datasets and fetching, GPU
pre-flight, failure classes and Great Expectations validation. Imports only `core`."""
