"""The VOCdevkit layout every VOC reader shares: where the year's folder is, which ids a split
names, and which files those ids need (the layout check and the dataset fingerprint use it)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class VocFormatError(ValueError):
    """The tree is not the VOC dataset it should be; the message names the file and what is wrong."""


@dataclass(frozen=True)
class VocTree:
    dirname: str                              # VOC2007, VOC2012
    split_dir: Path                           # ImageSets/Segmentation, ImageSets/Main
    splits: tuple[str, ...]                   # the split files that must exist
    per_image: tuple[tuple[str, str], ...]    # (folder, extension) of the files each id needs

    def base_dir(self, root: str | Path) -> Path:
        """root may be VOCdevkit/, its parent, or the year's folder itself."""
        root = Path(root)
        for candidate in (root / "VOCdevkit" / self.dirname, root / self.dirname, root):
            if (candidate / self.split_dir).is_dir():
                return candidate
        return root / self.dirname

    def split_ids(self, root: str | Path, split: str) -> list[str]:
        path = self.base_dir(root) / self.split_dir / f"{split}.txt"
        if not path.is_file():
            raise VocFormatError(f"{path}: split file missing (expected {self.split_dir}/{{{','.join(self.splits)}}}.txt)")
        ids = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
        if not ids:
            raise VocFormatError(f"{path}: split file names no image ids")
        return ids

    def expected_files(self, root: str | Path) -> list[str]:
        """Every file the splits need, relative to the year's folder (the split files first)."""
        files = [str(self.split_dir / f"{s}.txt") for s in self.splits]
        if not all((self.base_dir(root) / f).is_file() for f in files):
            return files
        ids = sorted({i for s in self.splits for i in self.split_ids(root, s)})
        return files + [f"{folder}/{i}{ext}" for folder, ext in self.per_image for i in ids]
