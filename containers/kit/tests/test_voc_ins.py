"""VOC2012 instances: the reader on hand-made PNGs with known instances, broken trees, the
COCO converter (RLE decoded back), and the synthetic generator."""
import json

import numpy as np
import pytest
from PIL import Image

from scalebench_kit import datasets, masks, voc_ins
from scalebench_kit.voc_seg import VocFormatError, palette


def put(base, image_id, cls, obj, size=None):
    h, w = cls.shape
    Image.fromarray(np.full((h, w, 3), 120, dtype=np.uint8)).save(base / "JPEGImages" / f"{image_id}.jpg")
    for arr, sub in ((cls, "SegmentationClass"), (obj, "SegmentationObject")):
        png = Image.fromarray(arr.astype(np.uint8), mode="P")
        png.putpalette(palette())
        png.save(base / sub / f"{image_id}.png")


@pytest.fixture
def hand(tmp_path):
    """Two touching dogs split by a 255 outline, a car; an image with no object."""
    base = tmp_path / "VOCdevkit" / "VOC2012"
    for sub in ("JPEGImages", "SegmentationClass", "SegmentationObject", "ImageSets/Segmentation"):
        (base / sub).mkdir(parents=True)
    cls = np.zeros((6, 8), dtype=np.uint8)
    obj = np.zeros((6, 8), dtype=np.uint8)
    cls[1:3, 0:3], obj[1:3, 0:3] = 12, 1      # dog 1: 2x3
    cls[1:3, 3], obj[1:3, 3] = 255, 255       # the outline between them
    cls[1:3, 4:6], obj[1:3, 4:6] = 12, 2      # dog 2, touching through the outline: 2x2
    cls[4:6, 6:8], obj[4:6, 6:8] = 7, 3       # a car: 2x2
    put(base, "a", cls, obj)
    put(base, "empty", np.zeros((6, 8)), np.zeros((6, 8)))
    (base / "ImageSets/Segmentation/train.txt").write_text("a\nempty\n")
    (base / "ImageSets/Segmentation/val.txt").write_text("empty\n")
    return tmp_path, base


def test_instances_with_touching_objects_an_outline_and_an_empty_image(hand):
    root, _ = hand
    inst = voc_ins.read_instances(root, "a")
    assert [(i.label, i.area, i.bbox) for i in inst] == [(12, 6, [0, 1, 3, 3]), (12, 4, [4, 1, 6, 3]),
                                                        (7, 4, [6, 4, 8, 6])]
    assert voc_ins.read_instances(root, "empty") == []


def test_coco_json_boxes_areas_and_rle_masks_decode_back(hand):
    root, _ = hand
    coco = voc_ins.to_coco(root, "train")
    assert [i["file_name"] for i in coco["images"]] == ["a.jpg", "empty.jpg"]
    assert len(coco["categories"]) == 20 and coco["categories"][11] == {"id": 12, "name": "dog"}
    anns = coco["annotations"]
    assert [(a["image_id"], a["category_id"], a["bbox"], a["area"]) for a in anns] == [
        (1, 12, [0, 1, 3, 2], 6), (1, 12, [4, 1, 2, 2], 4), (1, 7, [6, 4, 2, 2], 4)]
    for a, want in zip(anns, voc_ins.read_instances(root, "a")):
        counts, (h, w) = a["segmentation"]["counts"], a["segmentation"]["size"]
        flat = np.repeat(np.arange(len(counts)) % 2, counts).astype(bool)  # runs alternate 0s and 1s
        assert (flat.reshape((w, h)).T == want.mask).all() and sum(counts) == h * w


def test_truths_from_the_coco_json_match_the_pngs_read_directly(hand):
    root, _ = hand
    truths = voc_ins.truths(json.loads(json.dumps(voc_ins.to_coco(root, "train"))))  # as read back from the cache
    assert [t["image_id"] for t in truths] == ["a", "empty"] and truths[1]["labels"] == []
    direct = voc_ins.read_instances(root, "a")
    assert truths[0]["boxes"] == [i.bbox for i in direct] and truths[0]["labels"] == [i.label for i in direct]
    assert all((masks.decode(m) == i.mask).all() for m, i in zip(truths[0]["masks"], direct))
    assert truths[0]["difficult"] == [False] * 3


@pytest.mark.parametrize("break_it, expected", [
    (lambda b: (b / "SegmentationObject/a.png").write_bytes(b"not a png"), "SegmentationObject/a.png: not a readable PNG"),
    (lambda b: (b / "SegmentationClass/a.png").unlink(), "SegmentationClass/a.png: PNG missing"),
    (lambda b: put(b, "a", np.where(np.arange(48).reshape(6, 8) < 3, 12, 0), np.where(np.arange(48).reshape(6, 8) < 5, 1, 0)),
     "object 1 covers class value\\(s\\) \\[0, 12\\]"),
])
def test_broken_pngs_name_the_file(hand, break_it, expected):
    root, base = hand
    break_it(base)
    with pytest.raises(VocFormatError, match=expected):
        voc_ins.to_coco(root, "train")


def test_synthetic_tree_is_the_devkit_layout_with_agreeing_pngs(tmp_path):
    voc_ins.write_synthetic(tmp_path, train_images=6, test_images=2, size=64, seed=3)
    assert datasets.missing_files(tmp_path, "vocdevkit-2012-ins") == []
    coco = voc_ins.to_coco(tmp_path, "train")
    assert len(coco["images"]) == 6 and len(coco["annotations"]) >= 6
    assert {a["category_id"] for a in coco["annotations"]} <= set(voc_ins.SYNTHETIC_CLASSES)
    obj = np.asarray(Image.open(tmp_path / "VOCdevkit/VOC2012/SegmentationObject/2012_000000.png"))
    assert 255 in obj  # outlines, as VOC draws them
