"""Dataset registry shared by trainers and the orchestrator: layout checks, fingerprints, synthetic data."""
from __future__ import annotations

import hashlib
from pathlib import Path

from . import cifar10

# format name -> (sub-folder, files that must exist, synthetic writer)
FORMATS = {
    "cifar10-python": (cifar10.DIRNAME, cifar10.EXPECTED_FILES, cifar10.write_synthetic),
}


def _format(fmt: str):
    try:
        return FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown dataset format {fmt!r}; known: {sorted(FORMATS)}") from None


def missing_files(root: str | Path, fmt: str) -> list[str]:
    sub, files, _ = _format(fmt)
    base = Path(root) / sub
    return [str(base / f) for f in files if not (base / f).is_file()]


def fingerprint(root: str | Path, fmt: str) -> str:
    """sha256 over the format's files (names and bytes), so any change in the data shows."""
    sub, files, _ = _format(fmt)
    digest = hashlib.sha256()
    for name in sorted(files):
        path = Path(root) / sub / name
        digest.update(name.encode() + b"\0")
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def write_synthetic(root: str | Path, fmt: str, **sizes) -> Path:
    return _format(fmt)[2](root, **sizes)
