"""The scaling prediction checked against published multi-GPU tables (bench/public_scaling.csv,
each row with its source): fitted on the counts up to 4, it predicts every larger count, beside
two naive rules ("per-GPU throughput stays at the largest count's", "the efficiency trend
continues linearly"). Prints one Markdown row per prediction (docs/measurements.md keeps them).

    .venv/bin/python bench/prediction.py
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from scalebench.analysis.prediction import naive_rules, points_from_csv, predict

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


def main() -> None:
    print("| table | kind | GPUs | measured images/s | predicted | error | efficiency error (points) | "
          "per-GPU throughput held | efficiency trend |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows():
        naive = " | ".join(f"{r.error(v):+.1%} ({r.points(v):+.1f})" for v in r.naive.values())
        print(f"| {r.table} | {r.kind} | {r.gpus} | {r.measured:g} | {r.predicted:.1f} | {r.error(r.predicted):+.1%} | "
              f"{r.points(r.predicted):+.1f} | {naive} |")


if __name__ == "__main__":
    main()
