"""The records that travel between tasks, the store, the analysis and the report, as documented
TypedDicts: plain dicts on the wire (XCom deserialises only plain types, and the UI's
`map_index_template` reads a planned cell's `label`), with their fields written down once here.

A report row's identity is a `RowKey`: later fields (precision, timing basis) are fields of it,
never new dictionary keys spread over the code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

Status = Literal["valid", "invalid", "failed", "missing"]


class StoredCellFields(TypedDict):
    """What a stored cell keeps of its plan (the store's cells table)."""
    key: str
    dag_id: str
    run_id: str
    run_type: str
    benchmark: str
    host: str
    gpus: int
    epochs: int
    repeat: int
    profile: str
    precision: str           # fp32 | tf32 | bf16 | fp16 (scalebench_kit.names.PRECISIONS); older cells "framework default"
    seed: int
    scaling_mode: str
    per_device_batch: int
    global_batch: int
    label: str


class PlannedCell(StoredCellFields):
    """One cell of a run as `core.cells.plan` makes it: what the train task is mapped over. Its
    `key` hashes the identity (dag_id, run_id, benchmark, host, gpus, epochs, repeat, profile,
    precision); its `label` ("2 GPUs · bf16 · 3 epochs · repeat 1") names the mapped task in the UI."""
    cell_id: str             # g<gpus>-e<epochs>-r<repeat>: the attempt folder's name
    night: str | None        # ISO date (UTC) of the run
    lr: float
    image: NotRequired[str]          # a candidate image (trigger param image_tag) instead of the configured one
    role: NotRequired[str]           # measure (default) | rerun | ab_previous (an A/B on the previous image) | probe
    rerun_of: NotRequired[str]       # a rerun: the key of the cell it confirms or clears
    avoid_devices: NotRequired[list[str] | None]  # a rerun: the flagged cell's devices, taken only if no other set is free
    profile_steps: NotRequired[int]  # a profiled cell: its profiling window's steps, after the timed ones


class Figure(TypedDict):
    """A cell's figure: the numbers of its latest valid attempt, as `Store.figures` returns them."""
    attempt: int
    train_s: float
    images_per_s: float
    metrics: dict[str, float] | None
    image_digest: str | None
    config_sha: str | None           # the resolved config's identity (see core.config.Resolved.summary)
    timing: dict[str, Any] | None    # the contract's timing, with its breakdown, epoch plan and evaluations
    fingerprint: dict[str, Any] | None  # the system the attempt ran on (core.provenance.system_of)
    teardown: str | None             # a crash after the run (every rank's success): the attempt stays valid


class FigureRow(StoredCellFields):
    """One stored cell as one flat row (`Store.figures`): what history, reruns and the report read."""
    night: str
    role: str
    rerun_of: str | None
    status: Status
    reason: str | None               # why the last attempt failed, when there is no figure
    figure: Figure | None
    others: list[str]                # its attempts but the one shown, e.g. "attempt 1 failed (lease_lost)"


def figure_of(row: FigureRow) -> Figure:
    """The row's figure, where the caller kept only rows that have one; a row without one is a
    defect of that caller, said with the row's key."""
    figure = row["figure"]
    if figure is None:
        raise ValueError(f"cell {row['key']} has no valid figure")
    return figure


class AttemptRecord(TypedDict):
    """One attempt of a stored cell (`Store.cells`), valid or not."""
    attempt: int
    status: Status
    reason: str | None
    exit_code: int | None
    message: str | None
    train_s: float | None
    images_per_s: float | None
    metrics: dict[str, float] | None
    image_digest: str | None
    placement: dict[str, Any] | None
    fingerprint: dict[str, Any] | None
    task_id: str | None        # the Airflow task instance that ran it (None: recorded before 0008)
    map_index: int | None
    try_number: int | None
    recorded_at: str


class StoredCell(StoredCellFields):
    """A stored cell with every attempt (`Store.cells`): what `scalebench results` and compare read."""
    created_at: str
    night: str | None                # ISO date (UTC) of its run
    role: str
    rerun_of: str | None
    attempts: list[AttemptRecord]
    figure: AttemptRecord | None     # the newest valid attempt
    status: Status


class Mark(TypedDict):
    """A night's judgement shown on its summary: alert, fixed, flagged, cleared, restart, change or move."""
    kind: str
    text: str


class NightSummary(TypedDict):
    """One benchmark's night at one GPU count and precision, as the history shows it
    (`report.summary` writes it, `Store.summaries` reads it; a page may read only some fields)."""
    benchmark: str
    night: str
    gpus: int
    precision: str
    dag_id: str
    run_id: str
    run_type: str
    profile: str
    host: str
    cells: int
    valid: int
    retried: int                     # cells with more than one attempt
    reruns: int                      # same-night reruns of a flagged figure
    basis: str | None                # the timing basis (None: the row mixes bases)
    figures: dict[str, float | None]  # every figure of core.figures.HISTORY_FIGURES, by name
    relative_time_ci: list[float] | None
    metrics: dict[str, float] | None
    step_shares: dict[str, float] | None
    image_digest: str | None
    fingerprint: dict[str, Any] | None
    marks: NotRequired[list[Mark] | None]   # set by the night's report
    updated_at: NotRequired[str]


CELL_FIELDS = tuple(StoredCellFields.__annotations__)  # the columns of the store's cells table

DEFAULT_PRECISION = "framework default"   # what cells recorded before precision presets ran
# How a row's relative time is taken: "train time", T(n)/T(1) over the same full passes; or
# "throughput", X(1)/X(n) from steady samples per second where epochs are capped (fixed steps)
TIMING_BASES = ("train time", "throughput")


@dataclass(frozen=True, order=True)
class RowKey:
    """Which figures make one row of the report: like is compared only with like."""
    benchmark: str
    profile: str
    host: str
    precision: str = DEFAULT_PRECISION
    timing_basis: str = TIMING_BASES[0]
