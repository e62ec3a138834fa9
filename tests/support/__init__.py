"""What the tests and the benches share: sample records, the engine and Airflow homes, service clients.

Imported by tests/ and bench/; holds no tests itself."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "include" / "configs"


def new_config_tree(dst: Path, fleet: dict | None = None) -> Path:
    """An empty config folder a test fills with benchmarks: the shipped stacks and a fleet (the
    shipped one unless given)."""
    import shutil

    import yaml

    (dst / "benchmarks").mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIGS / "stacks.yaml", dst / "stacks.yaml")
    if fleet is None:
        shutil.copy(CONFIGS / "fleet.yaml", dst / "fleet.yaml")
    else:
        (dst / "fleet.yaml").write_text(yaml.safe_dump(fleet))
    return dst
