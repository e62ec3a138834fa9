"""One table builder for every table a person reads: the report's Markdown, the terminal's
aligned text and the UI pages. A table is columns over items, built once into text cells (`build`),
then rendered as Markdown (`markdown`), as aligned text (`text`) or handed to a page template,
which escapes every cell (`Table.rows`). A cell may link somewhere (`Link`): the pages draw the
link, Markdown and the terminal show its text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Link:
    text: str
    href: str
    top: bool = False   # a page opens it in the Airflow UI's window (a task log), not in the plugin's frame


# Unicode's bidirectional controls: stored text (a container's last line, a config's reason) that
# holds one would reorder what follows it on screen, in a page cell as in a terminal
BIDI_CONTROLS = {c: f"[U+{c:04X}]" for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def visible(text: str) -> str:
    """`text` with every bidirectional control written out as [U+XXXX]: shown, never obeyed."""
    return text.translate(BIDI_CONTROLS)


def plain(v: Any) -> str:
    """A value as a cell: – for none, 4 significant digits for a float, items joined by commas."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return str(v)


@dataclass(frozen=True)
class Column(Generic[T]):
    """One column: its header, the value it shows of an item, how that value is written, and
    whether it is a number (right-aligned); `links`, where a page's cell links somewhere."""
    header: str
    value: Callable[[T], Any]
    fmt: Callable[[Any], str] = plain
    numeric: bool = False
    links: Callable[[T], list[Link]] | None = None


@dataclass(frozen=True)
class Cell:
    text: str
    links: tuple[Link, ...] = ()   # a page shows these instead of the text


@dataclass(frozen=True)
class Row:
    cells: list[Cell]
    flag: str = ""      # a page's row class ("failed")


@dataclass(frozen=True)
class Table:
    headers: list[str]
    numeric: list[bool]
    rows: list[Row] = field(default_factory=list)


def build(columns: Sequence[Column[T]], items: Sequence[T], flag: Callable[[T], str] | None = None) -> Table:
    """The table of `items`: each column's value of each item, written by the column's fmt (any
    bidirectional control made visible)."""
    rows = [Row([Cell(visible(c.fmt(c.value(it))), tuple(Link(visible(k.text), k.href, k.top) for k in c.links(it))
                      if c.links else ()) for c in columns],
                flag(it) if flag else "") for it in items]
    return Table([c.header for c in columns], [c.numeric for c in columns], rows)


def _text(cell: Cell) -> str:
    return cell.text if cell.text or not cell.links else " ".join(link.text for link in cell.links)


def markdown(t: Table) -> list[str]:
    """A Markdown table, one line per row (a | inside a cell escaped)."""
    def line(vals: list[str]) -> str:
        return "| " + " | ".join(v.replace("|", "\\|") for v in vals) + " |"
    return [line(t.headers), "|" + "".join("---:|" if n else "---|" for n in t.numeric),
            *(line([_text(c) for c in r.cells]) for r in t.rows)]


def text(t: Table) -> str:
    """Aligned columns for a terminal, one header line; numbers right-aligned."""
    cells = [[_text(c) for c in r.cells] for r in t.rows]
    width = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(t.headers)]

    def line(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, width, t.numeric)).rstrip()
    return "\n".join([line(t.headers), *(line(row) for row in cells)])
