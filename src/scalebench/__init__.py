"""scalebench: nightly multi-GPU training scaling benchmarks, scheduled by Apache Airflow.

Kept light at import time: DAG files import this package while the scheduler parses them.
"""
__version__ = "0.1.0"
