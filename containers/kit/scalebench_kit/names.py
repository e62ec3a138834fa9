"""Every name the orchestrator, the trainers and the report share, defined once (in the spirit
of MLPerf logging's constants module). Code imports these; it never spells them again.
Standard library only: this module is installed in every training image."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

# -- files of one attempt folder ----------------------------------------------------------------
CELL_SPEC_FILE = "cell.json"          # what to run (orchestrator -> trainer)
RESULT_FILE = "metrics.json"          # the result contract (trainer -> orchestrator)
EVENTS_FILE = "events.jsonl"          # event lines, keys below
MLLOG_FILE = "mlperf.log"             # the same events in MLPerf's :::MLLOG format (MLLOG_KEYS)
FAILURE_FILE = "failure.json"         # why an attempt failed, at any stage
TEARDOWN_FILE = "teardown.json"       # a crash after every rank's run_stop success (the attempt stays valid)
VALIDATION_FILE = "validation.json"   # the GX verdict on the result
PLACEMENT_FILE = "placement.json"     # devices, timing policy, co-tenants
PREFLIGHT_FILE = "preflight.json"     # NVML report of a failed pre-flight
TASK_FILE = "task.json"               # the Airflow task instance of the attempt (task id, map index, try)
CONTAINER_FILE = "container.json"     # how its container was started (image digest, command, env, mounts, devices)
PROFILE_DIR = "profile"               # the profiling window's traces, profile/rank<r>/ (scalebench_kit.profiling)
ATTEMPT_FILES = (CELL_SPEC_FILE, RESULT_FILE, EVENTS_FILE, MLLOG_FILE, FAILURE_FILE, VALIDATION_FILE, PLACEMENT_FILE,
                 PREFLIGHT_FILE, TASK_FILE, CONTAINER_FILE)

# -- files of one night's report (reports/<night>/) and of the reports folder --------------------
REPORT_MD, REPORT_HTML, REPORT_TABLE = "report.md", "report.html", "table.json"
REPORTS_INDEX_HTML, REPORTS_INDEX_JSON = "index.html", "index.json"


# -- metrics -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    name: str            # the key in metrics.json and in configs
    display: str         # how tables and plots name it
    higher_is_better: bool
    fraction: bool       # a value in [0, 1]


# the accuracy metrics' names as a type a checker reads (configs use it); ACCURACY_METRICS describes each
AccuracyMetricName = Literal["precision", "recall", "iou", "accuracy", "map50", "map", "mask_iou", "mask_map50",
                             "mask_map"]
ACCURACY_METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("precision", "precision", True, True),
    Metric("recall", "recall", True, True),
    Metric("iou", "IoU", True, True),
    Metric("accuracy", "accuracy", True, True),
    Metric("map50", "mAP@0.5", True, True),                 # boxes, VOC area AP at IoU 0.5
    Metric("map", "mAP@[.5:.95]", True, True),              # boxes, COCOeval's AP over IoU 0.50-0.95
    Metric("mask_iou", "mask IoU", True, True),             # instance masks: the same scores on pixels
    Metric("mask_map50", "mask mAP@0.5", True, True),
    Metric("mask_map", "mask mAP@[.5:.95]", True, True),
)}
assert tuple(ACCURACY_METRICS) == get_args(AccuracyMetricName), "one description per accuracy metric name"
THROUGHPUT = Metric("images_per_s", "images/s", True, False)
TRAIN_TIME = Metric("train_s", "train s", False, False)
ALL_METRICS: dict[str, Metric] = {**ACCURACY_METRICS, THROUGHPUT.name: THROUGHPUT, TRAIN_TIME.name: TRAIN_TIME}

# -- numeric precision (scalebench_kit.precision applies them; each stack names its switch) -------
# fp32: TF32 off; tf32: fp32 storage, TF32 tensor-core math; bf16 / fp16: mixed precision
Precision = Literal["fp32", "tf32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
COMPUTE_DTYPE = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
MIN_COMPUTE_CAPABILITY = {"tf32": (8, 0), "bf16": (8, 0)}  # Ampere or newer

# -- dataset formats (scalebench_kit.datasets registers a reader and a synthetic writer for each) ---
DatasetFormat = Literal["cifar10-python", "vocdevkit-2007-seg", "vocdevkit-2007-det", "vocdevkit-2012-ins"]
DATASET_FORMATS: tuple[str, ...] = get_args(DatasetFormat)

# -- failure reasons: class -> transient (retried with backoff) -----------------------------------
FAILURE_REASONS: dict[str, bool] = {
    "out_of_memory": False,
    "timeout": False,
    # SIGTERM to the task: a user's mark-failed or clear (Airflow has already set the state, so no
    # retry follows whatever we raise) or a scheduler/worker shutdown (then the retry saves the cell)
    "cancelled": True,
    "killed": True,               # a signal from outside (preemption, reboot, docker kill): try again
    "worker_lost": True,          # the task's own process died with its worker: no record was written
    "communication_error": True,
    "preflight_failed": True,
    "precision_unsupported": False,  # the GPU's compute capability is below the precision's (bf16, tf32: 8.0)
    "engine_unreachable": True,
    "lease_timeout": True,
    "lease_lost": True,           # the heartbeat found the lease reclaimed, or could not renew it for a TTL
    "dataset_missing": False,
    "image_missing": False,
    "contract_missing_or_invalid": False,
    "validation_failed": False,   # a result outside the benchmark's expectations (NaN, bounds, counts)
    # the launcher failed after every rank logged its run_stop success: the cell counts as valid
    # when its contract validates (the crash is recorded with it), so it is never retried
    "teardown_crash": False,
    "unknown": False,
}

TRAINER_FAILED = "scalebench: trainer failed:"  # the line a trainer prints for any exception (runtime.main_guard)
PROGRESS_PREFIX = "scalebench progress:"  # a trainer's progress line; the operator logs it outside the folded output
PROGRESS_EVERY_ENV = "SCALEBENCH_PROGRESS_EVERY_S"  # seconds between progress lines (default PROGRESS_EVERY_S)
PROGRESS_EVERY_S = 30.0

# -- event keys (events.jsonl) -------------------------------------------------------------------
EVENT_KEYS = frozenset({
    "run_start", "init_start", "init_stop", "data_ready", "model_ready", "warmup_stop",
    "epoch_start", "epoch_stop", "train_stop", "eval_start", "precise_bn", "eval_stop", "run_stop",
    "step_breakdown", "profile_start", "profile_stop",
    "metric", "error",
})

# Each event key as an MLPerf log key and event type. Where mllog's constants have the key (the
# strings of mlperf_logging.mllog.constants, spelt here so the kit needs no new dependency), that
# one; else ours, namespaced "scalebench.", as a point in time.
MLLOG_NAMESPACE = "scalebench."
MLLOG_KEYS: dict[str, tuple[str, str]] = {
    "run_start": ("run_start", "INTERVAL_START"), "run_stop": ("run_stop", "INTERVAL_END"),
    "init_start": ("init_start", "INTERVAL_START"), "init_stop": ("init_stop", "INTERVAL_END"),
    "epoch_start": ("epoch_start", "INTERVAL_START"), "epoch_stop": ("epoch_stop", "INTERVAL_END"),
    "eval_start": ("eval_start", "INTERVAL_START"), "eval_stop": ("eval_stop", "INTERVAL_END"),
    **{k: (MLLOG_NAMESPACE + k, "POINT_IN_TIME") for k in EVENT_KEYS
       if k not in ("run_start", "run_stop", "init_start", "init_stop", "epoch_start", "epoch_stop", "eval_start",
                    "eval_stop")},
}
