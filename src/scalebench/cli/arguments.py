"""How a command declares its arguments (as data, beside the command), the argument types that
refuse a bad value on one line, and the parser whose errors are one line too."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any, Callable

OUTPUTS = ("table", "json", "csv")


@dataclass(frozen=True)
class Arg:
    """One argument: argparse's flags and keywords; `exclusive` names a group of arguments of
    which at most one may be given."""
    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)
    exclusive: str | None = None


def arg(*flags: str, exclusive: str | None = None, **options: Any) -> Arg:
    return Arg(flags, options, exclusive)


@dataclass
class Command:
    """A subcommand: its name, one line of help, what it runs (args, configs) -> a Listing, a
    sentence or a JSON document, and its arguments. A listing command also takes -o/--output."""
    name: str
    help: str
    run: Callable[..., Any]
    args: tuple[Arg, ...] = ()
    listing: bool = False


LISTING_ARGS = (
    arg("-o", "--output", choices=OUTPUTS, default="table", help="table (default), json or csv"),
    arg("--json", dest="output", action="store_const", const="json", help="the same as -o json (kept for one release)"),
)


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, in the command line's one form, exit status 2."""

    def error(self, message: str):
        message = message.replace("argument ", "", 1) if message.startswith("argument ") else message
        what = self.prog.removeprefix("scalebench").strip()
        self.exit(2, f"scalebench: {what + ': ' if what else ''}{message}; see {self.prog} --help\n")


def add_command(sub, command: Command) -> None:
    """The command's subparser, its arguments in the order declared (the output options first).
    A value without a type of its own must not be empty."""
    p = sub.add_parser(command.name, help=command.help)
    groups: dict[str, Any] = {}
    for a in (LISTING_ARGS if command.listing else ()) + command.args:
        if a.exclusive and a.exclusive not in groups:
            groups[a.exclusive] = p.add_mutually_exclusive_group()
        options = a.options
        if "type" not in options and "choices" not in options and options.get("action", "store") in ("store", "append"):
            options = {**options, "type": text}
        (groups[a.exclusive] if a.exclusive else p).add_argument(*a.flags, **options)
    p.set_defaults(command=command)


def text(value: str) -> str:
    """An argparse type: a value that is not empty or blank."""
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty one")
    return value


def gpus(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus expects a comma-separated list of integers like 1,2; got {text!r}") from None
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"--gpus expects distinct GPU counts of at least 1 like 1,2; got {text!r}")
    return counts


def url(text: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https", "file") or not (parts.netloc or parts.path.strip("/")):
        raise argparse.ArgumentTypeError(f"expects an http://, https:// or file:// URL; got {text!r}")
    return text


def whole(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (expected {lo}-{hi})") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range (expected {lo}-{hi})")
        return value
    return parse


def number(lo: float, hi: float, *, open_low: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi] (or (lo, hi] with open_low)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < lo or value > hi or (open_low and value == lo):
            low = f"more than {lo:g}" if open_low else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (expected {low} and at most {hi:g})")
        return value
    return parse


def night(text: str) -> str:
    import datetime as dt

    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a night: expected YYYY-MM-DD") from None


def group_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 2**31:
        raise argparse.ArgumentTypeError(f"expects a group number like 12 (scalebench alerts list); got {text!r}")
    return int(text)
