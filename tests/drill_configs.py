"""A copy of include/configs plus the benchmark `drill`, whose cell fails on purpose (exit 3 with
a RuntimeError line), to inspect a failed cell in the UI. Used by the service and stack tests;
`python -m tests.drill_configs DIR` writes it for `make e2e`."""
import shutil
import sys
from pathlib import Path

import yaml

CONFIGS = Path(__file__).resolve().parents[1] / "include" / "configs"


def write_drill_configs(dst: Path, benchmarks: tuple[str, ...] = ("resnet50_keras_cifar10",)) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    (dst / "benchmarks").mkdir(parents=True)
    shutil.copy(CONFIGS / "fleet.yaml", dst / "fleet.yaml")
    for b in benchmarks:
        shutil.copy(CONFIGS / "benchmarks" / f"{b}.yaml", dst / "benchmarks" / f"{b}.yaml")
    drill = yaml.safe_load((CONFIGS / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    drill.update(id="drill", retries=0, entrypoint=["sh", "-c", "echo 'RuntimeError: drill cell fails on purpose' >&2; exit 3"])
    (dst / "benchmarks" / "drill.yaml").write_text(yaml.safe_dump(drill))
    return dst


if __name__ == "__main__":
    print(write_drill_configs(Path(sys.argv[1]).resolve()))
