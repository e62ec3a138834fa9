"""What the tests and the benches share: sample records, the engine and Airflow homes, service clients.

Imported by tests/ and bench/; holds no tests itself."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "include" / "configs"
