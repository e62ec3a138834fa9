"""The VOC2007 segmentation reader and generator (kit), and the segmentation metrics."""
import numpy as np
import pytest
from PIL import Image

from scalebench_kit import voc_seg
from scalebench_kit.metrics import confusion_matrix, scores


@pytest.fixture
def tree(tmp_path):
    voc_seg.write_synthetic(tmp_path, train_images=6, test_images=3, seed=1, size=48)
    return tmp_path


def test_the_generator_writes_the_real_vocdevkit_layout_and_the_reader_reads_it(tree):
    base = tree / "VOCdevkit" / "VOC2007"
    assert voc_seg.split_ids(tree, "train") == [f"2007_{i:06d}" for i in range(6)]
    assert voc_seg.split_ids(tree / "VOCdevkit", "val") == [f"2007_{i:06d}" for i in range(6, 9)]
    assert all((base / f).is_file() for f in voc_seg.expected_files(tree)) and len(voc_seg.expected_files(tree)) == 2 + 9 * 2
    with Image.open(base / "SegmentationClass" / "2007_000000.png") as png:
        assert png.mode == "P" and png.getpalette()[3:6] == [128, 0, 0]  # VOC's colour of class 1
    with Image.open(base / "JPEGImages" / "2007_000000.jpg") as jpg:
        assert jpg.format == "JPEG" and jpg.size == (48, 48)
    images, masks = voc_seg.read_split(tree, "train", size=32)
    assert images.shape == (6, 32, 32, 3) and masks.shape == (6, 32, 32) and images.dtype == masks.dtype == np.uint8
    values = set(np.unique(masks).tolist())
    assert values <= {0, 255, *voc_seg.SYNTHETIC_CLASSES} and 255 in values and len(values & set(voc_seg.SYNTHETIC_CLASSES)) >= 2


def test_a_missing_png_names_the_file(tree):
    png = tree / "VOCdevkit" / "VOC2007" / "SegmentationClass" / "2007_000002.png"
    png.unlink()
    with pytest.raises(voc_seg.VocFormatError, match=f"{png}: segmentation PNG missing"):
        voc_seg.read_split(tree, "train", size=32)


def test_a_pixel_that_is_neither_a_class_nor_ignore_names_the_file_and_value(tree):
    png = tree / "VOCdevkit" / "VOC2007" / "SegmentationClass" / "2007_000007.png"
    bad = np.zeros((48, 48), dtype=np.uint8)
    bad[3, 3] = 42
    im = Image.fromarray(bad, mode="P")
    im.putpalette(voc_seg.palette())  # without a full palette Pillow renumbers the indices it saves
    im.save(png)
    with pytest.raises(voc_seg.VocFormatError, match=r"2007_000007.png: pixel value\(s\) \[42\] are neither a class"):
        voc_seg.read_split(tree, "val", size=32)


def test_a_split_naming_a_missing_image_names_the_split_and_the_id(tree):
    split = tree / "VOCdevkit" / "VOC2007" / "ImageSets" / "Segmentation" / "val.txt"
    split.write_text(split.read_text() + "2007_999999\n")
    with pytest.raises(voc_seg.VocFormatError, match=r"val.txt names '2007_999999', but .*2007_999999.jpg is missing"):
        voc_seg.read_split(tree, "val", size=32)
    split.unlink()
    with pytest.raises(voc_seg.VocFormatError, match="val.txt: split file missing"):
        voc_seg.split_ids(tree, "val")


def test_segmentation_scores_on_hand_made_masks():
    truth = np.array([[0, 0, 1, 1],
                      [0, 255, 1, 1],
                      [2, 2, 255, 0]])
    pred = np.array([[0, 1, 1, 1],
                     [0, 3, 1, 0],
                     [2, 0, 2, 0]])  # predictions under 255 are not counted; class 3 never true
    cm = confusion_matrix(truth, pred, num_classes=5, ignore=255)
    assert cm.sum() == 10
    got = scores(cm)
    # per class (tp, predicted, actual): 0 (3, 5, 4), 1 (3, 4, 4), 2 (1, 1, 2); classes 3 and 4 absent
    assert got["iou"] == pytest.approx(np.mean([3 / 6, 3 / 5, 1 / 2]))
    assert got["precision"] == pytest.approx(np.mean([3 / 5, 3 / 4, 1 / 1]))
    assert got["recall"] == pytest.approx(np.mean([3 / 4, 3 / 4, 1 / 2]))
    assert got["accuracy"] == pytest.approx(7 / 10)


def test_the_dataset_registry_checks_and_fingerprints_a_vocdevkit_tree(tree):
    from scalebench_kit import datasets

    fmt = "vocdevkit-2007-seg"
    assert datasets.missing_files(tree, fmt) == [] and datasets.missing_files(tree / "VOCdevkit", fmt) == []
    before = datasets.fingerprint(tree, fmt)
    png = tree / "VOCdevkit" / "VOC2007" / "SegmentationClass" / "2007_000004.png"
    png.write_bytes(png.read_bytes() + b"\0")
    assert datasets.fingerprint(tree, fmt) != before
    png.unlink()
    assert datasets.missing_files(tree, fmt) == [str(png)]
    assert datasets.missing_files(tree / "elsewhere", fmt)[0].endswith("ImageSets/Segmentation/train.txt")
