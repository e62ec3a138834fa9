"""The widths of the store's bounded columns that a config or a trigger can fill, declared once:
the table definitions (scalebench.store) take their widths from here and the checks at entry
(the configs, the trigger's tags) refuse a value the column cannot hold, naming the column, so
nothing passes the checks by day to fail on PostgreSQL at night."""
from __future__ import annotations

WIDTH = {
    "cells.benchmark": 100,             # a benchmark id
    "cells.host": 100,                  # a fleet host's name
    "cells.label": 300,                 # a cell's label, with a bisection's image tag (128 at most)
    "device_leases.device_id": 64,      # one device id: a GPU UUID (40) or a MIG UUID
    "image_packages.image": 300,        # an image reference as configured
    "alert_groups.new_image": 300,      # a suspect's image reference
    "alert_deliveries.channel": 100,    # an alert route's name
}


def width(column: str) -> int:
    return WIDTH[column]


def check_width(value: str, column: str, what: str) -> str:
    """`value` when it fits `column`; ValueError naming what it is, its length and the column."""
    if len(value) > WIDTH[column]:
        raise ValueError(f"{what} {value[:60]!r}{'...' if len(value) > 60 else ''} is {len(value)} characters; "
                         f"the store's column {column} holds {WIDTH[column]}")
    return value
