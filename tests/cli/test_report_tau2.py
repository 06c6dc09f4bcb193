"""Which tau2 a run was made with, as the read-only commands show it, and what the
leaderboard would make of its not-evaluable trials. Runs are written straight into a
SQLite store (no Temporal): `runs`, `report` in every format and `export --format jsonl`
name the tau2 version and data digest; a report of runs made with different tau2 versions
is refused unless asked for, and then says so; whenever a trial is not evaluable, pass^k
is shown as the leaderboard counts it too, with what that count leaves out."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import pytest

from passhat.contracts import TaskUnit
from passhat.infra.store import Store
from passhat.testing.harness import passhat
from tests.helpers import cli_env, make_config, one_error_line

# run id -> (tau2 version, data digest); "legacy" was recorded before passhat kept them.
RUNS = {"old": ("26.3.0", "d1g3st0ld0000000"), "new": ("1.0.1", "d1g3stn3w0000000"),
        "legacy": (None, None)}


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    """Each run: 2 tasks, k=2, every scored trial a success; in "new" and "old" task t2's
    second trial is not evaluable."""
    url = f"sqlite:///{tmp_path_factory.mktemp('tau2') / 'results.db'}"
    store = Store(url)
    for run_id, (version, data) in RUNS.items():
        store.create_run(make_config(run_id, agent_models=["openai/x"], trials=2,
                                     task_ids={"mock": ["t1", "t2"]},
                                     tau2_version=version, tau2_data=data), 4)
        for task_id in ("t1", "t2"):
            unit = TaskUnit(run_id=run_id, agent_model="openai/x", user_model="user-m",
                            domain="mock", task_id=task_id, seeds=[11, 22])
            for index in range(2):
                spec = unit.trial(index)
                store.begin_trial(spec)
                if run_id != "legacy" and (task_id, index) == ("t2", 1):
                    store.mark_not_evaluable(spec.trial_id, "simulation failed 4 times",
                                             "infrastructure_error")
                else:
                    store.finish_trial(spec.trial_id, 1.0, True, {"reward": 1.0}, "user_stop", 4)
        store.set_run_status(run_id, "completed")
    store.close()
    return url


@pytest.fixture
def env(store_url, tmp_path):
    return cli_env(store_url, tmp_path)


def _ok(result):  # noqa: ANN001, ANN202
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_runs_report_and_export_name_the_tau2_version_and_data(env, tmp_path):
    table = _ok(passhat("runs", env=env)).splitlines()
    assert table[0].split("\t")[-2:] == ["tau2", "data"]
    rows = {line.split("\t")[0]: line.split("\t")[-2:] for line in table[1:]}
    assert rows == {"old": ["26.3.0", "d1g3st0ld0000000"], "new": ["1.0.1", "d1g3stn3w0000000"],
                    "legacy": ["26.3", "-"]}
    listed = {r["run_id"]: (r["tau2_version"], r["tau2_data"])
              for r in json.loads(_ok(passhat("runs", "-o", "json", env=env)))["runs"]}
    assert listed["new"] == ("1.0.1", "d1g3stn3w0000000") and listed["legacy"] == ("26.3", None)

    words = "tau2 1.0.1, data d1g3stn3w0000000"
    for output in ("table", "markdown", "html"):
        assert words in _ok(passhat("report", "new", "-o", output, env=env)), output
    [run] = json.loads(_ok(passhat("report", "new", "-o", "json", env=env)))["runs"]
    assert (run["tau2_version"], run["tau2_data"]) == ("1.0.1", "d1g3stn3w0000000")
    [row] = csv.DictReader(io.StringIO(_ok(passhat("report", "new", "-o", "csv", env=env))))
    assert (row["tau2_version"], row["tau2_data"]) == ("1.0.1", "d1g3stn3w0000000")
    assert "recorded before passhat kept the version" in _ok(passhat("report", "legacy", env=env))

    export = passhat("export", "new", "--format", "jsonl", "--output-dir", str(tmp_path), env=env)
    assert words in _ok(export) + export.stderr
    lines = [json.loads(line) for line in (tmp_path / "new.jsonl").read_text().splitlines()]
    assert {(t["tau2_version"], t["tau2_data"]) for t in lines} == {("1.0.1", "d1g3stn3w0000000")}


def test_runs_of_different_tau2_versions_are_compared_only_when_asked(env):
    line = one_error_line(passhat("report", "old", "new", env=env))
    assert "old (tau2 26.3.0) and new (tau2 1.0.1)" in line and "--across-tau2-versions" in line

    body = json.loads(_ok(passhat("report", "old", "new", "--across-tau2-versions", "-o", "json", env=env)))
    assert body["across_tau2_versions"] is True
    assert all("ACROSS tau2 VERSIONS" in c["statement"] for c in body["comparisons"])
    for output in ("table", "markdown", "html"):
        text = _ok(passhat("report", "old", "new", "--across-tau2-versions", "-o", output, env=env))
        assert "ACROSS tau2 VERSIONS" in text, output

    # A run recorded before the version was kept ran on 26.3: the same version as 26.3.0.
    same = json.loads(_ok(passhat("report", "old", "legacy", "-o", "json", env=env)))
    assert same["across_tau2_versions"] is False
    assert "ACROSS" not in _ok(passhat("report", "old", "legacy", env=env))


def test_not_evaluable_trials_are_left_out_as_the_leaderboard_leaves_them_out(env):
    [run] = json.loads(_ok(passhat("report", "new", "-o", "json", env=env)))["runs"]
    [group] = run["groups"]
    assert group["pass_hat_k"]["1"]["value"] == 1.0  # the lost trial left out
    # tau2 1.0.1's submit prepare leaves it out too, and stops k at t2's one evaluable
    # trial: pass^1 1.0, no pass^2. Beside it: what it left out, and the figure with the
    # lost trial counted as a failure (t1 2/2, t2 1/2 -> pass^1 0.75, pass^2 0.5).
    board = {k: e["value"] for k, e in group["pass_hat_k_leaderboard"].items()}
    assert board == {"1": 1.0}
    assert group["leaderboard_left_out"] == 1
    assert group["pass_hat_k_failures_counted"] == pytest.approx({"1": 0.75, "2": 0.5})
    for output in ("table", "markdown", "html"):
        text = " ".join(_ok(passhat("report", "new", "-o", output, env=env)).split())
        assert "as the leaderboard counts (tau2 1.0.1 submit prepare, pandas 2.x): pass^1 1.000" in text, output
        assert ("it leaves out 1 of 4 trials (1 not evaluable), not counting them as failures; "
                "no pass^2: a task has only 1 evaluable trial; counted as failures (as prepare counts "
                "them under pandas 3.x): "
                "pass^1 0.750, pass^2 0.500") in text, output
    # Nothing lost: one way of counting.
    [legacy] = json.loads(_ok(passhat("report", "legacy", "-o", "json", env=env)))["runs"]
    assert legacy["groups"][0]["pass_hat_k_leaderboard"] is None
    assert "leaderboard" not in _ok(passhat("report", "legacy", env=env))
