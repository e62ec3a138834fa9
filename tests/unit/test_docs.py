"""The README stays one screen, and every page it links is in the repository."""
import re

from tests.support import ROOT


def test_the_readme_is_one_screen_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "the README is one screen (150 lines at most): move detail into docs/"
    targets = {m.split("#")[0] for m in re.findall(r"\]\(([^)]+)\)", text) if not m.startswith("http")}
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert targets and not missing, missing
