"""The scaling prediction checked against published multi-GPU tables (bench/public_scaling.csv,
each row with its source): fitted on the counts up to 4, it predicts every larger count, beside
two naive rules ("per-GPU throughput stays at the largest count's", "the efficiency trend
continues linearly"). Prints one Markdown row per prediction (docs/measurements.md keeps them).

    .venv/bin/python bench/prediction.py            # the published tables
    .venv/bin/python bench/prediction.py --year     # `scalebench predict` on a store of a year of nights
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from scalebench.analysis.prediction import naive_rules, predict
from scalebench.analysis.scaling_table import points_from_csv

TABLES = Path(__file__).with_name("public_scaling.csv")
FIT_UP_TO = 4


@dataclass(frozen=True)
class Row:
    table: str
    kind: str                 # regular | poor | irregular (as the CSV files it)
    gpus: int
    measured: float
    predicted: float
    naive: dict[str, float]
    one: float

    def error(self, value: float) -> float:
        """Relative error of images/s."""
        return value / self.measured - 1

    def points(self, value: float) -> float:
        """Error in points of efficiency (images/s over gpus x 1 GPU's)."""
        return (value - self.measured) / (self.gpus * self.one) * 100

    @property
    def better_naive(self) -> float:
        """The naive rule with the smaller error in points of efficiency, as its error."""
        return min((self.points(v) for v in self.naive.values()), key=abs)


def rows(path: Path = TABLES) -> list[Row]:
    text = path.read_text()
    tables, _ = points_from_csv(text, str(path))
    kinds = {r["table"]: r["kind"] for r in csv.DictReader(text.splitlines())}
    out = []
    for name, points in tables.items():
        fit_on = [p for p in points if p.total <= FIT_UP_TO]
        one = next(p.images_per_s for p in points if p.total == 1)
        for p in sorted((p for p in points if p.total > FIT_UP_TO), key=lambda p: p.total):
            got = predict(fit_on, p.total, table=True)
            assert got.images_per_s is not None, got.why_not
            out.append(Row(name, kinds[name], p.total, p.images_per_s, got.images_per_s,
                           naive_rules(fit_on, p.total), one))
    return out


def year_of_nights(nights: int = 365) -> None:
    """A store of a year of scheduled nights of one benchmark at 1-4 GPUs (two cells each, a step
    breakdown in every cell), then `scalebench predict BENCHMARK --gpus 8` timed end to end (a new
    process: imports, configs, the store read, the fit and its bootstrap), median of three."""
    import datetime as dt
    import math
    import os
    import statistics
    import subprocess
    import sys
    import tempfile
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from scalebench.store.db import upgrade
    from scalebench.store.results import Store
    from tests.support.samples import sample_breakdown, sample_cell, sample_contract

    home = Path(tempfile.mkdtemp(prefix="predict-year-"))
    url = f"sqlite:///{home / 'results.db'}"
    upgrade(url)
    store = Store(url)
    last = dt.date.today()
    t0 = time.perf_counter()
    for i in range(nights):
        night = (last - dt.timedelta(days=nights - 1 - i)).isoformat()
        for gpus in (1, 2, 3, 4):
            for rep in (1, 2):
                cell = sample_cell(gpus=gpus, repeat=rep, run_id=f"scheduled__{night}", night=night,
                                   run_type="scheduled")
                c = sample_contract(cell)
                ips = 100.0 * gpus * (1 - 0.04 * math.log2(gpus))
                c["timing"]["images_per_s"] = ips
                c["timing"]["breakdown"] = sample_breakdown(gpus, 20 * 16 * gpus / ips, sync_share=0.02 * (gpus - 1))
                store.record_attempt(cell, 1, "valid", contract=c)
    print(f"seeded {nights} nights x 8 cells in {time.perf_counter() - t0:.0f} s ({home})")
    env = {**os.environ, "SCALEBENCH_STORE_URL": url}
    cli = Path(sys.executable).with_name("scalebench")
    took = []
    for _ in range(3):
        t = time.perf_counter()
        done = subprocess.run([str(cli), "predict", "resnet50_keras_cifar10", "--gpus", "8"], env=env,
                              capture_output=True, text=True)
        took.append(time.perf_counter() - t)
        assert done.returncode == 0, done.stderr
    print(done.stdout.strip())
    print(f"scalebench predict on a year of nights: {statistics.median(took):.2f} s (median of 3: "
          + ", ".join(f"{x:.2f}" for x in took) + ")")


def main() -> None:
    import sys

    if "--year" in sys.argv[1:]:
        return year_of_nights()
    print("| table | kind | GPUs | measured images/s | predicted | error | efficiency error (points) | "
          "per-GPU throughput held | efficiency trend |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows():
        naive = " | ".join(f"{r.error(v):+.1%} ({r.points(v):+.1f})" for v in r.naive.values())
        print(f"| {r.table} | {r.kind} | {r.gpus} | {r.measured:g} | {r.predicted:.1f} | {r.error(r.predicted):+.1%} | "
              f"{r.points(r.predicted):+.1f} | {naive} |")


if __name__ == "__main__":
    main()
