"""A benchmark DAG run's parameters, typed once: the trigger form's Params (dag_factory) validated
by Airflow, read here into one object the tasks hand on instead of `context["params"]`."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True)
class RunParams:
    gpu_counts: list[int]
    epochs: list[int] | None          # None: the profile's own list
    repeats: int                      # of a manual run (scheduled runs make schedule_repeats)
    profile: str
    precisions: list[str] | None      # None: the profile's
    seed: int
    image_tag: str | None             # a candidate tag of the configured image's repository
    ab_images: list[str] | None       # tags run side by side (a bisect step)
    profile_ops: bool                 # each cell profiled after its timed steps (scalebench_kit.profiling)

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> RunParams:
        """From the run's params (already checked against the DAG's Param schema); an empty list or
        string counts as not given."""
        return cls(gpu_counts=list(params["gpu_counts"]), epochs=list(params.get("epochs") or []) or None,
                   repeats=int(params["repeats"]), profile=str(params["profile"]),
                   precisions=list(params.get("precisions") or []) or None, seed=int(params["seed"]),
                   image_tag=params.get("image_tag") or None, ab_images=list(params.get("ab_images") or []) or None,
                   profile_ops=bool(params.get("profile_ops")))


PARAM_NAMES = tuple(f.name for f in fields(RunParams))  # the trigger form's fields (a test keeps them equal)
