"""include/configs/alerts.yaml: which of Airflow's notifiers delivers confirmed regressions."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from scalebench.core.columns import check_width
from scalebench.core.config.common import ALERTS_FILE, Strict, _load_model


class AlertRoute(Strict):
    """Where a group's messages also go: for groups with any of these benchmarks, or of these stacks."""
    name: str | None = None                    # how logs, the report and the store name it (default: its connection)
    benchmarks: list[str] = []
    stacks: list[str] = []
    connection: str                            # the Airflow connection this route's notifier uses
    endpoint: str | None = None                # webhook: its path (default: the main one's)
    to: list[str] = []                         # email: its recipients

    @model_validator(mode="after")
    def _selects(self) -> "AlertRoute":
        if not self.benchmarks and not self.stacks:
            raise ValueError("a route names the benchmarks or stacks it is for")
        return self

    def wants(self, benchmarks: list[str], stack_of: dict[str, str]) -> bool:
        return any(b in self.benchmarks or stack_of.get(b) in self.stacks for b in benchmarks)

    @model_validator(mode="after")
    def _name_fits(self) -> "AlertRoute":
        check_width(self.label, "alert_deliveries.channel", "route name")
        return self

    @property
    def label(self) -> str:
        return self.name or self.connection + (f"/{self.endpoint.strip('/')}" if self.endpoint else "")


class AlertConfig(Strict):
    """include/configs/alerts.yaml: which of Airflow's notifiers delivers confirmed regressions."""
    notifier: Literal["webhook", "slack", "email", "none"]
    connection: str = "scalebench_alerts"     # the Airflow connection the notifier uses
    endpoint: str = ""                         # webhook: path below the connection's base URL
    to: list[str] = []                         # email: recipients
    # where the report pages are served; unset: Airflow's [api] base_url + /scalebench (the
    # address the UI is reached at, which `make airflow` and the stack set)
    report_url: str | None = None
    remind_after_days: Annotated[int, Field(ge=1, le=365)] = 3  # an alert group still "new": told again
    auto_bisect: bool = True  # a new group whose suspect is an image starts scalebench_bisect over the tags between
    routes: list[AlertRoute] = []  # a group's messages also go to each route that wants its benchmarks

    def channels(self, benchmarks: list[str], stack_of: dict[str, str]) -> list[tuple[str, "AlertConfig"]]:
        """The channels one group's message goes to, each sent alone: ("main", this one), then
        (its name, each route that wants it: its connection, endpoint and recipients, with this notifier)."""
        return [("main", self)] + [(r.label, self.model_copy(update={
            "connection": r.connection, "to": r.to or self.to, "routes": [],
            "endpoint": self.endpoint if r.endpoint is None else r.endpoint}))
            for r in self.routes if r.wants(benchmarks, stack_of)]

    @field_validator("report_url")
    @classmethod
    def _web_address(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith(("http://", "https://")) or len(v) < 11):
            raise ValueError(f"expected an http:// or https:// address of the report pages, got {v!r}")
        return v

    @model_validator(mode="after")
    def _recipients(self) -> "AlertConfig":
        if self.notifier == "email" and not self.to:
            raise ValueError("field 'to': the email notifier needs at least one recipient")
        names = [r.label for r in self.routes]
        clash = sorted({n for n in names if names.count(n) > 1 or n == "main"})
        if clash:
            raise ValueError(f"field 'routes': each route needs its own name (give `name:`), {clash[0]!r} is "
                             "used twice or is the main channel's")
        return self


def load_alerts(config_dir: Path | str) -> AlertConfig:
    """The alert settings; alerts are off when the file is absent."""
    path = Path(config_dir) / ALERTS_FILE
    return _load_model(AlertConfig, path) if path.exists() else AlertConfig(notifier="none")
