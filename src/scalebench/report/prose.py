"""The report's sentences, written from figures already decided: what grows with the GPU count,
and the night's conclusions next to the study's."""
from __future__ import annotations

from scalebench.report.model import FLAT, LOOKBACK_NIGHTS, STEP_PARTS, STUDY_AVERAGE, Options, Row


def step_sentence(row: Row) -> str | None:
    """One sentence on what grows with the GPU count in a benchmark's steady step, led by the
    part whose share grows most; None without two GPU counts that have a breakdown."""
    counts = sorted(n for n, sh in row.step_shares.items() if any(v is not None for v in sh.values()))
    if len(counts) < 2:
        return None
    lo, hi = counts[0], counts[-1]
    shares_lo, shares_hi = row.step_shares[lo], row.step_shares[hi]
    names = {"data_wait": "data wait", "compute": "compute", "sync": "sync", "other": "unattributed time"}
    known = [p for p in STEP_PARTS if shares_lo.get(p) is not None and shares_hi.get(p) is not None]
    if not known:
        return None
    a = {p: float(shares_lo[p] or 0.0) for p in known}  # (each measured at both counts: known)
    b = {p: float(shares_hi[p] or 0.0) for p in known}
    lead = max(known, key=lambda p: b[p] - a[p])
    unit = lambda n: f"{n} device{'s' if n != 1 else ''}"  # noqa: E731
    if b[lead] - a[lead] < FLAT:
        parts = ["no part of the step grows with the GPU count (" +
                 ", ".join(f"{names[p]} {100 * b[p]:.0f}%" for p in known) + f" at {unit(hi)})"]
    else:
        parts = [f"{names[lead]} is {100 * b[lead]:.0f}% of the step at {unit(hi)}, {100 * a[lead]:.0f}% at {lo}"]
        for p in known:
            if p == lead:
                continue
            d = b[p] - a[p]
            parts.append(f"{names[p]} flat ({100 * b[p]:.0f}%)" if abs(d) < FLAT else
                         f"{names[p]} {'grows' if d > 0 else 'falls'} from {100 * a[p]:.0f}% to {100 * b[p]:.0f}%")
    unmeasured = [names[p] for p in STEP_PARTS if p not in known]
    tail = f" ({', '.join(unmeasured)} not exposed by this framework)" if unmeasured else ""
    return f"{row.name}: " + "; ".join(parts) + tail + "."


def _avg(avg: dict[int, float], multi: list[int]) -> str:
    return ", ".join(f"{100 * avg[n]:.1f}% at {n} GPUs" for n in multi)


def study_sentence(study_rows: list[Row], study_avg: dict[int, float]) -> str:
    """The study's averages beside the weekly run's (full passes, the same epochs at every GPU
    count): the one figure of ours that measures what the study measured."""
    study = ", ".join(f"{100 * v:.1f}% at {n} GPUs" for n, v in sorted(STUDY_AVERAGE.items()))
    multi = [n for n in sorted(study_avg) if n > 1]
    if not multi:
        return (f"The study's averages ({study}) are relative times to train the same epochs: no weekly run with "
                f"full passes at more than one GPU count in the last {LOOKBACK_NIGHTS} nights to set beside them.")
    k = len([r for r in study_rows if r.relative_time])
    return (f"Weekly run, full passes, averaged over {k} benchmark{'s' if k != 1 else ''}: training the same epochs "
            f"took {_avg(study_avg, multi)} of the 1-GPU time (the study reported "
            f"{', '.join(f'{100 * STUDY_AVERAGE[n]:.1f}%' for n in multi if n in STUDY_AVERAGE)}).")


def accuracy_answer(r: Row, margin: float) -> str:
    """Does accuracy suffer? One weekly row's answer with what it rests on."""
    found = [(m, n, v) for m, per in r.verdicts.items() for n, v in sorted(per.items())]
    pts = f"±{100 * margin:.0f} point{'s' if margin != 0.01 else ''}"
    reps = sorted({v.n[1] for *_, v in found} | {v.n[0] for *_, v in found})
    head = (f"Does accuracy suffer? {r.name}, weekly run {r.run_id} ({'/'.join(map(str, reps)) or 'no'} repeats"
            f" per GPU count): ")
    informative = [(m, n, v) for m, n, v in found if v.kind != "uninformative"]
    if not informative:
        return head + "not answered (no comparison with 1 GPU can tell: " + (
            "; ".join(f"{m} at {n} GPUs {v.text()}" for m, n, v in found) or "no 1-GPU cell and another GPU count") + ")."
    worse = [f"{m} at {n} GPUs {v.text()}" for m, n, v in informative if v.kind == "worse"]
    open_ = [f"{m} at {n} GPUs {v.text()}" for m, n, v in informative if v.kind == "inconclusive"]
    eq = sum(v.kind in ("equivalent", "better") for *_, v in informative)
    if worse:
        answer = "yes: " + "; ".join(worse)
    elif open_:
        answer = f"not shown: {eq} of {len(informative)} comparisons equivalent within {pts}; " + "; ".join(open_)
    else:
        answer = f"no: all {len(informative)} comparisons with 1 GPU equivalent within {pts} (two one-sided tests, 90% CI)"
    tail = "; ".join(f"epochs to {r.tta_target} at {n} GPUs: {v.text()}" for n, v in sorted(r.convergence.items()))
    return head + answer + (f"; {tail}" if tail else "") + "."


def conclusions(rows: list[Row], avg: dict[int, float], opts: Options, weekly: list[Row] | None = None,
                study_rows: list[Row] | None = None, study_avg: dict[int, float] | None = None) -> list[str]:
    from scalebench.analysis.stats import spearman

    weekly = weekly or []
    out = [study_sentence(study_rows or [], study_avg or {})]
    out += [accuracy_answer(r, opts.margin) for r in weekly]
    if not weekly:
        out.append(f"Does accuracy suffer? Not answered: no weekly accuracy run in the last {LOOKBACK_NIGHTS} nights "
                   "(scalebench_<benchmark>_accuracy, the full profile on the real dataset).")
    if not rows:
        return out + ["No benchmark has valid results for this night."]
    multi = [n for n in sorted(avg) if n > 1]
    if not multi:
        out.append("No benchmark has valid results at more than one GPU count this night, so no scaling is compared.")
    if multi:
        k = len([r for r in rows if r.relative_time])
        bases = sorted({r.key.timing_basis for r in rows if r.relative_time})
        out.append(f"Tonight, averaged over {k} benchmark{'s' if k != 1 else ''}: relative time {_avg(avg, multi)} "
                   f"of 1 GPU (timed by {' and '.join(bases)}; the nightly profile's capped epochs measure "
                   "steady-state throughput, not the study's time to train the same epochs).")
        best = min(((r.relative_time[n], n, r) for r in rows for n in r.relative_time if n > 1), key=lambda x: x[0])
        r_, n_, row = best
        figure = f"{100 * r_:.1f}% of the 1-GPU time (speedup {1 / r_:.2f}x, efficiency {100 / r_ / n_:.0f}%)"
        if r_ < 1:
            out.append(f"The largest saving: {row.name} at {n_} GPUs, {figure}.")
        else:
            out.append(f"No benchmark trained faster with more devices; the smallest slow-down: {row.name} "
                       f"at {n_} GPUs, {figure}.")
        top = max(multi)
        pts = [(r.parameters, r.efficiency[top]) for r in rows if top in r.efficiency and r.parameters]
        rho = spearman([p for p, _ in pts], [e for _, e in pts])
        if rho is None:
            out.append(f"Whether more complex models gain more cannot be tested: {len(pts)} benchmark(s) with "
                       f"parameter counts and {top}-GPU results (Spearman's test needs 3).")
        elif rho[1] is None:
            same = "parameter count" if len({p for p, _ in pts}) == 1 else f"{top}-GPU efficiency"
            out.append(f"Whether more complex models gain more cannot be tested: all {len(pts)} benchmarks have the "
                       f"same {same}, so the rank correlation is undefined (no rho, no p-value).")
        else:
            verdict = "supported" if rho[0] > 0 and rho[1] < 0.05 else "not supported"
            out.append(f"More complex models gain more: {verdict} (Spearman's rho between parameter count and "
                       f"{top}-GPU efficiency {rho[0]:+.2f}, p = {rho[1]:.2f}, {len(pts)} benchmarks).")
    verdicts = [(r.name, m, n, v) for r in rows for m, per in r.verdicts.items() for n, v in per.items()]
    uninformative = [f"{b} {m}" for b, m, n, v in verdicts if v.kind == "uninformative"]
    verdicts = [x for x in verdicts if x[3].kind != "uninformative"]
    if verdicts:
        eq = sum(v.kind == "equivalent" for *_, v in verdicts)
        worse = [f"{b} {m} at {n} GPUs ({v.text()})" for b, m, n, v in verdicts if v.kind == "worse"]
        inconcl = sum(v.kind == "inconclusive" for *_, v in verdicts)
        s = (f"Nightly accuracy, a smoke signal only: {eq} of {len(verdicts)} comparisons with 1 GPU are equivalent "
             f"within ±{100 * opts.margin:.0f} point{'s' if opts.margin != 0.01 else ''} (two one-sided tests, 90% CI)")
        s += f"; worse: {'; '.join(worse)}" if worse else "; none is significantly worse"
        s += f"; {inconcl} inconclusive." if inconcl else "."
        out.append(s)
    if uninformative:
        names = sorted(set(uninformative))
        out.append(f"Accuracy comparisons that say nothing, counted apart: {len(uninformative)} "
                   f"({', '.join(names)}: the metric sits at its floor or ceiling, or does not vary over repeats; "
                   "more steps or real data are needed before accuracy can be compared).")
    out += [x for x in map(step_sentence, rows) if x]
    for r in rows:
        if r.epoch_mismatch:
            figs = ", ".join(f"{r.samples_per_epoch[n]} samples in {r.steps_per_epoch[n]} steps at {n} GPUs"
                             for n in sorted(r.steps_per_epoch))
            out.append(f"{r.name}: an epoch covers a different part of the train split at "
                       f"{', '.join(map(str, r.epoch_mismatch))} GPUs than at 1 ({figs}; more than 1% of the split "
                       "apart): its training times are not comparable across GPU counts.")
    return out
