"""Where things live: configs in the project's include/configs, runtime state under one ignored
folder. Found without relying on how scalebench was installed: SCALEBENCH_CONFIG_DIR (and
SCALEBENCH_HOME) when set, else the project root: SCALEBENCH_PROJECT_DIR, else the nearest
folder holding include/configs/ from the working directory up, else the source checkout this
package runs from (an editable install)."""
from __future__ import annotations

import os
from pathlib import Path

CONFIGS = Path("include") / "configs"


class ProjectNotFound(ValueError):
    """No configs to work with; says where it looked and what to set."""


def project_root() -> Path | None:
    if os.environ.get("SCALEBENCH_PROJECT_DIR"):
        return Path(os.environ["SCALEBENCH_PROJECT_DIR"])
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIGS).is_dir():
            return folder
    checkout = Path(__file__).resolve().parents[3]  # src/scalebench/core/paths.py
    return checkout if (checkout / CONFIGS).is_dir() else None


def config_dir() -> Path:
    if os.environ.get("SCALEBENCH_CONFIG_DIR"):
        return Path(os.environ["SCALEBENCH_CONFIG_DIR"])
    root = project_root()
    if root is None:
        raise ProjectNotFound(f"no scalebench configs found: set SCALEBENCH_CONFIG_DIR to a folder with benchmarks/ "
                              f"and fleet.yaml, or run from a checkout (a folder with {CONFIGS}/) or below it; "
                              f"looked up from {Path.cwd()}")
    return root / CONFIGS


def fleet_file() -> Path:
    return Path(os.environ.get("SCALEBENCH_FLEET", config_dir() / "fleet.yaml"))


def state_dir() -> Path:
    """Runtime state: Airflow home, SQLite files, results, reports, generated data."""
    if os.environ.get("SCALEBENCH_HOME"):
        return Path(os.environ["SCALEBENCH_HOME"])
    return (project_root() or Path.cwd()) / ".state"


def results_dir() -> Path:
    return state_dir() / "results"


def reports_dir() -> Path:
    return state_dir() / "reports"


def airflow_logs_dir() -> Path:
    """Airflow's task logs: its configured base log folder, else $AIRFLOW_HOME/logs, else the default home's."""
    if os.environ.get("AIRFLOW__LOGGING__BASE_LOG_FOLDER"):
        return Path(os.environ["AIRFLOW__LOGGING__BASE_LOG_FOLDER"])
    return Path(os.environ.get("AIRFLOW_HOME", state_dir() / "airflow")) / "logs"


def cache_dir() -> Path:
    """Derived data a trainer may cache across cells (mounted at /cache), e.g. converted TFRecords."""
    return state_dir() / "cache"


def synthetic_data_dir() -> Path:
    return state_dir() / "data" / "synthetic"


def store_url() -> str:
    return os.environ.get("SCALEBENCH_STORE_URL", f"sqlite:///{state_dir() / 'results.db'}")
