"""Structured event log (JSON lines), one list of keys in the spirit of MLPerf logging."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .names import EVENT_KEYS


class EventLog:
    """Appends {"key", "time", "value", "rank"...} lines; only rank 0 writes."""

    def __init__(self, path: str | Path, rank: int = 0, echo: bool = True):
        self.path = Path(path)
        self.rank = rank
        self.echo = echo

    def log(self, key: str, value: Any = None, **meta: Any) -> dict:
        if key not in EVENT_KEYS:
            raise ValueError(f"unknown event key {key!r}; expected one of {sorted(EVENT_KEYS)}")
        event = {"key": key, "time": time.time(), "value": value, "rank": self.rank, **meta}
        if self.rank == 0:
            line = json.dumps(event, sort_keys=True, default=str)
            with self.path.open("a") as fh:
                fh.write(line + "\n")
            if self.echo:
                print(":::SCALEBENCH " + line, flush=True)
        return event


def read_events(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
