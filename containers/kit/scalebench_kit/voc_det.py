"""PASCAL VOC2007 detection in its real VOCdevkit layout.

VOCdevkit/VOC2007/ImageSets/Main/{trainval,test}.txt name the ids; each id has
JPEGImages/<id>.jpg and Annotations/<id>.xml (the devkit's XML: size, and per object its class
name, pose, truncated, difficult and a 1-based pixel bndbox). The reader turns an annotation into
0-based [xmin, ymin, xmax, ymax] boxes with labels 1-20 (0 is background, as in the
segmentation classes) and keeps the `difficult` flags: the metrics ignore difficult objects, as
VOC does. `write_synthetic` writes exactly that layout with objects a detector learns from
scratch in a few dozen steps. Pillow is imported only where images are written.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .voc_seg import CLASSES, DIRNAME
from .voc_tree import VocFormatError, VocTree

SPLIT_DIR = Path("ImageSets") / "Main"
SPLITS = ("trainval", "test")
TREE = VocTree(DIRNAME, SPLIT_DIR, SPLITS, (("JPEGImages", ".jpg"), ("Annotations", ".xml")))
base_dir, split_ids, expected_files = TREE.base_dir, TREE.split_ids, TREE.expected_files
LABELS = {name: i for i, name in enumerate(CLASSES) if i}  # 20 object classes, 1-based
SYNTHETIC_CLASSES = ("aeroplane", "car", "dog")


@dataclass
class Annotation:
    image_id: str
    width: int
    height: int
    boxes: np.ndarray                  # (N, 4) float32, 0-based xmin, ymin, xmax, ymax in pixels
    labels: np.ndarray                 # (N,) int, 1-20
    difficult: np.ndarray              # (N,) bool
    names: list[str] = field(default_factory=list)


def _int(node: ET.Element, tag: str, path: Path) -> int:
    child = node.find(tag)
    if child is None or child.text is None:
        raise VocFormatError(f"{path}: <{node.tag}> has no <{tag}>")
    try:
        return int(float(child.text.strip()))
    except ValueError:
        raise VocFormatError(f"{path}: <{tag}> is {child.text.strip()!r}, expected a number") from None


def parse_annotation(path: str | Path) -> Annotation:
    """One Annotations/<id>.xml; a malformed file fails with its path and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise VocFormatError(f"{path}: annotation XML missing")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise VocFormatError(f"{path}: not well-formed XML ({exc})") from None
    size = root.find("size")
    if size is None:
        raise VocFormatError(f"{path}: no <size> element")
    width, height = _int(size, "width", path), _int(size, "height", path)
    boxes, labels, difficult, names = [], [], [], []
    for k, obj in enumerate(root.findall("object")):
        name = (obj.findtext("name") or "").strip()
        if name not in LABELS:
            raise VocFormatError(f"{path}: object {k} has class {name!r}, not one of the 20 VOC classes")
        bb = obj.find("bndbox")
        if bb is None:
            raise VocFormatError(f"{path}: object {k} ({name}) has no <bndbox>")
        x1, y1, x2, y2 = (_int(bb, t, path) for t in ("xmin", "ymin", "xmax", "ymax"))
        if not (1 <= x1 <= x2 <= width and 1 <= y1 <= y2 <= height):
            raise VocFormatError(f"{path}: object {k} ({name}) box {[x1, y1, x2, y2]} is not inside the "
                                 f"{width}x{height} image (1-based, xmin <= xmax, ymin <= ymax)")
        boxes.append([x1 - 1, y1 - 1, x2, y2])  # 1-based inclusive pixels -> 0-based edges
        labels.append(LABELS[name])
        difficult.append((obj.findtext("difficult") or "0").strip() == "1")
        names.append(name)
    return Annotation(image_id=path.stem, width=width, height=height,
                      boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
                      labels=np.asarray(labels, dtype=np.int64), difficult=np.asarray(difficult, dtype=bool),
                      names=names)


def read_split(root: str | Path, split: str, limit: int | None = None) -> list[tuple[Path, Annotation]]:
    """(image path, annotation) for each id of a split; every file is checked before training."""
    base = base_dir(root)
    out = []
    for image_id in split_ids(root, split)[:limit]:
        image = base / "JPEGImages" / f"{image_id}.jpg"
        if not image.is_file():
            raise VocFormatError(f"{image}: image missing (named by {SPLIT_DIR / split}.txt)")
        out.append((image, parse_annotation(base / "Annotations" / f"{image_id}.xml")))
    return out


def truths(records: list[tuple[Path, Annotation]]) -> list[dict]:
    """read_split's records as the metrics' ground truth (difficult objects flagged, not dropped)."""
    return [{"image_id": a.image_id, "boxes": a.boxes.tolist(), "labels": a.labels.tolist(),
             "difficult": a.difficult.tolist()} for _, a in records]


def annotation_xml(image_id: str, width: int, height: int, objects: list[tuple[str, list[int], bool]]) -> str:
    """The devkit's XML for one image; objects are (class name, 1-based [x1, y1, x2, y2], difficult)."""
    root = ET.Element("annotation")
    ET.SubElement(root, "folder").text = DIRNAME
    ET.SubElement(root, "filename").text = f"{image_id}.jpg"
    size = ET.SubElement(root, "size")
    for tag, v in (("width", width), ("height", height), ("depth", 3)):
        ET.SubElement(size, tag).text = str(v)
    ET.SubElement(root, "segmented").text = "0"
    for name, (x1, y1, x2, y2), hard in objects:
        obj = ET.SubElement(root, "object")
        ET.SubElement(obj, "name").text = name
        ET.SubElement(obj, "pose").text = "Unspecified"
        ET.SubElement(obj, "truncated").text = "0"
        ET.SubElement(obj, "difficult").text = "1" if hard else "0"
        bb = ET.SubElement(obj, "bndbox")
        for tag, v in (("xmin", x1), ("ymin", y1), ("xmax", x2), ("ymax", y2)):
            ET.SubElement(bb, tag).text = str(v)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def _draw(rng: np.random.Generator, size: int, colours: dict[str, np.ndarray]):
    """One image with 1-2 large, well separated objects: a solid colour and a shape per class."""
    yy, xx = np.mgrid[0:size, 0:size]
    image = rng.normal(110, 20, size=(size, size, 3))
    objects = []
    halves = rng.permutation([0, 1])[: rng.integers(1, 3)]  # left and/or right half: objects never overlap
    for half in halves:
        name = str(rng.choice(SYNTHETIC_CLASSES))
        w, h = (rng.uniform(0.25, 0.45, size=2) * size).astype(int)
        x1 = int(half * size / 2 + rng.uniform(0, size / 2 - w))
        y1 = int(rng.uniform(0, size - h))
        inside = (xx >= x1) & (xx < x1 + w) & (yy >= y1) & (yy < y1 + h)
        if name == "dog":  # an ellipse: the shape is a cue as well as the colour
            cy, cx = y1 + h / 2, x1 + w / 2
            inside = ((yy - cy) / (h / 2)) ** 2 + ((xx - cx) / (w / 2)) ** 2 <= 1.0
        image[inside] = colours[name] + rng.normal(0, 10, size=(int(inside.sum()), 3))
        objects.append((name, [x1 + 1, y1 + 1, x1 + w, y1 + h], bool(rng.random() < 0.1)))
    return np.clip(image, 0, 255).astype(np.uint8), objects


def write_synthetic(root: str | Path, train_images: int = 60, test_images: int = 20, seed: int = 0,
                    size: int = 128) -> Path:
    """A VOCdevkit/VOC2007 detection tree under root: JPEGs, XML annotations (about 1 object in
    10 marked difficult), ImageSets/Main/{trainval,test}.txt and the train/val halves."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    colours = {name: np.asarray(c, dtype=float)
               for name, c in zip(SYNTHETIC_CLASSES, ([220, 40, 40], [40, 200, 60], [50, 70, 230]))}
    base = Path(root) / "VOCdevkit" / DIRNAME
    for sub in ("JPEGImages", "Annotations", SPLIT_DIR):
        (base / sub).mkdir(parents=True, exist_ok=True)
    ids = {"trainval": [f"{k:06d}" for k in range(train_images)],
           "test": [f"{k:06d}" for k in range(train_images, train_images + test_images)]}
    for split_ids_ in ids.values():
        for i in split_ids_:
            image, objects = _draw(rng, size, colours)
            Image.fromarray(image).save(base / "JPEGImages" / f"{i}.jpg", quality=95)
            (base / "Annotations" / f"{i}.xml").write_text(annotation_xml(i, size, size, objects))
    for split, names in (*ids.items(), ("train", ids["trainval"][::2]), ("val", ids["trainval"][1::2])):
        (base / SPLIT_DIR / f"{split}.txt").write_text("\n".join(names) + "\n")
    return Path(root) / "VOCdevkit"
