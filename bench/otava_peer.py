"""Apache Otava's analysis on simulated histories, run in Otava's own venv by bench/regressions.py.

    otava-venv/bin/python bench/otava_peer.py in.json out.json

in.json: {"histories": [[night values]], "nights": [[nights to judge]]}. For each history and
night t, Otava's compute_change_points (its defaults: window 50, p-value 0.001, no magnitude
floor) runs on the values up to t; out.json holds, per history, whether a change point that
lowers the value (a throughput regression) falls on night t or t - 1.
"""
import json
import sys

from otava.analysis import compute_change_points


def regression_at_end(values: list[float]) -> bool:
    cps, _ = compute_change_points(values)
    end = len(values) - 1
    return any(int(cp.index) >= end - 1 and cp.stats.mean_2 < cp.stats.mean_1 for cp in cps)


def main() -> None:
    doc = json.loads(open(sys.argv[1]).read())
    out = [[regression_at_end(h[:t + 1]) for t in nights] for h, nights in zip(doc["histories"], doc["nights"])]
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
