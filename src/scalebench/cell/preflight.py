"""Pre-flight of a timed cell's GPUs through NVML (nvidia-ml-py): no foreign processes, no
active throttling, a compute capability that runs the cell's precision (bf16 and tf32 need 8.0,
Ampere); clocks and temperature recorded. Skipped (and recorded so) without NVML."""
from __future__ import annotations

from typing import Any

from scalebench_kit.names import MIN_COMPUTE_CAPABILITY

# Clock-event reasons that do not distort a measurement (NVML bit masks).
BENIGN_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting"}
REASON_NAMES = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}


class PreflightFailed(RuntimeError):
    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


class PrecisionUnsupported(PreflightFailed):
    """A leased GPU cannot run the cell's precision: no retry helps (a different host would)."""


def _load_nvml():
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def _reasons(nvml, handle) -> int:
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(handle))


def check(device_ids: list[str], nvml: Any = None, own_pids: set[int] | None = None,
          precision: str | None = None) -> dict:
    """Report per device; raises PreflightFailed when a leased GPU is busy or throttled, and
    PrecisionUnsupported when its compute capability is below what `precision` needs."""
    if nvml is None:
        try:
            nvml = _load_nvml()
        except Exception as exc:  # CPU host, no driver: nothing to check
            return {"status": "skipped", "reason": f"NVML not available ({type(exc).__name__}: {exc})"}
    own_pids = own_pids or set()
    devices, problems, unsupported = [], [], []
    need = MIN_COMPUTE_CAPABILITY.get(precision or "")
    for dev in device_ids:
        h = nvml.nvmlDeviceGetHandleByIndex(int(dev))
        procs = [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)] + \
                [p.pid for p in nvml.nvmlDeviceGetGraphicsRunningProcesses(h)]
        foreign = sorted(set(procs) - own_pids)
        mask = _reasons(nvml, h)
        active = [name for bit, name in REASON_NAMES.items() if mask & bit]
        info = {
            "id": dev,
            "name": nvml.nvmlDeviceGetName(h) if hasattr(nvml, "nvmlDeviceGetName") else None,
            "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM),
            "temperature_c": nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU),
            "foreign_pids": foreign,
            "throttle_reasons": active,
            "compute_capability": ".".join(map(str, nvml.nvmlDeviceGetCudaComputeCapability(h))),
        }
        if isinstance(info["name"], bytes):
            info["name"] = info["name"].decode()
        devices.append(info)
        if foreign:
            problems.append(f"GPU {dev} runs foreign processes {foreign}")
        if active:
            problems.append(f"GPU {dev} is throttled ({', '.join(active)}) at {info['temperature_c']} C")
        if need and tuple(nvml.nvmlDeviceGetCudaComputeCapability(h)) < need:
            unsupported.append(f"GPU {dev} ({info['name']}) has compute capability {info['compute_capability']}; "
                               f"precision {precision} needs {'.'.join(map(str, need))} or newer (Ampere)")
    report = {"status": "failed" if problems or unsupported else "passed", "devices": devices,
              "problems": unsupported + problems, "precision": precision}
    if unsupported:
        raise PrecisionUnsupported("pre-flight failed: " + "; ".join(unsupported), report)
    if problems:
        raise PreflightFailed("pre-flight failed: " + "; ".join(problems), report)
    return report
