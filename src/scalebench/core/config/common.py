"""What every config file shares: the profiles, the strict base model, image references,
precision lists, and loading a YAML file into a model with errors that name file, field, value
and what was expected."""
from __future__ import annotations

import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scalebench_kit.names import Precision

ALERTS_FILE = "alerts.yaml"
SHIFTS_FILE = "acknowledged_shifts.yaml"
STACKS_FILE = "stacks.yaml"

Profile = Literal["smoke", "nightly", "full"]
PROFILES: tuple[str, ...] = get_args(Profile)
# Fewest timed steps (after warm-up) a profile accepts at any GPU count: fewer make no steady figure.
MIN_TIMED_STEPS = {"smoke": 1, "nightly": 50, "full": 50}
# Steps of a profiled cell's profiling window, after its timed steps (a trigger's profile_ops)
PROFILE_STEPS = {"smoke": 2, "nightly": 5, "full": 5}
# a docker image reference, no templates
IMAGE_REF = re.compile(r"[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?")
# What runs when neither the benchmark nor its profile names a precision: smoke runs on CPU hosts
# (fp32); the timed profiles run on GPU hosts, where tuned users train in bf16
DEFAULT_PRECISION = {"smoke": ["fp32"], "nightly": ["bf16"], "full": ["bf16"]}
PosInt = Annotated[int, Field(gt=0)]
PosFloat = Annotated[float, Field(gt=0)]


class ConfigError(ValueError):
    """A config file that does not validate; the message names file, field, value, expectation."""


def _bare(annotation):
    """The type under Annotated[...] and Optional[...] (X | None)."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _boolean_for_number(value, annotation) -> str | None:
    """Where in `value` a boolean stands for a number the annotation wants ("" for the value
    itself, "[2]" or ".key" inside a list or mapping), or None."""
    bare = _bare(annotation)
    if isinstance(value, bool):
        return "" if bare in (int, float) else None
    origin, args = get_origin(bare), get_args(bare)
    if origin in (list, tuple, set, frozenset) and isinstance(value, list) and args:
        for i, item in enumerate(value):
            inner = _boolean_for_number(item, args[i] if origin is tuple and len(args) > i and args[-1] is not ... else args[0])
            if inner is not None:
                return f"[{i}]{inner}"
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            inner = _boolean_for_number(item, args[1])
            if inner is not None:
                return f".{key}{inner}"
    return None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, data):
        """YAML's yes/no/true are booleans, which pydantic would read as 1 and 0 for a number."""
        if isinstance(data, dict):
            for name, f in cls.model_fields.items():
                where = _boolean_for_number(data.get(f.alias or name), f.annotation)
                if where is not None:
                    raise ValueError(f"field '{name}{where}': expected a number, got a boolean "
                                     "(YAML reads yes/no/true/false as booleans)")
        return data


def _check_bounds(bounds: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    from scalebench_kit.names import ALL_METRICS

    unknown = sorted(set(bounds) - set(ALL_METRICS))
    if unknown:
        raise ValueError(f"bounds for unknown metrics {unknown}: the metrics are {sorted(ALL_METRICS)}")
    for name, (lo, hi) in bounds.items():
        if lo > hi:
            raise ValueError(f"bounds for {name!r}: lower {lo} is above upper {hi}")
    return bounds


IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def image_repository(ref: str) -> str:
    """name[:tag][@digest] -> name (a registry port stays: only a ':' in the last path part is a tag)."""
    name = ref.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return (head + "/" if head else "") + last.split(":", 1)[0]


def with_tag(ref: str, tag: str) -> str:
    """The configured image's repository at another tag (a candidate image); anything but a plain
    tag is refused, so a trigger can choose a version, never another image."""
    if not IMAGE_TAG.fullmatch(tag or ""):
        raise ConfigError(f"image_tag {tag!r}: expected a plain tag of {image_repository(ref)} "
                          "(letters, digits, _ . -; at most 128 characters)")
    return f"{image_repository(ref)}:{tag}"


def _plain_images(v: dict) -> dict:
    from scalebench.core.columns import check_width

    for kind, ref in v.items():
        if not IMAGE_REF.fullmatch(ref):
            raise ValueError(f"images.{kind}: {ref!r} is not a plain image reference (name[:tag][@sha256:digest]; "
                             "no templates)")
        check_width(ref, "image_packages.image", f"images.{kind}")
    return v


def _precision_list(v):
    """`precision: bf16` or `precision: [fp32, bf16]` (a matrix axis, one report row each)."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and len(set(v)) != len(v):
        raise ValueError(f"precisions must not repeat, got {v}")
    return v


PrecisionList = Annotated[list[Precision], Field(min_length=1)]


def _format_errors(source: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not part of the schema; check its spelling)"
        elif err["type"] == "missing":
            msg = "required field missing"
        shown = repr(err.get("input"))
        got = "" if err["type"] == "missing" or len(shown) > 200 else f" (got {shown})"  # not a whole section
        lines.append(f"{source}: field '{where}': {msg}{got}")
    return "\n".join(lines)


class _UniqueKeys(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, refusing a key written twice in one mapping (the last would silently win);
    merge keys (`<<: *defaults`) are standard YAML: a key written beside them overrides theirs.
    libyaml's parser where PyYAML has it: every DAG file parse reads every config, and the pure-
    Python parser was a third of a parse."""


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<`: the safe constructor merges it below
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            again = key in seen
        except TypeError:  # an unhashable key: the constructor below says so
            continue
        if again:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is written twice, at lines {seen[key]} and {key_node.start_mark.line + 1} "
                "(the second would silently win); keep one", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _load_yaml(path: Path) -> dict:
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeys)  # noqa: S506 (a safe loader)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, expected a YAML file") from None
    except PermissionError:
        raise ConfigError(f"{path}: cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    except yaml.YAMLError as exc:  # one line: where and what, not the parser's picture of the line
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(f"{path}: not valid YAML{where}: {what}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(doc).__name__}")
    return doc


def _load_model(model: type[BaseModel], path: Path):
    try:
        return model.model_validate(_load_yaml(path))
    except ValidationError as exc:
        raise ConfigError(_format_errors(path, exc)) from None
