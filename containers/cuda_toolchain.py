"""The CUDA toolchain that compiles against an image's torch (mmcv's CUDA ops in the mmdet image).

One source of truth: the CUDA version comes from the torch wheel's own requirements
(`cuda-toolkit[...]==13.0.3` in its metadata), so the toolchain wheels are installed at exactly
torch's CUDA and no file of ours writes that version a second time. A toolchain from elsewhere (a
base image's /usr/local/cuda) is checked against `torch.version.cuda` before anything compiles.

Run in a build stage with the image's Python (standard library only), one line on stdout or, on
failure, one line on stderr and exit status 1:
  cuda_toolchain.py requirement        the pip requirement of the toolchain wheels at torch's CUDA
  cuda_toolchain.py home               CUDA_HOME of those wheels once installed (links libcudart.so)
  cuda_toolchain.py check NVCC         refuses an nvcc whose CUDA release differs from torch's
  cuda_toolchain.py archs FILE LIST CUOBJDUMP
                                       the GPU code in a built extension (a .so, or a wheel holding
                                       one): SASS for every arch of TORCH_CUDA_ARCH_LIST, PTX for
                                       those marked +PTX
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# what compiling a torch extension needs: the compiler, its C++ front end headers, CUB/Thrust and
# the runtime; cuBLAS, cuSPARSE, cuSOLVER and cuDNN headers come with torch's own runtime wheels
EXTRAS = ("nvcc", "cccl", "crt", "cudart")
PIN = re.compile(r"^cuda-toolkit(?:\[[^\]]*\])?\s*==\s*([0-9][0-9.]*)\s*(?:;|$)")
RELEASE = re.compile(r"release (\d+\.\d+)")
LISTED = re.compile(r"\.(sm|compute)_(\d+[a-z]?)\.(cubin|ptx)\s*$")


class ToolchainError(Exception):
    """One line: what is wrong and what to do."""


def toolkit_version(requires: list[str]) -> str:
    """The exact cuda-toolkit version a torch wheel requires (its metadata's Requires-Dist)."""
    for line in requires:
        m = PIN.match(line.strip().lower().replace("_", "-"))
        if m:
            return m.group(1)
    raise ToolchainError("torch's wheel requires no cuda-toolkit==X (a CPU or ROCm build?): "
                         "the GPU images need torch's CUDA build from PyPI")


def requirement(requires: list[str]) -> str:
    return f"cuda-toolkit[{','.join(EXTRAS)}]=={toolkit_version(requires)}"


def cuda_release(version: str) -> str:
    """'13.0.3' -> '13.0': the major.minor that torch.version.cuda and nvcc's release name."""
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ToolchainError(f"not a CUDA version: {version!r} (expected MAJOR.MINOR[.PATCH])")
    return ".".join(parts[:2])


def nvcc_release(text: str) -> str:
    m = RELEASE.search(text)
    if not m:
        raise ToolchainError(f"nvcc --version printed no 'release X.Y': {text.strip()[-120:]!r}")
    return m.group(1)


def check(nvcc_text: str, torch_cuda: str | None, torch_version: str) -> str:
    """nvcc's CUDA release when it is torch's; ToolchainError naming both otherwise."""
    if not torch_cuda:
        raise ToolchainError(f"torch {torch_version} is not a CUDA build (torch.version.cuda is None): "
                             "the GPU images need torch's CUDA build from PyPI")
    nvcc = nvcc_release(nvcc_text)
    if nvcc != cuda_release(torch_cuda):
        raise ToolchainError(f"nvcc is CUDA {nvcc} but torch {torch_version} was built with CUDA {torch_cuda}: "
                             f"compile with the toolchain at torch's CUDA (CUDA_TOOLCHAIN=pypi, the default) "
                             f"or a base image whose CUDA is {cuda_release(torch_cuda)}")
    return nvcc


def expected_archs(arch_list: str) -> tuple[set[str], set[str]]:
    """TORCH_CUDA_ARCH_LIST ('8.0;8.6;9.0+PTX', ';' or spaces) -> (SASS archs, PTX archs), e.g. '80'."""
    sass, ptx = set(), set()
    for item in re.split(r"[;\s]+", arch_list.strip()):
        if not item:
            continue
        m = re.fullmatch(r"(\d+)\.(\d+)([a-z]?)(\+PTX)?", item)
        if not m:
            raise ToolchainError(f"TORCH_CUDA_ARCH_LIST: {item!r} is not an arch (expected e.g. 8.0, 9.0a, 9.0+PTX)")
        arch = f"{m.group(1)}{m.group(2)}{m.group(3)}"
        sass.add(arch)
        if m.group(4):
            ptx.add(arch)
    if not sass:
        raise ToolchainError("TORCH_CUDA_ARCH_LIST is empty: name the GPU architectures to compile for")
    return sass, ptx


def listed_archs(listing: str) -> set[str]:
    """Archs named by `cuobjdump --list-elf` or `--list-ptx` ('ELF file 1: _ext.1.sm_80.cubin')."""
    return {m.group(2) for m in map(LISTED.search, listing.splitlines()) if m}


def check_archs(arch_list: str, elf: set[str], ptx: set[str]) -> str:
    want_sass, want_ptx = expected_archs(arch_list)
    missing = [f"sm_{a}" for a in _ordered(want_sass - elf)] + [f"PTX compute_{a}" for a in _ordered(want_ptx - ptx)]
    found = f"SASS {' '.join(f'sm_{a}' for a in _ordered(elf)) or 'none'}; " \
            f"PTX {' '.join(f'compute_{a}' for a in _ordered(ptx)) or 'none'}"
    if missing:
        raise ToolchainError(f"the extension lacks {', '.join(missing)} of TORCH_CUDA_ARCH_LIST={arch_list!r} "
                             f"(it has {found})")
    return found


def _ordered(archs: set[str]) -> list[str]:
    return sorted(archs, key=lambda a: (int(re.match(r"\d+", a).group()), a))


def _extension(path: Path, into: Path) -> Path:
    """The compiled extension itself: the file, or the one _ext*.so inside a wheel."""
    if path.suffix != ".whl":
        return path
    with zipfile.ZipFile(path) as whl:
        names = [n for n in whl.namelist() if re.search(r"/_ext[^/]*\.so$", n)]
        if len(names) != 1:
            raise ToolchainError(f"{path.name}: expected one compiled _ext*.so, found {names or 'none'}")
        return Path(whl.extract(names[0], into))


def _listing(cuobjdump: str, flag: str, so: Path) -> set[str]:
    out = subprocess.run([cuobjdump, flag, str(so)], capture_output=True, text=True)
    if out.returncode != 0:  # e.g. "does not contain device code": built without FORCE_CUDA
        said = (out.stderr or out.stdout).strip().splitlines() or [f"exit status {out.returncode}"]
        raise ToolchainError(f"{so.name}: cuobjdump {flag}: {said[-1]}")
    return listed_archs(out.stdout)


def _torch_requires() -> list[str]:
    from importlib import metadata
    return metadata.requires("torch") or []


def _home() -> Path:
    import nvidia  # the namespace package NVIDIA's wheels install into
    for root in map(Path, nvidia.__path__):
        for nvcc in sorted(root.glob("cu*/bin/nvcc")):
            home = nvcc.parent.parent
            cudart = home / "lib" / "libcudart.so"  # the name the linker asks for (-lcudart)
            versioned = sorted((home / "lib").glob("libcudart.so.*"))
            if not cudart.exists() and versioned:
                cudart.symlink_to(versioned[0].name)
            return home
    raise ToolchainError("no nvcc in NVIDIA's wheels: install the toolchain first (cuda_toolchain.py requirement)")


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent  # containers/: its torch/ folder is not the torch package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    try:
        cmd = argv[0] if argv else ""
        if cmd == "requirement":
            print(requirement(_torch_requires()))
        elif cmd == "home":
            print(_home())
        elif cmd == "check" and len(argv) == 2:
            import torch
            out = subprocess.run([argv[1], "--version"], capture_output=True, text=True)
            nvcc = check(out.stdout, torch.version.cuda, torch.__version__)
            print(f"nvcc CUDA {nvcc} = torch {torch.__version__} CUDA {torch.version.cuda}")
        elif cmd == "archs" and len(argv) == 4:
            with tempfile.TemporaryDirectory() as tmp:
                so = _extension(Path(argv[1]), Path(tmp))
                elf, ptx = (_listing(argv[3], flag, so) for flag in ("--list-elf", "--list-ptx"))
                print(f"{so.name}: {check_archs(argv[2], elf, ptx)}")
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (ToolchainError, OSError, ImportError) as exc:
        print(f"cuda_toolchain: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
