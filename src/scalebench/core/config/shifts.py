"""include/configs/acknowledged_shifts.yaml: intentional changes that restart a baseline."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from scalebench.core.config.common import PosInt, Strict, _load_model


class AcknowledgedShift(Strict):
    """An intentional change that restarts a baseline (include/configs/acknowledged_shifts.yaml)."""
    benchmark: str
    since: dt.date
    reason: str
    gpus: list[PosInt] | None = None
    metric: str | None = None
    image: str | None = None  # from the first night on this image (reference or digest) on or after `since`


class AcknowledgedShifts(Strict):
    shifts: list[AcknowledgedShift] = []


def load_acknowledged_shifts(path: Path | str) -> list[AcknowledgedShift]:
    """The acknowledged shifts; none when the file is absent."""
    path = Path(path)
    return _load_model(AcknowledgedShifts, path).shifts if path.exists() else []
