"""PASCAL VOC2007 semantic segmentation in its real VOCdevkit layout.

VOCdevkit/VOC2007/ImageSets/Segmentation/{train,val}.txt name the ids; each id has
JPEGImages/<id>.jpg and SegmentationClass/<id>.png, a palette ("P" mode) PNG whose pixel values
are class indices 0-20 (0 = background) and 255 = ignore (object outlines, "difficult" areas).
`write_synthetic` writes exactly that layout with shapes a small UNet learns in a few dozen
steps. Pillow is imported inside the functions: images without it can still import the kit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .voc_tree import VocFormatError, VocTree  # noqa: F401  (VocFormatError: imported from here too)

DIRNAME = "VOC2007"
SPLITS = ("train", "val")
CLASSES = ["background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
           "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor"]
NUM_CLASSES = len(CLASSES)
IGNORE = 255
SPLIT_DIR = Path("ImageSets") / "Segmentation"
TREE = VocTree(DIRNAME, SPLIT_DIR, SPLITS, (("JPEGImages", ".jpg"), ("SegmentationClass", ".png")))
base_dir, split_ids, expected_files = TREE.base_dir, TREE.split_ids, TREE.expected_files


def palette() -> list[int]:
    """The VOC colour map (the devkit's bit-interleaving), 256 RGB triples flattened."""
    out = []
    for i in range(256):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        out += [r, g, b]
    return out


def read_mask(path: Path) -> np.ndarray:
    from PIL import Image

    if not path.is_file():
        raise VocFormatError(f"{path}: segmentation PNG missing")
    with Image.open(path) as im:
        if im.mode not in ("P", "L"):
            raise VocFormatError(f"{path}: expected a palette PNG of class indices, got mode {im.mode}")
        mask = np.asarray(im, dtype=np.uint8)
    bad = np.setdiff1d(np.unique(mask), [*range(NUM_CLASSES), IGNORE])
    if bad.size:
        raise VocFormatError(f"{path}: pixel value(s) {bad[:5].tolist()} are neither a class (0-{NUM_CLASSES - 1}) "
                             f"nor {IGNORE} (ignore)")
    return mask


def read_split(root: str | Path, split: str, size: int, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, size, size, 3) uint8 and masks (N, size, size) uint8, resized (bilinear for
    images, nearest for masks, so no new class values appear)."""
    from PIL import Image

    base = base_dir(root)
    ids = split_ids(root, split)[:limit]
    images = np.empty((len(ids), size, size, 3), dtype=np.uint8)
    masks = np.empty((len(ids), size, size), dtype=np.uint8)
    for k, i in enumerate(ids):
        jpg = base / "JPEGImages" / f"{i}.jpg"
        if not jpg.is_file():
            raise VocFormatError(f"{base / SPLIT_DIR / f'{split}.txt'} names {i!r}, but {jpg} is missing")
        with Image.open(jpg) as im:
            images[k] = np.asarray(im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR))
        mask = read_mask(base / "SegmentationClass" / f"{i}.png")
        masks[k] = np.asarray(Image.fromarray(mask).resize((size, size), Image.Resampling.NEAREST))
    return images, masks


# Synthetic data: each image holds 1-3 filled shapes of a few classes, each class with its own
# colour and texture on a noisy background, outlined by 255 as VOC outlines its objects.
SYNTHETIC_CLASSES = (1, 7, 12, 15)  # aeroplane, car, dog, person


def _draw(rng: np.random.Generator, size: int, colours: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    yy, xx = np.mgrid[0:size, 0:size]
    image = rng.normal(110, 25, size=(size, size, 3))
    mask = np.zeros((size, size), dtype=np.uint8)
    for _ in range(rng.integers(1, 4)):
        cls = int(rng.choice(SYNTHETIC_CLASSES))
        cy, cx = rng.uniform(0.2, 0.8, size=2) * size
        ry, rx = rng.uniform(0.12, 0.28, size=2) * size
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        if cls in (7, 15):  # boxes for some classes, ellipses for others: shape is a cue too
            inside = (np.abs(yy - cy) <= ry) & (np.abs(xx - cx) <= rx)
        image[inside] = colours[cls] + rng.normal(0, 12, size=(int(inside.sum()), 3))
        mask[inside] = cls
    edge = np.zeros_like(mask, dtype=bool)  # a 1-pixel ignore outline where labels change
    edge[1:, :] |= mask[1:, :] != mask[:-1, :]
    edge[:, 1:] |= mask[:, 1:] != mask[:, :-1]
    mask[edge] = IGNORE
    return np.clip(image, 0, 255).astype(np.uint8), mask


def write_synthetic(root: str | Path, train_images: int = 60, test_images: int = 20, seed: int = 0,
                    size: int = 64) -> Path:
    """A VOCdevkit/VOC2007 tree under root: JPEGs, palette PNGs with 255 outlines, split files."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    colours = {c: rng.uniform(20, 235, size=3) for c in SYNTHETIC_CLASSES}
    base = Path(root) / "VOCdevkit" / DIRNAME
    for sub in ("JPEGImages", "SegmentationClass", SPLIT_DIR):
        (base / sub).mkdir(parents=True, exist_ok=True)
    counts = {"train": train_images, "val": test_images}
    start = 0
    for split in SPLITS:
        ids = [f"2007_{start + k:06d}" for k in range(counts[split])]
        start += counts[split]
        for i in ids:
            image, mask = _draw(rng, size, colours)
            Image.fromarray(image).save(base / "JPEGImages" / f"{i}.jpg", quality=95)
            png = Image.fromarray(mask, mode="P")
            png.putpalette(palette())
            png.save(base / "SegmentationClass" / f"{i}.png")
        (base / SPLIT_DIR / f"{split}.txt").write_text("\n".join(ids) + "\n")
    return Path(root) / "VOCdevkit"
