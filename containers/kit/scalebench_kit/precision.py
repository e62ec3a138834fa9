"""A cell's numeric precision, whatever the framework: the preset asked for, and the record of what
ran (requested, and the dtype an inner layer's output actually had). Each framework's own switch
for the four presets is in its family's module (torch_ddp.TorchPrecision, tf_distribute.keras_policy)."""
from __future__ import annotations

from .names import COMPUTE_DTYPE, PRECISIONS


class PrecisionError(ValueError):
    """A precision this device or framework cannot run, with the reason."""


def requested(spec: dict) -> str:
    p = spec["training"].get("precision", "fp32")
    if p not in PRECISIONS:
        raise PrecisionError(f"cell.json training.precision {p!r}: expected one of {list(PRECISIONS)}")
    return p


def record(precision: str, observed: str | None, layer: str, switches: dict) -> dict:
    """The result contract's `precision`: what was asked, what ran, and the settings used."""
    return {"requested": precision, "expected_dtype": COMPUTE_DTYPE[precision], "observed_dtype": observed,
            "observed_layer": layer, "switches": switches}


def not_observed(precision: str, why: str) -> dict:
    """The record of a trainer with no model layer to observe (it says so; nothing is claimed)."""
    return record(precision, None, why, {})
