"""The README stays one screen, and every page it or a doc links is in the repository."""
import re

from tests.support import ROOT


def test_the_readme_is_one_screen_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "the README is one screen (150 lines at most): move detail into docs/"
    targets = {m.split("#")[0] for m in re.findall(r"\]\(([^)]+)\)", text) if not m.startswith("http")}
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert targets and not missing, missing


def test_every_link_between_the_docs_resolves():
    """Each relative link of a page under docs/ names a file of the repository."""
    missing = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for target in re.findall(r"\]\(([^)]+)\)", doc.read_text()):
            if target.startswith(("http", "#")):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                missing.append(f"{doc.name}: {target}")
    assert not missing, missing
