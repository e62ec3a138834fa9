"""include/configs/fleet.yaml: the hosts, their devices and queues, the host probe, the nightly
budget and the weekly accuracy window."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from scalebench.core import paths
from scalebench.core.columns import check_width
from scalebench.core.config.common import ConfigError, PosFloat, PosInt, Strict, _load_model, _plain_images


class Host(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]  # fits the store's host columns (below)
    kind: Literal["cpu", "gpu"]
    queue: str
    device_ids: Annotated[list[str], Field(min_length=1)]
    threads_per_device: PosInt = 1
    cpus: list[Annotated[int, Field(ge=0)]] | None = None  # cores to pin cells to, split evenly over the devices
    data_root: str | None = None
    topology: dict[str, dict[str, str]] | None = None
    # None: by profile (smoke packed, timed profiles exclusive); set it to dedicate or share a host
    timing_policy: Literal["packed", "exclusive"] | None = None
    # the link to the other hosts (Gbit/s): a two-host prediction assumes it (not measured)
    link_gbps: Annotated[float, Field(gt=0, le=100_000)] | None = None

    def cores_for(self, device_ids: list[str]) -> list[int] | None:
        """The cores that go with these devices (each device owns an equal slice), or None."""
        if not self.cpus:
            return None
        per = len(self.cpus) // len(self.device_ids)
        if per == 0:
            return None  # fewer cores than devices: nothing sensible to pin
        return [c for d in device_ids for c in self.cpus[self.device_ids.index(d) * per:(self.device_ids.index(d) + 1) * per]]

    @property
    def pool(self) -> str:
        return f"scalebench_{self.name}"

    @field_validator("device_ids")
    @classmethod
    def _unique(cls, ids: list[str]) -> list[str]:
        if len(set(ids)) != len(ids):
            raise ValueError(f"device ids must be unique, got {ids}")
        for i in ids:  # a GPU UUID fits; what the lease table cannot hold is refused here, not at night
            check_width(i, "device_leases.device_id", "device id")
        return ids

    @field_validator("name")
    @classmethod
    def _name_fits(cls, name: str) -> str:
        return check_width(name, "cells.host", "host name")

    @field_validator("queue")
    @classmethod
    def _queue(cls, queue: str) -> str:
        if not queue.strip():
            raise ValueError("a host's Celery queue must not be empty")
        return queue

    @model_validator(mode="after")
    def _topology_of_its_devices(self):
        """A topology names only this host's devices, each pair both ways alike."""
        if not self.topology:
            return self
        named = set(self.topology) | {d for links in self.topology.values() for d in links}
        stray = sorted(named - set(self.device_ids))
        if stray:
            raise ValueError(f"host {self.name!r}: topology names devices {stray} that are not in its device_ids "
                             f"{self.device_ids}")
        for a, links in self.topology.items():
            for b, link in links.items():
                back = self.topology.get(b, {}).get(a)
                if back is not None and back != link:
                    raise ValueError(f"host {self.name!r}: topology says {a}-{b} is {link!r} but {b}-{a} is {back!r}")
        return self


def core_list(cores: list[int]) -> str:
    """Cores as taskset and Docker's cpuset write them: 0-3,6."""
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def orchestrator_cores(hosts: list[Host], online: list[int]) -> tuple[list[int] | None, str]:
    """The cores Airflow's own processes (scheduler, parsing, tasks) run on, on a machine where
    these hosts' cells run: the cores no cell is pinned to. None, and why, where the cells are not
    pinned (their containers may use any core) or are pinned to every core."""
    pinned = sorted({c for h in hosts for c in h.cores_for(h.device_ids) or []} & set(online))
    free = [c for c in online if c not in pinned]
    unpinned = [h.name for h in hosts if not h.cores_for(h.device_ids)]
    if not pinned:
        return None, (f"Airflow shares all {len(online)} cores with the cells: fleet.yaml pins no cell to any of them "
                      "(a host's `cpus`)")
    if not free:
        return None, f"Airflow shares the cells' cores: they are pinned to all {len(online)} cores, none to spare"
    also = f" (the cells of {', '.join(unpinned)} are not pinned)" if unpinned else ""
    return free, f"Airflow on cores {core_list(free)}, the cells on {core_list(pinned)}{also}"


class HostProbe(Strict):
    """A short fixed cell run on every GPU host each night before the benchmarks (`scalebench_host_probe`):
    it has no changes of its own, so its throughput against its own recent nights is the host's
    night factor, however few benchmarks share the host. Pin `image` by digest: a new probe
    image restarts its baseline and leaves the host without a factor for a few nights."""
    benchmark: str                 # whose trainer, nightly sizes and dataset it runs
    gpus: PosInt = 1
    cells: Annotated[int, Field(ge=1, le=48)] = 24  # cells a night per host (their median is the night's figure)
    schedule: str = "0 0 * * *"    # before the benchmarks (01:00 and 02:00 UTC in the examples)
    image: str | None = None       # default: the benchmark's GPU image

    _i = field_validator("image")(lambda cls, v: v if v is None else _plain_images({"probe": v})["probe"])

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str) -> str:
        from croniter import croniter

        if not croniter.is_valid(v):
            raise ValueError(f"schedule {v!r} is not a cron expression (e.g. '0 0 * * *', daily 00:00 UTC)")
        return v


class Fleet(Strict):
    night_budget_minutes: PosFloat = 480
    # `scalebench prune` and the maintenance DAG: bulky files older than this go
    retention_days: Annotated[float, Field(ge=1)] = 30
    # the weekly accuracy run (the `full` profile) of every benchmark on its GPU host: its cron (UTC;
    # None: never scheduled) and the window it reserves there, during which nightly runs are skipped
    accuracy_schedule: str | None = "0 18 * * 6"
    accuracy_window_hours: PosFloat = 48
    probe: HostProbe | None = None  # the host probe (None: night factors from the host's other benchmarks only)
    # a new GPU driver is an environment change (the baseline restarts); true: it is under test like
    # a new image (judged against the old baseline, alerted when confirmed)
    driver_under_test: bool = False
    hosts: Annotated[list[Host], Field(min_length=1)]

    @field_validator("accuracy_schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        from croniter import croniter

        if v is not None and not croniter.is_valid(v):
            raise ValueError(f"accuracy_schedule {v!r} is not a cron expression (e.g. '0 18 * * 6', Saturdays 18:00 UTC)")
        return v

    @model_validator(mode="after")
    def _unique_names(self):
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError(f"host names must be unique, got {names}")
        # a GPU host's worker takes its cells from its own queue: two on one queue would run each
        # other's cells on the wrong devices
        queues: dict[str, str] = {}
        for h in self.hosts_of("gpu"):
            if h.queue in queues:
                raise ValueError(f"GPU hosts {queues[h.queue]!r} and {h.name!r} share the queue {h.queue!r}; "
                                 "give each GPU host its own queue")
            queues[h.queue] = h.name
        return self

    @property
    def max_devices(self) -> int:
        return max(len(h.device_ids) for h in self.hosts)

    def host_probe(self) -> HostProbe:
        """The host probe's settings; a ConfigError naming the field when the fleet has none."""
        if self.probe is None:
            raise ConfigError("fleet: field 'probe': not set, and a host probe DAG was asked for")
        return self.probe

    def hosts_of(self, kind: str) -> list[Host]:
        return [h for h in self.hosts if h.kind == kind]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in the fleet (hosts: {[h.name for h in self.hosts]})")


def load_fleet(path: Path | str | None = None) -> Fleet:
    return _load_model(Fleet, Path(path or paths.fleet_file()))
