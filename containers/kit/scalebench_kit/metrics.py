"""Accuracy metrics, defined once for every framework (as docs/architecture.md defines them)."""
from __future__ import annotations

import numpy as np

from . import masks


def confusion_matrix(y_true, y_pred, num_classes: int, ignore: int | None = None) -> np.ndarray:
    """cm[t, p] = how many items of true class t were predicted p; items whose true label is
    `ignore` (VOC's 255 outlines) are not counted. Matrices of parts of a split add up."""
    y_true = np.asarray(y_true).ravel()
    y_pred = np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has {y_true.size} labels, y_pred {y_pred.size}")
    if ignore is not None:
        keep = y_true != ignore
        y_true, y_pred = y_true[keep], y_pred[keep]
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (y_true.astype(np.int64), y_pred.astype(np.int64)), 1)
    return cm


def scores(cm: np.ndarray) -> dict[str, float]:
    """Macro precision and recall over classes present in truth or prediction, accuracy, and the
    mean IoU over classes whose union is not empty (VOC's mIoU). A class never predicted has
    precision 0 (not undefined), the conservative choice."""
    tp = np.diag(cm).astype(float)
    predicted = cm.sum(axis=0).astype(float)
    actual = cm.sum(axis=1).astype(float)
    present = (actual + predicted) > 0
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    union = actual + predicted - tp
    iou = np.divide(tp, union, out=np.zeros_like(tp), where=union > 0)

    def mean(v) -> float:
        return float(v[present].mean()) if present.any() else 0.0

    return {"precision": mean(precision), "recall": mean(recall), "iou": mean(iou),
            "accuracy": float(tp.sum() / max(cm.sum(), 1))}


def macro_precision_recall(y_true, y_pred, num_classes: int) -> dict[str, float]:
    """Classification: macro precision, recall and accuracy over the labels."""
    out = scores(confusion_matrix(y_true, y_pred, num_classes))
    return {k: out[k] for k in ("precision", "recall", "accuracy")}


# -- detection: one implementation for every detection row, from saved raw detections ------------
def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in a (N, 4) with every box in b (M, 4); boxes are xmin, ymin, xmax, ymax."""
    a, b = np.asarray(a, dtype=float).reshape(-1, 4), np.asarray(b, dtype=float).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area = lambda x: np.clip(x[:, 2] - x[:, 0], 0, None) * np.clip(x[:, 3] - x[:, 1], 0, None)  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def voc_ap(recall: np.ndarray, precision: np.ndarray, eleven_point: bool = False) -> float:
    """VOC average precision: the 11-point interpolation (VOC2007) or the area under the
    monotone precision envelope (VOC2010 on)."""
    if eleven_point:
        return float(np.mean([precision[recall >= t].max() if (recall >= t).any() else 0.0
                              for t in np.linspace(0, 1, 11)]))
    r = np.concatenate([[0.0], recall, [1.0]])
    p = np.concatenate([[0.0], precision, [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]
    steps = np.where(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))


COCO_THRESHOLDS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))  # IoU 0.50:0.95, for "map"
COCO_RECALLS = np.linspace(0.0, 1.0, 101)
COCO_MAX_DETS = 100  # per image and class, as COCOeval's mAP@[.5:.95] (maxDets=100)


def _coco_match(ious: np.ndarray, ignored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """COCOeval's matching in one image for one class, at each of COCO_THRESHOLDS: each detection
    (rows, highest score first) takes the best-overlapping truth not yet taken with IoU >= t, a
    regular truth before an ignored one (truths come regular first). Returns (matched, matched
    an ignored truth), each (thresholds, detections)."""
    n_det, n_gt = ious.shape
    matched = np.zeros((len(COCO_THRESHOLDS), n_det), dtype=bool)
    on_ignored = np.zeros_like(matched)
    for ti, t in enumerate(COCO_THRESHOLDS):
        taken = np.zeros(n_gt, dtype=bool)
        for d in range(n_det):
            best, j = min(t, 1 - 1e-10), -1
            for g in range(n_gt):
                if taken[g]:
                    continue
                if j > -1 and not ignored[j] and ignored[g]:
                    break
                if ious[d, g] < best:
                    continue
                best, j = ious[d, g], g
            if j > -1:
                taken[j], matched[ti, d], on_ignored[ti, d] = True, True, ignored[j]
    return matched, on_ignored


def coco_class_ap(images: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float | None:
    """COCO's AP of one class over IoU 0.50:0.95, as pycocotools' COCOeval computes it (area
    'all', 100 detections per image). `images`, in image order: (scores (D,), IoU (D, G) of each
    detection with each truth, ignored (G,) truths) of the class in that image. Detections that
    match an ignored truth drop out; precision is made monotone and read at 101 recall points.
    None when the class has no regular truth (COCOeval leaves such a class out of the mean)."""
    scores, matched, on_ignored, positives = [], [], [], 0
    for s, ious, ignored in images:
        s, ignored = np.asarray(s, dtype=float), np.asarray(ignored, dtype=bool)
        order = np.argsort(-s, kind="mergesort")[:COCO_MAX_DETS]
        regular_first = np.argsort(ignored, kind="mergesort")
        ious = np.asarray(ious, dtype=float).reshape(len(s), len(ignored))[order][:, regular_first]
        m, ig = _coco_match(ious, ignored[regular_first])
        scores.append(s[order])
        matched.append(m)
        on_ignored.append(ig)
        positives += int((~ignored).sum())
    if not positives:
        return None
    order = np.argsort(-np.concatenate(scores), kind="mergesort")  # ties keep image order, as COCOeval's
    matched_all = np.concatenate(matched, axis=1)[:, order]
    ignored_all = np.concatenate(on_ignored, axis=1)[:, order]
    precision = np.zeros((len(COCO_THRESHOLDS), len(COCO_RECALLS)))
    for t in range(len(COCO_THRESHOLDS)):
        tp = np.cumsum(matched_all[t] & ~ignored_all[t])
        fp = np.cumsum(~matched_all[t] & ~ignored_all[t])
        recall, prec = tp / positives, tp / (tp + fp + np.spacing(1))
        prec = np.maximum.accumulate(prec[::-1])[::-1]
        at = np.searchsorted(recall, COCO_RECALLS, side="left")
        inside = at < len(prec)
        precision[t, inside] = prec[at[inside]]
    return float(precision.mean())


def _class_truth(truths: list[dict], c: int, kind: str) -> dict:
    """image_id -> (objects of class c: boxes (K, 4) or masks (K, H, W), difficult flags (K,))."""
    out = {}
    for t in truths:
        sel = np.flatnonzero(np.asarray(t["labels"], dtype=int) == c)
        hard = np.asarray(t["difficult"], dtype=bool)[sel] if len(sel) else np.zeros(0, dtype=bool)
        if kind == "bbox":
            objects = np.asarray(t["boxes"], dtype=float).reshape(-1, 4)[sel]
        else:
            objects = np.stack([masks.decode(t["masks"][i]) for i in sel]) if len(sel) else np.zeros((0, 1, 1), bool)
        out[t["image_id"]] = (objects, hard)
    return out


def _overlaps(det: dict, objects: np.ndarray, kind: str) -> np.ndarray:
    if len(objects) == 0:
        return np.zeros(0)
    if kind == "bbox":
        return box_iou(np.asarray(det["bbox"]), objects)[0]
    return masks.iou(masks.decode(det["mask"]), objects)


def match_detections(ious: list[np.ndarray], image_ids: list, truth: dict,
                     iou_threshold: float = 0.5) -> list[tuple[str, float]]:
    """VOC matching of one class's detections over all images, given highest score first with
    each one's IoU against its image's objects of that class: a detection is a true positive
    when it overlaps an unmatched object by >= the threshold, a duplicate of a matched object is
    a false positive, and one whose best match is a difficult object is ignored. Returns
    (outcome, IoU) per detection: outcome is 'tp', 'fp' or 'ignored'."""
    used = {k: np.zeros(len(v[1]), dtype=bool) for k, v in truth.items()}
    out = []
    for row, image_id in zip(ious, image_ids):
        if row.size == 0:
            out.append(("fp", 0.0))
            continue
        j = int(row.argmax())
        hard = truth[image_id][1]
        if row[j] < iou_threshold:
            out.append(("fp", float(row[j])))
        elif hard[j]:
            out.append(("ignored", float(row[j])))
        elif used[image_id][j]:
            out.append(("fp", float(row[j])))  # a duplicate
        else:
            used[image_id][j] = True
            out.append(("tp", float(row[j])))
    return out


def _average_precision(outcome: list[tuple[str, float]], n_pos: int) -> tuple[float, float]:
    """(area AP, 11-point AP) of a class's ranked outcomes; ignored detections drop out."""
    kept = [o for o, _ in outcome if o != "ignored"]
    if not kept:
        return 0.0, 0.0
    tp = np.cumsum([o == "tp" for o in kept])
    fp = np.cumsum([o == "fp" for o in kept])
    recall, precision = tp / n_pos, tp / np.maximum(tp + fp, 1)
    return voc_ap(recall, precision), voc_ap(recall, precision, eleven_point=True)


def _per_image(dets: list[dict], ids: list, ious: list[np.ndarray], truth: dict) -> list[tuple]:
    """One class's (scores, IoU rows, difficult flags) per image, in the truths' image order."""
    rows: dict = {}
    for d, image_id, row in zip(dets, ids, ious):
        rows.setdefault(image_id, []).append((d["score"], row))
    out = []
    for image_id, (_, hard) in truth.items():
        got = rows.get(image_id, [])
        out.append((np.array([score for score, _ in got], dtype=float),
                    np.array([row for _, row in got], dtype=float).reshape(len(got), len(hard)), hard))
    return out


def detection_scores(detections: list[dict], truths: list[dict], num_classes: int, iou_threshold: float = 0.5,
                     score_threshold: float = 0.5, kind: str = "bbox") -> dict:
    """Precision and recall at IoU >= `iou_threshold` and score >= `score_threshold`, the mean IoU
    of those matched pairs, VOC mAP@0.5 (area and 11-point) and COCO's mAP@[.5:.95] (COCOeval's
    matching and 101-point AP, `coco_class_ap`) over classes with ground truth; difficult objects
    are ignored (for COCO: ignored truths, which a detection may match without counting).
    kind "bbox": `detections` {image_id, label, score, bbox}, `truths` {image_id, boxes, labels,
    difficult}; kind "mask": the same with a `mask` RLE per detection and `masks` (RLEs, in label
    order) per truth, overlaps measured on pixels. No detections at all: zeros, `detections: 0`."""
    if kind not in ("bbox", "mask"):
        raise ValueError(f"kind must be 'bbox' or 'mask', got {kind!r}")
    aps, aps11, coco, tp_n, fp_n, matched = [], [], [], 0, 0, []
    positives = 0
    for c in range(1, num_classes):
        truth = _class_truth(truths, c, kind)
        dets = sorted((d for d in detections if d["label"] == c), key=lambda d: -d["score"])
        ids = [d["image_id"] for d in dets]
        for i in ids:
            truth.setdefault(i, (np.zeros((0, 4)), np.zeros(0, dtype=bool)))
        ious = [_overlaps(d, truth[i][0], kind) for d, i in zip(dets, ids)]
        outcome = match_detections(ious, ids, truth, iou_threshold)
        n_pos = int(sum((~hard).sum() for _, hard in truth.values()))
        if n_pos:
            positives += n_pos
            ap, ap11 = _average_precision(outcome, n_pos)
            aps.append(ap)
            aps11.append(ap11)
            class_ap = coco_class_ap(_per_image(dets, ids, ious, truth))
            if class_ap is not None:  # (it has positives here, so it always has an AP)
                coco.append(class_ap)
        for (o, iou), d in zip(outcome, dets):
            if d["score"] >= score_threshold and o != "ignored":
                tp_n += o == "tp"
                fp_n += o == "fp"
                if o == "tp":
                    matched.append(iou)
    return {
        "precision": tp_n / (tp_n + fp_n) if tp_n + fp_n else 0.0,
        "recall": tp_n / positives if positives else 0.0,
        "iou": float(np.mean(matched)) if matched else 0.0,
        "map50": float(np.mean(aps)) if aps else 0.0,
        "map50_11pt": float(np.mean(aps11)) if aps11 else 0.0,
        "map": float(np.mean(coco)) if coco else 0.0,
        "detections": len(detections),
        "detections_above_threshold": sum(d["score"] >= score_threshold for d in detections),
        "score_threshold": score_threshold,
    }


MASK_KEYS = ("precision", "recall", "iou", "map50", "map50_11pt", "map")


def instance_scores(detections: list[dict], truths: list[dict], num_classes: int, score_threshold: float = 0.5) -> dict:
    """Instance segmentation: the box scores, and the same scores on masks prefixed `mask_`."""
    boxes = detection_scores(detections, truths, num_classes, score_threshold=score_threshold)
    on_masks = detection_scores(detections, truths, num_classes, score_threshold=score_threshold, kind="mask")
    return {**boxes, **{f"mask_{k}": on_masks[k] for k in MASK_KEYS}}
