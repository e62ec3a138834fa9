"""The committed chart script (uPlot): the files are those SHA256SUMS records, of the version web/package-lock.json pins."""
import hashlib
import json
from pathlib import Path

import scalebench.orchestration.ui as ui

VENDOR = Path(ui.__file__).parent / "static" / "vendor"
ROOT = Path(__file__).resolve().parents[3]


def recorded() -> dict[str, str]:
    return {name.strip(): digest for digest, name in
            (line.split(maxsplit=1) for line in (VENDOR / "SHA256SUMS").read_text().splitlines() if line.strip())}


def test_the_committed_chart_files_match_their_recorded_sha256():
    sums = recorded()
    assert set(sums) == {"LICENSE", "uPlot.iife.min.js", "uPlot.min.css"}
    for name, digest in sums.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == digest, f"{VENDOR / name} differs from SHA256SUMS"


def test_the_committed_script_is_the_version_the_lock_pins():
    lock = json.loads((ROOT / "web" / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/uplot"]["version"]
    head = (VENDOR / "uPlot.iife.min.js").read_text()[:200]
    assert f"(v{version})" in head, f"uPlot.iife.min.js is not v{version}: run make ui-vendor"
    assert "MIT License" in (VENDOR / "LICENSE").read_text()
