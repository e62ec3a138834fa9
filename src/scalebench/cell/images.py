"""A training image as a thing to judge: a reference that runs it again, and what it carries.

Every image a figure was measured on stays runnable: the cell operator tags it by its digest
(`<repository>:sha256-<12 hex>`) before the cell runs, so `make images` moving the image's tag to
a new build leaves the old one reachable, and the A/B and bisect can run it. An image pulled from
or pushed to a registry is referenced by its registry digest (`repository@sha256:...`), which a
second host resolves too. Its package list is read once, inside the image, by the kit's
`scalebench_kit.packages` (no network), and kept by digest in the results store.
"""
from __future__ import annotations

import json
import re

from scalebench.cell.engine import Engine
from scalebench.core.config import image_repository

KEEP_TAG = re.compile(r"^sha256-[0-9a-f]{12}$")
READ_TIMEOUT_S = 120
PACKAGES_COMMAND = ["python3", "-m", "scalebench_kit.packages"]


class ImageError(RuntimeError):
    """An image that cannot be found, tagged or read; the message names it."""


def keep_tag(digest: str) -> str:
    """The tag an image is kept under: its digest's first 12 hex digits ("sha256-0123456789ab")."""
    return "sha256-" + digest.split(":", 1)[-1][:12]


def keep_reference(engine: Engine, image: str, inspected: dict | None = None) -> str:
    """A reference that runs this image again: its registry digest where it has one, else a tag by
    its digest in its repository, which this makes on the engine."""
    inspected = inspected or engine.inspect_image(image)
    repo = image_repository(image)
    for rd in inspected.get("RepoDigests") or []:
        if image_repository(rd) == repo:
            return rd
    tag = keep_tag(inspected["Id"])
    engine.tag(inspected["Id"], repo, tag)
    return f"{repo}:{tag}"


def read_packages(engine: Engine, image: str) -> dict:
    """The image's package list, read by a short container of the image itself (no network)."""
    code, out, err = engine.run_command(image, PACKAGES_COMMAND, role="image-packages", timeout_s=READ_TIMEOUT_S)
    if code != 0:
        raise ImageError(f"reading the packages of {image} exited {code}: {err.strip()[-300:]}")
    try:
        doc = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ImageError(f"reading the packages of {image} printed no JSON: {out[-300:]!r}") from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), dict) for k in ("python", "debian", "cuda")):
        raise ImageError(f"the packages of {image}: expected python, debian and cuda maps, got {sorted(doc)}")
    return doc


def keep_image(engine: Engine, store, image: str, inspected: dict | None = None) -> tuple[str, str]:
    """(digest, a reference that runs it again) of an image on this engine, its package list read
    and kept in `store` (a results store) the first time the store sees its digest."""
    inspected = inspected or engine.inspect_image(image)
    digest, ref = inspected["Id"], keep_reference(engine, image, inspected)
    if store.image_packages(digest) is None:
        store.save_image_packages(digest, image, ref, read_packages(engine, image))
    return digest, ref


def tags_between(images: list[dict], good: str, bad: str) -> list[str] | str:
    """The tags of one repository built after the good image and before the bad one (by creation
    time), oldest first: a bisection's candidates. `images`: [{"tags": [...], "created": ISO
    time}] of the repository (the engine's `images.list(name=repo)`). Kept digest tags
    (sha256-...) are never candidates. A string says why there are none."""
    created = {t: img["created"] for img in images for t in img["tags"]}
    missing = [t for t in (good, bad) if t not in created]
    if missing:
        return f"the engine holds no image tagged {' or '.join(missing)}"
    low, high = created[good], created[bad]
    if low >= high:
        return f"{good} was not built before {bad}"
    between = sorted((c, t) for t, c in created.items() if low < c < high and not KEEP_TAG.match(t) and t not in (good, bad))
    return [t for _, t in between] or f"no tag was built between {good} and {bad}"


def repository_images(engine: Engine, repository: str) -> list[dict]:
    """[{"tags", "created"}] of a repository on an engine, tags without the repository."""
    out = []
    for img in engine.images(repository):
        tags = [t.rsplit(":", 1)[1] for t in img["tags"] if image_repository(t) == repository]
        if tags:
            out.append({"tags": tags, "created": img["created"]})
    return out
