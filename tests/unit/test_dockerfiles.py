"""Every GPU Dockerfile parsed (dockerfile-parse) as `make images-gpu` builds it, and
`containers/build-gpu.sh` run against a stand-in `docker` that records what it is asked: the stages,
bases, cache inputs and CUDA compile settings, in every CI run without an engine. (The images
themselves are built and checked by make images-gpu-check: tests/integration/images/test_gpu_images.py.)"""
import os
import re
import subprocess

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from tests.support import CONFIGS, ROOT
from tests.unit.test_cuda_toolchain import tc

STACKS = yaml.safe_load((CONFIGS / "stacks.yaml").read_text())["stacks"]
GPU_BASE = "scalebench/debian-base:bookworm"  # build-gpu.sh's default: the frameworks bring CUDA as wheels


def parsed(path, **args) -> DockerfileParser:
    d = DockerfileParser(str(path), build_args={"VARIANT": "gpu", "BASE_IMAGE": GPU_BASE, **args})
    d.content  # noqa: B018  (read now: a missing file fails here, with its path)
    return d


def stages(d: DockerfileParser) -> list[list[dict]]:
    out: list[list[dict]] = []
    for ins in d.structure:
        if ins["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def named(d: DockerfileParser, name: str) -> list[dict]:
    [stage] = [st for st in stages(d) if st[0]["value"].endswith(f" AS {name}")]
    return stage


def args_of(stage: list[dict]) -> dict[str, str | None]:
    return {m.group(1): m.group(2) for i in stage if i["instruction"] == "ARG"
            for m in [re.match(r"(\w+)(?:=(.*))?$", i["value"])]}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_each_gpu_variant_builds_from_its_base_in_a_build_and_a_final_stage(stack):
    d = parsed(ROOT / "containers" / stack / "Dockerfile")
    base = STACKS[stack]["base"]
    expected = GPU_BASE if base is None else STACKS[base]["images"]["gpu"]
    assert d.parent_images[-2:] == [expected, expected], d.parent_images  # build and final stage on the named base
    build, final = named(d, "build"), stages(d)[-1]
    assert "--from=build" in " ".join(i["value"] for i in final)
    assert d.labels.get("org.scalebench.stack") == stack
    assert (ROOT / "containers" / stack / "requirements-gpu.txt").exists()
    copies = [i["value"] for i in build if i["instruction"] == "COPY"]
    # the variant's pinned set, with VARIANT declared in the stage that reads it
    assert f"{stack}/requirements-${{VARIANT}}.txt /tmp/requirements.txt" in copies
    assert any(i["instruction"] == "ARG" and i["value"].startswith("VARIANT") for i in build)


def test_the_torch_gpu_image_never_takes_the_hosts_cpu_wheel():
    """.wheels/torch/ holds the CPU build (2.13.0+cpu also satisfies torch==2.13.0): a GPU image
    built after the CPU one got CPU torch until pip read that folder for the CPU variant only."""
    d = parsed(ROOT / "containers" / "torch" / "Dockerfile")
    [install] = [i["value"] for i in named(d, "build") if i["instruction"] == "RUN" and "pip install" in i["value"]]
    assert '$([ "$VARIANT" = cpu ] && echo --find-links /tmp/wheels)' in install
    for variant in ("cpu", "gpu"):
        said = subprocess.run(["sh", "-c", f'VARIANT={variant}; echo $([ "$VARIANT" = cpu ] && echo --find-links /tmp/wheels)'],
                              capture_output=True, text=True).stdout.strip()
        assert said == ("--find-links /tmp/wheels" if variant == "cpu" else "")


def test_mmcvs_cuda_build_stage_reads_only_its_inputs_and_compiles_for_the_arch_list():
    d = parsed(ROOT / "containers" / "mmdet" / "Dockerfile")
    stage = named(d, "mmcv-cuda")
    assert stage[0]["value"] == "${BASE_IMAGE} AS mmcv-cuda" and d.parent_images[0] == GPU_BASE  # not the torch image
    args = args_of(stage)
    assert tc.expected_archs(args["TORCH_CUDA_ARCH_LIST"].strip('"')) == ({"80", "86", "89", "90"}, {"90"})
    assert args["CUDA_TOOLCHAIN"] == "pypi" and args["MAX_JOBS"] == "2"
    # the compiled wheel is a cached layer: only what the compile reads is copied in before it (the
    # kit, the trainers or the mmdet pins changing must not compile again)
    copies = [i["value"] for i in stage if i["instruction"] == "COPY"]
    assert copies == [".build-ca/ /tmp/build-ca/", "torch/requirements-gpu.txt /tmp/torch-requirements.txt",
                      "cuda_toolchain.py mmdet/build-mmcv.sh /tmp/mmcv-build/"]
    [compile_] = [i["value"] for i in stage if i["instruction"] == "RUN" and "build-mmcv.sh" in i["value"]]
    assert compile_.startswith('mkdir -p /tmp/mmcv && if [ "$VARIANT" = gpu ]; then python3 -m venv /opt/venv')
    assert compile_.endswith("/tmp/mmcv-build/build-mmcv.sh gpu; fi")
    build = named(d, "build")
    assert "--from=mmcv-cuda /tmp/mmcv/ /tmp/mmcv/" in [i["value"] for i in build if i["instruction"] == "COPY"]
    script = (ROOT / "containers" / "mmdet" / "build-mmcv.sh").read_text()
    for step in ('req="$($py "$here/cuda_toolchain.py" requirement)"', '"$here/cuda_toolchain.py" check "$CUDA_HOME/bin/nvcc"',
                 "FORCE_CUDA=$force_cuda", '"$here/cuda_toolchain.py" archs /tmp/mmcv/mmcv-2.1.0-*.whl "$TORCH_CUDA_ARCH_LIST"'):
        assert step in script, step
    assert script.index("cuda_toolchain.py\" check") < script.index("pip wheel")  # refused before compiling


def test_the_nvidia_repository_base_takes_its_cuda_version_from_the_build():
    d = parsed(ROOT / "containers" / "base" / "cuda-devel.Dockerfile", BASE_IMAGE=GPU_BASE)
    assert d.parent_images == [GPU_BASE]
    assert args_of(d.structure)["CUDA_VERSION"] is None  # no default to drift from torch's CUDA
    run = " ".join(i["value"] for i in d.structure if i["instruction"] == "RUN")
    for package in ("python3-venv", "g++", "cuda-nvcc-${CUDA_VERSION/./-}", "cuda-libraries-dev-${CUDA_VERSION/./-}"):
        assert package in run, package
    assert d.envs["CUDA_HOME"] == "/usr/local/cuda" and "/usr/local/cuda/bin" in d.envs["PATH"]


def fake_docker(tmp_path):
    """A `docker` that records each call and answers image inspects as if every image were there."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "docker").write_text('#!/bin/sh\necho "$*" >> "$DOCKER_LOG"\n'
                                 'case "$1 $2 $3" in "image inspect -f") echo "$5 5192418886";; esac\n')
    (bin_ / "docker").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "DOCKER_LOG": str(tmp_path / "docker.log")}


@pytest.mark.parametrize("env, base, toolchain", [
    ({}, GPU_BASE, None),
    ({"GPU_BASE_IMAGE": "registry.local/ubuntu-py311:24.04"}, "registry.local/ubuntu-py311:24.04", None),
    ({"CUDA_VERSION": "13.0"}, "scalebench/cuda-devel:13.0-bookworm", "base"),
    ({"CUDA_VERSION": "13.0", "CUDA_TOOLCHAIN": "pypi"}, "scalebench/cuda-devel:13.0-bookworm", "pypi"),
])
def test_make_images_gpu_builds_every_stack_in_order_on_the_chosen_base(tmp_path, env, base, toolchain):
    env = {**{k: v for k, v in fake_docker(tmp_path).items() if k not in ("GPU_BASE_IMAGE", "CUDA_VERSION", "CUDA_TOOLCHAIN")},
           **env}
    out = subprocess.run([str(ROOT / "containers" / "build-gpu.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    builds = [line.split() for line in (tmp_path / "docker.log").read_text().splitlines() if line.startswith("build ")]
    tags = [b[b.index("-t") + 1] for b in builds]
    order = [f"scalebench/{s}:gpu" for s in ("tensorflow", "torch", "tf-detection", "mmdet")]
    assert [t for t in tags if t.startswith("scalebench/") and t.endswith(":gpu")] == order
    if env.get("CUDA_VERSION"):
        assert tags[0] == base and "CUDA_VERSION=13.0" in builds[0]  # the NVIDIA repository base first
    for b in builds[-4:]:
        assert f"BASE_IMAGE={base}" in b and "VARIANT=gpu" in b
    mmdet = builds[-1]
    assert (f"CUDA_TOOLCHAIN={toolchain}" in mmdet) == (toolchain is not None)
    assert out.stdout.splitlines()[-4:] == [f"{t}: 5.19 GB, built in {s} s" for t, s in
                                            zip(order, re.findall(r"built in (\d+) s", out.stdout)[-4:])]
