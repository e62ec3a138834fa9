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
        for f in files:
            try:
                b = load_benchmark(f, self.fleet, stacks)
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
