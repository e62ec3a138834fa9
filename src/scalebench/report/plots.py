"""The report's plots (matplotlib, PNG): speedup, relative time in the study's layout,
accuracy with error bars, time breakdown, nightly throughput trend with alerts marked.
They draw what `report.build` decided; nothing is computed here."""
from __future__ import annotations

from pathlib import Path

from scalebench_kit.names import ACCURACY_METRICS, THROUGHPUT


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, ax, path: Path, legend: bool = True) -> None:
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    # zlib's fastest level: the largest plot encodes in 47 ms instead of 64, for a file about 5 % larger
    fig.savefig(path, pil_kwargs={"compress_level": 1})
    _plt().close(fig)


def _nothing(fig, ax, path: Path, why: str) -> list[str]:
    """A chart with nothing to show says why in words, instead of empty 0-1 axes; returns them."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, fontsize=10)
    _save(fig, ax, path, legend=False)
    return [why]


def _label(r, n: int) -> str:
    """A bar's label: the row's name in full (benchmark and precision), then the GPU count."""
    return f"{r.name}\n{n} GPU{'s' if n != 1 else ''}"


def speedup(rep, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    top = max([max(r.speedup, default=1) for r in rep.rows] + [2])
    ax.plot([1, top], [1, top], "k--", linewidth=1, label="ideal")
    for r in rep.rows:
        ns = sorted(r.speedup)
        err = [[0, 0]] * len(ns)
        for i, n in enumerate(ns):
            ci = r.relative_time_ci.get(n)
            if ci:  # speedup = 1/r: the CI flips
                s = r.speedup[n]
                err[i] = [s - 1 / ci[1], 1 / ci[0] - s]
        ax.errorbar(ns, [r.speedup[n] for n in ns], yerr=list(zip(*err)) if ns else None, marker="o", capsize=3,
                    label=r.benchmark)
    ax.set(xlabel="GPUs", ylabel="speedup T1/Tn", title="Speedup vs GPUs (95% CI)", xticks=range(1, top + 1))
    ax.grid(alpha=0.3)
    _save(fig, ax, path)


def relative_time(rep, path: Path) -> None:
    plt = _plt()
    counts = [n for n in rep.gpu_counts if n > 1] or [1]
    names = [r.benchmark for r in rep.rows] + ["average"]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 4), dpi=100)
    width = 0.8 / len(counts)
    for i, n in enumerate(counts):
        vals = [100 * r.relative_time.get(n, float("nan")) for r in rep.rows] + \
               [100 * rep.average.get(n, float("nan"))]
        ax.bar([x + i * width for x in range(len(names))], vals, width, label=f"{n} GPUs")
    ax.axhline(100, color="k", linewidth=0.8)
    ax.set_xticks([x + width * (len(counts) - 1) / 2 for x in range(len(names))], names, rotation=20, ha="right", fontsize=7)
    ax.set(ylabel="% of 1-GPU training time", title="Relative training time (study layout)")
    _save(fig, ax, path)


def accuracy(rep, path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for r in rep.rows:
        for m, per in r.metrics.items():
            ns = sorted(per)
            iq = r.metric_iqr.get(m, {})
            ax.errorbar(ns, [per[n] for n in ns], yerr=[iq.get(n, 0) / 2 for n in ns], marker="o", capsize=3,
                        label=f"{r.benchmark} {ACCURACY_METRICS[m].display}")
    ax.set(xlabel="GPUs", ylabel="metric (median, IQR bars)", title="Accuracy vs GPUs", ylim=(0, 1))
    ax.grid(alpha=0.3)
    _save(fig, ax, path)


def breakdown(rep, path: Path) -> list[str]:
    """Returns the bars' labels (or the words drawn instead)."""
    plt = _plt()
    steps = [(_label(r, n), r.step_s[n]) for r in rep.rows for n in sorted(r.step_s)]
    cells = [(_label(r, n), r.breakdown[n]) for r in rep.rows for n in sorted(r.breakdown)]
    if not cells:
        fig, ax = plt.subplots(figsize=(7, 3), dpi=100)
        return _nothing(fig, ax, path, "No valid cell this night: no time breakdown to draw.")
    # full names, rotated: neighbouring labels run parallel and never overlap
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(10, 0.9 * len(cells) + 2), 5.5), dpi=100)
    bottom = [0.0] * len(steps)
    for part in ("data_wait", "compute", "sync", "other"):
        vals = [b[1].get(part) or 0.0 for b in steps]
        left.bar(range(len(steps)), vals, bottom=bottom, label=part.replace("_", " "))
        bottom = [x + y for x, y in zip(bottom, vals)]
    left.set_xticks(range(len(steps)), [b[0] for b in steps], fontsize=6, rotation=60, ha="right")
    left.set(ylabel="seconds per steady step (slowest rank)", title="Where a step's time goes")
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize=7)
    bottom = [0.0] * len(cells)
    for part in ("setup_s", "warmup_s", "train_s", "eval_s"):
        vals = [b[1].get(part) or 0.0 for b in cells]
        right.bar(range(len(cells)), vals, bottom=bottom, label=part.removesuffix("_s"))
        bottom = [x + y for x, y in zip(bottom, vals)]
    right.set_xticks(range(len(cells)), [b[0] for b in cells], fontsize=6, rotation=60, ha="right")
    right.set(ylabel="seconds (median cell)", title="Where a cell's time goes")
    _save(fig, right, path)
    return [b[0] for b in cells]


def trend(rep, path: Path) -> list[str]:
    """Returns the series drawn (or the words drawn instead)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    by_key: dict = {}
    for j in rep.judged:
        if j.key.metric == THROUGHPUT.name:
            by_key.setdefault(j.key, []).append(j)
    if not by_key:
        return _nothing(fig, ax, path, "No scheduled night in the lookback window: no nightly trend to draw "
                                       "(manual runs never feed it).")
    for key, js in list(by_key.items())[:12]:
        ax.plot([j.night for j in js], [j.value for j in js], marker=".", label=f"{key.benchmark} {key.gpus} GPU")
        hits = [j for j in js if j.alert]
        ax.scatter([j.night for j in hits], [j.value for j in hits], s=80, facecolors="none", edgecolors="red")
    ax.set(ylabel=f"{THROUGHPUT.display} (scheduled nights)", title="Nightly throughput (red: regression alert)")
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    _save(fig, ax, path)
    return [f"{key.benchmark} {key.gpus} GPU" for key in list(by_key)[:12]]


DRAW = {"speedup.png": speedup, "relative_time.png": relative_time, "accuracy.png": accuracy,
        "breakdown.png": breakdown, "trend.png": trend}


def render_all(rep, out: Path) -> None:
    """Every plot the report lists (Report.plots), into `out`."""
    for name in rep.plots:
        DRAW[name](rep, out / name)
