"""Why a cell failed, in one reason class; whether trying again can help."""
from __future__ import annotations

import re
from dataclasses import dataclass

# reason -> transient (retried with backoff) or deterministic (not retried)
REASONS = {
    "out_of_memory": False,
    "timeout": False,
    "communication_error": True,
    "preflight_failed": True,
    "engine_unreachable": True,
    "lease_timeout": True,
    "dataset_missing": False,
    "image_missing": False,
    "contract_missing_or_invalid": False,
    "unknown": False,
}

CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|OOM when allocating|RESOURCE_EXHAUSTED|"
                      r"cudaErrorMemoryAllocation|torch\.OutOfMemoryError", re.I)
COMM = re.compile(r"\bNCCL\b.*(error|timeout|timed out)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                  r"ProcessGroupNCCL|Gloo.*(timed out|Connection reset|connection closed)|"
                  r"collective operation timeout|Watchdog caught collective operation timeout", re.I)
DATASET = re.compile(r"CIFAR-10 file missing|dataset .* missing|No such file or directory: '/data|"
                     r"not a CIFAR-10 python batch|FileNotFoundError: .*?/data/", re.I)


@dataclass(frozen=True)
class Failure:
    reason: str
    exit_code: int | None
    detail: str

    @property
    def transient(self) -> bool:
        return REASONS[self.reason]

    def line(self, cell: dict, attempt: int) -> str:
        code = "none" if self.exit_code is None else str(self.exit_code)
        return (f"cell {cell['cell_id']} ({cell['label']}) attempt {attempt} failed: {self.reason}, exit code {code}"
                f"{' (transient)' if self.transient else ''}: {self.detail}")


def classify(exit_code: int | None, output: list[str], *, oom_killed: bool = False, timed_out: bool = False,
             timeout_s: float | None = None) -> Failure:
    """Classify a finished container from its state and output; the first match wins, most specific first."""
    text = "\n".join(output[-400:])
    if timed_out:
        return Failure("timeout", exit_code, f"ran past the cell timeout of {timeout_s:.0f}s and was stopped")
    if oom_killed:
        return Failure("out_of_memory", exit_code, "the container was killed by the kernel OOM killer (host memory)")
    m = CUDA_OOM.search(text)
    if m:
        return Failure("out_of_memory", exit_code, f"device memory exhausted ({m.group(0)})")
    m = COMM.search(text)
    if m:
        return Failure("communication_error", exit_code, f"collective communication failed ({m.group(0)[:120]})")
    m = DATASET.search(text)
    if m:
        return Failure("dataset_missing", exit_code, f"dataset missing or malformed ({m.group(0)[:120]})")
    last = next((ln.strip() for ln in reversed(output) if ln.strip()), "no output")
    return Failure("unknown", exit_code, f"last output line: {last[:200]}")
