"""Bisecting between images: which image of an ordered list (a good one, candidates, a bad one)
first made a cell slower.

Each step runs the cell on the first, middle and last image of every open interval in one run,
interleaved (a same-night A/B of the midpoint and its neighbours), and compares neighbours with
the A/B test of `regress.ABTest`: where the midpoint is worse than the first image, the step lies
in the first half; where the last image is worse than the midpoint, in the second; where both,
both halves are kept (two culprits, as TorchBench's bisector does). An interval of two neighbours
found different names its culprit. An interval where no neighbour differs, or the test stays
unknown, is reported unresolved with its numbers rather than guessed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from scalebench.analysis.regress import ABTest, Gates


@dataclass
class Step:
    number: int
    images: list[str]                    # what this step ran, in the run's order
    run_id: str | None
    values: dict[str, list[float]]       # image -> the step's figures on it
    lines: list[str] = field(default_factory=list)  # each comparison, in words

    def to_json(self) -> dict:
        return {"step": self.number, "images": self.images, "run_id": self.run_id, "values": self.values,
                "lines": self.lines}


@dataclass
class Bisection:
    benchmark: str
    gpus: int
    images: list[str]                    # good, candidates..., bad, in the order they were built
    direction: int = +1                  # +1: higher is better (throughput)
    gates: Gates = field(default_factory=Gates)
    open: list[tuple[int, int]] = field(default_factory=list)
    culprits: list[tuple[int, str]] = field(default_factory=list)      # (index, the A/B line that named it)
    unresolved: list[tuple[int, int, str]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    def __post_init__(self):
        if len(self.images) < 2 or len(set(self.images)) != len(self.images):
            raise ValueError(f"bisect needs a good and a bad image and distinct candidates, got {self.images}")
        if not self.open and not self.culprits and not self.unresolved and not self.steps:
            self.open = [(0, len(self.images) - 1)]

    @property
    def done(self) -> bool:
        return not self.open

    @staticmethod
    def _trio(lo: int, hi: int) -> list[int]:
        return [lo, hi] if hi - lo == 1 else [lo, (lo + hi) // 2, hi]

    def next_images(self) -> list[str]:
        """The images the next step runs: every open interval's ends and midpoint, each once."""
        idx = sorted({i for lo, hi in self.open for i in self._trio(lo, hi)})
        return [self.images[i] for i in idx]

    def record(self, values: dict[str, list[float]], run_id: str | None = None) -> Step:
        """Judge one step's figures and narrow every open interval."""
        step = Step(len(self.steps) + 1, self.next_images(), run_id, {k: list(v) for k, v in values.items()})
        still = []
        for lo, hi in self.open:
            trio = self._trio(lo, hi)
            halves = []
            for a, b in zip(trio, trio[1:]):
                ab = ABTest(self.images[a], self.images[b], "one host", tuple(values.get(self.images[a], ())),
                            tuple(values.get(self.images[b], ())), self.direction, self.gates)
                step.lines.append(f"{self.images[a]} -> {self.images[b]}: {ab.verdict}: {ab.line()}")
                if ab.verdict == "worse":
                    halves.append((a, b, ab.line()))
                elif ab.verdict == "unknown":
                    self.unresolved.append((a, b, f"unknown after {len(ab.a)} + {len(ab.b)} cells: {ab.line()}"))
            if not halves and not any(u[:2] in ((x, y) for x, y in zip(trio, trio[1:])) for u in self.unresolved):
                self.unresolved.append((lo, hi, f"no step between {self.images[lo]} and {self.images[hi]} this run"))
            for a, b, line in halves:
                if b - a == 1:
                    self.culprits.append((b, line))
                else:
                    still.append((a, b))
        self.open = still
        self.steps.append(step)
        return step

    def result(self) -> list[str]:
        """The culprits (each with the image before it) and what stayed unresolved, in words."""
        out = [f"culprit: {self.images[i]} (the image before it: {self.images[i - 1]}); {line}"
               for i, line in sorted(self.culprits)]
        out += [f"unresolved between {self.images[a]} and {self.images[b]}: {why}" for a, b, why in self.unresolved]
        return out or ["nothing found"]

    def to_json(self) -> dict:
        return {"benchmark": self.benchmark, "gpus": self.gpus, "images": self.images, "open": self.open,
                "culprits": [{"image": self.images[i], "previous": self.images[i - 1], "line": line}
                             for i, line in sorted(self.culprits)],
                "unresolved": [{"from": self.images[a], "to": self.images[b], "why": why}
                               for a, b, why in self.unresolved],
                "steps": [s.to_json() for s in self.steps], "result": self.result()}


def from_json(doc: dict, gates: Gates | None = None) -> Bisection:
    """A bisection back from its JSON (the bisect DAG hands it from step to step)."""
    images = doc["images"]
    b = Bisection(doc["benchmark"], doc["gpus"], images, gates=gates or Gates())
    b.open = [tuple(x) for x in doc["open"]]
    b.culprits = [(images.index(c["image"]), c["line"]) for c in doc["culprits"]]
    b.unresolved = [(images.index(u["from"]), images.index(u["to"]), u["why"]) for u in doc["unresolved"]]
    b.steps = [Step(s["step"], s["images"], s["run_id"], s["values"], s["lines"]) for s in doc["steps"]]
    return b
