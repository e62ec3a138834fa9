"""CIFAR-10 in its real "python version" on-disk format (cifar-10-batches-py/).

data_batch_1..5 and test_batch are pickled dicts with bytes keys: b"data" (uint8, N x 3072,
R, G, B planes of 32x32 row-major), b"labels", b"filenames", b"batch_label"; batches.meta has
b"label_names". `write_synthetic` writes small learnable data in exactly that format.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

DIRNAME = "cifar-10-batches-py"
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_FILE = "test_batch"
META_FILE = "batches.meta"
LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
EXPECTED_FILES = [*TRAIN_FILES, TEST_FILE, META_FILE]


def _load(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return pickle.load(fh, encoding="bytes")
    except FileNotFoundError:
        raise FileNotFoundError(f"CIFAR-10 file missing: {path} (expected {DIRNAME}/ with {', '.join(EXPECTED_FILES)})") from None


def read_split(root: str | Path, split: str, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images as uint8 NHWC (N, 32, 32, 3) and int64 labels, for split 'train' or 'test'."""
    base = Path(root) / DIRNAME if (Path(root) / DIRNAME).is_dir() else Path(root)
    files = TRAIN_FILES if split == "train" else [TEST_FILE]
    xs, ys, have = [], [], 0
    for name in files:
        batch = _load(base / name)
        try:
            data, labels = batch[b"data"], batch[b"labels"]
        except KeyError as exc:
            raise ValueError(f"{base / name}: not a CIFAR-10 python batch (missing key {exc.args[0]!r})") from None
        data = np.asarray(data, dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != data.shape[0]:
            raise ValueError(f"{base / name}: b'data' must be N x 3072 uint8 with N labels, "
                             f"got {data.shape} and {len(labels)} labels")
        xs.append(data)
        ys.append(np.asarray(labels, dtype=np.int64))
        have += data.shape[0]
        if limit is not None and have >= limit:
            break
    x = np.concatenate(xs)[:limit].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    y = np.concatenate(ys)[:limit]
    return np.ascontiguousarray(x), y


def _class_templates(rng: np.random.Generator) -> np.ndarray:
    # Low-frequency colour patterns, one per class: easy enough that a few epochs learn them.
    coarse = rng.uniform(0, 255, size=(10, 3, 4, 4))
    return np.repeat(np.repeat(coarse, 8, axis=2), 8, axis=3)


def write_synthetic(root: str | Path, train_images: int = 500, test_images: int = 100, seed: int = 0) -> Path:
    """Write learnable synthetic CIFAR-10 (real format) under root/cifar-10-batches-py."""
    rng = np.random.default_rng(seed)
    templates = _class_templates(rng)
    out = Path(root) / DIRNAME
    out.mkdir(parents=True, exist_ok=True)

    def make(n: int) -> tuple[np.ndarray, list[int]]:
        labels = rng.integers(0, 10, size=n)
        noise = rng.normal(0, 40, size=(n, 3, 32, 32))
        images = np.clip(0.7 * templates[labels] + noise + 38, 0, 255).astype(np.uint8)
        return images.reshape(n, 3072), [int(v) for v in labels]

    def dump(name: str, data: np.ndarray, labels: list[int], batch_label: str) -> None:
        doc = {
            b"batch_label": batch_label.encode(),
            b"labels": labels,
            b"data": data,
            b"filenames": [f"synthetic_{name}_{i:06d}.png".encode() for i in range(len(labels))],
        }
        with (out / name).open("wb") as fh:
            pickle.dump(doc, fh, protocol=2)

    per_batch = np.array_split(np.arange(train_images), len(TRAIN_FILES))
    for i, (name, idx) in enumerate(zip(TRAIN_FILES, per_batch), start=1):
        data, labels = make(len(idx))
        dump(name, data, labels, f"synthetic training batch {i} of 5")
    data, labels = make(test_images)
    dump(TEST_FILE, data, labels, "synthetic testing batch 1 of 1")
    with (out / META_FILE).open("wb") as fh:
        pickle.dump({b"label_names": [n.encode() for n in LABEL_NAMES], b"num_cases_per_batch": len(per_batch[0]),
                     b"num_vis": 3072}, fh, protocol=2)
    return out
