"""Dataset registry shared by trainers and the orchestrator: layout checks, fingerprints, synthetic data."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import cifar10, voc_det, voc_ins, voc_seg
from .names import DATASET_FORMATS, DatasetFormat


@dataclass(frozen=True)
class Format:
    base: Callable[[Path], Path]            # the folder the format's files are relative to
    expected: Callable[[Path], list[str]]   # the files that must exist (may depend on split files)
    write_synthetic: Callable[..., Path]    # small learnable data in exactly this layout


FORMATS: dict[DatasetFormat, Format] = {
    "cifar10-python": Format(lambda root: Path(root) / cifar10.DIRNAME, lambda root: list(cifar10.EXPECTED_FILES),
                             cifar10.write_synthetic),
    "vocdevkit-2007-seg": Format(voc_seg.base_dir, voc_seg.expected_files, voc_seg.write_synthetic),
    "vocdevkit-2007-det": Format(voc_det.base_dir, voc_det.expected_files, voc_det.write_synthetic),
    "vocdevkit-2012-ins": Format(voc_ins.base_dir, voc_ins.expected_files, voc_ins.write_synthetic),
}
assert tuple(FORMATS) == DATASET_FORMATS, "every format named in scalebench_kit.names has a reader, and no other"


def _format(fmt: str) -> Format:
    try:
        return FORMATS[fmt]  # type: ignore[index]  # an unknown name is the KeyError below
    except KeyError:
        raise ValueError(f"unknown dataset format {fmt!r}; known: {sorted(FORMATS)}") from None


def missing_files(root: str | Path, fmt: str) -> list[str]:
    f = _format(fmt)
    base = f.base(Path(root))
    return [str(base / name) for name in f.expected(Path(root)) if not (base / name).is_file()]


def fingerprint(root: str | Path, fmt: str) -> str:
    """sha256 over the format's files (names and bytes), so any change in the data shows."""
    f = _format(fmt)
    base = f.base(Path(root))
    digest = hashlib.sha256()
    for name in sorted(f.expected(Path(root))):
        digest.update(name.encode() + b"\0")
        with (base / name).open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def write_synthetic(root: str | Path, fmt: str, **sizes) -> Path:
    return _format(fmt).write_synthetic(root, **sizes)
