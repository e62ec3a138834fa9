"""PASCAL VOC2012 instance segmentation in its real VOCdevkit layout, and its COCO-style json.

VOCdevkit/VOC2012/ImageSets/Segmentation/{train,val}.txt name the ids; each id has
JPEGImages/<id>.jpg, SegmentationClass/<id>.png (class index per pixel, 0 background) and
SegmentationObject/<id>.png (instance index per pixel, 1..K, 0 background); both are palette
PNGs with 255 on object outlines and "difficult" areas. Every instance must carry one class in
the class PNG: where they disagree the dataset is broken and the reader says which file.
`to_coco` writes what mmdetection's CocoDataset reads (its VOCDataset has no masks): boxes,
areas and uncompressed RLE masks (`masks.encode`, as pycocotools defines them).
`write_synthetic` writes the layout with objects a detector learns.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import masks
from .voc_seg import CLASSES, IGNORE, NUM_CLASSES, SPLIT_DIR, SPLITS, palette
from .voc_tree import VocFormatError, VocTree

DIRNAME = "VOC2012"
TREE = VocTree(DIRNAME, SPLIT_DIR, SPLITS, (("JPEGImages", ".jpg"), ("SegmentationClass", ".png"),
                                            ("SegmentationObject", ".png")))
base_dir, split_ids, expected_files = TREE.base_dir, TREE.split_ids, TREE.expected_files
SYNTHETIC_CLASSES = (1, 7, 12)  # aeroplane, car, dog


@dataclass
class Instance:
    label: int             # 1-20
    mask: np.ndarray       # (H, W) bool
    bbox: list[float]      # xmin, ymin, xmax, ymax (0-based pixel edges)

    @property
    def area(self) -> int:
        return int(self.mask.sum())


def _png(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise VocFormatError(f"{path}: PNG missing")
    try:
        with Image.open(path) as im:
            if im.mode not in ("P", "L"):
                raise VocFormatError(f"{path}: expected a palette PNG of indices, got mode {im.mode}")
            return np.asarray(im, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise VocFormatError(f"{path}: not a readable PNG ({exc})") from None


def read_instances(root: str | Path, image_id: str) -> list[Instance]:
    """The instances of one image, each with its class from the class PNG."""
    base = base_dir(root)
    cls_path, obj_path = base / "SegmentationClass" / f"{image_id}.png", base / "SegmentationObject" / f"{image_id}.png"
    cls, obj = _png(cls_path), _png(obj_path)
    if cls.shape != obj.shape:
        raise VocFormatError(f"{obj_path}: size {obj.shape[::-1]} differs from {cls_path} {cls.shape[::-1]}")
    bad = np.setdiff1d(np.unique(cls), [*range(NUM_CLASSES), IGNORE])
    if bad.size:
        raise VocFormatError(f"{cls_path}: pixel value(s) {bad[:5].tolist()} are neither a class (0-20) nor 255")
    out = []
    for k in sorted(set(np.unique(obj).tolist()) - {0, IGNORE}):
        mask = obj == k
        labels = np.unique(cls[mask])
        if labels.size != 1 or labels[0] in (0, IGNORE):
            raise VocFormatError(f"{obj_path}: object {k} covers class value(s) {labels.tolist()} in {cls_path}; "
                                 "expected exactly one object class (1-20)")
        ys, xs = np.nonzero(mask)
        out.append(Instance(int(labels[0]), mask, [float(xs.min()), float(ys.min()), float(xs.max() + 1),
                                                   float(ys.max() + 1)]))
    return out


def to_coco(root: str | Path, split: str, limit: int | None = None) -> dict:
    """COCO-style instances json of a split: images, annotations (bbox xywh, area, RLE), the 20
    categories with VOC's names and ids 1-20."""
    from PIL import Image

    base = base_dir(root)
    images: list[dict] = []
    annotations: list[dict] = []
    for n, image_id in enumerate(split_ids(root, split)[:limit], start=1):
        jpg = base / "JPEGImages" / f"{image_id}.jpg"
        if not jpg.is_file():
            raise VocFormatError(f"{jpg}: image missing (named by {SPLIT_DIR / split}.txt)")
        with Image.open(jpg) as im:
            width, height = im.size
        images.append({"id": n, "file_name": f"{image_id}.jpg", "width": width, "height": height,
                       "voc_id": image_id})
        for inst in read_instances(root, image_id):
            if inst.mask.shape != (height, width):
                raise VocFormatError(f"{base / 'SegmentationObject' / (image_id + '.png')}: size "
                                     f"{inst.mask.shape[::-1]} differs from {jpg} ({width}, {height})")
            x1, y1, x2, y2 = inst.bbox
            annotations.append({"id": len(annotations) + 1, "image_id": n, "category_id": inst.label,
                                "bbox": [x1, y1, x2 - x1, y2 - y1], "area": inst.area, "iscrowd": 0,
                                "segmentation": masks.encode(inst.mask)})
    return {"images": images, "annotations": annotations,
            "categories": [{"id": i, "name": name} for i, name in enumerate(CLASSES) if i]}


def truths(coco: dict) -> list[dict]:
    """to_coco's json as the metrics' ground truth: VOC ids, xyxy boxes, RLE masks, in image order
    (read from the json, so the PNGs are decoded once per dataset)."""
    by_image = {img["id"]: {"image_id": img["voc_id"], "boxes": [], "labels": [], "difficult": [], "masks": []}
                for img in coco["images"]}
    for ann in coco["annotations"]:
        t, (x, y, w, h) = by_image[ann["image_id"]], ann["bbox"]
        t["boxes"].append([x, y, x + w, y + h])
        t["labels"].append(ann["category_id"])
        t["difficult"].append(False)  # VOC marks difficult areas with 255 in the PNGs, not per object
        t["masks"].append(ann["segmentation"])
    return list(by_image.values())


def _draw(rng: np.random.Generator, size: int, colours: dict[int, np.ndarray]):
    """1-3 objects; later ones may touch or overlap earlier ones (VOC draws the front object)."""
    yy, xx = np.mgrid[0:size, 0:size]
    image = rng.normal(110, 20, size=(size, size, 3))
    cls = np.zeros((size, size), dtype=np.uint8)
    obj = np.zeros((size, size), dtype=np.uint8)
    for k in range(1, int(rng.integers(1, 4)) + 1):
        c = int(rng.choice(SYNTHETIC_CLASSES))
        cy, cx = rng.uniform(0.25, 0.75, size=2) * size
        ry, rx = rng.uniform(0.12, 0.25, size=2) * size
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        if c == 7:  # cars are boxes: the shape is a cue too
            inside = (np.abs(yy - cy) <= ry) & (np.abs(xx - cx) <= rx)
        image[inside] = colours[c] + rng.normal(0, 10, size=(int(inside.sum()), 3))
        cls[inside], obj[inside] = c, k
    edge = np.zeros((size, size), dtype=bool)  # a 1-pixel 255 outline where objects change, in both PNGs
    edge[1:, :] |= obj[1:, :] != obj[:-1, :]
    edge[:, 1:] |= obj[:, 1:] != obj[:, :-1]
    cls[edge], obj[edge] = IGNORE, IGNORE
    # an object hidden entirely by later ones is gone from both PNGs: renumber what is left
    left = [k for k in np.unique(obj).tolist() if k not in (0, IGNORE)]
    renum = np.zeros(256, dtype=np.uint8)
    renum[IGNORE] = IGNORE
    for new, k in enumerate(left, start=1):
        renum[k] = new
    return np.clip(image, 0, 255).astype(np.uint8), cls, renum[obj]


def write_synthetic(root: str | Path, train_images: int = 60, test_images: int = 20, seed: int = 0,
                    size: int = 128) -> Path:
    """A VOCdevkit/VOC2012 tree under root: JPEGs, class and object palette PNGs that agree
    (255 outlines in both), ImageSets/Segmentation/{train,val}.txt."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    colours = {c: np.asarray(v, dtype=float) for c, v in zip(SYNTHETIC_CLASSES, ([220, 40, 40], [40, 200, 60],
                                                                              [50, 70, 230]))}
    base = Path(root) / "VOCdevkit" / DIRNAME
    for sub in ("JPEGImages", "SegmentationClass", "SegmentationObject", SPLIT_DIR):
        (base / sub).mkdir(parents=True, exist_ok=True)
    start = 0
    for split, count in zip(SPLITS, (train_images, test_images)):
        ids = [f"2012_{start + k:06d}" for k in range(count)]
        start += count
        for i in ids:
            image, cls, obj = _draw(rng, size, colours)
            Image.fromarray(image).save(base / "JPEGImages" / f"{i}.jpg", quality=95)
            for arr, sub in ((cls, "SegmentationClass"), (obj, "SegmentationObject")):
                png = Image.fromarray(arr, mode="P")
                png.putpalette(palette())
                png.save(base / sub / f"{i}.png")
        (base / SPLIT_DIR / f"{split}.txt").write_text("\n".join(ids) + "\n")
    return Path(root) / "VOCdevkit"
