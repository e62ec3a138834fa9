"""VOC2007 detection (read by the kit) to the tf.Example TFRecords Model Garden's decoder reads.

Run as the cell's prepare step, outside the timed region; its output is cached by dataset
fingerprint and split sizes under the shared cache folder (/cache in a cell), written to a
temporary name and renamed, so cells of the same night convert once and a half-written file is
never read. Difficult objects stay out of the training targets (VOC evaluation ignores them);
the metrics read the ground truth from the XML, not from these records.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from scalebench_kit import voc_det

FEATURES = ("image/encoded", "image/source_id", "image/height", "image/width", "image/object/bbox/xmin",
            "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax",
            "image/object/class/label", "image/object/is_crowd", "image/object/area")


def example(tf, image_path: Path, a: voc_det.Annotation, source_id: int, with_difficult: bool = False):
    """One tf.train.Example: the JPEG bytes as they are, boxes normalised to [0, 1]."""
    keep = [i for i in range(len(a.labels)) if with_difficult or not a.difficult[i]]
    b = a.boxes[keep] if keep else a.boxes[:0]
    f = tf.train.Feature
    floats = lambda v: f(float_list=tf.train.FloatList(value=[float(x) for x in v]))  # noqa: E731
    ints = lambda v: f(int64_list=tf.train.Int64List(value=[int(x) for x in v]))  # noqa: E731
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": f(bytes_list=tf.train.BytesList(value=[image_path.read_bytes()])),
        "image/source_id": f(bytes_list=tf.train.BytesList(value=[str(source_id).encode()])),
        "image/height": ints([a.height]), "image/width": ints([a.width]),
        "image/object/bbox/xmin": floats(b[:, 0] / a.width), "image/object/bbox/ymin": floats(b[:, 1] / a.height),
        "image/object/bbox/xmax": floats(b[:, 2] / a.width), "image/object/bbox/ymax": floats(b[:, 3] / a.height),
        "image/object/class/label": ints(a.labels[keep]), "image/object/is_crowd": ints([0] * len(keep)),
        "image/object/area": floats((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])),
    }))


def write(tf, records: list, path: Path, first_id: int = 1, with_difficult: bool = False) -> dict[int, str]:
    """Write records to path atomically; returns source id -> VOC image id."""
    ids = {}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with tf.io.TFRecordWriter(str(tmp)) as out:
        for k, (image_path, a) in enumerate(records):
            ids[first_id + k] = a.image_id
            out.write(example(tf, image_path, a, first_id + k, with_difficult).SerializeToString())
    os.replace(tmp, path)
    return ids


def convert_cached(tf, splits: dict[str, list], fingerprint: str, cache_dir: Path) -> tuple[Path, dict, bool]:
    """(folder with <split>.tfrecord files, source id -> image id per split, whether it was
    already there). The folder name hashes the fingerprint and each split's image ids."""
    key = hashlib.sha256(json.dumps([fingerprint, {s: [a.image_id for _, a in r] for s, r in splits.items()}],
                                    sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir / "tfrecord" / key
    index = folder / "ids.json"
    if index.is_file():
        return folder, {s: {int(k): v for k, v in m.items()} for s, m in json.loads(index.read_text()).items()}, True
    folder.mkdir(parents=True, exist_ok=True)
    ids, first = {}, 1
    for split, records in splits.items():
        ids[split] = write(tf, records, folder / f"{split}.tfrecord", first, with_difficult=split != "train")
        first += len(records)
    tmp = folder / f".ids.json.{os.getpid()}"
    tmp.write_text(json.dumps(ids))
    os.replace(tmp, index)  # written last: its presence means every split file is complete
    return folder, ids, False
