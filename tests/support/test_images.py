"""Tags of a training image for the image-change tests: each built FROM the torch image (which
carries the kit and its hold trainer) with a slowdown baked into its environment (the hold
trainer reads it) and, optionally, one extra package installed from a wheel made here."""
import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path

REPO = "scalebench/torch"
BASE = f"{REPO}:cpu"
EXTRA = ("scalebench-test-extra", "1.0")


def extra_wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel of EXTRA, with its RECORD hashes (pip installs it offline)."""
    name, version = EXTRA
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    files = {f"{mod}/__init__.py": b'"""A package only the slower test image has."""\n',
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: scalebench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    whl = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{dist}/RECORD", record)
    return whl


def build_tag(tag: str, slowdown: float, extra: bool, context: Path) -> str:
    """scalebench/torch:<tag>, FROM the torch image; its digest."""
    context.mkdir(parents=True, exist_ok=True)
    lines = [f"FROM {BASE}", f"ENV SCALEBENCH_TEST_IMAGE_SLOWDOWN={slowdown}"]
    if extra:
        whl = extra_wheel(context)
        lines += [f"COPY {whl.name} /tmp/", f"RUN pip install -q --no-index --no-deps /tmp/{whl.name} && rm /tmp/{whl.name}"]
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    subprocess.run(["docker", "build", "-q", "-t", f"{REPO}:{tag}", str(context)], check=True, capture_output=True,
                   env={"DOCKER_BUILDKIT": "0", "PATH": "/usr/local/bin:/usr/bin:/bin"})
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", f"{REPO}:{tag}"], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def remove_images(digests: list[str]) -> None:
    """The test images with every tag they got (the cell operator's tags by digest too)."""
    subprocess.run(["docker", "image", "rm", "-f", *digests], capture_output=True)
