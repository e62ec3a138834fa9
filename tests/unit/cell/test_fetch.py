"""`scalebench data --fetch` against a local HTTP server (the official mirrors are not reachable
here): resumed downloads, sha256 checks, unpacking into the dataset root in the real layout."""
import hashlib
import http.server
import tarfile
import threading
from pathlib import Path

import pytest
import yaml

from scalebench import cli
from scalebench.cell.fetch import FetchError, fetch
from scalebench.core.config import Archive
from scalebench_kit import datasets as kit_datasets
from scalebench_kit import voc_seg


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files with Range support; the first GET of a file is cut off halfway when asked."""
    cut_first = False
    served: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            return self.send_error(404)
        data = path.read_bytes()
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        type(self).served.append(start)
        body = data[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if type(self).cut_first and len(type(self).served) == 1:
            self.wfile.write(body[: len(body) // 2])  # then the connection drops
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture
def mirror(tmp_path):
    """A VOC2007-layout archive (synthetic, real on-disk format) on a local HTTP server."""
    src = tmp_path / "src"
    voc_seg.write_synthetic(src, train_images=6, test_images=3, size=32)
    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(served / "VOCtrainval_06-Nov-2007.tar", "w") as tar:
        tar.add(src / "VOCdevkit", arcname="VOCdevkit")
    blob = (served / "VOCtrainval_06-Nov-2007.tar").read_bytes()
    archive = Archive(url="http://unreachable.invalid/VOCtrainval_06-Nov-2007.tar",
                      sha256=hashlib.sha256(blob).hexdigest(), size=len(blob))
    RangeHandler.served, RangeHandler.cut_first = [], False
    handler = lambda *a, **k: RangeHandler(*a, directory=str(served), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", archive, blob
    server.shutdown()


def test_an_interrupted_download_resumes_and_unpacks_the_real_layout(mirror, tmp_path):
    url, archive, blob = mirror
    RangeHandler.cut_first = True
    root = tmp_path / "data" / "VOCdevkit"
    with pytest.raises(FetchError, match="interrupted after .* run again to resume"):
        fetch("voc2007", root, url, archives={"voc2007": [archive]}, say=lambda _: None)
    part = root / ".downloads" / "VOCtrainval_06-Nov-2007.tar.part"
    kept = part.stat().st_size
    assert 0 < kept < len(blob)
    [done] = fetch("voc2007", root, url, archives={"voc2007": [archive]}, say=lambda _: None)
    assert RangeHandler.served == [0, kept]  # the second request asked only for the rest
    assert done.read_bytes() == blob and not part.exists()
    assert kit_datasets.missing_files(root, "vocdevkit-2007-seg") == []
    x, y = voc_seg.read_split(root, "train", 32)
    assert x.shape == (6, 32, 32, 3)
    messages = []
    fetch("voc2007", root, url, archives={"voc2007": [archive]}, say=messages.append)
    assert messages == [f"VOCtrainval_06-Nov-2007.tar: already verified and unpacked in {root}"]
    assert len(RangeHandler.served) == 2  # nothing downloaded again


def test_a_checksum_mismatch_names_the_file_and_starts_over_next_time(mirror, tmp_path):
    url, archive, _ = mirror
    wrong = archive.model_copy(update={"sha256": "0" * 64})
    root = tmp_path / "VOCdevkit"
    with pytest.raises(FetchError, match=r"VOCtrainval_06-Nov-2007.tar from http://127.0.0.1:\d+/VOCtrainval"
                                         r"_06-Nov-2007.tar: sha256 [0-9a-f]{64} .* does not match the published 0{64}"):
        fetch("voc2007", root, url, archives={"voc2007": [wrong]}, say=lambda _: None)
    assert list((root / ".downloads").iterdir()) == [] and not (root / "VOCdevkit").exists()


def test_the_cli_fetches_into_the_data_root_and_reports_completeness(mirror, config_tree, tmp_path, monkeypatch,
                                                                     capsys):
    """The archives come from the stacks file: point voc2007's at the local server's file."""
    url, archive, _ = mirror
    stacks = yaml.safe_load((config_tree / "stacks.yaml").read_text())
    stacks["datasets"]["voc2007"]["archives"] = [archive.model_dump()]
    (config_tree / "stacks.yaml").write_text(yaml.safe_dump(stacks))
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(config_tree))
    assert cli.main(["data", "unet_torch_voc2007", "--fetch", "--data-root", str(tmp_path / "d"),
                     "--mirror", url]) == 0
    out = capsys.readouterr().out
    assert '"complete": true' in out and str(tmp_path / "d" / "VOCdevkit") in out
    assert cli.main(["data", "unet_torch_voc2007", "--fetch"]) == 2  # the local fleet names no data root
    assert "no data root; give --data-root PATH" in capsys.readouterr().err


def test_unreachable_mirror_is_a_clear_error(tmp_path):
    with pytest.raises(FetchError, match=r"cifar-10-python.tar.gz: cannot connect"):
        fetch("cifar10", tmp_path, "http://127.0.0.1:9", say=lambda _: None)
    with pytest.raises(FetchError, match="no download known for dataset 'coco'"):
        fetch("coco", tmp_path)
