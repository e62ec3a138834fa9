"""What changed between two images: their package lists (as `scalebench.cell.images` reads them)
side by side, and the one line an alert and a change verdict carry
("torch 2.5.1 -> 2.6.0, nvidia-nccl-cu12 2.21.5 -> 2.23.4; config: unchanged")."""
from __future__ import annotations

SECTIONS = ("python", "cuda", "debian")  # the order a diff is told in: what a framework change moves first
LINE_ITEMS = 8                            # a one-line diff names this many, then counts the rest


def section_diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """["torch 2.5.1 -> 2.6.0", "scalebench-extra (new) 1.0", "six 1.16.0 (removed)"], by name."""
    out = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        if va == vb:
            continue
        out.append(f"{name} {va} -> {vb}" if va and vb else f"{name} (new) {vb}" if vb else f"{name} {va} (removed)")
    return out


def package_diff(a: dict | None, b: dict | None) -> dict[str, list[str]] | None:
    """Per section, what differs from image A's packages to image B's; None when either is unknown.
    The CUDA section leaves out NVIDIA's wheels, which the Python section already names."""
    if not a or not b:
        return None
    out = {}
    for section in SECTIONS:
        pa, pb = (a.get(section) or {}), (b.get(section) or {})
        if section == "cuda":
            pa = {k: v for k, v in pa.items() if k not in (a.get("python") or {})}
            pb = {k: v for k, v in pb.items() if k not in (b.get("python") or {})}
        out[section] = section_diff(pa, pb)
    return out


def diff_line(diff: dict[str, list[str]] | None, config_changed: bool | None = None) -> str:
    """The one line a verdict carries: the first packages that changed, and whether the config did."""
    if diff is None:
        packages = "packages unknown (no package list kept for one of the images)"
    else:
        items = [i for s in SECTIONS for i in diff.get(s, [])]
        packages = ", ".join(items[:LINE_ITEMS]) if items else "no package changed"
        if len(items) > LINE_ITEMS:
            packages += f" and {len(items) - LINE_ITEMS} more (scalebench diff)"
    if config_changed is None:
        return packages
    return f"{packages}; config: {'changed' if config_changed else 'unchanged'}"


def render_diff(label_a: str, label_b: str, diff: dict[str, list[str]] | None) -> str:
    """`scalebench diff`'s text: each section's changes, one per line."""
    if diff is None:
        return f"{label_a} -> {label_b}: no package list for one of them (run a cell on it, or keep it on this engine)"
    lines = [f"{label_a} -> {label_b}"]
    for section in SECTIONS:
        items = diff.get(section, [])
        lines.append(f"{section}: {len(items)} changed" if items else f"{section}: unchanged")
        lines += [f"  {i}" for i in items]
    return "\n".join(lines)
