"""Accuracy metrics, defined once for every framework (as docs/architecture.md defines them)."""
from __future__ import annotations

import numpy as np


def macro_precision_recall(y_true, y_pred, num_classes: int) -> dict[str, float]:
    """Macro-averaged precision and recall over classes present in y_true or y_pred.

    A class never predicted has precision 0 (not undefined), which is the conservative choice.
    """
    y_true = np.asarray(y_true).ravel()
    y_pred = np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has {y_true.size} labels, y_pred {y_pred.size}")
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (y_true, y_pred), 1)
    tp = np.diag(cm).astype(float)
    predicted = cm.sum(axis=0).astype(float)
    actual = cm.sum(axis=1).astype(float)
    present = (actual + predicted) > 0
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    return {
        "precision": float(precision[present].mean()) if present.any() else 0.0,
        "recall": float(recall[present].mean()) if present.any() else 0.0,
        "accuracy": float(tp.sum() / max(y_true.size, 1)),
    }
