"""The profiling window: when a cell asks for it (training.profile_steps), a few steps more after
the timed ones (never inside them: no figure moves), on every rank, through the framework's own
profiler; each rank's trace kept beside the result (gzip, capped) and its summary: the operations
(and, with a device, the kernels) by self time per step, their calls per step and share of the
step. The trainer only hands over one step; the framework object (torch_ddp, tf_distribute)
says how its profiler runs. A window that fails leaves the cell valid and says why."""
from __future__ import annotations

import gzip
import shutil
import time
from pathlib import Path
from typing import Callable, Protocol

from .names import PROFILE_DIR

TOP = 25                          # operations (and kernels) kept per rank, by self time
TRACE_CAP_BYTES = 64 * 1024 ** 2  # a compressed trace larger than this is dropped (its summary kept)


class Backend(Protocol):
    """A framework's profiler: `run(steps, step, trace_dir)` profiles `steps` calls of `step` (after
    a warm-up call of its own) and returns the ops' totals over them, the traces it wrote and the
    wall seconds of the profiled steps alone (no warm-up, no export)."""

    def run(self, steps: int, step: Callable[[], None], trace_dir: Path) -> tuple[list[dict], list[Path], float]: ...


class NoSummary(Exception):
    """The profiler wrote its traces, but nothing here can summarise them."""

    def __init__(self, why: str, traces: list[Path]):
        super().__init__(why)
        self.traces = traces


def window(backend: Backend, steps: int, step: Callable[[], None], results_dir: Path, rank: int) -> dict:
    """One rank's profile summary: {rank, steps, step_s, ops, kernels, traces} or {rank, why_not}."""
    folder = results_dir / PROFILE_DIR / f"rank{rank}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        totals, traces, active_s = backend.run(steps, step, folder)
        step_s = active_s / steps  # the profiled steps' own wall time: the warm-up's profiler start-up is not a step
        kept, notes = _compressed(traces, results_dir)
    except NoSummary as exc:
        return {"rank": rank, "why_not": str(exc), "traces": _compressed(exc.traces, results_dir)[0]}
    except Exception as exc:  # the cell's figures are already measured: a profile is never worth failing it
        return {"rank": rank, "why_not": f"{type(exc).__name__}: {exc}"[:300]}
    if not totals:
        return {"rank": rank, "why_not": "the profiler recorded no operation"}
    return {"rank": rank, "steps": steps, "step_s": round(step_s, 6), "ops": summarise(totals, steps, step_s, "self_s"),
            "kernels": summarise(totals, steps, step_s, "device_self_s"), "traces": kept, "notes": notes}


def summarise(totals: list[dict], steps: int, step_s: float, key: str) -> list[dict]:
    """The TOP entries by `key` (seconds over the window), per step, with calls per step and their
    share of the step."""
    rows = sorted((t for t in totals if t.get(key)), key=lambda t: -t[key])[:TOP]
    return [{"name": t["name"], "self_s": round(t[key] / steps, 7), "calls": round(t["calls"] / steps, 3),
             "share": round(t[key] / steps / step_s, 5) if step_s else None} for t in rows]


def slowest(summaries: list[dict]) -> dict:
    """The profile kept with the cell: the slowest rank's summary (by its step in the window), with
    every rank's step time and why any rank has none."""
    done = [s for s in summaries if "why_not" not in s]
    if not done:
        return {"why_not": "; ".join(f"rank {s['rank']}: {s['why_not']}" for s in summaries) or "no rank profiled"}
    pick = max(done, key=lambda s: s["step_s"])
    return {**pick, "ranks": {str(s["rank"]): s.get("step_s") for s in summaries},
            "missing": {str(s["rank"]): s["why_not"] for s in summaries if "why_not" in s}}


def _compressed(traces: list[Path], results_dir: Path) -> tuple[list[str], list[str]]:
    """Each trace gzip-compressed in place (paths relative to the results folder); one over the
    cap is dropped and said."""
    kept, notes = [], []
    for path in traces:
        target = path if path.suffix == ".gz" else path.with_name(path.name + ".gz")
        if target != path:
            with path.open("rb") as src, gzip.open(target, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst)
            path.unlink()
        if target.stat().st_size > TRACE_CAP_BYTES:
            notes.append(f"{target.name}: {target.stat().st_size / 1024 ** 2:.0f} MiB compressed, over the "
                         f"{TRACE_CAP_BYTES / 1024 ** 2:.0f} MiB cap: dropped")
            target.unlink()
            continue
        kept.append(str(target.relative_to(results_dir)))
    return kept, notes


class TorchProfiler:
    """torch.profiler over CPU activity, and CUDA's where the run has a GPU: a schedule of one
    warm-up step and `steps` active ones, the Chrome trace exported, key_averages' self times."""

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda

    def run(self, steps: int, step: Callable[[], None], trace_dir: Path) -> tuple[list[dict], list[Path], float]:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        settle = self.torch.cuda.synchronize if self.cuda else (lambda: None)
        with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
            for i in range(steps + 1):
                if i == 1:
                    t0 = time.perf_counter()
                step()
                settle()
                prof.step()
            active_s = time.perf_counter() - t0
        trace = trace_dir / "trace.json"
        prof.export_chrome_trace(str(trace))
        totals = []
        for e in prof.key_averages():
            if e.key.startswith("ProfilerStep#"):  # the schedule's own step markers span each whole step
                continue
            device = getattr(e, "self_device_time_total", None)
            if device is None:
                device = getattr(e, "self_cuda_time_total", 0)
            totals.append({"name": e.key, "calls": e.count, "self_s": e.self_cpu_time_total / 1e6,
                           "device_self_s": (device or 0) / 1e6})
        return totals, [trace], active_s


class TFProfiler:
    """TensorFlow's profiler (tf.profiler.experimental) around `steps` steps after one warm-up
    step: its XPlane trace kept (TensorBoard's profile plugin opens it), the ops' self times from
    TensorFlow's own converter (the plugin's framework_op_stats tool): host ops as operations,
    device ops as kernels, each named by its op and its type."""

    def __init__(self, tf):
        self.tf = tf

    def run(self, steps: int, step: Callable[[], None], trace_dir: Path) -> tuple[list[dict], list[Path], float]:
        step()
        self.tf.profiler.experimental.start(str(trace_dir))
        try:
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            active_s = time.perf_counter() - t0
        finally:
            self.tf.profiler.experimental.stop()
        traces = sorted(trace_dir.rglob("*.xplane.pb"))
        if not traces:
            raise NoSummary("TensorFlow's profiler wrote no trace", [])
        try:
            from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin

            raw = plugin.xspace_to_tools_data([str(t) for t in traces], "framework_op_stats", {})
            return tf_op_totals(raw[0] if isinstance(raw, tuple) else raw), traces, active_s
        except Exception as exc:  # a converter that moved or changed its table: the trace stays
            raise NoSummary(f"TensorFlow's trace is kept; its op table could not be read ({exc})"[:300], traces) from None


def tf_op_totals(data: bytes | str) -> list[dict]:
    """framework_op_stats' table (Google Charts JSON, the last table: idle excluded) as totals:
    {name: "operation (type)", calls, self_s on the host, device_self_s on a device}."""
    import json

    tables = json.loads(data)
    table = tables[-1] if isinstance(tables, list) else tables
    ids = [c["id"] for c in table["cols"]]
    totals: dict[str, dict] = {}
    for r in table["rows"]:
        row = dict(zip(ids, [c.get("v") if c else None for c in r["c"]]))
        if row.get("type") == "IDLE":
            continue
        name = f"{row['operation']} ({row['type']})"
        t = totals.setdefault(name, {"name": name, "calls": 0, "self_s": 0.0, "device_self_s": 0.0})
        t["calls"] += int(row.get("occurrences") or 0)
        t["device_self_s" if row.get("host_or_device") == "Device" else "self_s"] += (row.get("total_self_time") or 0) / 1e6
    return list(totals.values())
