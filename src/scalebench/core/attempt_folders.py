"""Where a run's files live on disk: results/<dag_id>/<run_id>/<cell_id>/attempt-<n>/, one
folder per try of a cell, holding the files named in scalebench_kit.names.

A folder is never reused: an attempt's number is its Airflow try number unless that folder
exists already (a deleted and re-created run, a repeated `dags test`, tries that start at 1
again), and then the next number past every folder of the cell.

Names are one-to-one: a name of letters, digits and _ . - is its own folder; any other gets its
readable form (every other character `_`) plus `@` and a hash of the exact name, and `@` is never
in a name kept as it is, so two run ids never share a folder. Folders written before (the
readable form alone) are still read, where their cell.json names the same run."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Mapping

from scalebench_kit.names import CELL_SPEC_FILE

from scalebench.core import paths


MAX_NAME = 200  # characters of a name that becomes one folder (file systems allow 255 bytes)
KEPT = re.compile(r"[A-Za-z0-9_.-]+")  # a name of only these is its own folder
HASH_MARK = "@"  # joins a readable form and its hash; never in a kept name
HASH_CHARS = 16  # hex characters of sha256: 64 bits


class UnsafeName(ValueError):
    """A name (a run id, a DAG id) that cannot become a folder: it says which and why."""


def safe(name: str) -> str:
    """A name usable as a folder or DAG id: anything but letters, digits, _ . - becomes _ (the
    same name always gives the same folder)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def segment(name: str, what: str = "run id") -> str:
    """`name` as its own folder below its parent, one-to-one (see the module), or UnsafeName:
    never empty, never only dots (a folder outside or beside its own), at most MAX_NAME characters."""
    out = safe(name)
    if not out or set(out) == {"."}:
        raise UnsafeName(f"{what} {name!r} cannot name a folder: it would be "
                         f"{'empty' if not out else 'the folder ' + repr(out) + ' (outside its own)'}")
    if len(out) > MAX_NAME:
        raise UnsafeName(f"{what} {name[:40]!r}... is {len(name)} characters; at most {MAX_NAME} name a folder")
    if KEPT.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    return f"{out}{HASH_MARK}{digest}"


def run_dir(dag_id: str, run_id: str) -> Path:
    return paths.results_dir() / segment(dag_id, "DAG id") / segment(run_id)


def attempt_dir(cell: Mapping[str, Any], attempt: int) -> Path:
    return run_dir(cell["dag_id"], cell["run_id"]) / segment(cell["cell_id"], "cell id") / f"attempt-{attempt}"


def _attempts_in(base: Path) -> list[tuple[int, Path]]:
    return [(int(p.name.split("-", 1)[1]), p) for p in base.glob("attempt-*") if p.name.split("-", 1)[1].isdigit()]


def _names_run(folder: Path, run_id: str) -> bool:
    try:
        return json.loads((folder / CELL_SPEC_FILE).read_text())["cell"]["run_id"] == run_id
    except (OSError, ValueError, KeyError, TypeError):
        return False


def cell_attempts(cell: Mapping[str, Any]) -> list[tuple[int, Path]]:
    """The cell's attempt folders, (number, folder), by number (attempt-10 after attempt-9); with
    those written under the run's folder name from before one-to-one names, where their cell.json
    names this run (that name was shared by other run ids)."""
    found = _attempts_in(attempt_dir(cell, 1).parent)
    legacy = paths.results_dir() / safe(cell["dag_id"]) / safe(cell["run_id"]) / cell["cell_id"]
    if legacy != attempt_dir(cell, 1).parent:
        found += [(n, p) for n, p in _attempts_in(legacy) if _names_run(p, cell["run_id"])]
    return sorted(found)


def claim(cell: Mapping[str, Any], try_number: int) -> tuple[int, Path]:
    """A new attempt folder for this try, created here (mkdir is atomic: two claimants never share
    one); its number is the try number when free, else past every folder the cell has."""
    taken = {n for n, _ in cell_attempts(cell)}
    number = try_number if try_number not in taken else max(taken) + 1
    while True:
        out = attempt_dir(cell, number)
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            out.mkdir()
            return number, out
        except FileExistsError:
            number = max([number] + [n for n, _ in cell_attempts(cell)]) + 1


def contract_mismatch(cell: Mapping[str, Any], attempt: int, contract: dict) -> str | None:
    """Why a result contract is not this folder's (another cell, benchmark, run or attempt), naming
    both sides; None when it is."""
    says = contract.get("cell") or {}
    wrong = [f"{name} {says.get(field)!r} (the folder's is {want!r})"
             for name, field, want in (("cell key", "key", cell["key"]), ("benchmark", "benchmark", cell["benchmark"]),
                                       ("run", "run_id", cell["run_id"]), ("attempt", "attempt", attempt))
             if says.get(field) != want]
    return f"the contract names {', '.join(wrong)}: it is not this attempt's result" if wrong else None


def find_attempt(dag_id: str, run_id: str, key: str, attempt: int) -> Path | None:
    """A stored cell's attempt folder found by its cell.json's key under the run's folder (a cell
    folder's name is not stored: a rerun's or bisect's carries its role), None where none is."""
    try:
        base = run_dir(dag_id, run_id)
    except UnsafeName:
        return None
    for folder in sorted(base.glob(f"*/attempt-{int(attempt)}")):
        try:
            if json.loads((folder / CELL_SPEC_FILE).read_text())["cell"]["key"] == key:
                return folder
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None
