"""The sections that show where an A/B's step time went (analysis.profile_diff.ab_diff), on the
alert page and the run's figures tab: the diff table, the step before and after, the unexplained
rest, and each side's traces for download. Values only: the templates render them."""
from __future__ import annotations

from typing import Sequence
from urllib.parse import quote

from scalebench.core import tables
from scalebench.core.tables import Column, Link
from scalebench.orchestration.ui.pages import text as _text

DIFF_ROWS = 10  # operations shown per A/B diff (the CLI's `profile diff` lists every one)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.3g}"


def trace_links(base: str, side: str, found: dict) -> list[Link]:
    """Each kept trace of one side of a diff, for download (Perfetto or TensorBoard's profile plugin opens it)."""
    mine = found[side]
    return [Link(f"{side.upper()} trace {i + 1}", f"{base}/api/cells/{quote(mine['key'], safe='')}/traces/{i}")
            for i in range(len(mine["traces"]))]


def profile_diff_section(base: str, title: str, found: dict, id_: str = "") -> dict:
    """A page section from an A/B's profile diff (analysis.profile_diff.ab_diff): the operations
    by their share of the step's change, the unexplained rest, and both sides' traces."""
    if found.get("why_not"):
        return {"id": id_, "title": title, "about": [_text(f"night {found['night']}: no profile: {found['why_not']}")],
                "table": None}
    d = found["diff"]
    columns: list[Column[dict]] = [
        Column("kernel" if d["kind"] == "kernel" else "operation", lambda c: c["name"]),
        Column("status", lambda c: c["status"]),
        Column("A ms/step", lambda c: _ms(c["before_s"]), numeric=True),
        Column("B ms/step", lambda c: _ms(c["after_s"]), numeric=True),
        Column("change ms/step", lambda c: f"{c['delta_s'] * 1e3:+.3g}", numeric=True),
        Column("share of the change", lambda c: "" if c["share"] is None else f"{c['share']:.0%}", numeric=True)]
    links = trace_links(base, "a", found) + trace_links(base, "b", found)
    about = [_text(f"Night {found['night']}, the A/B's profiled pair (A: the previous image, B: the new one): the step "
                  f"{d['step_before_s'] * 1e3:.4g} -> {d['step_after_s'] * 1e3:.4g} ms; not explained by a listed "
                  f"{'device kernel' if d['kind'] == 'kernel' else 'operation'}: {d['unexplained_s'] * 1e3:+.3g} ms. "),
             *([_text("Traces (open in Perfetto or TensorBoard's profile plugin): ")] + links if links
               else [_text("No trace was kept.", muted=True)])]
    return {"id": id_, "title": title, "about": about, "table": tables.build(columns, d["changes"][:DIFF_ROWS])}


def diff_sections(base: str, diffs: Sequence[tuple[str, dict]], prefix: str = "ab") -> list[dict]:
    """One section per (title, ab_diff), with ids prefix-1, prefix-2, ..."""
    return [profile_diff_section(base, title, found, f"{prefix}-{i + 1}") for i, (title, found) in enumerate(diffs)]
