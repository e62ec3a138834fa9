"""The figures a benchmark's history tracks per night, GPU count and precision, declared once.

Each entry is where its figure comes from (a field of the report's row) and how it reads. The
rest derives from this list:
- the night summary: its columns in the store (`store.results`) and its value, taken from the
  night's report row (`report.summary`);
- the history export columns (`report.exports`);
- the history page's table and charts (`orchestration/ui`; `history.js` draws one chart per
  charted figure from the list the page hands it);
- the report's detail table (`report.render`).
Adding a figure is one entry here, plus a migration that adds its column to `night_summaries`
(a test compares the migrated schema with the model).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Direction = Literal["lower", "higher"]


@dataclass(frozen=True)
class FigureField:
    name: str              # the summary column, export column and history.js field
    label: str             # a table's header and a chart's title
    unit: str              # a chart's y axis
    fmt: str               # format spec of a table cell: format(value, fmt)
    direction: Direction   # which way is better (a chart's title says it)
    source: str            # where the report's row holds it per GPU count: "attr" is row.attr[n],
                           # "attr.key" is row.attr[n][key]
    chart: bool = True     # drawn on the history page
    from_gpus: int = 1     # the smallest GPU count it means something at (a ratio to 1 GPU: 2)
    spread: tuple[str, str] | None = None  # its interval in the report's detail table: (row field, what it is);
                                           # row.field[n] is a width (an IQR) or a (low, high) CI
    note: str = ""         # what its chart shows, under the chart's title

    def text(self, value: float | None) -> str:
        return "–" if value is None else format(value, self.fmt)

    def title(self) -> str:
        return f"{self.label[0].upper()}{self.label[1:]} per GPU count ({self.unit}; {self.direction} is better)"


HISTORY_FIGURES: tuple[FigureField, ...] = (
    FigureField("train_s", "train s", "seconds", ".2f", "lower", "train_s", chart=False, spread=("iqr_s", "IQR")),
    FigureField("relative_time", "relative time", "of 1 GPU", ".1%", "lower", "relative_time", from_gpus=2,
                spread=("relative_time_ci", "95% CI"), note="On each night's basis: train time, T(n) / T(1) of the same epochs; "
                "throughput, X(1) / X(n) of steady steps."),
    FigureField("images_per_s", "images/s", "images/s", ".1f", "higher", "images_per_s"),
    FigureField("sync_share", "exposed sync share", "share of a step", ".1%", "lower", "step_shares.sync", from_gpus=2,
                note="Gradient sync a step waits for, not hidden behind compute (slowest rank); none where the "
                "framework does not expose it (TF's MirroredStrategy)."),
)
FIGURE_NAMES = tuple(f.name for f in HISTORY_FIGURES)
