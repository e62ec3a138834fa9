"""Checks on the night's figures: which are not physically plausible (suspect, kept out of the
average), and the Great Expectations checks on the aggregated table."""
from __future__ import annotations

from scalebench_kit.names import ACCURACY_METRICS

from scalebench.report.model import Report, Row


def plausibility(row: Row, reference=None) -> dict[int, list[str]]:
    """Per GPU count, why its figures are not physically plausible: efficiency above 1, an epoch
    that is not one pass over the split, an accuracy far from the benchmark's reference at the
    global batch. Such figures are shown as suspect and left out of the average."""
    out: dict[int, list[str]] = {}
    for n, e in row.efficiency.items():
        if n > 1 and e > 1.0:
            out.setdefault(n, []).append(f"efficiency {e:.2f} is above 1 (faster than linear scaling)")
    for n in row.epoch_mismatch:
        out.setdefault(n, []).append(f"an epoch covers {row.samples_per_epoch.get(n)} samples in "
                                     f"{row.steps_per_epoch.get(n)} steps, {row.samples_per_epoch.get(1)} at 1 GPU")
    if reference is not None:
        for n, v in row.metrics.get(reference.metric, {}).items():
            expected = reference.expected(row.global_batch.get(n, 0))
            if abs(v - expected) > reference.tolerance:
                out.setdefault(n, []).append(
                    f"{ACCURACY_METRICS[reference.metric].display} {v:.3f} is far from the reference {expected:.3f} "
                    f"(±{reference.tolerance:g}) at global batch {row.global_batch.get(n)}")
    return out


def table_checks(rep: Report) -> list[str]:
    """The GX suite on the aggregate (every cell present or marked, efficiency in range, every ratio
    against a matching baseline), in this process; the failures, empty when all passed. A
    published report runs the same suite in its own process (report.checker)."""
    from scalebench.cell.validation import check_table, table_rows

    return check_table(table_rows(rep))
