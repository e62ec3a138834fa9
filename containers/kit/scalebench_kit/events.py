"""Structured event log (JSON lines), one list of keys in the spirit of MLPerf logging, written
twice: events.jsonl (our records) and mlperf.log (MLPerf's `:::MLLOG` lines, which the field's
tools read: mlperf-logging's parser, result summarizers)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .names import EVENT_KEYS, MLLOG_FILE, MLLOG_KEYS


class EventLog:
    """Appends {"key", "time", "value", "rank", "world_size", "pid"...} lines. Every rank writes
    (one short line per write() on an O_APPEND file, so lines of different ranks never interleave);
    only rank 0 echoes to the container log."""

    def __init__(self, path: str | Path, rank: int = 0, world_size: int = 1, echo: bool = True):
        self.path = Path(path)
        self.mllog = self.path.with_name(MLLOG_FILE)
        self.rank = rank
        self.world_size = world_size
        self.echo = echo

    def log(self, key: str, value: Any = None, **meta: Any) -> dict:
        if key not in EVENT_KEYS:
            raise ValueError(f"unknown event key {key!r}; expected one of {sorted(EVENT_KEYS)}")
        event = {"key": key, "time": time.time(), "value": value, "rank": self.rank, "world_size": self.world_size,
                 "pid": os.getpid(), **meta}
        line = json.dumps(event, sort_keys=True, default=str)
        _append(self.path, line)
        _append(self.mllog, ":::MLLOG " + json.dumps(mllog_line(event), default=str))
        if self.echo and self.rank == 0:
            print(":::SCALEBENCH " + line, flush=True)
        return event


def mllog_line(event: dict) -> dict:
    """One event as an MLPerf log record: {namespace, time_ms, event_type, key, value, metadata}."""
    key, kind = MLLOG_KEYS[event["key"]]
    meta = {k: v for k, v in event.items() if k not in ("key", "time", "value")}
    return {"namespace": "", "time_ms": int(event["time"] * 1000), "event_type": kind, "key": key,
            "value": event["value"], "metadata": meta}


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_events(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def window_share(events: list[dict]) -> tuple[float, float] | None:
    """(the profiling window's seconds, the run's seconds) of the rank whose window was longest:
    its profile_start to profile_stop against run_start to run_stop (the run's first start and last
    stop where that rank logged none). None without a whole window."""
    first: dict[int, dict[str, float]] = {}
    for e in events:
        first.setdefault(e.get("rank", 0), {}).setdefault(e["key"], e["time"])
    windows = [(k["profile_stop"] - k["profile_start"], rank) for rank, k in first.items()
               if "profile_start" in k and "profile_stop" in k]
    starts = [k["run_start"] for k in first.values() if "run_start" in k]
    stops = [k["run_stop"] for k in first.values() if "run_stop" in k]
    if not windows or not starts or not stops:
        return None
    seconds, rank = max(windows)
    own = first[rank]
    return seconds, own.get("run_stop", max(stops)) - own.get("run_start", min(starts))
