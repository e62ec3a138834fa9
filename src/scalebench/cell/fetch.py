"""`scalebench data --fetch`: the real datasets from their official mirrors into the data root.

Each archive is downloaded to `<dataset root>/.downloads/<file>.part`, resumed with an HTTP
Range request when a previous try was cut off, checked against its published sha256, then
unpacked into the dataset root (the folder the benchmark's config names under the host's
data_root). An archive already verified and unpacked is not fetched again. `--mirror URL` (or
SCALEBENCH_DATA_MIRROR) fetches the same file names from another server, e.g. a site mirror.
The archives known for each dataset, with their published sha256, are listed in
include/configs/stacks.yaml (`datasets:`).
"""
from __future__ import annotations

import hashlib
import os
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from scalebench.core.config import Archive, Configs

CHUNK = 1 << 20
MIRROR_ENV = "SCALEBENCH_DATA_MIRROR"


class FetchError(RuntimeError):
    """A download that failed or does not match its published checksum; names the file."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, part: Path, timeout: float = 60) -> int:
    """Append what is missing of `url` to `part` (Range request from its current size); returns
    the bytes received this time. A server that ignores Range makes the file start over."""
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    why: str | None
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416:  # nothing left to send: the file is complete
            return 0
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: cannot connect ({exc})") from None
    got, expected = 0, resp.headers.get("Content-Length")
    with resp, part.open("ab" if resp.status == 206 else "wb") as out:
        try:
            for block in iter(lambda: resp.read(CHUNK), b""):
                out.write(block)
                got += len(block)
        except (OSError, ValueError) as exc:  # cut off: keep what arrived, the next try resumes
            why = str(exc)
        else:
            why = None if expected is None or got >= int(expected) else f"{got} of {expected} bytes this time"
    if why:
        raise FetchError(f"{url}: interrupted after {part.stat().st_size} bytes ({why}); run again to resume")
    return got


def _unpack(archive: Path, into: Path) -> None:
    with tarfile.open(archive) as tar:
        kwargs: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # no absolute paths or links out
        tar.extractall(into, **kwargs)


def fetch_archive(a: Archive, root: Path, mirror: str | None = None,
                  say: Callable[[str], None] = print) -> Path:
    """Download (resuming), verify and unpack one archive into `root`; returns the verified file."""
    downloads = root / ".downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    final, part, done = downloads / a.name, downloads / f"{a.name}.part", downloads / f"{a.name}.unpacked"
    if done.exists():
        say(f"{a.name}: already verified and unpacked in {root}")
        return final
    if not final.exists():
        url = f"{mirror.rstrip('/')}/{a.name}" if mirror else a.url
        if part.exists():
            say(f"{a.name}: resuming from {part.stat().st_size} bytes")
        download(url, part)
        digest = _sha256(part)
        if digest != a.sha256:
            size = part.stat().st_size
            part.unlink()  # a wrong file is not resumed: the next try starts over
            raise FetchError(f"{a.name} from {url}: sha256 {digest} ({size} bytes) does not match the published "
                             f"{a.sha256} ({a.size} bytes); the partial file was removed, run again")
        os.replace(part, final)
    say(f"{a.name}: sha256 ok, unpacking into {root}")
    _unpack(final, root)
    done.write_text(a.sha256 + "\n")
    return final


def fetch(dataset: str, root: Path, mirror: str | None = None, archives: dict[str, list[Archive]] | None = None,
          say: Callable[[str], None] = print) -> list[Path]:
    """Every archive of `dataset` (default table: the stacks file's `datasets`) into `root`."""
    table = archives if archives is not None else {n: d.archives for n, d in Configs().stacks.datasets.items()}
    if dataset not in table:
        raise FetchError(f"no download known for dataset {dataset!r}; known: {sorted(table)}")
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    return [fetch_archive(a, Path(root), mirror, say) for a in table[dataset]]
