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
