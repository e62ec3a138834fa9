"""`scalebench compare RUN_A RUN_B`: a candidate run against a reference run (e.g. a new image tag
before it goes nightly), per cell (GPU count, epochs), with the report's statistics: the median
training time ratio B/A with its bootstrap CI over repeats, throughput, and each accuracy metric's
equivalence verdict (two one-sided tests, 90 % CI, the report's margin). `compare_nights` does
the same for two nights, per benchmark, between the runs each night's report reads. Computed as
data here; the CLI and the UI render it."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from scalebench_kit.names import ACCURACY_METRICS

from scalebench.analysis.regress import fingerprint_change
from scalebench.analysis.stats import Verdict, bootstrap_ratio_ci, equivalence
from scalebench.core import tables
from scalebench.core.nights import choose_runs
from scalebench.core.tables import Column
from scalebench.core.records import StoredCell


class CompareError(ValueError):
    """A run id that matches no stored run, or more than one benchmark's."""


@dataclass
class CellDiff:
    gpus: int
    epochs: int
    repeats: tuple[int, int]
    train_s: tuple[float, float]                  # median A, median B
    ratio: float                                  # median B / median A (> 1: B is slower)
    ratio_ci: tuple[float, float] | None          # 95 % bootstrap CI (None: < 2 repeats a side)
    images_per_s: tuple[float, float]
    accuracy: dict[str, Verdict] = field(default_factory=dict)
    precision: str = ""

    @property
    def verdict(self) -> str:
        if self.ratio_ci is None:
            return "inconclusive (fewer than 2 repeats a side)"
        lo, hi = self.ratio_ci
        if lo > 1:
            return f"B slower by {100 * (self.ratio - 1):.1f}%"
        if hi < 1:
            return f"B faster by {100 * (1 - self.ratio):.1f}%"
        return "no significant difference"


@dataclass
class Comparison:
    benchmark: str
    run_a: str
    run_b: str
    changed: str | None         # what differs between the runs' systems (image, framework, driver...)
    cells: list[CellDiff]
    only_a: list[str]
    only_b: list[str]


def _run_cells(store, run_id: str, benchmark: str | None) -> list[StoredCell]:
    cells = [c for c in store.cells(benchmark=benchmark, run_id=run_id) if c.get("role", "measure") == "measure"]
    if not cells:
        raise CompareError(f"run {run_id!r}: no stored cells" + (f" of benchmark {benchmark!r}" if benchmark else ""))
    benches = sorted({c["benchmark"] for c in cells})
    if len(benches) > 1:
        raise CompareError(f"run {run_id!r} is a run of {benches}: give --benchmark")
    return cells


def compare(store, run_a: str, run_b: str, benchmark: str | None = None, margin: float = 0.01) -> Comparison:
    a, b = _run_cells(store, run_a, benchmark), _run_cells(store, run_b, benchmark)
    if a[0]["benchmark"] != b[0]["benchmark"]:
        raise CompareError(f"run {run_a!r} is of {a[0]['benchmark']!r}, run {run_b!r} of {b[0]['benchmark']!r}")
    return compare_cells(a[0]["benchmark"], run_a, a, run_b, b, margin)


@dataclass
class NightComparison:
    night_a: str
    night_b: str
    benchmarks: list[Comparison]   # A = the run night A's report reads, B = night B's
    only_a: list[str]              # benchmarks with a run only on night A
    only_b: list[str]


def compare_nights(cells_a: list[StoredCell], cells_b: list[StoredCell], night_a: str, night_b: str,
                   benchmark: str | None = None, margin: float = 0.01) -> NightComparison:
    """Each benchmark's run of night A (the one its report reads: scheduled if any) against its
    run of night B; `cells_a`/`cells_b` are the store's cells of those nights."""
    def runs(cells: list[StoredCell], night: str) -> dict[str, list[StoredCell]]:
        measured = [c for c in cells if c.get("role", "measure") == "measure" and (not benchmark or c["benchmark"] == benchmark)]
        chosen, _ = choose_runs(measured, night)
        return {b: [c for c in measured if c["benchmark"] == b and c["run_id"] == run] for b, run in chosen.items()}

    a, b = runs(cells_a, night_a), runs(cells_b, night_b)
    if not a and not b:
        raise CompareError(f"nights {night_a} and {night_b}: no stored run"
                           + (f" of benchmark {benchmark!r}" if benchmark else ""))
    both = sorted(set(a) & set(b))
    return NightComparison(night_a, night_b,
                           [compare_cells(x, a[x][0]["run_id"], a[x], b[x][0]["run_id"], b[x], margin) for x in both],
                           sorted(set(a) - set(b)), sorted(set(b) - set(a)))


def compare_cells(benchmark: str, run_a: str, a: list[StoredCell], run_b: str, b: list[StoredCell],
                  margin: float = 0.01) -> Comparison:
    """Like with like (GPU count, precision, epochs) between two sets of one benchmark's cells."""
    groups: dict[tuple[int, str, int], tuple[list, list]] = {}  # like with like: GPUs, precision, epochs
    for side, cells in ((0, a), (1, b)):
        for c in cells:
            if c["figure"] is not None:
                groups.setdefault((c["gpus"], c["precision"], c["epochs"]), ([], []))[side].append(c["figure"])
    diffs = []
    for (n, p, e), (fa, fb) in sorted(groups.items()):
        if not fa or not fb:
            continue
        ta, tb = [f["train_s"] for f in fa], [f["train_s"] for f in fb]
        acc = {}
        for m in ACCURACY_METRICS:
            va = [f["metrics"][m] for f in fa if m in (f["metrics"] or {})]
            vb = [f["metrics"][m] for f in fb if m in (f["metrics"] or {})]
            if va and vb:
                acc[m] = equivalence(va, vb, margin)
        diffs.append(CellDiff(n, e, (len(fa), len(fb)), (statistics.median(ta), statistics.median(tb)),
                              statistics.median(tb) / statistics.median(ta), bootstrap_ratio_ci(ta, tb),
                              (statistics.median(f["images_per_s"] for f in fa),
                               statistics.median(f["images_per_s"] for f in fb)), acc, p))
    def only(side: int) -> list[str]:
        return sorted(f"{n} GPU{'s' if n != 1 else ''} {p} x {e} epochs" for (n, p, e), g in groups.items()
                      if g[side] and not g[1 - side])

    def system(cells: list[StoredCell]) -> dict | None:
        return next((c["figure"].get("fingerprint") for c in cells if c["figure"]), None)

    return Comparison(benchmark, run_a, run_b, fingerprint_change(system(a), system(b)), diffs, only(0), only(1))


def comparison_rows(cmp: Comparison) -> list[dict]:
    """One flat row per compared cell (CSV, JSON lines, the UI's table)."""
    return [{"benchmark": cmp.benchmark, "run_a": cmp.run_a, "run_b": cmp.run_b, "gpus": d.gpus, "precision": d.precision,
             "epochs": d.epochs, "repeats_a": d.repeats[0], "repeats_b": d.repeats[1], "train_s_a": d.train_s[0],
             "train_s_b": d.train_s[1], "ratio": d.ratio, "ratio_ci_low": d.ratio_ci[0] if d.ratio_ci else None,
             "ratio_ci_high": d.ratio_ci[1] if d.ratio_ci else None, "images_per_s_a": d.images_per_s[0],
             "images_per_s_b": d.images_per_s[1], "verdict": d.verdict, "systems_differ_in": cmp.changed or "",
             **{f"{m}_verdict": v.text() for m, v in d.accuracy.items()}} for d in cmp.cells]


COMPARISON_COLUMNS = ["benchmark", "run_a", "run_b", "gpus", "precision", "epochs", "repeats_a", "repeats_b", "train_s_a",
                      "train_s_b", "ratio", "ratio_ci_low", "ratio_ci_high", "images_per_s_a", "images_per_s_b", "verdict",
                      "systems_differ_in"]


def render_nights(cmp: NightComparison) -> str:
    out = [f"night A = {cmp.night_a}, night B = {cmp.night_b}"]
    for c in cmp.benchmarks:
        out += ["", render(c)]
    for name, only in (("A", cmp.only_a), ("B", cmp.only_b)):
        if only:
            out += ["", f"only on night {name}: {', '.join(only)}"]
    return "\n".join(out)


def _ci(d: CellDiff) -> str:
    return f"{d.ratio_ci[0]:.3f}–{d.ratio_ci[1]:.3f}" if d.ratio_ci else "–"


# The table of a comparison, one line per compared cell: the terminal's and the compare page's
COLUMNS: list[Column[CellDiff]] = [
    Column("GPUs", lambda d: d.gpus, numeric=True), Column("dtype", lambda d: d.precision),
    Column("epochs", lambda d: d.epochs, numeric=True),
    Column("repeats", lambda d: f"{d.repeats[0]}/{d.repeats[1]}", numeric=True),
    Column("train s A", lambda d: f"{d.train_s[0]:.2f}", numeric=True),
    Column("train s B", lambda d: f"{d.train_s[1]:.2f}", numeric=True),
    Column("B/A", lambda d: f"{d.ratio:.3f}", numeric=True), Column("95% CI", _ci, numeric=True),
    Column("images/s A", lambda d: f"{d.images_per_s[0]:.1f}", numeric=True),
    Column("images/s B", lambda d: f"{d.images_per_s[1]:.1f}", numeric=True),
    Column("verdict", lambda d: d.verdict),
    Column("accuracy", lambda d: "; ".join(f"{ACCURACY_METRICS[m].display}: {v.text()}" for m, v in d.accuracy.items())),
]


def render(cmp: Comparison) -> str:
    out = [f"{cmp.benchmark}: A = {cmp.run_a}, B = {cmp.run_b}",
           f"systems differ in: {cmp.changed}" if cmp.changed else "systems: same fingerprint (or not recorded)", ""]
    if cmp.cells:
        out.append(tables.text(tables.build(COLUMNS, cmp.cells)))
    else:
        out.append("no (GPU count, precision, epochs) cell has a valid result in both runs")
    for name, only in (("A", cmp.only_a), ("B", cmp.only_b)):
        if only:
            out.append(f"only in {name}: {', '.join(only)}")
    return "\n".join(out)
