"""include/configs/benchmarks/<id>.yaml: one benchmark, its profiles (sizes only), and the same
benchmark with one profile applied (Resolved), checked against the fleet and the stacks."""
from __future__ import annotations

import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, cast

from scalebench.core.columns import check_width
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from scalebench_kit.epochs import epoch_plan, timed_steps
from scalebench_kit.names import AccuracyMetricName

from scalebench.core.config.common import (DEFAULT_PRECISION, MIN_TIMED_STEPS, PROFILE_STEPS, PROFILES, STACKS_FILE,
                                           ConfigError, Profile, PosFloat, PosInt, PrecisionList, Strict,
                                           _check_bounds, _load_model, _plain_images, _precision_list)
from scalebench.core.config.fleet import Fleet
from scalebench.core.config.stacks import SplitSizes, Stack, Stacks
from scalebench.core.dag_ids import accuracy_dag_id, benchmark_dag_id
from scalebench.core.records import TIMING_BASES


class LrPolicy(Strict):
    rule: Literal["linear", "sqrt", "constant"]
    base_lr: PosFloat
    reference_batch: PosInt

    def lr_for(self, global_batch: int) -> float:
        ratio = global_batch / self.reference_batch
        return self.base_lr * {"linear": ratio, "sqrt": ratio ** 0.5, "constant": 1.0}[self.rule]


class Dataset(Strict):
    name: str
    format: str
    path: str  # below the host's data_root: relative, no '..' (a config must not reach other folders)

    @field_validator("path")
    @classmethod
    def _inside_data_root(cls, v: str) -> str:
        if not v or Path(v).is_absolute() or ".." in Path(v).parts:
            raise ValueError(f"must be a relative path below the host's data_root without '..', got {v!r}")
        return v


class Estimate(Strict):
    """Night-time estimate for one cell on a GPU host: set-up + steps x step time + eval."""
    setup_s: Annotated[float, Field(ge=0)]
    eval_s: Annotated[float, Field(ge=0)]
    step_s: dict[PosInt, PosFloat]


class ReferenceAccuracy(Strict):
    """What the benchmark reaches at a global batch (published or measured): a figure further than
    `tolerance` from the reference at the nearest global batch is reported as suspect."""
    metric: AccuracyMetricName
    by_global_batch: Annotated[dict[PosInt, Annotated[float, Field(ge=0, le=1)]], Field(min_length=1)]
    tolerance: Annotated[float, Field(gt=0, le=1)]

    def expected(self, global_batch: int) -> float:
        nearest = min(self.by_global_batch, key=lambda b: (abs(b - global_batch), b))
        return self.by_global_batch[nearest]


class Sizes(Strict):
    """What a profile may change: sizes only (data, resolution, steps, batch, bounds, time limit)."""
    per_gpu_batch: PosInt | None = None
    global_batch: PosInt | None = None
    epochs: Annotated[list[PosInt], Field(min_length=1)] | None = None
    train_images: PosInt | None = None
    test_images: PosInt | None = None
    image_size: PosInt | None = None
    warmup_steps: Annotated[int, Field(ge=0)] | None = None
    # caps an epoch at this many steps; a profile caps at every GPU count or at none (one timing basis per row)
    max_steps_per_epoch: PosInt | None = None
    min_timed_steps: Annotated[int, Field(ge=0)] | None = None  # default MIN_TIMED_STEPS of the profile
    profile_steps: PosInt | None = None  # a profiled cell's profiling window (default PROFILE_STEPS of the profile)
    synthetic_data: bool | None = None
    eval_each_epoch: bool | None = None  # evaluate after every epoch (outside the timed region): time to accuracy
    cell_timeout_minutes: PosFloat | None = None
    bounds: dict[str, tuple[float, float]] | None = None
    reference_accuracy: ReferenceAccuracy | None = None  # a profile's plausible accuracy (smoke data is random)
    # not a size, but per profile like one: the presets its runs train in (default DEFAULT_PRECISION)
    precision: PrecisionList | None = None

    _b = field_validator("bounds")(lambda cls, v: v if v is None else _check_bounds(v))
    _p = field_validator("precision", mode="before")(lambda cls, v: _precision_list(v))


class AccuracyTarget(Strict):
    """Time to accuracy: the training time until the first evaluation with `metric` >= `target`."""
    metric: AccuracyMetricName
    target: Annotated[float, Field(gt=0, le=1)]


class Benchmark(Strict):
    id: Annotated[str, Field(pattern=r"^[a-z0-9_]+$")]  # fits the store's benchmark columns (checked below)
    title: str
    task: Annotated[str, Field(pattern=r"^[a-z][a-z-]*$")]  # what the model does (classification, detection, ...)
    stack: str                    # a stack of include/configs/stacks.yaml: its images, launcher and formats
    model: dict[str, str | int]
    images: dict[Literal["cpu", "gpu"], str] = {}  # default: the stack's; set to run another image of it
    entrypoint: Annotated[list[str], Field(min_length=1)]
    dataset: Dataset
    per_gpu_batch: PosInt
    global_batch: PosInt | None = None
    epochs: Annotated[list[PosInt], Field(min_length=1)]
    gpu_counts: Annotated[list[PosInt], Field(min_length=1)]
    metrics: Annotated[list[AccuracyMetricName], Field(min_length=1)]  # each one is reported
    bounds: dict[str, tuple[float, float]]
    scaling_mode: Literal["weak", "strong"]
    lr_policy: LrPolicy
    warmup_steps: Annotated[int, Field(ge=0)]
    schedule: str | None
    cell_timeout_minutes: PosFloat
    retries: Annotated[int, Field(ge=0, le=10)] = 2  # for transient failures only (engine, NCCL, pre-flight)
    retry_delay_s: Annotated[float, Field(ge=0)] = 60
    estimate: Estimate
    time_to_accuracy: AccuracyTarget | None = None
    confirm_reruns: Annotated[int, Field(ge=0, le=10)] = 3  # same-night reruns of a figure that looks regressed
    # a figure that looks regressed tonight on a new image: pairs of the previous and the new image,
    # run on one host (at least 5: 4 + 4 cells cannot reach p <= 0.01), more while the A/B says "unknown"
    ab_pairs: Annotated[int, Field(ge=5, le=10)] = 5
    ab_max_pairs: Annotated[int, Field(ge=5, le=16)] = 8
    # a confirmed regression that came with an edit of this config alerts too (default: reported only)
    alert_on_config_change: bool = False
    schedule_repeats: Annotated[int, Field(ge=1, le=10)] = 3  # repeats of every cell in a scheduled run
    # the weekly accuracy run (profile `full`), cut to fit its window: these epochs (default: the
    # largest of the full profile's) and repeats
    accuracy_epochs: Annotated[list[PosInt], Field(min_length=1)] | None = None
    accuracy_repeats: Annotated[int, Field(ge=1, le=10)] = 3  # fewer cannot show accuracy equivalent
    # the GPU hosts this benchmark may be assigned to (one: pinned); None: any with enough devices
    hosts: Annotated[list[str], Field(min_length=1)] | None = None
    reference_accuracy: ReferenceAccuracy | None = None
    precision: PrecisionList | None = None  # every profile's presets (a profile may set its own)
    profiles: dict[Literal["smoke", "nightly", "full"], Sizes] = {}

    _b = field_validator("bounds")(lambda cls, v: _check_bounds(v))
    _s = field_validator("schedule")(lambda cls, v: _check_schedule(v))
    _p = field_validator("precision", mode="before")(lambda cls, v: _precision_list(v))
    _i = field_validator("images")(lambda cls, v: _plain_images(v))
    _id = field_validator("id")(lambda cls, v: check_width(v, "cells.benchmark", "benchmark id"))
    _stack: Stack | None = PrivateAttr(default=None)  # set by load_benchmark from the stacks file
    _splits: SplitSizes | None = PrivateAttr(default=None)  # the dataset's split sizes, from the stacks file

    @property
    def stack_config(self) -> Stack:
        if self._stack is None:
            raise ConfigError(f"{self.id}: loaded without the stacks file (use Configs or load_benchmark)")
        return self._stack

    @field_validator("entrypoint")
    @classmethod
    def _no_templates(cls, v: list[str]) -> list[str]:
        for part in v:  # only {gpus} is filled in; Jinja would let a trigger's conf reach the command
            if "{{" in part or "{%" in part or any(f and f != "gpus" for _, f, _, _ in string.Formatter().parse(part)):
                raise ValueError(f"entrypoint part {part!r}: the only placeholder allowed is {{gpus}}")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        for m in self.metrics:
            if m not in self.bounds:
                raise ValueError(f"metric {m!r} has no entry in bounds (expected bounds.{m}: [low, high])")
        if self.time_to_accuracy and self.time_to_accuracy.metric not in self.metrics:
            raise ValueError(f"time_to_accuracy.metric {self.time_to_accuracy.metric!r} is not one of this "
                             f"benchmark's metrics {self.metrics}")
        if self.scaling_mode == "strong" and self.global_batch is None:
            raise ValueError("scaling_mode 'strong' needs global_batch (the fixed global batch)")
        if len(set(self.gpu_counts)) != len(self.gpu_counts):
            raise ValueError(f"gpu_counts must not repeat, got {self.gpu_counts}")
        if self.ab_max_pairs < self.ab_pairs:
            raise ValueError(f"ab_max_pairs ({self.ab_max_pairs}) must be at least ab_pairs ({self.ab_pairs})")
        return self

    @property
    def dag_id(self) -> str:
        return benchmark_dag_id(self.id)

    @property
    def accuracy_dag_id(self) -> str:
        return accuracy_dag_id(self.id)

    def accuracy_cut(self) -> tuple[list[int], int]:
        """(epochs, repeats) of the weekly accuracy run."""
        return sorted(self.accuracy_epochs or [max(self.resolved("full").epochs)]), self.accuracy_repeats

    def resolved(self, profile: str) -> "Resolved":
        """This benchmark with one profile's sizes applied (profiles change sizes, nothing else)."""
        if profile not in PROFILES:
            raise ConfigError(f"{self.id}: unknown profile {profile!r}; expected one of {list(PROFILES)}")
        base = {name: getattr(self, name, None) for name in Sizes.model_fields}  # None: not set for the study
        base["synthetic_data"] = False
        base["eval_each_epoch"] = False
        base["min_timed_steps"] = MIN_TIMED_STEPS[profile]
        base["profile_steps"] = PROFILE_STEPS[profile]
        over = self.profiles.get(cast(Profile, profile))
        if over is not None:
            base.update(over.model_dump(exclude_none=True))
        base["precision"] = base["precision"] or DEFAULT_PRECISION[profile]
        res = Resolved.model_validate({"benchmark": self, "profile": profile, **base})
        res._splits = self._splits
        return res


# Fields that do not change what a cell measures: kept out of its config identity (config_sha).
CRON_PRESETS = ("@once", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly", "@annually")


def _check_schedule(value: str | None) -> str | None:
    """A cron expression (five fields, as Airflow reads it) or one of Airflow's presets."""
    if value is None or value in CRON_PRESETS:
        return value
    from croniter import croniter

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValueError(f"{value!r} is not a cron expression (five fields, e.g. '0 2 * * *') or one of "
                         f"{', '.join(CRON_PRESETS)}")
    return value


NOT_RESULT_FIELDS = {"title", "schedule", "estimate", "retries", "retry_delay_s", "profiles", "gpu_counts",
                     "cell_timeout_minutes", "bounds", "metrics", "time_to_accuracy", "confirm_reruns",
                     "ab_pairs", "ab_max_pairs", "alert_on_config_change",
                     # the image is judged as an image (its reference and digest are in the fingerprint): a
                     # new tag in a config is an image change, not an edit of the benchmark
                     "images",
                     "reference_accuracy", "schedule_repeats", "min_timed_steps", "accuracy_epochs",
                     "accuracy_repeats", "hosts"}


@dataclass(frozen=True)
class StepPlan:
    """How many steps one cell runs and times, counted as its trainer will count them."""
    gpus: int
    global_batch: int
    train_images: int
    steps_per_pass: int       # one pass over the whole train split (the last batch smaller)
    steps_per_epoch: int      # what the trainer runs per epoch (the pass, or the cap)
    capped: bool
    epochs: int
    warmup_steps: int
    timed_steps: int

    @property
    def full_steps(self) -> int:
        """Full batches in a pass: the largest max_steps_per_epoch that caps this cell."""
        return max(self.train_images // self.global_batch, 1)

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch


class Resolved(Sizes):
    """A benchmark with one profile's sizes applied: every size field of Sizes, now set."""
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    benchmark: Benchmark
    profile: str
    _splits: SplitSizes | None = PrivateAttr(default=None)
    # what resolving sets on every profile (Sizes leaves them open for a profile to override)
    per_gpu_batch: PosInt
    epochs: Annotated[list[PosInt], Field(min_length=1)]
    warmup_steps: Annotated[int, Field(ge=0)]
    min_timed_steps: Annotated[int, Field(ge=0)]
    profile_steps: PosInt
    synthetic_data: bool
    eval_each_epoch: bool
    cell_timeout_minutes: PosFloat
    bounds: dict[str, tuple[float, float]]
    precision: PrecisionList

    def train_images_used(self) -> int | None:
        """Images one pass trains on: the profile's limit, the split's size, the smaller of both."""
        split = self._splits.train if self._splits else None
        known = [n for n in (self.train_images, split) if n]
        return min(known) if known else None

    def steps(self, gpus: int, epochs: int | None = None) -> StepPlan | None:
        """The steps of a cell at `gpus` devices and `epochs` (default the profile's fewest); None
        when the split's size is unknown (no `splits` for the dataset in the stacks file)."""
        images = self.train_images_used()
        if images is None:
            return None
        glob = self.batches(gpus)[1]
        plan = epoch_plan(images, glob, self.max_steps_per_epoch, shards=gpus)
        e = epochs or min(self.epochs)
        return StepPlan(gpus=gpus, global_batch=glob, train_images=images, steps_per_pass=max(-(-images // glob), 1),
                        steps_per_epoch=plan["steps_per_epoch"], capped="capped_by_max_steps_per_epoch" in plan,
                        epochs=e, warmup_steps=self.warmup_steps, timed_steps=timed_steps(plan, e, self.warmup_steps))

    def step_plans(self, gpu_counts: list[int]) -> list[StepPlan] | None:
        """The step plan at each GPU count; None when the split's size is unknown."""
        plans = [self.steps(n) for n in gpu_counts]
        return [p for p in plans if p is not None] if all(p is not None for p in plans) else None

    def timing_basis(self, gpu_counts: list[int]) -> str | None:
        """'throughput' when every GPU count's epoch is capped, 'train time' when none is, None
        (unknown) without split sizes. A mix is refused when the config loads."""
        plans = self.step_plans(gpu_counts)
        if plans is None:
            return None
        return TIMING_BASES[1] if all(p.capped for p in plans) else TIMING_BASES[0]

    def batches(self, gpus: int) -> tuple[int, int]:
        """(per-device batch, global batch) at `gpus` devices under the scaling mode."""
        if self.benchmark.scaling_mode == "weak":
            return self.per_gpu_batch, self.per_gpu_batch * gpus
        glob = self.global_batch
        if glob is None:
            raise ConfigError(f"{self.benchmark.id} ({self.profile}): strong scaling needs global_batch")
        if glob % gpus:
            raise ConfigError(f"{self.benchmark.id} ({self.profile}): strong scaling with global_batch {glob} "
                              f"does not divide over {gpus} GPUs; choose a global batch divisible by every GPU count")
        return glob // gpus, glob

    def summary(self, precision: str | None = None) -> dict:
        """Everything in the config that changes a result (sizes, model, entrypoint,
        stack and its launcher, dataset, scaling, LR policy, warm-up, the cell's `precision`), the
        same for every GPU count of a run: the cell's `resolved_config`, whose hash is its config
        identity (without `precision`: the profile's list). The image is not part of it: which image
        ran is the fingerprint's (a new image is judged as one)."""
        out = self.benchmark.model_dump(exclude=NOT_RESULT_FIELDS | set(Sizes.model_fields))
        stack = self.benchmark._stack
        if stack is not None:
            out["launcher"], out["processes_per_device"] = stack.launcher, stack.processes_per_device
        out |= self.model_dump(exclude={"benchmark", "cell_timeout_minutes", "bounds", "epochs",  # a cell has its own
                                        "reference_accuracy", "min_timed_steps"})
        out["benchmark"] = self.benchmark.id
        if precision is not None:
            out["precision"] = precision
        return out

    def precision_kind(self, fleet: "Fleet") -> str | None:
        """The kind of host this profile's runs go to (smoke: a CPU host when the fleet has one)."""
        kinds = ["cpu", "gpu"] if self.profile == "smoke" else ["gpu"]
        return next((k for k in kinds if fleet.hosts_of(k)), None)


def load_benchmark(path: Path | str, fleet: Fleet, stacks: Stacks) -> Benchmark:
    path = Path(path)
    bench = _load_model(Benchmark, path)
    stack = stacks.stacks.get(bench.stack)
    if stack is None:
        raise ConfigError(f"{path}: field 'stack': unknown stack {bench.stack!r}; expected one of "
                          f"{sorted(stacks.stacks)} (include/configs/{STACKS_FILE})")
    if bench.dataset.format not in stack.formats:
        raise ConfigError(f"{path}: field 'dataset.format': stack {bench.stack!r} reads {stack.formats}, "
                          f"got {bench.dataset.format!r}")
    if not bench.images:
        bench = bench.model_copy(update={"images": dict(stack.images)})
    bench._stack = stack
    source = stacks.datasets.get(bench.dataset.name)
    bench._splits = source.splits.get(bench.dataset.format) if source else None
    if bench.id != path.stem:
        raise ConfigError(f"{path}: field 'id': {bench.id!r} must equal the file name {path.stem!r}")
    too_big = [n for n in bench.gpu_counts if n > fleet.max_devices]
    if too_big:
        raise ConfigError(f"{path}: field 'gpu_counts': {too_big} above the largest host in the fleet "
                          f"({fleet.max_devices} devices); expected counts <= {fleet.max_devices}")
    if bench.hosts is not None:
        known = {h.name: h for h in fleet.hosts}
        unknown = [h for h in bench.hosts if h not in known]
        if unknown:
            raise ConfigError(f"{path}: field 'hosts': {unknown} are not hosts of the fleet; expected some of "
                              f"{sorted(known)}")
        kind = "gpu" if fleet.hosts_of("gpu") else "cpu"  # a GPU fleet assigns its GPU hosts
        if not any(known[h].kind == kind and len(known[h].device_ids) >= max(bench.gpu_counts) for h in bench.hosts):
            raise ConfigError(f"{path}: field 'hosts': none of {bench.hosts} is a {kind.upper()} host with "
                              f"{max(bench.gpu_counts)} devices for gpu_counts {bench.gpu_counts} "
                              f"({ {h: (known[h].kind, len(known[h].device_ids)) for h in bench.hosts} })")
    for profile in PROFILES:
        res = bench.resolved(profile)
        for n in bench.gpu_counts:
            try:
                res.batches(n)
            except ConfigError as exc:
                raise ConfigError(f"{path}: field 'global_batch': {exc}") from None
        _check_steps(path, res)
        kind = res.precision_kind(fleet)
        refusal = kind and stack.precision.check(bench.stack, kind, res.precision)
        if refusal:
            where = f"profiles.{profile}.precision" if (bench.profiles.get(profile) or Sizes()).precision else "precision"
            raise ConfigError(f"{path}: field '{where}' (profile {profile!r}): {refusal}")
    return bench


def _check_steps(path: Path, res: "Resolved") -> None:
    """A profile must time enough steps at every GPU count, and cap its epochs at every GPU count or
    at none: a row's ratios then use one timing basis."""
    bench, profile, counts = res.benchmark, res.profile, sorted(res.benchmark.gpu_counts)
    plans = res.step_plans(counts)
    where = f"{path}: profile {profile!r}"
    if plans is None:
        if res.min_timed_steps > MIN_TIMED_STEPS["smoke"]:
            raise ConfigError(f"{where}: the train split's size of dataset {bench.dataset.name!r} "
                              f"({bench.dataset.format}) is unknown, so its timed steps cannot be checked; add "
                              f"datasets.{bench.dataset.name}.splits.{bench.dataset.format}: {{train: N, test: M}} to "
                              f"{STACKS_FILE}, or set train_images in the profile")
        return
    capped = [p.gpus for p in plans if p.capped]
    if capped and len(capped) < len(plans):
        full = [p.gpus for p in plans if not p.capped]
        raise ConfigError(f"{where}: field 'max_steps_per_epoch': {res.max_steps_per_epoch} caps the epoch at "
                          f"{_gpus_text(capped)} but not at {_gpus_text(full)} (steps per pass "
                          f"{', '.join(f'{p.steps_per_pass} at {p.gpus}' for p in plans)}), so one row would mix "
                          f"timing bases; expected a cap at or below {min(p.full_steps for p in plans)} "
                          "(every GPU count: steady throughput) or none (full passes: training time)")
    short = [p for p in plans if p.timed_steps < res.min_timed_steps]
    if short:
        per = min(p.full_steps for p in plans)
        if res.max_steps_per_epoch:
            per = min(per, res.max_steps_per_epoch)
        epochs = math.ceil((res.min_timed_steps + res.warmup_steps) / per)
        raise ConfigError(
            f"{where}: benchmark {bench.id!r} times fewer than min_timed_steps {res.min_timed_steps} steps: "
            + "; ".join(f"{p.timed_steps} at {_gpus_text([p.gpus])} ({p.epochs} epoch(s) of {p.steps_per_epoch} "
                        f"steps at global batch {p.global_batch}, {p.warmup_steps} warm-up)" for p in short)
            + f". Fix: in profiles.{profile} set max_steps_per_epoch: {per} and epochs: [{epochs}] (the same steps "
              f"at every GPU count, timed as steady throughput), or lower warmup_steps or min_timed_steps")


def _gpus_text(counts: list[int]) -> str:
    return f"{', '.join(map(str, counts))} GPU{'s' if counts != [1] else ''}"
