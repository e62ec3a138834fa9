"""GPU utilisation and memory sampled through NVML while a cell trains (GPU hosts only).

`nvidia-ml-py` is imported only when a sampler starts on a GPU host; CPU images do not have it
and do not need it. The driver version and device names join the system fingerprint.
"""
from __future__ import annotations

import threading


class GpuSampler:
    """Samples every `interval_s` in a daemon thread: utilisation (%) and used memory of each
    device index given. Use as a context manager around training; `summary()` afterwards."""

    def __init__(self, indices: list[int], interval_s: float = 0.5):
        self.indices = indices
        self.interval_s = interval_s
        self.samples: dict[int, list[tuple[float, float]]] = {i: [] for i in indices}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None

    def __enter__(self) -> "GpuSampler":
        import pynvml  # nvidia-ml-py: in GPU images and on GPU check hosts

        pynvml.nvmlInit()
        self._nvml = pynvml
        handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}

        def loop():
            while not self._stop.is_set():
                for i, h in handles.items():
                    util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
                    mem = pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20
                    self.samples[i].append((float(util), float(mem)))
                self._stop.wait(self.interval_s)

        self._thread = threading.Thread(target=loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
            if self._thread.is_alive():  # an NVML call hung: say so, the run's end must not wait on it
                print(f"nvml-sampler still running {5} s after it was told to stop", flush=True)

    def summary(self) -> dict:
        per = {}
        for i, s in self.samples.items():
            if s:
                per[str(i)] = {"samples": len(s), "util_mean_pct": round(sum(u for u, _ in s) / len(s), 1),
                               "util_max_pct": max(u for u, _ in s), "memory_max_mib": round(max(m for _, m in s), 1)}
        return {"interval_s": self.interval_s, "devices": per}

    def fingerprint(self) -> dict:
        """Driver, device names and the NVML version, for the system fingerprint."""
        nv = self._nvml
        if nv is None:
            return {}
        names = [nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i)) for i in self.indices]
        return {"driver": nv.nvmlSystemGetDriverVersion(), "nvml_devices": [n.decode() if isinstance(n, bytes) else n
                                                                            for n in names]}


def sample_gpus(kind: str, indices: list[int], interval_s: float = 0.5):
    """A GpuSampler on GPU hosts; on CPU hosts a no-op context with an empty summary."""
    return GpuSampler(indices, interval_s) if kind == "gpu" else _NoSampler()


class _NoSampler:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def summary(self) -> None:
        return None

    def fingerprint(self) -> dict:
        return {}

