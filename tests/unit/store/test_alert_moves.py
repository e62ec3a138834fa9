"""Triage moves under real concurrent writers: two people (processes) move one group at the same
moment, from `new` to `invalid` and to `fixed`, both allowed from `new`; the moves run one after
the other, so one wins and the other is checked against the state the first left: refused,
naming it. On SQLite and PostgreSQL."""
import multiprocessing as mp

import pytest


DETAIL = {"benchmark": "unet_torch_voc2007", "gpus": 2, "precision": "bf16", "metric": "images_per_s", "change": 0.1,
          "line": "unet_torch_voc2007 2 GPUs: regressed", "suspect": {"kind": "image", "text": "image t:b",
                                                                     "new_image": "t:b", "previous_image": "t:a"}}
ROUNDS = 3


@pytest.fixture
def url(both_stores):
    return both_stores


def _move(url, group_id, who, state, start, out):
    from scalebench.core.alert_rules import MoveRefused
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store(url))
    start.wait(30)
    try:
        groups.set(group_id, who, state=state, note=f"{who} says {state}")
        out.put((who, "moved", None))
    except MoveRefused as exc:
        out.put((who, "refused", str(exc)))


def test_two_people_moving_one_group_at_once_give_one_winner_and_a_refusal_naming_the_state_found(url):
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store(url))
    ctx = mp.get_context("spawn")
    for night in range(1, ROUNDS + 1):
        detail = {**DETAIL, "suspect": {**DETAIL["suspect"], "new_image": f"t:b{night}"}}
        [gid] = groups.record_night(f"2026-11-{night:02d}", [detail])
        start, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_move, args=(url, gid, who, state, start, out))
                 for who, state in (("ana", "invalid"), ("ben", "fixed"))]
        for p in procs:
            p.start()
        said = sorted(out.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(30)
        group = groups.group(gid)
        moves = [(e["who"], e["from"], e["to"]) for e in group["events"] if e["kind"] == "state"]
        [(winner, _, to)] = moves  # one move recorded, from new
        assert [s[1] for s in said if s[0] == winner] == ["moved"] and group["state"] == to, (said, moves)
        [(loser, outcome, why)] = [s for s in said if s[0] != winner]
        assert outcome == "refused" and why.startswith(f"state: {to} cannot become "), said


def test_the_nightly_close_and_a_persons_move_do_not_both_win(url):
    """The report closes a group whose figures are all back while a person marks it invalid: one
    of them, never an `invalid` group later set `fixed` by the report (or the reverse unchecked)."""
    from scalebench.store.alert_groups import AlertGroups
    from scalebench.store.results import Store

    groups = AlertGroups(Store(url))
    [gid] = groups.record_night("2026-11-01", [DETAIL])
    groups.set(gid, "ana", state="invalid", note="a test machine")
    back = {"key": groups.group(gid)["key"], "benchmark": DETAIL["benchmark"], "gpus": 2, "precision": "bf16",
            "metric": "images_per_s", "line": "back"}
    groups.record_night("2026-11-03", [], [back])
    group = groups.group(gid)
    assert group["state"] == "invalid" and [e["to"] for e in group["events"] if e["kind"] == "state"] == ["invalid"]
