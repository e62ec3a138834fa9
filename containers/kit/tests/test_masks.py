"""Masks as COCO run-length encodings (uncompressed and COCO's compact string) and the
instance scores on masks, on hand-made masks with known overlaps."""
import numpy as np
import pytest

from scalebench_kit import masks
from scalebench_kit.metrics import instance_scores


@pytest.mark.parametrize("make", [
    lambda rng: rng.random((37, 23)) < 0.3,                 # many short runs
    lambda rng: np.ones((5, 4), dtype=bool),                # starts with a 1: a leading 0-run
    lambda rng: np.zeros((3, 3), dtype=bool),
    lambda rng: np.pad(np.ones((300, 200), bool), 40),      # long runs: multi-group counts
])
def test_rle_round_trips_uncompressed_and_compressed(make):
    mask = make(np.random.default_rng(0))
    rle = masks.encode(mask)
    assert sum(rle["counts"]) == mask.size and rle["size"] == list(mask.shape)
    packed = masks.compress(mask)
    assert isinstance(packed["counts"], str) and packed == masks.compress(rle)
    assert (masks.decode(rle) == mask).all() and (masks.decode(packed) == mask).all()
    assert (masks.decode({**packed, "counts": packed["counts"].encode()}) == mask).all()  # pycocotools gives bytes


def test_a_corrupt_rle_says_what_is_wrong():
    with pytest.raises(ValueError, match=r"runs add up to 5 pixels, its size 2x3 has 6"):
        masks.decode({"size": [2, 3], "counts": [1, 4]})


def blob(y0, y1, x0, x1, shape=(20, 20)):
    m = np.zeros(shape, dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def test_instance_scores_measure_masks_apart_from_boxes():
    """Two objects of class 1. Detection A has the right box but only half the mask; detection B
    matches object 2's mask exactly. On boxes both are hits; on masks A is a miss at 0.5."""
    obj1, obj2 = blob(0, 10, 0, 10), blob(12, 20, 12, 20)
    truths = [{"image_id": "a", "labels": [1, 1], "difficult": [False, False],
               "boxes": [[0, 0, 10, 10], [12, 12, 20, 20]], "masks": [masks.encode(obj1), masks.encode(obj2)]}]
    half = blob(0, 10, 0, 10) & (np.arange(20)[None, :] < 4)     # 40 of obj1's 100 pixels
    dets = [{"image_id": "a", "label": 1, "score": 0.9, "bbox": [0, 0, 10, 10], "mask": masks.compress(half)},
            {"image_id": "a", "label": 1, "score": 0.8, "bbox": [12, 12, 20, 20], "mask": masks.compress(obj2)}]
    s = instance_scores(dets, truths, num_classes=3)
    assert (s["precision"], s["recall"], s["iou"], s["map50"]) == (1.0, 1.0, 1.0, 1.0)
    assert (s["mask_precision"], s["mask_recall"], s["mask_iou"]) == (0.5, 0.5, 1.0)
    # ranked fp (IoU 0.4) then tp: precision 0, 0.5 at recall 0, 0.5 -> VOC's area AP 0.25;
    # COCO reads the monotone precision 0.5 at 51 of its 101 recall points (0 to 0.5)
    assert s["mask_map50"] == pytest.approx(0.25) and s["mask_map"] == pytest.approx(0.5 * 51 / 101)
    assert s["detections"] == 2


def test_a_0_255_mask_is_the_same_mask_as_a_0_1_one():
    png = np.array([[0, 255], [255, 255]], dtype=np.uint8)
    assert masks.decode(masks.encode([[255]])).tolist() == [[True]]
    assert masks.decode(masks.encode(png)).tolist() == [[False, True], [True, True]]
    assert masks.encode(png) == masks.encode(png > 0) == masks.encode(png // 255)
    assert masks.iou(png, png).tolist() == [1.0] and masks.iou(png, [png == 0]).tolist() == [0.0]


def test_masks_of_different_shapes_are_refused_not_reshaped():
    a = np.ones((2, 3), dtype=bool)
    with pytest.raises(ValueError, match=r"masks of one shape: \(2, 3\) against \(3, 2\)"):
        masks.iou(a, np.ones((1, 3, 2), dtype=bool))  # the same pixel count, another shape
    with pytest.raises(ValueError, match=r"must be 2-D"):
        masks.encode(np.ones((2, 2, 2)))
