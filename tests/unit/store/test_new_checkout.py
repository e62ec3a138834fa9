"""A new checkout, before any other command: the commands that read the results store say in one
line what to run first, and `scalebench plan` plans from the config estimates; no traceback."""
from scalebench.cli import main


def test_commands_on_a_new_checkout_say_what_to_run_first_and_plan_from_estimates(tmp_path, monkeypatch, capsys):
    home = tmp_path / "never-made"
    monkeypatch.setenv("SCALEBENCH_HOME", str(home))
    monkeypatch.delenv("SCALEBENCH_STORE_URL", raising=False)
    assert main(["results"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"scalebench: results store {home / 'results.db'} does not exist yet: run `scalebench db upgrade` "
                   "(make demo, make test and make airflow do)")
    assert main(["plan", "--profile", "nightly", "--fleet", "include/configs/fleet.gpu-example.yaml"]) == 0
    out = capsys.readouterr().out
    assert "host gpu-node-1:" in out and "config estimate" in out and "Traceback" not in out
    assert not home.exists()  # nothing was created by reading
