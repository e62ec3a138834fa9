"""VOC2007 detection: the XML reader on the real layout (and broken trees), the synthetic
generator, and the detection metrics on hand-made cases with known answers."""
import numpy as np
import pytest

from scalebench_kit import datasets, voc_det
from scalebench_kit.metrics import box_iou, detection_scores, voc_ap
from scalebench_kit.voc_seg import VocFormatError


@pytest.fixture
def tree(tmp_path):
    voc_det.write_synthetic(tmp_path, train_images=8, test_images=4, size=96, seed=2)
    return tmp_path


def test_synthetic_tree_is_the_devkit_layout_and_reads_back(tree):
    base = tree / "VOCdevkit" / "VOC2007"
    assert sorted(p.name for p in (base / "ImageSets" / "Main").iterdir()) == [
        "test.txt", "train.txt", "trainval.txt", "val.txt"]
    assert datasets.missing_files(tree, "vocdevkit-2007-det") == []
    records = voc_det.read_split(tree, "trainval")
    assert len(records) == 8 and all(p.suffix == ".jpg" for p, _ in records)
    a = records[0][1]
    assert a.width == a.height == 96 and a.boxes.shape[1] == 4 and len(a.labels) in (1, 2)
    assert set(a.names) <= set(voc_det.SYNTHETIC_CLASSES)
    assert (a.boxes[:, 2] > a.boxes[:, 0]).all() and a.boxes.min() >= 0 and a.boxes.max() <= 96
    xml = (base / "Annotations" / f"{a.image_id}.xml").read_text()
    assert "<difficult>" in xml and "<bndbox>" in xml and "<folder>VOC2007</folder>" in xml


def test_the_reader_keeps_1_based_boxes_as_0_based_edges_and_difficult_flags(tmp_path):
    path = tmp_path / "000001.xml"
    path.write_text(voc_det.annotation_xml("000001", 50, 40, [("dog", [1, 1, 10, 20], False),
                                                               ("person", [5, 6, 50, 40], True)]))
    a = voc_det.parse_annotation(path)
    assert a.boxes.tolist() == [[0, 0, 10, 20], [4, 5, 50, 40]]
    assert a.labels.tolist() == [12, 15] and a.difficult.tolist() == [False, True]
    assert voc_det.truths([(tmp_path / "000001.jpg", a)]) == [
        {"image_id": "000001", "boxes": [[0, 0, 10, 20], [4, 5, 50, 40]], "labels": [12, 15], "difficult": [False, True]}]


@pytest.mark.parametrize("text, expected", [
    ("<annotation><size><width>10</width>", "not well-formed XML"),
    ("<annotation><object><name>dog</name></object></annotation>", "no <size> element"),
    ("<annotation><size><width>10</width><height>10</height></size><object><name>unicorn</name></object>"
     "</annotation>", "class 'unicorn', not one of the 20 VOC classes"),
    ("<annotation><size><width>10</width><height>10</height></size><object><name>dog</name><bndbox><xmin>1"
     "</xmin><ymin>1</ymin><xmax>12</xmax><ymax>5</ymax></bndbox></object></annotation>", "is not inside the 10x10"),
    ("<annotation><size><width>ten</width><height>10</height></size></annotation>", "<width> is 'ten'"),
])
def test_a_corrupt_annotation_names_the_file(tmp_path, text, expected):
    path = tmp_path / "000007.xml"
    path.write_text(text)
    with pytest.raises(VocFormatError, match=expected) as err:
        voc_det.parse_annotation(path)
    assert str(path) in str(err.value)


def test_a_split_naming_a_missing_image_fails_before_training(tree):
    (tree / "VOCdevkit" / "VOC2007" / "JPEGImages" / "000003.jpg").unlink()
    with pytest.raises(VocFormatError, match=r"000003.jpg: image missing \(named by ImageSets/Main/trainval.txt\)"):
        voc_det.read_split(tree, "trainval")


def truth(image_id, boxes, labels, difficult=None):
    return {"image_id": image_id, "boxes": boxes, "labels": labels, "difficult": difficult or [False] * len(labels)}


def det(image_id, label, score, bbox):
    return {"image_id": image_id, "label": label, "score": score, "bbox": bbox}


def test_a_perfect_detection_scores_one_everywhere():
    s = detection_scores([det("a", 1, 0.9, [0, 0, 10, 10])], [truth("a", [[0, 0, 10, 10]], [1])], num_classes=3)
    assert (s["precision"], s["recall"], s["iou"], s["map50"], s["map50_11pt"]) == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_a_miss_a_duplicate_a_difficult_object_and_an_empty_image():
    truths = [truth("a", [[0, 0, 10, 10], [20, 20, 30, 30]], [1, 1]),   # the second is missed
              truth("b", [[0, 0, 10, 10]], [2], [True]),                # difficult: neither counted nor penalised
              truth("c", [], [])]                                         # an empty image
    dets = [det("a", 1, 0.9, [0, 0, 10, 8]),        # IoU 0.8: true positive
            det("a", 1, 0.8, [0, 0, 10, 10]),       # duplicate of the same box: false positive
            det("b", 2, 0.7, [0, 0, 10, 10]),       # on the difficult object: ignored
            det("c", 1, 0.6, [5, 5, 9, 9]),         # on the empty image: false positive
            det("a", 1, 0.3, [20, 20, 30, 30])]     # below the score threshold: only mAP sees it
    s = detection_scores(dets, truths, num_classes=3, score_threshold=0.5)
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 2)
    assert s["iou"] == pytest.approx(0.8) and s["detections"] == 5 and s["detections_above_threshold"] == 4
    # class 1 ranked: tp, fp, fp, tp -> recall .5, .5, .5, 1; precision 1, .5, .33, .5
    assert s["map50"] == pytest.approx(0.5 * 1 + 0.5 * 0.5)  # class 2 has no non-difficult truth: not averaged
    assert s["map50_11pt"] == pytest.approx((6 * 1 + 5 * 0.5) / 11)


def test_no_detection_at_all_is_zero_never_nan():
    s = detection_scores([], [truth("a", [[0, 0, 10, 10]], [1])], num_classes=3)
    assert s == {"precision": 0.0, "recall": 0.0, "iou": 0.0, "map50": 0.0, "map50_11pt": 0.0, "map": 0.0, "detections": 0,
                 "detections_above_threshold": 0, "score_threshold": 0.5}


def test_coco_style_map_averages_the_ap_over_iou_thresholds_half_to_095():
    # IoU 0.8: a true positive at the thresholds 0.50, 0.55, ..., 0.80 (7 of 10), a miss above
    s = detection_scores([det("a", 1, 0.9, [0, 0, 10, 8])], [truth("a", [[0, 0, 10, 10]], [1])], num_classes=3)
    assert s["map50"] == 1.0 and s["map"] == pytest.approx(0.7)


def test_coco_matching_takes_the_next_free_object_where_voc_counts_a_duplicate():
    """d2 overlaps the taken object A by 0.91 and the free object B by 0.75: VOC calls it a
    duplicate (false positive); COCO matches it to B at the thresholds 0.50-0.75 (6 of 10)."""
    truths = [truth("a", [[0, 0, 10, 10], [0, 2, 10, 12]], [1, 1])]
    dets = [det("a", 1, 0.9, [0, 0, 10, 10]), det("a", 1, 0.8, [0, 0, 10, 11])]
    s = detection_scores(dets, truths, num_classes=3)
    assert s["map50"] == pytest.approx(0.5)
    # above 0.75: tp then fp, precision 1 up to recall 0.5 = 51 of COCO's 101 recall points
    assert s["map"] == pytest.approx((6 * 1 + 4 * 51 / 101) / 10)


def test_a_detection_on_a_difficult_object_is_ignored_by_the_coco_map_too():
    truths = [truth("a", [[0, 0, 10, 10], [20, 20, 30, 30]], [1, 1], [False, True])]
    dets = [det("a", 1, 0.9, [20, 20, 30, 30]), det("a", 1, 0.8, [0, 0, 10, 10])]
    s = detection_scores(dets, truths, num_classes=3)
    assert s["map50"] == 1.0 and s["map"] == pytest.approx(1.0)


def test_iou_and_ap_primitives():
    assert box_iou([[0, 0, 10, 10]], [[5, 0, 15, 10], [20, 20, 30, 30]]).tolist() == [[pytest.approx(1 / 3), 0.0]]
    assert voc_ap(np.array([0.5, 1.0]), np.array([1.0, 0.5])) == pytest.approx(0.75)
