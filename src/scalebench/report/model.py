"""What the nightly report is made of: its options, one row per run compared like with like, and
the report itself. Computed by `figures`, `prose` and `checks`, assembled by `build`, written by
`render`: nothing here computes a figure.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field, fields

from scalebench.analysis.regress import Gates, Judgement, Shift
from scalebench.analysis.stats import ConvergenceVerdict, Verdict
from scalebench.core.config import Benchmark, ReferenceAccuracy
from scalebench.core.figures import FigureField
from scalebench.core.records import RowKey
from scalebench.report.plots import DRAW

STUDY_AVERAGE = {2: 0.662, 3: 0.557, 4: 0.512}
LOOKBACK_NIGHTS = 120  # history judged for a night's regressions (baselines use the last 20 of them)
PLOTS = tuple(DRAW)  # every plot, in the report's order: declared once, in report.plots
TIME_PARTS = ("setup_s", "warmup_s", "train_s", "eval_s")
STEP_PARTS = ("data_wait", "compute", "sync", "other")  # a steady step, as the kit's timing module splits it
FLAT = 0.03  # a step share that moves less than 3 points between GPU counts is called flat


@dataclass
class Options:
    """How a night is judged, against the loaded benchmark configs. A stored benchmark without a
    loaded config (renamed, removed) is still reported, with what its figures say alone."""
    benchmarks: dict[str, Benchmark] = field(default_factory=dict)
    config_errors: dict[str, str] = field(default_factory=dict)  # file stem -> why its config does not load
    expected: list[str] | None = None   # benchmarks that must record every night (default: the scheduled ones)
    shifts: list[Shift] = field(default_factory=list)
    # alert groups a person called invalid: (benchmark, gpus, precision, metric) -> night ranges never flagged
    invalid: dict[tuple[str, int, str, str], list[tuple[dt.date, dt.date]]] = field(default_factory=dict)
    margin: float = 0.01                # accuracy equivalence margin: ±1 point
    gates: Gates = field(default_factory=Gates)
    n_boot: int = 1000
    links: dict[str, float] = field(default_factory=dict)  # host -> link_gbps (fleet): two-host predictions

    def scheduled(self) -> list[str]:
        if self.expected is not None:
            return sorted(self.expected)
        return sorted(b for b, c in self.benchmarks.items() if c.schedule)

    def lineage(self) -> dict[str, str]:
        """benchmark -> image repository (no tag, no digest): a series follows its image line, and a
        new tag or build of it is a change judged against that line's baseline, not a new series."""
        from scalebench.core.config import image_repository

        return {b: image_repository(c.images["gpu"]) if c.images.get("gpu") else "" for b, c in self.benchmarks.items()}

    def config_alerts(self, bench: str) -> bool:
        """Whether a regression that came with a config change alerts (the benchmark asks for it)."""
        c = self.benchmarks.get(bench)
        return bool(c and c.alert_on_config_change)

    def lr_policy(self, bench: str) -> str:
        c = self.benchmarks.get(bench)
        return f"{c.lr_policy.rule} {c.lr_policy.base_lr:g}@{c.lr_policy.reference_batch}" if c else ""

    def metric_names(self, bench: str) -> list[str] | None:
        """The accuracy metrics the config lists (None: whatever the figures carry)."""
        c = self.benchmarks.get(bench)
        return list(c.metrics) if c else None

    def target(self, bench: str) -> tuple[str, float] | None:
        c = self.benchmarks.get(bench)
        return (c.time_to_accuracy.metric, c.time_to_accuracy.target) if c and c.time_to_accuracy else None

    def reference(self, bench: str, profile: str) -> ReferenceAccuracy | None:
        c = self.benchmarks.get(bench)
        return c.resolved(profile).reference_accuracy if c else None


@dataclass
class Row:
    """One row of the study's table: one benchmark's run of the night at one precision (its identity
    in `key`), every figure the report states about it."""
    key: RowKey
    benchmark: str
    run_id: str
    run_type: str
    profile: str
    scaling_mode: str
    lr_policy: str
    parameters: int | None
    global_batch: dict[int, int]
    train_epochs: dict[int, int]        # the epoch count train_s and iqr_s are taken at (the longest run)
    train_s: dict[int, float]           # median over repeats at train_epochs[n] (seconds of the timed steps)
    iqr_s: dict[int, float]             # IQR over the same repeats
    relative_time: dict[int, float]     # on the row's timing basis (key.timing_basis): T(n)/T(1) or X(1)/X(n)
    relative_time_ci: dict[int, tuple[float, float]]
    speedup: dict[int, float]
    efficiency: dict[int, float]
    metrics: dict[str, dict[int, float]]
    metric_iqr: dict[str, dict[int, float]]
    verdicts: dict[str, dict[int, Verdict]]
    breakdown: dict[int, dict[str, float | None]]
    step_s: dict[int, dict[str, float | None]]       # median seconds per steady step of each STEP_PART (slowest rank)
    step_shares: dict[int, dict[str, float | None]]  # median share of the step; None: the framework does not expose it
    cells: int
    valid: int
    not_valid: list[dict]
    refused: list[str]
    retried: list[dict] = field(default_factory=list)  # cells with other attempts: {label, figure attempt, others}
    teardown: list[dict] = field(default_factory=list)  # valid cells whose run crashed after it ended: {label, message}
    steps_per_epoch: dict[int, int] = field(default_factory=dict)  # what an epoch was, per GPU count (contracts that say)
    samples_per_epoch: dict[int, int] = field(default_factory=dict)  # samples an epoch covered, per GPU count
    epoch_mismatch: list[int] = field(default_factory=list)  # GPU counts whose epoch covers another part of the split
    tta_target: str | None = None       # e.g. "IoU >= 0.5"; None when the config sets no target
    time_to_accuracy: dict[int, float | None] = field(default_factory=dict)  # median train s to the target; None: not reached
    convergence: dict[int, ConvergenceVerdict] = field(default_factory=dict)  # epochs to the target at n vs 1 GPU
    suspect: dict[int, list[str]] = field(default_factory=dict)  # GPU count -> why its figures are not plausible
    images_per_s: dict[int, float] = field(default_factory=dict)  # median steady throughput per GPU count
    basis_refusal: str | None = None    # why the row has no ratios (its cells mix timing bases)

    @property
    def name(self) -> str:
        """How prose names the row: its benchmark and precision ("unet_torch_voc2007 (bf16)")."""
        return f"{self.benchmark} ({self.key.precision})"

    def figure(self, f: FigureField, n: int) -> float | None:
        """A history figure (core.figures) at n GPUs, read where its source says: row.attr[n] or row.attr[n][key]."""
        attr, _, key = f.source.partition(".")
        per_n = getattr(self, attr).get(n)
        return per_n.get(key) if key and per_n is not None else per_n

    def spread(self, f: FigureField, n: int) -> float | tuple[float, float] | None:
        """The figure's interval at n GPUs where it declares one: an IQR, or a (low, high) CI."""
        return getattr(self, f.spread[0]).get(n) if f.spread else None


@dataclass
class Report:
    night: str
    generated: str
    complete: bool
    expected: list[str]
    missing: list[str]
    source: str                         # "scheduled" or "manual": which runs feed the table
    manual_runs: list[dict]
    config_errors: dict[str, str]
    gpu_counts: list[int]
    metrics: list[str]                  # accuracy metrics shown, in the names module's order
    rows: list[Row]
    average: dict[int, float]
    conclusions: list[str]
    alerts: list[str]
    flagged: list[str]
    cleared: list[str]                  # flags the same night's reruns cleared
    changes: list[str]                  # series whose environment changed tonight: baseline restarted
    diagnoses: list[str]                # scaling vs compute regressions, per benchmark
    alert_details: list[dict]           # each alert as data (figure, baseline, reruns): what a notifier sends
    judged: list[Judgement]             # every night of every series (the trend plot marks alerts)
    series: int
    table_checks: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # benchmark -> why its scheduled run planned nothing
    changes_tonight: list[dict] = field(default_factory=list)  # each change under test tonight with its verdict
    accuracy_rows: list[Row] = field(default_factory=list)  # each benchmark's latest weekly accuracy run
    accuracy_metrics: list[str] = field(default_factory=list)
    study_rows: list[Row] = field(default_factory=list)  # the weekly rows timed by train time (full passes)
    study_average: dict[int, float] = field(default_factory=dict)  # their average: the one set beside the study's
    moves: list[dict] = field(default_factory=list)  # host assignment changes recorded this night (store.assignment_moves)
    undelivered: list[str] = field(default_factory=list)  # alert channels owed a message they failed to take
    # what tonight said of confirmed regressions, once: {verdict (fixed, ended by itself, partly fixed,
    # still regressed), line}
    fixed: list[dict] = field(default_factory=list)
    fixed_details: list[dict] = field(default_factory=list)  # figures back tonight: figures.back_detail
    moved_details: list[dict] = field(default_factory=list)  # flagged tonight: figures.moved_detail
    # what more GPUs would give (report.predictions.section): per series, 8 GPUs and two hosts; running errors
    predictions: dict = field(default_factory=dict)
    plots: tuple[str, ...] = PLOTS

    def to_json(self) -> dict:
        """table.json: the same figures, with verdicts as their texts."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("rows", "judged", "accuracy_rows", "study_rows")}
        doc["rows"] = [_row_json(r) for r in self.rows]
        doc["accuracy_rows"] = [_row_json(r) for r in self.accuracy_rows]
        doc["plots"] = list(self.plots)
        return doc


def _row_json(r: Row) -> dict:
    row = {k: v for k, v in asdict(r).items() if k != "verdicts"}
    row["key"] = asdict(r.key)
    row["verdicts_text"] = {m: {n: {"kind": v.kind, "text": v.text(), "ci": v.ci, "diff": v.diff,
                                    "repeats_needed": v.repeats_needed}
                                for n, v in per.items()} for m, per in r.verdicts.items()}
    row["convergence"] = {n: {"kind": v.kind, "text": v.text(), "extra_epochs": v.extra, "p": v.p}
                          for n, v in r.convergence.items()}
    return row
