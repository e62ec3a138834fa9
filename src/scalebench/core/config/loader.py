"""Every config of include/configs loaded and cross-checked once: the fleet, the stacks, each
benchmark (one bad file harms only itself), the alerts and the acknowledged shifts."""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

from scalebench.core import paths
from scalebench.core.config.alerts import AlertConfig, load_alerts
from scalebench.core.config.benchmark import Benchmark, load_benchmark
from scalebench.core.config.common import SHIFTS_FILE, STACKS_FILE, ConfigError
from scalebench.core.config.fleet import load_fleet
from scalebench.core.config.shifts import AcknowledgedShift, load_acknowledged_shifts
from scalebench.core.config.stacks import Stacks, load_stacks


class Configs:
    """All benchmark configs plus the fleet, loaded and cross-checked once."""

    def __init__(self, config_dir: Path | str | None = None, fleet_path: Path | str | None = None):
        self.config_dir = Path(config_dir or paths.config_dir())
        self.fleet = load_fleet(fleet_path)

    @cached_property
    def stacks(self) -> Stacks:
        return load_stacks(self.config_dir / STACKS_FILE)

    @cached_property
    def _loaded(self) -> tuple[dict[str, Benchmark], dict[str, ConfigError]]:
        files = sorted((self.config_dir / "benchmarks").glob("*.yaml"))
        if not files:
            raise ConfigError(f"{self.config_dir / 'benchmarks'}: no benchmark configs (*.yaml) found")
        good: dict[str, Benchmark] = {}
        broken: dict[str, ConfigError] = {}
        stacks = self.stacks  # a bad stacks file, like a bad fleet, stops every benchmark: said once
        for f in sorted((self.config_dir / "benchmarks").glob("*.yml")):  # read as nothing would be worse
            broken[f.stem] = ConfigError(f"{f}: benchmark files end in .yaml; rename it to {f.stem}.yaml")
        for f in files:
            try:
                b = load_benchmark(f, self.fleet, stacks)
                _check_dag_ids(f, b.id)
                good[b.id] = b
            except ConfigError as exc:
                broken[f.stem] = exc
        return good, broken

    def alerts(self) -> AlertConfig:
        return load_alerts(self.config_dir)

    def acknowledged_shifts(self) -> list[AcknowledgedShift]:
        return load_acknowledged_shifts(self.config_dir / SHIFTS_FILE)

    def load_all(self) -> tuple[dict[str, Benchmark], dict[str, ConfigError]]:
        """(benchmarks that load, {file stem: error} for those that do not): one bad file harms only itself."""
        return self._loaded

    @property
    def benchmarks(self) -> dict[str, Benchmark]:
        """Every benchmark; a ConfigError naming each bad file when any does not load."""
        good, broken = self._loaded
        if broken:
            raise ConfigError("\n".join(str(e) for e in broken.values()))
        return good

    def probe(self) -> Benchmark | None:
        """The host probe's benchmark (None without a probe or a GPU host); a ConfigError naming
        the fleet's field when it names no loadable benchmark or more devices than a GPU host has."""
        probe, gpu = self.fleet.probe, self.fleet.hosts_of("gpu")
        if probe is None or not gpu:
            return None
        try:
            bench = self.benchmark(probe.benchmark)
        except ConfigError as exc:
            raise ConfigError(f"fleet: field 'probe.benchmark': {exc}") from None
        small = [h.name for h in gpu if len(h.device_ids) < probe.gpus]
        if small:
            raise ConfigError(f"fleet: field 'probe.gpus': {probe.gpus} devices, but GPU hosts {small} have fewer; "
                              "the probe runs on every GPU host")
        return bench

    def benchmark(self, bench_id: str) -> Benchmark:
        good, broken = self._loaded
        if bench_id in good:
            return good[bench_id]
        if bench_id in broken:
            raise broken[bench_id]
        raise ConfigError(f"unknown benchmark {bench_id!r}; known: {sorted([*good, *broken])}")


def _check_dag_ids(path: Path, bench_id: str) -> None:
    """Every DAG id the project makes is unique: a benchmark id (its file name, so unique among
    benchmarks) may not take another DAG's id (the report's, the maintenance, bisect, host probe or
    all-reduce DAG's, or a weekly accuracy DAG's). Ids are at most 100 characters (the store's
    column), so their DAG ids stay within Airflow's 250."""
    from scalebench.core import dag_ids

    ours = {dag_ids.REPORT_DAG_ID: "the nightly report", dag_ids.MAINTENANCE_DAG_ID: "the maintenance",
            dag_ids.BISECT_DAG_ID: "the bisect", dag_ids.PROBE_DAG_ID: "the host probe",
            dag_ids.ALLREDUCE_DAG_ID: "the all-reduce"}
    mine = (dag_ids.benchmark_dag_id(bench_id), dag_ids.accuracy_dag_id(bench_id))
    for dag in mine:
        if dag in ours:
            raise ConfigError(f"{path}: field 'id': {bench_id!r} makes the DAG id {dag!r}, which is {ours[dag]} "
                              "DAG's; choose another id")
    if bench_id.endswith(dag_ids.ACCURACY_SUFFIX):
        raise ConfigError(f"{path}: field 'id': {bench_id!r} ends with {dag_ids.ACCURACY_SUFFIX!r}, the suffix of the "
                          "weekly accuracy DAGs (it would take the accuracy DAG id of "
                          f"{bench_id.removesuffix(dag_ids.ACCURACY_SUFFIX)!r}); choose another id")

