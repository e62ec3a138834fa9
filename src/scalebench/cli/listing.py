"""What a listing command returns and how it is printed: an aligned table for a person, JSON or
CSV for programs."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from scalebench.core import tables


@dataclass
class Listing:
    """What a listing command found: flat rows (table and CSV), the JSON document, notes under the table."""
    columns: list[str]
    rows: Sequence[Mapping[str, Any]]
    doc: Any = None                  # -o json prints this (default: the rows)
    notes: list[str] = field(default_factory=list)
    text: str | None = None          # a table rendered by its own module (compare), instead of the rows
    empty: str = "nothing to list"
    exit_code: int = 0               # non-zero: what it lists is a problem (an infeasible plan)

    def render(self, output: str) -> str:
        if output == "json":
            return json.dumps(self.rows if self.doc is None else self.doc, indent=2, default=str)
        if output == "csv":
            from scalebench.report.exports import to_csv

            return to_csv(self.columns, self.rows, extra=False).rstrip("\n")
        body = self.text if self.text is not None else (table(self.columns, self.rows) if self.rows else self.empty)
        return "\n".join([body, *self.notes])


def table(columns: list[str], rows: Sequence[Mapping[str, Any]]) -> str:
    """Aligned columns, one header line; a column of numbers right-aligned."""
    def number(v: Any) -> bool:
        return v is None or isinstance(v, (int, float)) and not isinstance(v, bool)

    def column(name: str) -> tables.Column:
        return tables.Column(name, lambda r: r.get(name), numeric=all(number(r.get(name)) for r in rows))
    return tables.text(tables.build([column(c) for c in columns], rows))
