"""Where the time went between two profiled cells: each operation's change per step, sorted by its
share of the step's change, new and gone operations, the rest no operation explains; and the
`scalebench profile` command over the store and over attempt folders, refusing what it cannot
compare in one line."""
import json

import pytest

from scalebench.analysis.profile_diff import diff
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract


def profile(step_ms, **ops_ms):
    ops = sorted(({"name": k.replace("__", "::"), "self_s": v / 1e3, "calls": 1.0, "share": v / step_ms}
                  for k, v in ops_ms.items()), key=lambda o: -o["self_s"])
    return {"rank": 0, "steps": 5, "step_s": step_ms / 1e3, "ops": ops, "kernels": [], "traces": []}


A = profile(100.0, aten__convolution_backward=40.0, aten__mm=20.0, aten__add=5.0, aten__copy_=3.0)
B = profile(130.0, aten__convolution_backward=58.0, aten__mm=21.0, aten__add=5.0, aten__gelu=8.0)


def test_the_changes_are_sorted_by_their_share_of_the_slowdown_with_new_gone_and_the_rest():
    d = diff(A, B)
    assert d.step_delta_s == pytest.approx(0.030)
    first = d.changes[0]
    assert first.name == "aten::convolution_backward" and first.delta_s == pytest.approx(0.018)
    assert first.share == pytest.approx(0.6) and first.line() == "aten::convolution_backward +18 ms per step, 60% of the slowdown"
    assert [c.name for c in d.top()] == ["aten::convolution_backward", "aten::gelu", "aten::mm"]
    status = {c.name: c.status for c in d.changes}
    assert status["aten::gelu"] == "new" and status["aten::copy_"] == "gone" and status["aten::add"] == "changed"
    # 30 ms of change: 18 + 8 + 1 - 3 explained by the listed operations, 6 ms by none of them
    assert d.unexplained_s == pytest.approx(0.006)
    assert sum(c.delta_s for c in d.changes) + d.unexplained_s == pytest.approx(d.step_delta_s)


def test_a_faster_b_lists_what_got_faster_first():
    d = diff(B, A)
    assert d.top(1)[0].name == "aten::convolution_backward" and d.top(1)[0].delta_s < 0
    assert d.top(1)[0].share == pytest.approx(0.6)


def test_a_side_without_a_profile_is_named():
    with pytest.raises(ValueError, match="B has no profile: CUPTI is busy"):
        diff(A, {"why_not": "CUPTI is busy"})


@pytest.fixture
def store(isolated_state):
    return Store()


def stored(store, gpus, prof, repeat=1, benchmark="resnet50_keras_cifar10"):
    cell = sample_cell(gpus=gpus, repeat=repeat, benchmark=benchmark)
    c = sample_contract(cell)
    c["profile"] = prof
    assert store.record_attempt(cell, 1, "valid", contract=c) == "inserted"
    return cell["key"]


def test_profile_show_and_diff_read_the_store_and_refuse_in_one_line(store, capsys, tmp_path):
    from scalebench.cli import main

    a, b = stored(store, 2, A), stored(store, 2, B, repeat=2)
    assert main(["profile", "show", a, "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in shown["profile"]["ops"]] == [o["name"] for o in A["ops"]]
    assert shown["profile"]["ops"][0]["self_s"] == pytest.approx(0.040) and shown["cell"]["gpus"] == 2
    assert main(["profile", "diff", a, b, "-o", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["changes"][0]["name"] == "aten::convolution_backward" and got["changes"][0]["share"] == pytest.approx(0.6)
    assert main(["profile", "diff", a, b]) == 0
    assert "top: aten::convolution_backward +18 ms per step, 60% of the slowdown" in capsys.readouterr().out
    # what cannot be compared: one line naming it, a non-zero exit
    other = stored(store, 4, A)
    plain = sample_cell(gpus=2, repeat=3)
    store.record_attempt(plain, 1, "valid", contract=sample_contract(plain))
    for argv, says in ((["diff", a, other], "a diff compares one benchmark at one GPU count"),
                       (["show", plain["key"]], "no profile (run it with the trigger's profile_ops)"),
                       (["show", "nosuchkey"], "is neither an attempt folder nor a stored cell key"),
                       (["diff", a], "give two CELLs")):
        assert main(["profile", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert says in err and "Traceback" not in err and len(err.splitlines()) == 1, err


def test_profile_show_reads_an_attempt_folder(tmp_path, capsys):
    from scalebench.cli import main

    cell = sample_cell(gpus=1)
    (tmp_path / "metrics.json").write_text(json.dumps({**sample_contract(cell), "profile": B}))
    assert main(["profile", "show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "aten::convolution_backward" in out and "rank 0's window (the slowest), 5 steps of 130 ms" in out
