"""`passhat run --adaptive` as a user runs it: a real process with its default workers
(one per core), the session's Temporal server, scripted models; a run killed on purpose
is finished by the test itself."""

from __future__ import annotations

import json

from passhat.testing.harness import TASKS, agent_that_succeeds, killed_once_running, passhat

SUITE = ["--domain", "airline", *[a for t in TASKS for a in ("--task", t)], "--user-model", "scripted/oracle",
         "--yes", "--trials", "8", "--adaptive"]


def test_stops_once_the_precision_is_reached(env):
    """Four tasks the oracle always solves: pass^1 is known to +-0.25 after 4 rounds of one
    trial a task, half the fixed design's 32 conversations."""
    result = passhat("run", *SUITE, "-m", "scripted/oracle", "--precision", "0.25", "--run-id", "a-fast",
                     "-o", "json", env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["reached"] and record["estimate"] == 1.0 and record["high"] - record["low"] <= 0.5
    assert record["rounds"] == [f"a-fast-r{i}" for i in range(2)]
    assert (record["conversations"], record["fixed_design_conversations"]) == (8, 32)
    table = passhat("run", *SUITE, "-m", "scripted/oracle", "--precision", "0.25", "--run-id", "a-fast",
                    env=env, timeout=600)
    assert table.returncode == 0 and "8 in 2 round(s), against 32" in table.stdout
    assert "round 0" not in table.stderr  # every round is read back, none run again


def test_a_precision_out_of_reach_spends_the_fixed_budget(env):
    """A coin-flip agent on four tasks cannot show pass^1 to +-0.05: every task gets its
    8 trials, and the record says the precision was not reached."""
    result = passhat("run", *SUITE, "-m", agent_that_succeeds("0.5"), "--precision", "0.05", "--run-id", "a-slow",
                     "-o", "json", env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert not record["reached"] and record["conversations"] == 32
    assert [t["trials"] for t in record["tasks"]] == [8] * len(TASKS)
    assert record["low"] <= record["estimate"] <= record["high"]


def test_usage_errors_are_one_line_exit_2(env):
    for args, said in [
        (("--precision", "0.7"), "--precision is the interval's half-width"),
        (("--precision-metric", "pass^9"), "needs --trials of at least 9"),
        (("--precision-metric", "pass9"), "--precision-metric must read"),
        (("-m", "scripted/noisy-0.5"), "one --agent-model at a time"),
        (("--workers", "0"), "--workers must be at least 1"),
    ]:
        result = passhat("run", *SUITE, "-m", "scripted/oracle", *args, env=env, timeout=120)
        assert result.returncode == 2, (args, result.stderr)
        assert said in result.stderr and "Traceback" not in result.stderr
        assert result.stderr.count("error:") == 1
    plain = passhat("run", *[a for a in SUITE if a != "--adaptive"], "-m", "scripted/oracle", "--precision", "0.1",
                    env=env, timeout=120)
    assert plain.returncode == 2 and "go with --adaptive" in plain.stderr


def test_a_killed_adaptive_run_resumes_without_running_a_round_again(env, tmp_path):
    args = ["run", *SUITE, "-m", "scripted/oracle", "--agent-args", '{"latency": 0.5}',
            "--precision", "0.2", "--run-id", "a-kill"]
    store = killed_once_running(args, env, tmp_path / "home" / "results.db", "a-kill-r1")
    first = {(t.trial_id, t.attempts, t.finished_at) for t in store.trials("a-kill-r0")}
    assert len(first) == len(TASKS)
    again = passhat(*args, "-o", "json", env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "round 0" not in again.stderr and "round 1 (a-kill-r1)" in again.stderr
    assert {(t.trial_id, t.attempts, t.finished_at) for t in store.trials("a-kill-r0")} == first
    record = json.loads(again.stdout)
    assert record["reached"] and record["rounds"] == [f"a-kill-r{i}" for i in range(3)]
    # The rounds after the kill ran once each (a trial in flight in the killed round is
    # continued by its resume, with a new attempt number: that is not a round run again).
    assert all(t.attempts == 1 for r in record["rounds"][2:] for t in store.trials(r))
    store.close()
