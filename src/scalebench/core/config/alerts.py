"""include/configs/alerts.yaml: which of Airflow's notifiers delivers confirmed regressions."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from scalebench.core.config.common import ALERTS_FILE, Strict, _load_model


class AlertConfig(Strict):
    """include/configs/alerts.yaml: which of Airflow's notifiers delivers confirmed regressions."""
    notifier: Literal["webhook", "slack", "email", "none"]
    connection: str = "scalebench_alerts"     # the Airflow connection the notifier uses
    endpoint: str = ""                         # webhook: path below the connection's base URL
    to: list[str] = []                         # email: recipients
    report_url: str = "http://localhost:8080/scalebench"  # where the report pages are served


def load_alerts(config_dir: Path | str) -> AlertConfig:
    """The alert settings; alerts are off when the file is absent."""
    path = Path(config_dir) / ALERTS_FILE
    return _load_model(AlertConfig, path) if path.exists() else AlertConfig(notifier="none")
