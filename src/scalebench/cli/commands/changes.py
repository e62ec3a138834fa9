"""Changes: what differs between two images, which image made a cell slower, and the alert groups a team triages."""
from __future__ import annotations

import sys
from typing import Literal

from scalebench.cli.arguments import Command, arg, group_id, whole
from scalebench.cli.listing import Listing
from scalebench.core.alert_rules import STATES
from scalebench.core.config import ConfigError, Configs


def _packages_of(store, ref: str) -> dict | None:
    """An image's package list: kept in the store (by digest, reference or name), else read now from
    this machine's engine (and kept)."""
    from scalebench.cell.engine import Engine
    from scalebench.cell.images import keep_image

    kept = store.image_packages(ref)
    if kept:
        return kept
    try:
        digest, _ = keep_image(Engine(), store, ref)
    except Exception:
        return None
    return store.image_packages(digest)


def cmd_diff(args, configs: Configs) -> str:
    """What changed between two images: Python, CUDA and Debian packages."""
    from scalebench.analysis.changes import package_diff, render_diff
    from scalebench.store.results import Store

    store = Store()
    a, b = _packages_of(store, args.image_a), _packages_of(store, args.image_b)
    for ref, kept in ((args.image_a, a), (args.image_b, b)):
        if kept is None:  # (one check for both images; the asserts below restate it for the checker)
            raise ConfigError(f"image {ref!r}: no package list in the results store and not on this Docker engine "
                              "(give a digest, a reference a cell ran, or an image this engine has)")
    assert a is not None and b is not None
    label = lambda ref, k: f"{ref} ({k['digest'][:19]})"  # noqa: E731
    return render_diff(label(args.image_a, a), label(args.image_b, b), package_diff(a["packages"], b["packages"]))


def cmd_bisect(args, configs: Configs) -> Listing:
    """Which image between --good and --bad first made the cell slower: A/B steps through the real DAG."""
    from scalebench.analysis.bisect import Bisection
    from scalebench.orchestration.dags.bisect import bisect, dags_test_runner, image_list
    from scalebench.store.results import Store

    bench = configs.benchmark(args.benchmark)
    if args.gpus not in bench.gpu_counts:
        raise ConfigError(f"--gpus {args.gpus}: {bench.id} runs on {bench.gpu_counts} GPUs; bisect one of them")
    kind: Literal["cpu", "gpu"] = "gpu" if args.profile != "smoke" else "cpu"
    images = image_list(bench, kind, args.good, args.bad, args.candidates)
    store = Store()
    b = Bisection(bench.id, args.gpus, images)
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731

    def packages_of(ref: str) -> dict | None:
        kept = _packages_of(store, ref)
        return kept["packages"] if kept else None

    bisect_id, lines = bisect(store, b, dags_test_runner(bench.id, store), args.profile, args.pairs,
                              packages_of, log=log)
    rows = [{"step": s.number, "run_id": s.run_id, "images": " ".join(s.images), "verdicts": " | ".join(s.lines)}
            for s in b.steps]
    return Listing(["step", "run_id", "images", "verdicts"], rows, {"bisect_id": bisect_id, **b.to_json(),
                                                                    "lines": lines},
                   [f"bisect {bisect_id}: {len(b.steps)} step(s)"] + lines, exit_code=0 if b.culprits else 1)


def os_user() -> str:
    """The account this process runs as (its effective uid), never $USER or $LOGNAME, which anyone sets."""
    import os
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid with no passwd entry (a container's): the number is what is known
        return f"uid {os.geteuid()}"


def cmd_alerts(args, configs: Configs) -> Listing:
    """Alert groups: list (open first), show one with its figures and events, set a state / owner / note."""
    from scalebench.report.alert_messages import figure_line, progress
    from scalebench.core.alert_rules import AlertStateError
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store())
    try:
        if args.action == "list":
            found = groups.groups(state=args.state, benchmark=args.benchmark, owner=args.owner)
        else:
            if args.id is None:
                raise ConfigError(f"alerts {args.action}: needs a group ID (scalebench alerts list shows them)")
            if args.action == "set":
                # the OS user makes the change; --who is recorded beside it as a claim, never instead of it
                who = os_user() + (f" (for {args.who})" if args.who else "")
                groups.set(args.id, who, state=args.state, owner=args.owner, note=args.note)
            one = groups.group(args.id)
            if one is None:
                raise ConfigError(f"alerts {args.action}: no alert group #{args.id} (scalebench alerts list shows them)")
            found = [one]
    except AlertStateError as exc:
        raise ConfigError(f"alerts {args.action}: {exc}") from None
    rows = [{"id": g["id"], "state": g["state"], "owner": g["owner"] or "", "first": g["first_night"],
             "last": g["last_night"], "figures": len(g["figures"]), "benchmarks": " ".join(g["benchmarks"]),
             "suspect": (g["suspect"] or "none")[:60]} for g in found]
    notes = []
    if args.action != "list":
        g = found[0]
        notes = [x for x in [progress(g)] if x] + [f"- {figure_line(f)}" for f in g["figures"]]
        notes += [f"{e['at']} {e['who']}: {e['kind']}" + (f" {e['from'] or ''} -> {e['to']}" if e["to"] else "")
                  + (f": {e['note']}" if e["note"] else "") for e in g.get("events", [])]
    doc = found if args.action == "list" else found[0]
    return Listing(["id", "state", "owner", "first", "last", "figures", "benchmarks", "suspect"], rows, doc, notes,
                   empty="no alert group" + (f" in state {args.state}" if args.state else ""))


DIFF = Command("diff", "what changed between two images: Python, CUDA and Debian packages with versions", cmd_diff, (
    arg("image_a", help="the earlier image: a digest, a reference a cell ran, or an image on this engine"),
    arg("image_b", help="the later image"),
))
BISECT = Command("bisect", "which image between --good and --bad first made a cell slower: A/B steps of the "
                           "benchmark's DAG (airflow dags test)", cmd_bisect, (
    arg("benchmark"),
    arg("--gpus", type=whole(1, 1024), required=True, help="the regressed cell's GPU count"),
    arg("--good", required=True, help="an image (tag of the benchmark's repository) that was fast"),
    arg("--bad", required=True, help="an image that is slow"),
    arg("--candidates", nargs="*", default=[], metavar="TAG", help="the images between them, in order"),
    arg("--pairs", type=whole(5, 10), default=5, help="cells per image per step (at least 5 for p <= 0.01)"),
    arg("--profile", default="nightly", choices=["smoke", "nightly", "full"]),
), listing=True)
ALERTS = Command("alerts", "alert groups (one per change that regressed): list, show ID, set ID STATE [--owner] "
                           "[--note]", cmd_alerts, (
    arg("action", choices=["list", "show", "set"]),
    arg("id", nargs="?", type=group_id, help="the group's number (show, set)"),
    arg("state", nargs="?", choices=STATES, help="set: the new state"),
    arg("--state", dest="state", choices=STATES + ("open",),
        help="list: only this state (open: new, triaged, investigating)"),
    arg("--benchmark", help="list: only groups with this benchmark"),
    arg("--owner", help="set: who owns it (needed for triaged); list: only theirs"),
    arg("--note", help="set: a note for the event log"),
    arg("--who", help="set: on whose behalf (recorded beside this user, who makes the change)"),
), listing=True)
