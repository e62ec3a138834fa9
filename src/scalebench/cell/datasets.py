"""Dataset location and checks for a benchmark run (the 'check dataset' step)."""
from __future__ import annotations

from pathlib import Path

from scalebench_kit import datasets as kit_datasets

from scalebench.core import paths
from scalebench.core.config import Benchmark, Host


class DatasetError(RuntimeError):
    """Dataset missing or malformed; the message names the path and what was expected."""


def dataset_root(bench: Benchmark, profile: str, host: Host) -> Path:
    res = bench.resolved(profile)
    if res.synthetic_data:
        # the format too: VOC2007 segmentation and detection share a name but not a layout
        name = f"{bench.dataset.name}-{bench.dataset.format}-{res.train_images}x{res.test_images}"
        return paths.synthetic_data_dir() / name
    if not host.data_root:
        raise DatasetError(f"host {host.name!r} has no data_root in the fleet config; profile {profile!r} of "
                           f"{bench.id} needs the real {bench.dataset.name} dataset")
    return Path(host.data_root) / bench.dataset.path


def prepare(bench: Benchmark, profile: str, host: Host, *, make_synthetic: bool = True) -> dict:
    """Check the dataset (making the smoke profile's synthetic data if absent) and fingerprint it."""
    res = bench.resolved(profile)
    root = dataset_root(bench, profile, host)
    fmt = bench.dataset.format
    try:
        if res.synthetic_data and make_synthetic and kit_datasets.missing_files(root, fmt):
            kit_datasets.write_synthetic(root, fmt, train_images=res.train_images, test_images=res.test_images, seed=1234)
        missing = kit_datasets.missing_files(root, fmt)
    except ValueError as exc:
        raise DatasetError(f"{bench.id}: dataset {bench.dataset.name!r}: {exc}") from None
    if missing:
        raise DatasetError(f"{bench.id}: dataset {bench.dataset.name!r} ({fmt}) missing at {root}: "
                           f"{len(missing)} expected file(s) absent, e.g. {missing[:3]}")
    return {"root": str(root), "format": fmt, "name": bench.dataset.name, "synthetic": res.synthetic_data,
            "fingerprint": kit_datasets.fingerprint(root, fmt)}
