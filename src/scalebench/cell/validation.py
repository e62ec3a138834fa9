"""Great Expectations (GX Core 1.x) on each cell's result: the run-time quality gate.

great_expectations and pandas are imported inside the functions: they take seconds to import
and DAG files must parse fast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from scalebench_kit.names import ACCURACY_METRICS, COMPUTE_DTYPE

REQUIRED = ("train_s", "total_s", "setup_s", "eval_s", "images_per_s", "world_size", "device_count",
            "per_device_batch", "global_batch", "epochs_recorded")


@dataclass
class Verdict:
    success: bool
    failures: list[str] = field(default_factory=list)
    checked: int = 0

    def message(self, cell: dict) -> str:
        head = f"cell {cell['cell_id']} ({cell['label']}) of {cell['benchmark']}"
        if self.success:
            return f"{head}: {self.checked} expectations met"
        return f"{head}: failed validation: " + "; ".join(self.failures)


def _get(doc: dict, *path, default=None):
    for p in path:
        if not isinstance(doc, dict) or p not in doc:
            return default
        doc = doc[p]
    return doc


def flatten(contract: dict) -> dict:
    """One row per cell: the fields the expectations look at (absent stays absent)."""
    row = {}
    for name in ("train_s", "total_s", "setup_s", "eval_s", "warmup_s", "images_per_s"):
        if _get(contract, "timing", name) is not None:
            row[name] = _get(contract, "timing", name)
    if isinstance(_get(contract, "timing", "epoch_s"), list):
        row["epochs_recorded"] = len(contract["timing"]["epoch_s"])
    for src, dst in ((("devices", "world_size"), "world_size"), (("devices", "count"), "device_count"),
                     (("training", "per_device_batch"), "per_device_batch"),
                     (("training", "global_batch"), "global_batch")):
        if _get(contract, *src) is not None:
            row[dst] = _get(contract, *src)
    for name, value in (_get(contract, "metrics", default={}) or {}).items():
        row[name] = value
    if "per_device_batch" in row and "world_size" in row:
        row["per_device_x_world"] = row["per_device_batch"] * row["world_size"]
    if isinstance(_get(contract, "precision"), dict):  # null observed: the trainer has no layer to observe
        row["observed_dtype"] = contract["precision"].get("observed_dtype")
    b = _get(contract, "timing", "breakdown")
    if isinstance(b, dict) and b.get("step_s"):
        # the parts a trainer measured plus the unattributed rest must make up the step
        parts = [b.get(k) for k in ("data_wait_s", "compute_s", "sync_s", "other_s")]
        row["step_parts_over_step"] = sum(v for v in parts if v is not None) / b["step_s"]
        row["ranks_reported"] = len(b.get("per_rank") or [])
        row["ranks"] = b.get("ranks")
    return row


def _quiet_context():
    """An in-memory GX context with analytics off and no progress bars (they read as errors in task
    logs); set through its own config, never through this process's environment."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (DataContextConfig, InMemoryStoreBackendDefaults,
                                                            ProgressBarsConfig)

    config = DataContextConfig(store_backend_defaults=InMemoryStoreBackendDefaults(), analytics_enabled=False)
    ctx = gx.get_context(mode="ephemeral", project_config=config)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return ctx


def expectations(cell: dict, metrics: list[str], bounds: dict[str, tuple[float, float]]):
    import great_expectations as gx

    E = gx.expectations
    out = []
    for col in (*REQUIRED, *metrics):
        out.append(E.ExpectColumnToExist(column=col))
        out.append(E.ExpectColumnValuesToNotBeNull(column=col))
    for col in ("train_s", "total_s", "images_per_s"):
        out.append(E.ExpectColumnValuesToBeBetween(column=col, min_value=0, strict_min=True))
    for col in ("setup_s", "eval_s"):
        out.append(E.ExpectColumnValuesToBeBetween(column=col, min_value=0))
    for m in metrics:
        lo, hi = bounds.get(m, (0.0, 1.0))
        if ACCURACY_METRICS[m].fraction:
            lo, hi = max(lo, 0.0), min(hi, 1.0)
        out.append(E.ExpectColumnValuesToBeBetween(column=m, min_value=lo, max_value=hi))
    n = cell["gpus"]
    out.append(E.ExpectColumnValuesToBeBetween(column="world_size", min_value=n, max_value=n))
    out.append(E.ExpectColumnValuesToBeBetween(column="device_count", min_value=n, max_value=n))
    out.append(E.ExpectColumnValuesToBeBetween(column="global_batch", min_value=cell["global_batch"],
                                               max_value=cell["global_batch"]))
    out.append(E.ExpectColumnValuesToBeBetween(column="per_device_batch", min_value=cell["per_device_batch"],
                                               max_value=cell["per_device_batch"]))
    out.append(E.ExpectColumnPairValuesToBeEqual(column_A="global_batch", column_B="per_device_x_world"))
    out.append(E.ExpectColumnValuesToBeBetween(column="epochs_recorded", min_value=cell["epochs"], max_value=cell["epochs"]))
    out.append(E.ExpectColumnValuesToBeBetween(column="step_parts_over_step", min_value=0.99, max_value=1.01))
    out.append(E.ExpectColumnPairValuesToBeEqual(column_A="ranks", column_B="ranks_reported"))
    if cell.get("precision") in COMPUTE_DTYPE:  # the preset asked for is what an inner layer computed in
        out.append(E.ExpectColumnToExist(column="observed_dtype"))
        out.append(E.ExpectColumnValuesToBeInSet(column="observed_dtype", value_set=[COMPUTE_DTYPE[cell["precision"]]]))
    return out


def _describe(res) -> str:
    cfg = res.expectation_config
    kw = {k: v for k, v in cfg.kwargs.items() if k != "batch_id" and v is not None}
    got = res.result.get("partial_unexpected_list") if res.result else None
    if cfg.type == "expect_column_values_to_not_be_null":
        got = "null/NaN"
    elif cfg.type == "expect_column_to_exist":
        got = "field missing"
    args = ", ".join(f"{k}={v}" for k, v in kw.items())
    return f"{cfg.type}({args}) got {got}"


def validate_result(cell: dict, contract: dict, metrics: list[str], bounds: dict[str, tuple[float, float]]) -> Verdict:
    """Run the cell's expectation suite on its result; the verdict names each failed expectation."""
    import great_expectations as gx
    import pandas as pd

    row = flatten(contract)
    # NaN must read as null, not as a number outside the bounds.
    row = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
    ctx = _quiet_context()
    batch_def = ctx.data_sources.add_pandas("cells").add_dataframe_asset("cell").add_batch_definition_whole_dataframe("all")
    batch = batch_def.get_batch(batch_parameters={"dataframe": pd.DataFrame([row])})
    suite = gx.ExpectationSuite(name=f"cell_{cell['benchmark']}")
    for exp in expectations(cell, metrics, bounds):
        suite.add_expectation(exp)
    result = batch.validate(suite)
    failures = [_describe(r) for r in result.results if not r.success]
    # A missing column fails its other expectations too; report it once.
    missing = {r.expectation_config.kwargs["column"] for r in result.results
               if not r.success and r.expectation_config.type == "expect_column_to_exist"}
    failures = [f for f in failures if f.startswith("expect_column_to_exist")
                or not any(f"column={m}," in f or f"column={m})" in f for m in missing)]
    return Verdict(success=not failures, failures=failures, checked=len(result.results))


def table_rows(rep) -> list[dict]:
    """The night's aggregate as the rows its GX suite reads (`check_table`): each cell's status, each
    GPU count's efficiency, each refused ratio (no matching 1-GPU baseline)."""
    rows = []
    for r in rep.rows:
        statuses = [x["status"] for x in r.not_valid] + ["valid"] * r.valid
        rows += [{"benchmark": r.benchmark, "gpus": None, "efficiency": None, "status": s, "baseline_ok": True}
                 for s in statuses]
        rows += [{"benchmark": r.benchmark, "gpus": n, "efficiency": e, "status": "valid", "baseline_ok": True}
                 for n, e in r.efficiency.items()]
        rows += [{"benchmark": r.benchmark, "gpus": None, "efficiency": None, "status": "refused",
                  "baseline_ok": False} for _ in r.refused]
    return rows


def check_table(rows: list[dict]) -> list[str]:
    """GX on the aggregated table (`table_rows`): every expected cell present or marked, efficiency
    in (0, 1.5], every ratio taken against a matching 1-GPU baseline. Returns the failures (empty:
    all met); super-linear efficiency is not capped here: the report lists it among its suspect
    figures."""
    import great_expectations as gx
    import pandas as pd

    if not rows:
        return []
    ctx = _quiet_context()
    batch = (ctx.data_sources.add_pandas("table").add_dataframe_asset("aggregate")
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": pd.DataFrame(rows)}))
    E = gx.expectations
    suite = gx.ExpectationSuite(name="aggregate")
    suite.add_expectation(E.ExpectColumnValuesToBeInSet(column="status", value_set=["valid", "invalid", "failed", "missing"]))
    suite.add_expectation(E.ExpectColumnValuesToBeBetween(column="efficiency", min_value=0, max_value=1.5, strict_min=True))
    suite.add_expectation(E.ExpectColumnValuesToBeInSet(column="baseline_ok", value_set=[True]))
    result = batch.validate(suite)
    return [_describe(r) for r in result.results if not r.success]
