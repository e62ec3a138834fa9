"""Binary masks as COCO run-length encodings, with numpy alone (pycocotools is in no image but
mmdetection's). Runs are over the column-major flattened mask and start with a run of 0s.
`encode` gives the uncompressed form ({"size": [h, w], "counts": [int, ...]}); `compress`
gives COCO's compact string form (what pycocotools' `encode` writes), a few times smaller,
which the raw detection files use. `decode` reads either."""
from __future__ import annotations

import numpy as np


def _binary(mask, what: str = "mask") -> np.ndarray:
    """Any non-zero pixel is set: a 0/255 PNG mask is the same mask as a 0/1 or bool one."""
    a = np.asarray(mask)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (H, W), got shape {a.shape}")
    return a != 0


def encode(mask: np.ndarray) -> dict:
    """Uncompressed RLE of a (H, W) mask (any non-zero value is set)."""
    mask = _binary(mask)
    flat = mask.astype(np.uint8).flatten(order="F")
    change = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], change, [flat.size]])).tolist()
    if flat.size and flat[0] == 1:
        runs = [0] + runs
    return {"counts": runs, "size": [int(mask.shape[0]), int(mask.shape[1])]}


def _to_string(counts: list[int]) -> str:
    """COCO's rleToString: each count (from the third on, as a difference to the count two
    before) in 5-bit groups, least significant first, 0x20 = more follows, offset by 48."""
    out = []
    for i, x in enumerate(counts):
        x = int(x) - (int(counts[i - 2]) if i > 2 else 0)
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | 0x20 if more else c) + 48))
    return "".join(out)


def _from_string(s: str) -> list[int]:
    counts: list[int] = []
    p = 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p, k = p + 1, k + 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        counts.append(x + (counts[-2] if len(counts) > 2 else 0))
    return counts


def compress(mask_or_rle) -> dict:
    """COCO's compressed RLE of a mask (or of an uncompressed RLE)."""
    rle = mask_or_rle if isinstance(mask_or_rle, dict) else encode(mask_or_rle)
    counts = rle["counts"]
    return {"size": list(rle["size"]), "counts": counts if isinstance(counts, str) else _to_string(counts)}


def decode(rle: dict) -> np.ndarray:
    """The (H, W) bool mask of an RLE, compressed (str or bytes counts) or not."""
    h, w = rle["size"]
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii")
    if isinstance(counts, str):
        counts = _from_string(counts)
    if sum(counts) != h * w:
        raise ValueError(f"RLE runs add up to {sum(counts)} pixels, its size {h}x{w} has {h * w}")
    flat = np.repeat(np.arange(len(counts)) % 2, counts).astype(bool)
    return flat.reshape((w, h)).T


def iou(mask: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one (H, W) mask with each of (K, H, W) masks (or one more (H, W) mask); any non-zero
    value is set. Masks of another shape are refused: their pixels do not correspond."""
    mask = _binary(mask)
    others = np.asarray(others)
    others = (others[None] if others.ndim == 2 else others) != 0
    if others.ndim != 3 or others.shape[1:] != mask.shape:
        raise ValueError(f"mask IoU needs masks of one shape: {mask.shape} against {np.asarray(others).shape[1:]}")
    inter = (others & mask).sum(axis=(1, 2))
    union = others.sum(axis=(1, 2)) + int(np.sum(mask)) - inter
    return np.divide(inter, union, out=np.zeros(len(others)), where=union > 0)
