"""Every GPU Dockerfile parsed (dockerfile-parse) as `make images-gpu` builds it: CI cannot build
multi-GB CUDA images, so it checks their stages, base argument and CUDA compile settings."""
import re

import pytest
import yaml
from dockerfile_parse import DockerfileParser

from tests.support import CONFIGS, ROOT

STACKS = yaml.safe_load((CONFIGS / "stacks.yaml").read_text())["stacks"]
CUDA_BASE = "scalebench/cuda-devel:12.8-bookworm"


def parsed(path, **args) -> DockerfileParser:
    d = DockerfileParser(str(path), build_args={"VARIANT": "gpu", "BASE_IMAGE": CUDA_BASE, **args})
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


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_each_gpu_variant_builds_from_its_base_in_a_build_and_a_final_stage(stack):
    d = parsed(ROOT / "containers" / stack / "Dockerfile")
    base = STACKS[stack]["base"]
    expected = CUDA_BASE if base is None else STACKS[base]["images"]["gpu"]
    assert d.parent_images == [expected, expected], d.parent_images  # both stages on the named base
    build, final = stages(d)
    assert build[0]["value"].endswith(" AS build") and "--from=build" in " ".join(i["value"] for i in final)
    assert d.labels.get("org.scalebench.stack") == stack
    assert (ROOT / "containers" / stack / "requirements-gpu.txt").exists()
    copies = [i["value"] for i in build if i["instruction"] == "COPY"]
    # the variant's pinned set, with VARIANT declared in the stage that reads it
    assert f"{stack}/requirements-${{VARIANT}}.txt /tmp/requirements.txt" in copies
    assert any(i["instruction"] == "ARG" and i["value"].startswith("VARIANT") for i in build)


def test_mmdet_compiles_mmcv_with_cuda_for_the_arch_list_on_gpu():
    d = parsed(ROOT / "containers" / "mmdet" / "Dockerfile")
    build = stages(d)[0]
    args = {m.group(1): m.group(2) for i in build if i["instruction"] == "ARG"
            for m in [re.match(r'(\w+)(?:=(.*))?$', i["value"])]}
    assert set(args["TORCH_CUDA_ARCH_LIST"].strip('"').split(";")) == {"8.0", "8.6", "8.9", "9.0+PTX"}
    [compile_] = [i["value"] for i in build if i["instruction"] == "RUN" and "pip wheel" in i["value"]]
    assert 'FORCE_CUDA=$([ "$VARIANT" = gpu ] && echo 1 || echo 0)' in compile_
    assert 'TORCH_CUDA_ARCH_LIST="$TORCH_CUDA_ARCH_LIST"' in compile_ and "MMCV_WITH_OPS=1" in compile_
    # the prebuilt wheel in .wheels/mmdet/ is a CPU build: a GPU image always compiles
    assert compile_.startswith('mkdir -p /tmp/mmcv && if [ "$VARIANT" = cpu ] && ls /tmp/wheels/mmcv-2.1.0-')


def test_the_cuda_devel_base_has_nvcc_python_venv_and_cuda_home():
    d = parsed(ROOT / "containers" / "base" / "cuda-devel.Dockerfile", BASE_IMAGE="scalebench/debian-base:bookworm")
    assert d.parent_images == ["scalebench/debian-base:bookworm"]
    run = " ".join(i["value"] for i in d.structure if i["instruction"] == "RUN")
    for package in ("python3-venv", "g++", "cuda-nvcc-${CUDA_VERSION/./-}", "cuda-libraries-dev-${CUDA_VERSION/./-}"):
        assert package in run, package
    assert d.envs["CUDA_HOME"] == "/usr/local/cuda" and "/usr/local/cuda/bin" in d.envs["PATH"]


def test_make_images_gpu_builds_every_stack_in_order_on_the_named_base():
    script = (ROOT / "containers" / "build-gpu.sh").read_text()
    assert 'base="${GPU_BASE_IMAGE:-}"' in script and "stacks --build-order" in script
    assert 'BASE_IMAGE="$base" IMAGE_TAG=gpu "$here/build.sh" "$stack" gpu' in script
    assert "containers/build-gpu.sh" in (ROOT / "Makefile").read_text()
