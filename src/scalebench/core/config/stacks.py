"""include/configs/stacks.yaml: the training stacks (images, launcher, formats, precision switch)
and the datasets' archives and split sizes."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from scalebench_kit.names import DatasetFormat

from scalebench.core.config.common import PosInt, PrecisionList, Strict, _load_model, _plain_images


class StackPrecision(Strict):
    """How a stack switches precision (its framework's own switch, named for users) and which
    presets each kind of host runs; `cpu_refusal` says why a CPU host refuses the others."""
    switch: str
    cpu: PrecisionList
    gpu: PrecisionList
    cpu_refusal: str

    def check(self, stack: str, kind: str, wanted: list[str]) -> str | None:
        """Why `wanted` cannot run on `kind` hosts with this stack, or None."""
        bad = [p for p in wanted if p not in getattr(self, kind)]
        if not bad:
            return None
        why = self.cpu_refusal if kind == "cpu" else f"stack {stack!r} does not run it"
        return (f"precision {', '.join(bad)} cannot run on {kind.upper()} hosts with stack {stack!r} ({why}); "
                f"expected some of {getattr(self, kind)}")


class Stack(Strict):
    """A training stack (include/configs/stacks.yaml): its folder containers/<name>/ holds the
    Dockerfile and trainers; benchmarks name it with `stack: <name>`."""
    title: str
    images: dict[Literal["cpu", "gpu"], str]
    base: str | None = None            # the stack whose image this one is built FROM (None: BASE_IMAGE)
    launcher: str                      # how a cell's processes start (tf-distribute, torchrun, mmengine, ...)
    processes_per_device: bool         # torchrun-style one process per device, else one process for all
    formats: Annotated[list[DatasetFormat], Field(min_length=1)]  # what its trainers read
    precision: StackPrecision

    _i = field_validator("images")(lambda cls, v: _plain_images(v))


class Archive(Strict):
    url: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    size: PosInt

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[1]


class SplitSizes(Strict):
    """Images in the split a stack's trainers train on and the one they evaluate on (config data,
    so a plan needs no dataset on the control host)."""
    train: PosInt
    test: PosInt


class DatasetSource(Strict):
    archives: list[Archive] = []        # what `scalebench data --fetch` downloads (none: bring your own)
    splits: dict[DatasetFormat, SplitSizes] = {}  # per format: its train and test split sizes


class Stacks(Strict):
    stacks: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")], Stack]
    datasets: dict[str, DatasetSource] = {}

    @field_validator("stacks")
    @classmethod
    def _bases_are_stacks(cls, stacks: dict[str, Stack]) -> dict[str, Stack]:
        for name, s in stacks.items():
            seen = [name]
            while s.base is not None:
                if s.base not in stacks:
                    raise ValueError(f"stacks.{seen[-1]}.base: {s.base!r} is not a stack; known: {sorted(stacks)}")
                if s.base in seen:
                    raise ValueError(f"stacks.{name}.base: a cycle {' -> '.join([*seen, s.base])}")
                seen.append(s.base)
                s = stacks[s.base]
        return stacks

    def build_order(self) -> list[str]:
        """Every stack after the stack it is built FROM."""
        order: list[str] = []
        def visit(name: str) -> None:
            if name not in order:
                base = self.stacks[name].base
                if base:
                    visit(base)
                order.append(name)
        for name in self.stacks:
            visit(name)
        return order


def load_stacks(path: Path | str) -> Stacks:
    return _load_model(Stacks, Path(path))
