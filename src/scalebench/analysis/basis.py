"""A row's timing basis, decided once from its cells' own epoch plans, and the time each cell
contributes to the row's ratios under it.

- "train time": every GPU count made full passes over the split: r(n) = T(n) / T(1).
- "throughput": every GPU count ran capped epochs (the same steps): r(n) = X(1) / X(n) with X the
  steady samples per second of the slowest rank, which equals T(n) / T(1) for the same samples.
A row whose cells mix the two has no ratio: it would compare a capped epoch with full ones.
"""
from __future__ import annotations

from scalebench.core.records import TIMING_BASES, FigureRow

TRAIN_TIME, THROUGHPUT = TIMING_BASES


def capped(cell: FigureRow) -> bool:
    """Whether the cell's epochs were capped (its contract's epoch plan says; none recorded: full passes)."""
    figure = cell["figure"]
    epoch = ((figure["timing"] if figure else None) or {}).get("epoch") or {}
    return bool(epoch.get("capped_by_max_steps_per_epoch"))


def basis_of(cells: list[FigureRow]) -> tuple[str | None, str | None]:
    """(basis, None), or (None, why) when the cells mix capped and full epochs."""
    flags = {c["gpus"]: capped(c) for c in cells}
    if len(set(flags.values())) <= 1:
        return (THROUGHPUT if any(flags.values()) else TRAIN_TIME), None
    cap = sorted(n for n, f in flags.items() if f)
    full = sorted(n for n, f in flags.items() if not f)
    return None, (f"epochs capped at {', '.join(map(str, cap))} GPU(s) and full passes at {', '.join(map(str, full))} GPU(s): "
                  "no ratio across timing bases")


def time_value(cell: FigureRow, basis: str) -> float:
    """What the row's ratios divide: training seconds, or seconds per sample of the slowest rank."""
    f = cell["figure"]
    if f is None:
        raise ValueError(f"cell {cell['key']} has no figure to time")
    if basis == TRAIN_TIME:
        return f["train_s"]
    b = (f["timing"] or {}).get("breakdown") or {}
    if b.get("timed_steps") and b.get("step_s"):
        return b["step_s"] / (b["timed_steps"] * cell["global_batch"])
    return 1.0 / f["images_per_s"]
