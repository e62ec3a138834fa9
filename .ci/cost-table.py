#!/usr/bin/env python3
"""The cost table of docs/testing.md from one `.ci/run` log: every row from that run.

Usage: python3 .ci/cost-table.py CI_LOG "cold: new clone, empty Docker cache, commit abc1234"
"""
import re
import sys


def table(log: str, what: str) -> str:
    steps = re.findall(r"^CI steps: (.+?) (\d+) s$", log, re.M)
    took = re.search(r"^CI took (\d+) s$", log, re.M)
    summary = re.search(r"^(\d+) passed(?:, (\d+) skipped)?.* in ([\d.]+)s", log, re.M)
    folders = re.search(r"= time per test folder \(setup \+ call \+ teardown\) =+\n((?:\s+[\d.]+ s .*\n)+)", log)
    if not (steps and took and summary and folders):
        sys.exit("cost-table: the log has no CI steps, CI took, pytest summary or time per folder (a whole .ci/run log?)")
    total = int(took.group(1))
    machine = re.search(r"^CI machine: reference workload ([\d.]+) s before the run, ([\d.]+) s after .*?; "
                        r"pytest's CPU busy (\d+) %$", log, re.M)
    speed = (f" The machine: `.ci/machine.py`'s reference workload in {machine.group(1)} s on one core before the run "
             f"and {machine.group(2)} s after it; both cores {machine.group(3)} % busy while pytest ran." if machine else "")
    out = [f"One run of `.ci/run` ({what}): **{total / 60:.1f} min** in all, pytest {float(summary.group(3)) / 60:.1f} "
           f"min wall ({summary.group(1)} passed, {summary.group(2) or 0} skipped).{speed}", "",
           "| step | seconds |", "|---|---:|"]
    out += [f"| {name} | {secs} |" for name, secs in steps]
    out += [f"| all of CI | {total} |", "",
            "(lint runs beside the image builds and the tests: its seconds are inside the total, not added to it.)", "",
            "Time per test folder (setup, call and teardown summed over both workers, so the folders add up to",
            "more than pytest's wall time):", "", "| folder | seconds | tests |", "|---|---:|---:|"]
    for line in folders.group(1).splitlines():
        secs, _, _share, count, _, folder = line.split()
        out.append(f"| `{folder}` | {float(secs):.0f} | {count} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(open(sys.argv[1]).read(), sys.argv[2]))
