"""Predictions in the results store (tables: scalebench.store.prediction_tables): each host's
all-reduce sweep, and the predictions frozen each night. A frozen prediction is never rewritten:
freezing the same night again adds nothing, and a prediction is judged once, by the first night
that measures its target."""
from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scalebench.store.prediction_tables import AllreduceRow, PredictionRow

FIELDS = ("id", "benchmark", "host", "precision", "gpus", "hosts", "night", "role", "model_version", "fitted_nights",
          "fitted_counts", "images_per_s", "efficiency", "low", "high", "line", "doc", "judged_night",
          "measured_images_per_s", "measured_efficiency")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Predictions:
    def __init__(self, store):
        self.engine = store.engine

    def save_sweep(self, host: str, gpus: int, backend: str, rows: list[dict], night: str,
                   image: str | None = None) -> int:
        """One sweep's sizes (each {bytes, busbw_gbps}); returns how many were kept."""
        with Session(self.engine) as s, s.begin():
            for r in rows:
                s.add(AllreduceRow(host=host, gpus=gpus, backend=backend, bytes=int(r["bytes"]),
                                   busbw_gbps=float(r["busbw_gbps"]), image=image, night=night, measured_at=_now()))
        return len(rows)

    def bandwidth(self, host: str, gradient_bytes: float | None) -> dict[int, float]:
        """GB/s per GPU count on a host at the size nearest the gradients (the newest sweep of each
        count); empty without a sweep."""
        with Session(self.engine) as s:
            rows = s.scalars(select(AllreduceRow).where(AllreduceRow.host == host)
                             .order_by(AllreduceRow.measured_at, AllreduceRow.id)).all()
        newest: dict[tuple[int, int], float] = {}
        for r in rows:
            newest[(r.gpus, r.bytes)] = r.busbw_gbps
        out = {}
        for gpus in sorted({g for g, _ in newest}):
            sizes = [b for g, b in newest if g == gpus]
            size = min(sizes, key=lambda b: abs(b - (gradient_bytes or b)))
            out[gpus] = newest[(gpus, size)]
        return out

    def sweeps(self) -> list[dict]:
        with Session(self.engine) as s:
            rows = s.scalars(select(AllreduceRow).order_by(AllreduceRow.host, AllreduceRow.gpus, AllreduceRow.bytes)).all()
            return [{"host": r.host, "gpus": r.gpus, "backend": r.backend, "bytes": r.bytes, "busbw_gbps": r.busbw_gbps,
                     "night": r.night} for r in rows]

    def freeze(self, rows: list[dict]) -> int:
        """Keep each prediction unless one of its benchmark, host, precision, target and night is
        kept already (never rewritten). Returns how many were new."""
        added = 0
        for r in rows:
            try:
                with Session(self.engine) as s, s.begin():
                    s.add(PredictionRow(**{k: r[k] for k in FIELDS if k in r and k != "id"}, created_at=_now()))
                added += 1
            except IntegrityError:
                continue  # frozen already on this night: the first one stands
        return added

    def frozen(self, benchmark: str | None = None, night: str | None = None, up_to: str | None = None,
               judged: bool | None = None, doc: bool = True, since: str | None = None) -> list[dict]:
        """Frozen predictions, oldest night first; `judged` True/False: only those judged / not yet;
        `since`: frozen on that night or later (the report reads a window, never all the years);
        without `doc` the whole prediction document is left out (a year of them is read nightly)."""
        columns = [c for c in FIELDS if doc or c != "doc"]
        with Session(self.engine) as s:
            q = select(*[getattr(PredictionRow, c) for c in columns]).order_by(
                PredictionRow.night, PredictionRow.benchmark, PredictionRow.id)
            if benchmark:
                q = q.where(PredictionRow.benchmark == benchmark)
            if night:
                q = q.where(PredictionRow.night == night)
            if up_to:
                q = q.where(PredictionRow.night <= up_to)
            if since:
                q = q.where(PredictionRow.night >= since)
            if judged is not None:
                q = q.where(PredictionRow.judged_night.is_not(None) if judged else PredictionRow.judged_night.is_(None))
            return [dict(zip(columns, r)) for r in s.execute(q)]

    def judge(self, prediction_id: int, night: str, images_per_s: float, efficiency: float | None) -> bool:
        """The first night that measures a prediction's target judges it; later ones change nothing."""
        with Session(self.engine) as s, s.begin():
            r = s.get(PredictionRow, prediction_id)
            if r is None or r.judged_night is not None:
                return False
            r.judged_night, r.measured_images_per_s, r.measured_efficiency = night, images_per_s, efficiency
            return True

    def model_parameters(self) -> dict[str, int]:
        """Each benchmark's parameter count as its trainer reported it in its newest valid attempt
        (the all-reduce DAG's sizes; the report reads its window's cells instead)."""
        from sqlalchemy import func

        from scalebench.store.results import AttemptRow, CellRow

        with Session(self.engine) as s:
            newest = s.execute(select(CellRow.benchmark, func.max(AttemptRow.id)).join(CellRow)
                               .where(AttemptRow.status == "valid").group_by(CellRow.benchmark)).all()
            out = {}
            for bench, attempt_id in newest:
                row = s.get(AttemptRow, attempt_id)
                contract = (row.contract if row else None) or {}
                params = (contract.get("model") or {}).get("parameters")
                if params:
                    out[bench] = int(params)
            return out
