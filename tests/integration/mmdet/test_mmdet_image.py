"""The mmdetection image's mmcv comes from a checksum-verified prebuilt wheel or from source."""
import hashlib
import os
import subprocess

from tests.support import ROOT

SCRIPT = ROOT / "containers/mmdet/fetch-wheels.sh"
WANT, NAME = (ROOT / "containers/mmdet/mmcv-wheel.sha256").read_text().split()


def fetch(tmp_path, wheelhouse):
    env = {**os.environ, "WHEELS_OUT": str(tmp_path / "out")}
    env.pop("SCALEBENCH_WHEELHOUSE", None)
    if wheelhouse:
        env["SCALEBENCH_WHEELHOUSE"] = str(wheelhouse)
    proc = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc, sorted(p.name for p in (tmp_path / "out").iterdir())


def test_the_wheelhouse_wheel_is_used_only_when_its_sha256_matches(tmp_path):
    shared = ROOT.parent / "shared" / "wheelhouse" / NAME
    house = tmp_path / "house"
    house.mkdir()
    if shared.is_file():  # the real prebuilt wheel where the runner has the wheelhouse
        (house / NAME).write_bytes(shared.read_bytes())
        assert hashlib.sha256((house / NAME).read_bytes()).hexdigest() == WANT
        proc, files = fetch(tmp_path, house)
        assert files == [NAME] and "prebuilt wheel" in proc.stdout
    (house / NAME).write_bytes(b"a wheel built for another torch")
    proc, files = fetch(tmp_path, house)
    assert files == [] and f"expected {WANT}: not used, mmcv is built from source" in proc.stderr
    proc, files = fetch(tmp_path, None)  # a fresh machine: no wheelhouse, no stale wheel left behind
    assert files == [] and "built from source in the image" in proc.stdout
