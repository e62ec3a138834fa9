"""The cell contract: cell.json in (what to run), metrics.json out (what happened).

The JSON schema next to this file is the single source of truth; the orchestrator validates
with the same functions.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .names import RESULT_FILE

CONTRACT_VERSION = 1


class ContractError(ValueError):
    """A cell spec or result that does not match the contract; says which file and field."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("contract.schema.json").read_text())


def _find_nonfinite(value: Any, path: str = "") -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path or "/"
    if isinstance(value, dict):
        for k, v in value.items():
            hit = _find_nonfinite(v, f"{path}/{k}")
            if hit:
                return hit
    if isinstance(value, list):
        for i, v in enumerate(value):
            hit = _find_nonfinite(v, f"{path}/{i}")
            if hit:
                return hit
    return None


def contract_errors(doc: Any, kind: str = "result") -> list[str]:
    """All contract violations of `doc` (kind 'result' or 'cell_spec'), as 'field: message'."""
    import jsonschema

    full = dict(schema())
    validator = jsonschema.Draft202012Validator({**full, **full[kind]})
    errors = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        errors.append(f"{where}: {err.message}")
    bad = _find_nonfinite(doc)
    if bad:
        errors.append(f"{bad.lstrip('/')}: not a finite number (NaN or infinity)")
    return errors


def validate_contract(doc: Any, kind: str = "result", source: str = "<memory>") -> dict:
    errors = contract_errors(doc, kind)
    if errors:
        raise ContractError(f"{source}: does not match the {kind} contract v{CONTRACT_VERSION}: " + "; ".join(errors[:8]))
    return doc


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ContractError(f"{path}: file missing") from None
    except json.JSONDecodeError as exc:
        raise ContractError(f"{path}: not valid JSON ({exc})") from None


def load_cell_spec(path: str | Path) -> dict:
    return validate_contract(read_json(path), "cell_spec", str(path))


def load_result(path: str | Path) -> dict:
    return validate_contract(read_json(path), "result", str(path))


def write_json_atomic(path: str | Path, doc: Any) -> Path:
    """Write via a temp file + rename so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def write_result(out_dir: str | Path, doc: dict) -> Path:
    """Validate and write metrics.json; an invalid result is never written as valid."""
    validate_contract(doc, "result", str(Path(out_dir) / RESULT_FILE))
    return write_json_atomic(Path(out_dir) / RESULT_FILE, doc)
