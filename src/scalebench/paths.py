"""Where things live: configs in the repository, all runtime state under one ignored folder."""
from __future__ import annotations

import os
from pathlib import Path

PROJECT_DIR = Path(os.environ.get("SCALEBENCH_PROJECT_DIR", Path(__file__).resolve().parents[2]))


def config_dir() -> Path:
    return Path(os.environ.get("SCALEBENCH_CONFIG_DIR", PROJECT_DIR / "include" / "configs"))


def fleet_file() -> Path:
    return Path(os.environ.get("SCALEBENCH_FLEET", config_dir() / "fleet.yaml"))


def state_dir() -> Path:
    """Runtime state: Airflow home, SQLite files, results, reports, generated data."""
    return Path(os.environ.get("SCALEBENCH_HOME", PROJECT_DIR / ".state"))


def results_dir() -> Path:
    return state_dir() / "results"


def reports_dir() -> Path:
    return state_dir() / "reports"


def synthetic_data_dir() -> Path:
    return state_dir() / "data" / "synthetic"


def store_url() -> str:
    return os.environ.get("SCALEBENCH_STORE_URL", f"sqlite:///{state_dir() / 'results.db'}")
