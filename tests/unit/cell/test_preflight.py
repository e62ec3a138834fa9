from types import SimpleNamespace

import pytest

from scalebench.cell import preflight


class FakeNVML:
    """Answers like pynvml for a few GPUs: processes, clock-event reasons, clocks, temperature."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, gpus):
        self.gpus = gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p) for p in h.get("pids", [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return h.get("reasons", 0)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {1: 1980, 2: 2619}[kind]

    def nvmlDeviceGetTemperature(self, h, kind):
        return h.get("temp", 35)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return h.get("cc", (9, 0))


def test_idle_gpus_pass_and_their_clocks_are_recorded():
    nvml = FakeNVML({0: {"reasons": 0x1}, 1: {"reasons": 0x0}})
    report = preflight.check(["0", "1"], nvml)
    assert report["status"] == "passed"
    assert report["devices"][0] == {"id": "0", "name": "NVIDIA H100 80GB HBM3", "sm_clock_mhz": 1980,
                                    "mem_clock_mhz": 2619, "temperature_c": 35, "foreign_pids": [],
                                    "throttle_reasons": [], "compute_capability": "9.0"}


@pytest.mark.parametrize("gpu, expected", [
    ({"pids": [4242]}, "GPU 1 runs foreign processes [4242]"),
    ({"reasons": 0x20 | 0x40, "temp": 91}, "GPU 1 is throttled (sw_thermal_slowdown, hw_thermal_slowdown) at 91 C"),
    ({"reasons": 0x4}, "GPU 1 is throttled (sw_power_cap)"),
])
def test_busy_or_throttled_gpus_fail_the_preflight(gpu, expected):
    nvml = FakeNVML({0: {}, 1: gpu})
    with pytest.raises(preflight.PreflightFailed) as err:
        preflight.check(["0", "1"], nvml)
    assert expected in str(err.value) and err.value.report["status"] == "failed"


def test_the_cells_own_processes_are_not_foreign():
    assert preflight.check(["0"], FakeNVML({0: {"pids": [7]}}), own_pids={7})["status"] == "passed"


def test_without_nvml_it_is_skipped_and_says_why(monkeypatch):
    def no_driver():  # what pynvml raises on a CPU host, whatever this machine has
        raise OSError("NVML Shared Library Not Found")

    monkeypatch.setattr(preflight, "_load_nvml", no_driver)
    report = preflight.check(["0"])
    assert report == {"status": "skipped", "reason": "NVML not available (OSError: NVML Shared Library Not Found)"}


@pytest.mark.parametrize("precision, cc, passes", [
    ("bf16", (8, 0), True), ("bf16", (7, 0), False), ("tf32", (7, 5), False), ("tf32", (9, 0), True),
    ("fp16", (7, 0), True), ("fp32", (6, 0), True), (None, (6, 0), True)])
def test_bf16_and_tf32_need_compute_capability_8(precision, cc, passes):
    nvml = FakeNVML({0: {"cc": cc}})
    if passes:
        assert preflight.check(["0"], nvml, precision=precision)["devices"][0]["compute_capability"] == "%d.%d" % cc
        return
    with pytest.raises(preflight.PrecisionUnsupported) as exc:
        preflight.check(["0"], nvml, precision=precision)
    assert f"has compute capability {cc[0]}.{cc[1]}; precision {precision} needs 8.0 or newer" in str(exc.value)
    assert exc.value.report["precision"] == precision and exc.value.report["status"] == "failed"
