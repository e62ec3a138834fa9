"""`make lint`'s type checker holds the typed records: a misspelled key on a record fails it, the
right key passes (the same settings as `make lint`, from pyproject.toml)."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

USE = '''from scalebench.core.records import FigureRow


def train_seconds(row: FigureRow) -> object:
    return row["{key}"]
'''


@pytest.mark.timeout(300)
@pytest.mark.parametrize("key, fails", [("figure", False), ("figrue", True)])
def test_the_type_checker_catches_a_misspelled_record_key(tmp_path, key, fails):
    module = tmp_path / "uses_a_record.py"
    module.write_text(USE.format(key=key))
    out = subprocess.run([str(Path(sys.executable).parent / "mypy"), "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), str(module)], cwd=ROOT, capture_output=True,
                         text=True, timeout=280)
    if fails:
        assert out.returncode == 1, out.stdout
        assert f'TypedDict "FigureRow" has no key "{key}"' in out.stdout, out.stdout
    else:
        assert out.returncode == 0, out.stdout
