"""Run inside the mmdetection image (the one with pycocotools): the kit's mAP@[.5:.95] of boxes and
masks beside pycocotools' COCOeval on random scenes (misses, duplicates, wrong labels, a class
without truth, an image with more than 100 detections). Prints one JSON list."""
import contextlib
import io
import json
import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from scalebench_kit import masks
from scalebench_kit.metrics import detection_scores

def blob(rng, box, shape):
    x0, y0, x1, y1 = (int(v) for v in box)
    m = np.zeros(shape, dtype=bool)
    m[y0:y1 + 1, x0:x1 + 1] = rng.random((y1 + 1 - y0, x1 + 1 - x0)) < 0.95
    return m

def scene(seed, n_images=8, classes=4, size=48):
    rng = np.random.default_rng(seed)
    truths, dets = [], []
    for image_id in range(1, n_images + 1):
        n = int(rng.integers(0, 6))
        xy = rng.uniform(0, size - 12, (n, 2)); wh = rng.uniform(4, 12, (n, 2))
        boxes = np.hstack([xy, xy + wh]).round(1)
        labels = rng.integers(1, classes, n)  # the last class has no truth: COCO leaves it out
        ms = [blob(rng, b, (size, size)) for b in boxes]
        truths.append({"image_id": image_id, "labels": labels.tolist(), "difficult": [False] * n,
                       "boxes": boxes.tolist(), "masks": [masks.compress(m) for m in ms]})
        for b, label, m in zip(boxes, labels, ms):
            for _ in range(int(rng.integers(0, 3))):  # 0-2 detections per object: misses and duplicates
                jb = np.clip(b + rng.normal(0, 0.6, 4), 0, size - 1).round(1)
                jb[2:] = np.maximum(jb[2:], jb[:2] + 1)
                dm = m ^ (blob(rng, b, m.shape) & (rng.random(m.shape) < 0.1)) if rng.random() < 0.7 else blob(rng, jb, m.shape)
                dets.append({"image_id": image_id, "label": int(label if rng.random() < 0.85 else rng.integers(1, classes + 1)),
                             "score": float(rng.random()), "bbox": jb.tolist(), "mask": masks.compress(dm)})
        many = 120 if image_id == 1 else int(rng.integers(0, 4))  # image 1: more than COCO's 100 per image
        for _ in range(many):
            xy = rng.uniform(0, size - 12, 2); wh = rng.uniform(4, 12, 2)
            jb = np.concatenate([xy, xy + wh]).round(1)
            dets.append({"image_id": image_id, "label": int(rng.integers(1, classes + 1)), "score": float(rng.random() * 0.7),
                         "bbox": jb.tolist(), "mask": masks.compress(blob(rng, jb, (size, size)))})
    return truths, dets, classes, size

def xywh(b):
    return [b[0], b[1], b[2] - b[0], b[3] - b[1]]

def cocoeval(truths, dets, classes, size, iou_type):
    gt = COCO()
    anns = []
    for t in truths:
        for b, label, m in zip(t["boxes"], t["labels"], t["masks"]):
            anns.append({"id": len(anns) + 1, "image_id": t["image_id"], "category_id": label, "bbox": xywh(b),
                         "area": float(masks.decode(m).sum() if iou_type == "segm" else xywh(b)[2] * xywh(b)[3]),
                         "iscrowd": 0, "segmentation": m})
    gt.dataset = {"images": [{"id": t["image_id"], "height": size, "width": size} for t in truths],
                  "categories": [{"id": c} for c in range(1, classes + 1)], "annotations": anns}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        res = gt.loadRes([{"image_id": d["image_id"], "category_id": d["label"], "score": d["score"],
                           **({"segmentation": d["mask"]} if iou_type == "segm" else {"bbox": xywh(d["bbox"])})}
                          for d in dets])
        ev = COCOeval(gt, res, iou_type)
        ev.evaluate(); ev.accumulate(); ev.summarize()
    return float(ev.stats[0])

out = []
for seed in range(6):
    truths, dets, classes, size = scene(seed)
    for kind, iou_type in (("bbox", "bbox"), ("mask", "segm")):
        ours = detection_scores(dets, truths, classes + 1, kind=kind)["map"]
        out.append({"seed": seed, "kind": kind, "kit": ours, "pycocotools": cocoeval(truths, dets, classes, size, iou_type),
                    "detections": len(dets)})
print(json.dumps(out))
