"""Op-level profiles of cells run with the trigger's profile_ops: one cell's operations, or where
the time went between two (docs/profiling.md)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from scalebench.cli.arguments import Command, arg
from scalebench.cli.listing import Listing
from scalebench_kit.names import RESULT_FILE

from scalebench.core.config import ConfigError, Configs

SHOW_COLUMNS = ["kind", "name", "ms_per_step", "calls_per_step", "share"]
DIFF_COLUMNS = ["name", "status", "before_ms", "after_ms", "delta_ms", "share_of_change"]


def cmd_profile(args, configs: Configs) -> Listing:
    if args.action == "show":
        if len(args.targets) != 1:
            raise ConfigError("profile show: give one CELL (a cell key or an attempt folder)")
        about, prof = _profile(args.targets[0])
        rows = [{"kind": kind, "name": o["name"], "ms_per_step": round(o["self_s"] * 1e3, 4),
                 "calls_per_step": o["calls"], "share": f"{o['share']:.1%}" if o.get("share") is not None else ""}
                for kind, key in (("op", "ops"), ("kernel", "kernels")) for o in prof.get(key) or []]
        notes = [f"{_name(about)}: rank {prof['rank']}'s window (the slowest), {prof['steps']} steps of "
                 f"{prof['step_s'] * 1e3:.4g} ms" + (f"; traces: {', '.join(prof['traces'])}" if prof.get("traces")
                                                      else "; no trace kept")]
        return Listing(SHOW_COLUMNS, rows, {"cell": about, "profile": prof}, notes)
    if len(args.targets) != 2:
        raise ConfigError("profile diff: give two CELLs, A then B (cell keys or attempt folders)")
    from scalebench.analysis.profile_diff import diff

    (a_about, a), (b_about, b) = (_profile(t) for t in args.targets)
    for field in ("benchmark", "gpus"):
        if a_about.get(field) != b_about.get(field):
            raise ConfigError(f"profile diff: A is {_name(a_about)}, B is {_name(b_about)}: a diff compares one "
                              "benchmark at one GPU count")
    d = diff(a, b, args.kind)
    rows = [{"name": c.name, "status": c.status, "before_ms": _ms(c.before_s), "after_ms": _ms(c.after_s),
             "delta_ms": round(c.delta_s * 1e3, 4), "share_of_change": f"{c.share:.1%}" if c.share is not None else ""}
            for c in d.changes]
    notes = [f"the step {d.step_before_s * 1e3:.4g} -> {d.step_after_s * 1e3:.4g} ms ({d.step_delta_s * 1e3:+.4g}); "
             f"not explained by a listed {args.kind}: {d.unexplained_s * 1e3:+.4g} ms"]
    notes += [f"top: {c.line()}" for c in d.top()]
    return Listing(DIFF_COLUMNS, rows, {"a": a_about, "b": b_about, **d.to_json()}, notes)


def _profile(target: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the cell is, its profile) from an attempt folder's result or a stored cell key; one
    line naming what is missing otherwise."""
    folder = Path(target)
    if folder.is_dir():
        from scalebench_kit.contract import load_result

        try:
            doc = load_result(folder / RESULT_FILE)  # the contract's own reader and checks
        except (OSError, ValueError) as exc:  # ContractError is a ValueError naming the file and field
            raise ConfigError(f"{folder / RESULT_FILE}: no valid result ({exc})".splitlines()[0]) from None
        cell = doc.get("cell") or {}
        about = {"folder": str(folder), **{k: cell.get(k) for k in ("key", "benchmark", "gpus", "precision", "label")}}
        prof = doc.get("profile")
    else:
        from scalebench.store.profiles import cell_profile
        from scalebench.store.results import Store

        found = cell_profile(Store().engine, target)
        if found is None:
            raise ConfigError(f"{target!r} is neither an attempt folder nor a stored cell key "
                              "(`scalebench results -o json` lists the keys)")
        about, prof = found
    if not prof:
        raise ConfigError(f"{_name(about)}: no profile (run it with the trigger's profile_ops)")
    if prof.get("why_not"):
        raise ConfigError(f"{_name(about)}: no profile: {prof['why_not']}")
    return about, prof


def _name(about: dict[str, Any]) -> str:
    return f"{about.get('benchmark')} at {about.get('gpus')} GPU(s) ({about.get('label') or about.get('key')})"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 4)


PROFILE = Command("profile", "op-level profiles of cells run with profile_ops: show CELL (its operations by time per "
                             "step), diff A B (where the step's time went between two)", cmd_profile, (
    arg("action", choices=["show", "diff"]),
    arg("targets", nargs="+", metavar="CELL", help="a cell key or an attempt folder (diff: A, then B)"),
    arg("--kind", choices=["op", "kernel"], default="op", help="diff: operations (default) or device kernels"),
), listing=True)
