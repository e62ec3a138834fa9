"""Layer 1, imported by every other layer: configs, the cell matrix, paths, nights, topology,
provenance and attempt folders. Imports no other scalebench package and never Airflow."""
