"""A copy of include/configs plus the benchmark `drill`, whose cell fails on purpose (exit 3 with
a RuntimeError line), to inspect a failed cell in the UI, and optionally a malformed one. Used by the service and stack tests;
`python -m tests.support.drill_configs DIR` writes it for `make e2e`."""
import shutil
import sys
from pathlib import Path

import yaml

from tests.support import CONFIGS, new_config_tree


BROKEN = "broken_drill"  # a malformed benchmark file beside the good ones (only when asked for)


def write_drill_configs(dst: Path, benchmarks: tuple[str, ...] = ("resnet50_keras_cifar10",), broken: bool = False) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    new_config_tree(dst)
    for b in benchmarks:
        shutil.copy(CONFIGS / "benchmarks" / f"{b}.yaml", dst / "benchmarks" / f"{b}.yaml")
    drill = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    drill.update(id="drill", retries=0, entrypoint=["sh", "-c", "echo 'RuntimeError: drill cell fails on purpose' >&2; exit 3"])
    (dst / "benchmarks" / "drill.yaml").write_text(yaml.safe_dump(drill))
    if broken:
        drill.update(id=BROKEN, per_gpu_batch="lots")
        (dst / "benchmarks" / f"{BROKEN}.yaml").write_text(yaml.safe_dump(drill))
    return dst


if __name__ == "__main__":
    print(write_drill_configs(Path(sys.argv[1]).resolve()))


# A cell that holds its devices for a set time (the kit's hold trainer) and reports a valid
# contract: argv[1] maps "<gpus>x<epochs>" to seconds, so one config can give every cell its time;
# further arguments go to the hold trainer (e.g. its test-only slowdown).
HOLD_CODE = ("import json, sys; from scalebench_kit import hold; t = dict(kv.split('=') for kv in sys.argv[1].split(',')); "
             "c = json.load(open('/results/cell.json')); e = c['training']['epochs']; "
             "s = float(t['%dx%d' % (c['devices']['count'], e)]); "
             "sys.argv = ['hold', '--epoch-seconds', str(s / e), '--relative', '1,1,1,1'] + sys.argv[2:]; hold.main()")


def hold_benchmark(bench_id: str, seconds: dict[tuple[int, int], float], *, retries: int = 2,
                   retry_delay_s: float = 5, hold_args: tuple[str, ...] = ()) -> dict:
    """A benchmark config whose cells hold their slots for seconds[(gpus, epochs)] (smoke profile)."""
    base = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    epochs = sorted({e for _, e in seconds})
    table = ",".join(f"{g}x{e}={s:.3f}" for (g, e), s in sorted(seconds.items()))
    return {**base, "id": bench_id, "title": f"{bench_id}: cells that hold their devices", "retries": retries,
            "retry_delay_s": retry_delay_s, "gpu_counts": sorted({g for g, _ in seconds}), "epochs": epochs,
            "schedule": None, "images": {"cpu": "scalebench/torch:cpu", "gpu": "scalebench/torch:gpu"},
            "entrypoint": ["python", "-c", HOLD_CODE, table, *hold_args],
            # a hold cell times no real steps: its timed profiles need no minimum of them
            "profiles": {"smoke": {**base["profiles"]["smoke"], "epochs": epochs, "cell_timeout_minutes": 30},
                         "nightly": {"min_timed_steps": 0}, "full": {"min_timed_steps": 0}}}


def write_hold_configs(dst: Path, benchmarks: dict[str, dict], slots: int = 4, timing_policy: str | None = None) -> Path:
    """A config folder of hold benchmarks on one CPU host with `slots` device slots."""
    host = {"name": "local", "kind": "cpu", "queue": "default", "device_ids": [str(i) for i in range(slots)]}
    if timing_policy:
        host["timing_policy"] = timing_policy
    new_config_tree(dst, {"hosts": [host]})
    for bench_id, doc in benchmarks.items():
        (dst / "benchmarks" / f"{bench_id}.yaml").write_text(yaml.safe_dump(doc, width=1000))
    return dst
