"""The package installs whole: built as wheels (as the Airflow image installs it, not editable), every
subpackage, the migrations and the kit's contract schema are inside, and the store migrates from them."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """scalebench's and the kit's wheels, built from copies of their sources (the checkout stays clean)."""
    tmp = tmp_path_factory.mktemp("wheels")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "tests")
    shutil.copytree(ROOT / "src", tmp / "scalebench" / "src", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp / "scalebench")
    shutil.copytree(ROOT / "containers" / "kit", tmp / "kit", ignore=ignore)
    out = tmp / "dist"
    for name in ("scalebench", "kit"):
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                               "-w", str(out), str(tmp / name)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    return {w.name.split("-")[0]: w for w in out.glob("*.whl")}


def test_the_scalebench_wheel_holds_every_module_and_the_migrations(wheels):
    names = set(zipfile.ZipFile(wheels["scalebench"]).namelist())
    src = ROOT / "src"
    wanted = {p.relative_to(src).as_posix() for p in (src / "scalebench").rglob("*")
              if p.is_file() and p.suffix in (".py", ".mako") and "__pycache__" not in p.parts}
    assert "scalebench/store/migrations/versions/0001_initial.py" in wanted
    assert wanted - names == set(), f"missing from the wheel: {sorted(wanted - names)}"


def test_the_kit_wheel_holds_the_contract_schema_and_no_tests(wheels):
    names = zipfile.ZipFile(wheels["scalebench_kit"]).namelist()
    assert "scalebench_kit/contract.schema.json" in names
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]


def test_an_installed_wheel_migrates_a_store_from_its_own_files(wheels, tmp_path):
    """Alembic's script_location follows the package: a non-editable install finds its migrations."""
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                           *map(str, wheels.values())], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    code = ("import scalebench, scalebench_kit.contract as c; from scalebench.store.db import upgrade, HEAD_REVISION\n"
            f"assert scalebench.__file__.startswith({str(site)!r}), scalebench.__file__\n"
            "c.contract_errors({})  # the schema file loads from the installed kit\n"
            f"print(upgrade('sqlite:///{tmp_path}/results.db'), HEAD_REVISION)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "SCALEBENCH_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-3000:]
    before_after, head = done.stdout.strip().rsplit(" ", 1)
    assert before_after == f"(None, '{head}')", done.stdout
