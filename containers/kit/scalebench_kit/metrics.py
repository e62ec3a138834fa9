"""Accuracy metrics, defined once for every framework (as docs/architecture.md defines them)."""
from __future__ import annotations

import numpy as np


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
    mean = (lambda v: float(v[present].mean()) if present.any() else 0.0)
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


def match_detections(dets: list[dict], truth: dict, iou_threshold: float = 0.5) -> list[tuple[str, float]]:
    """VOC matching of one class's detections over all images, highest score first: a detection
    is a true positive when it overlaps an unmatched ground-truth box by >= the threshold, a
    duplicate of a matched box is a false positive, and one whose best match is a difficult
    object is ignored. Returns (outcome, IoU) per detection, in score order:
    outcome is 'tp', 'fp' or 'ignored'. `truth[image_id]` = (boxes, difficult) of this class."""
    used = {k: np.zeros(len(v[0]), dtype=bool) for k, v in truth.items()}
    out = []
    for d in sorted(dets, key=lambda d: -d["score"]):
        boxes, hard = truth.get(d["image_id"], (np.zeros((0, 4)), np.zeros(0, dtype=bool)))
        if len(boxes) == 0:
            out.append(("fp", 0.0))
            continue
        ious = box_iou(np.asarray(d["bbox"]), boxes)[0]
        j = int(ious.argmax())
        if ious[j] < iou_threshold:
            out.append(("fp", float(ious[j])))
        elif hard[j]:
            out.append(("ignored", float(ious[j])))
        elif used[d["image_id"]][j]:
            out.append(("fp", float(ious[j])))  # a duplicate
        else:
            used[d["image_id"]][j] = True
            out.append(("tp", float(ious[j])))
    return out


def detection_scores(detections: list[dict], truths: list[dict], num_classes: int, iou_threshold: float = 0.5,
                     score_threshold: float = 0.5) -> dict:
    """Precision and recall at IoU >= `iou_threshold` and score >= `score_threshold`, the mean IoU
    of those matched pairs, and VOC mAP@0.5 (area and 11-point) over classes with ground truth,
    difficult objects ignored. `detections`: {image_id, label, score, bbox}; `truths`:
    {image_id, boxes, labels, difficult}. No detections at all: precision 0, `detections: 0`."""
    aps, aps11, tp_n, fp_n, ious = [], [], 0, 0, []
    positives = 0
    for c in range(1, num_classes):
        truth = {}
        for t in truths:
            sel = np.asarray(t["labels"]) == c
            truth[t["image_id"]] = (np.asarray(t["boxes"], dtype=float).reshape(-1, 4)[sel],
                                    np.asarray(t["difficult"], dtype=bool)[sel])
        n_pos = int(sum((~hard).sum() for _, hard in truth.values()))
        dets = sorted((d for d in detections if d["label"] == c), key=lambda d: -d["score"])
        outcome = match_detections(dets, truth, iou_threshold)
        kept = [(o, i) for (o, i), d in zip(outcome, dets) if o != "ignored"]
        if n_pos:
            positives += n_pos
            tp = np.cumsum([o == "tp" for o, _ in kept])
            fp = np.cumsum([o == "fp" for o, _ in kept])
            recall = tp / n_pos if len(kept) else np.zeros(0)
            precision = tp / np.maximum(tp + fp, 1) if len(kept) else np.zeros(0)
            aps.append(voc_ap(recall, precision) if len(kept) else 0.0)
            aps11.append(voc_ap(recall, precision, eleven_point=True) if len(kept) else 0.0)
        for (o, i), d in zip(outcome, dets):
            if d["score"] >= score_threshold and o != "ignored":
                tp_n += o == "tp"
                fp_n += o == "fp"
                if o == "tp":
                    ious.append(i)
    return {
        "precision": tp_n / (tp_n + fp_n) if tp_n + fp_n else 0.0,
        "recall": tp_n / positives if positives else 0.0,
        "iou": float(np.mean(ious)) if ious else 0.0,
        "map50": float(np.mean(aps)) if aps else 0.0,
        "map50_11pt": float(np.mean(aps11)) if aps11 else 0.0,
        "detections": len(detections),
        "detections_above_threshold": sum(d["score"] >= score_threshold for d in detections),
        "score_threshold": score_threshold,
    }
