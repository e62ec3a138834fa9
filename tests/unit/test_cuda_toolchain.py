"""containers/cuda_toolchain.py: the toolchain read from torch's own requirements, the one-line
refusal of an nvcc whose CUDA is not torch's, and the GPU archs read back from a built extension.
(That the pins on PyPI agree is tests/integration/images/test_images.py's, which resolves them.)"""
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

spec = importlib.util.spec_from_file_location("cuda_toolchain", ROOT / "containers" / "cuda_toolchain.py")
tc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tc)

# torch 2.13.0's wheel metadata (Requires-Dist), as PyPI serves it
TORCH_REQUIRES = [
    "filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3",
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; '
    'platform_system == "Linux"',
    'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"', 'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"',
]
NVCC_13_0 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
NVCC_12_8 = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.8, V12.8.93\n"


@pytest.mark.parametrize("requires, version", [
    (TORCH_REQUIRES, "13.0.3"),
    (["cuda-toolkit==12.8.1"], "12.8.1"),
    (["cuda_toolkit[nvcc] == 13.1.0 ; sys_platform == 'linux'"], "13.1.0"),
    (["cuda-toolkit-extra==1.0", "cuda-toolkit[nvcc]==13.0.3"], "13.0.3"),
])
def test_the_toolkit_version_is_the_one_torchs_wheel_requires(requires, version):
    assert tc.toolkit_version(requires) == version


@pytest.mark.parametrize("requires", [["filelock", "sympy>=1.13"], ["cuda-toolkit>=13.0"], []])
def test_a_torch_without_an_exact_toolkit_pin_is_refused(requires):
    with pytest.raises(tc.ToolchainError, match="requires no cuda-toolkit==X"):
        tc.toolkit_version(requires)


def test_the_toolchain_requirement_is_the_compilers_extras_at_torchs_version():
    assert tc.requirement(TORCH_REQUIRES) == "cuda-toolkit[nvcc,cccl,crt,cudart]==13.0.3"


@pytest.mark.parametrize("nvcc, torch_cuda, outcome", [
    (NVCC_13_0, "13.0", "13.0"),
    (NVCC_13_0, "13.0.2", "13.0"),
    (NVCC_12_8, "13.0", "nvcc is CUDA 12.8 but torch 2.13.0 was built with CUDA 13.0"),
    ("Cuda compilation tools, release 13.1, V13.1.80", "13.0", "nvcc is CUDA 13.1 but torch"),
    (NVCC_13_0, None, "is not a CUDA build"),
    ("command not found", "13.0", "printed no 'release X.Y'"),
])
def test_nvcc_must_be_torchs_cuda_release(nvcc, torch_cuda, outcome):
    if outcome == "13.0":
        assert tc.check(nvcc, torch_cuda, "2.13.0") == outcome
    else:
        with pytest.raises(tc.ToolchainError, match=outcome.replace("(", r"\(")):
            tc.check(nvcc, torch_cuda, "2.13.0")


@pytest.mark.parametrize("arch_list, sass, ptx", [
    ("8.0;8.6;8.9;9.0+PTX", {"80", "86", "89", "90"}, {"90"}),
    ("9.0a 10.0+PTX", {"90a", "100"}, {"100"}),
    ("8.0+PTX;9.0", {"80", "90"}, {"80"}),
])
def test_the_arch_list_names_sass_for_each_and_ptx_for_those_marked(arch_list, sass, ptx):
    assert tc.expected_archs(arch_list) == (sass, ptx)


@pytest.mark.parametrize("arch_list", ["", "sm_80", "8.0;ampere"])
def test_a_bad_arch_list_is_refused_by_name(arch_list):
    with pytest.raises(tc.ToolchainError, match="TORCH_CUDA_ARCH_LIST"):
        tc.expected_archs(arch_list)


# what cuobjdump 13.2 printed for a CUDA 13.0 build (torch's libtorch_cuda_linalg.so)
ELF = ("ELF file    1: _ext.cpython-311-x86_64-linux-gnu.1.sm_80.cubin\n"
       "ELF file    2: _ext.cpython-311-x86_64-linux-gnu.2.sm_86.cubin\n"
       "ELF file    3: _ext.cpython-311-x86_64-linux-gnu.3.sm_90.cubin\n")
PTX = "PTX file    1: _ext.cpython-311-x86_64-linux-gnu.1.sm_90.ptx\n"


def test_a_built_extension_must_carry_every_arch_of_the_list():
    elf, ptx = tc.listed_archs(ELF), tc.listed_archs(PTX)
    assert (elf, ptx) == ({"80", "86", "90"}, {"90"})
    assert tc.check_archs("8.0;8.6;9.0+PTX", elf, ptx) == "SASS sm_80 sm_86 sm_90; PTX compute_90"
    with pytest.raises(tc.ToolchainError, match=r"lacks sm_89, sm_100, PTX compute_100 of .* \(it has SASS sm_80 sm_86 sm_90; PTX compute_90\)"):
        tc.check_archs("8.0;8.6;8.9;9.0;10.0+PTX", elf, ptx)
    with pytest.raises(tc.ToolchainError, match="lacks PTX compute_90"):
        tc.check_archs("9.0+PTX", elf, set())


@pytest.mark.parametrize("nvcc_says, status", [(NVCC_12_8, 1), (NVCC_13_0, 0)])
def test_the_build_step_refuses_a_mismatched_nvcc_in_one_line(tmp_path, nvcc_says, status):
    """As the mmdet build runs it, `cuda_toolchain.py check NVCC` with the image's torch: here a
    stand-in torch package that reports what torch 2.13.0's CUDA wheel reports."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("from . import version\n__version__ = '2.13.0+cu130'\n")
    (tmp_path / "torch" / "version.py").write_text("cuda = '13.0'\n")
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f"#!/bin/sh\nprintf '{nvcc_says}'\n")
    nvcc.chmod(0o755)
    out = subprocess.run([sys.executable, str(ROOT / "containers" / "cuda_toolchain.py"), "check", str(nvcc)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert out.returncode == status, out
    if status:
        assert out.stdout == "" and out.stderr == (
            "cuda_toolchain: nvcc is CUDA 12.8 but torch 2.13.0+cu130 was built with CUDA 13.0: compile with the "
            "toolchain at torch's CUDA (CUDA_TOOLCHAIN=pypi, the default) or a base image whose CUDA is 13.0\n")
    else:
        assert out.stdout == "nvcc CUDA 13.0 = torch 2.13.0+cu130 CUDA 13.0\n" and out.stderr == ""
