"""Two homes (two results stores) on one Temporal server, as a team's shared cluster is
used: a run id is the store's. A run or gate whose id another store used before runs as
its own (never shows the other store's result as its own), and a run whose id another
store's run is still running under is refused in one line, leaving nothing recorded."""

from __future__ import annotations

import json

from passhat.testing.harness import Passhat, stopping_workers

SUITE = ["--domain", "airline", "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle"]


def _tasks(ph: Passhat, run_id: str) -> list[tuple[str, float]]:
    trials = json.loads(ph.cli("trials", run_id, "-o", "json").stdout)["trials"]
    return sorted((t["task_id"], t["reward"]) for t in trials)


def test_a_run_id_another_store_used_runs_here_as_its_own(fresh_temporal_server, tmp_path):
    mine, theirs = (Passhat(home=tmp_path / name, temporal_address=fresh_temporal_server.address)
                    for name in ("mine", "theirs"))
    first = theirs.cli("run", *SUITE, "--task", "0", "--run-id", "nightly", timeout=300)
    assert first.returncode == 0, first.stderr
    again = mine.cli("run", *SUITE, "--task", "1", "--run-id", "nightly", timeout=300)
    assert again.returncode == 0, again.stderr
    assert _tasks(mine, "nightly") == [("1", 1.0)]
    assert _tasks(theirs, "nightly") == [("0", 1.0)]

    gate = ["gate", *SUITE, "--task", "0", "--task", "1", "--task", "2", "--require", "pass^1 >= 0.3",
            "--run-id", "release", "-o", "json"]
    assert theirs.cli(*gate, timeout=300).returncode == 0
    here = mine.cli(*gate, timeout=300)
    assert here.returncode == 0, here.stderr
    rounds = json.loads(here.stdout)["rounds"]
    assert rounds and all(_tasks(mine, r) for r in rounds), rounds


def test_a_run_id_another_store_is_running_is_refused_in_one_line(fresh_temporal_server, tmp_path):
    mine, theirs = (Passhat(home=tmp_path / name, temporal_address=fresh_temporal_server.address)
                    for name in ("mine", "theirs"))
    for _ in stopping_workers(theirs):
        # no worker serves its queue: it stays running
        started = theirs.cli("run", *SUITE, "--task", "0", "--run-id", "busy", "--detach")
        assert started.returncode == 0, started.stderr
        refused = mine.cli("run", *SUITE, "--task", "0", "--run-id", "busy")
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip().splitlines()[-1] == (
            "error: a run 'busy' that this results store does not hold is running on the Temporal server "
            "(another PASSHAT_HOME or results store); give another --run-id"), refused.stderr
        assert "Traceback" not in refused.stderr
        assert "busy" not in mine.cli("runs").stdout
