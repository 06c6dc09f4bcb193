"""`passhat export` and `passhat import` as a user runs them (real processes), checked by
tau2's own CLI: `tau2 evaluate-trajs` recomputes every reward of an export, and
`tau2 submit prepare` / `tau2 submit validate` accept the export of a full airline run.

The scripted runs go through Temporal in this process (tests.runs); every passhat and
tau2 command after that is a subprocess against the run's SQLite store, with
TEMPORAL_ADDRESS on a closed port: export, import and everything on an imported run
work without Temporal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text

from passhat.contracts import RunConfig
from passhat.messages import Message
from passhat.domains.tau2_version import GIVEN_UP, installed_family, installed_rules
from passhat.infra.store import Store
from passhat.testing.harness import passhat
from tests.helpers import cli_env, one_error_line
from tests.results_files import (
    TAU2_MOCK_RESULTS,
    tau_bench_pass_hat,
    tau_bench_result,
    write_tau_bench_file,
)
from tests.runs import config, run_to_end

TAU2_CLI = str(Path(sys.executable).with_name("tau2"))
TABLES = ("runs", "trials", "steps", "task_results")
# Answers to `tau2 submit prepare`'s prompts, per tau2 version. 26.3: model and user
# model (defaults), organization, email, contact name, GitHub, highlighted as new, then
# the methodology (date, tau2 version, notes) without which `tau2 submit validate`
# crashes. 1.0.x asks for the model's organization before the submitter's, and after
# "highlighted" for the submission type and reasoning effort, then the methodology,
# whether prompts were modified or tasks omitted, references and a release date.
SUBMIT_ANSWERS = {
    "26.3": "\n\nPasshat Tests\nci@example.com\n\n\nn\n2026-01-01\n26.3\nexported by passhat\n",
    "1.0": "\n\nPasshat\nPasshat Tests\nci@example.com\n\n\nn\n\n\n2026-01-01\n\nexported by passhat\nn\nn\nn\n\n",
}[installed_family()]


def tau2(*args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([TAU2_CLI, *args], capture_output=True, text=True, input=stdin,
                          timeout=timeout, env=env, cwd=env["PASSHAT_HOME"])


def snapshot(db_url: str) -> dict[str, list]:
    store = Store(db_url)
    try:
        with store.engine.connect() as conn:
            return {t: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY 1"))] for t in TABLES}
    finally:
        store.close()


# Scripted runs, made once per test session and shared by the tests that read them.
_RUNS: dict[str, tuple[str, str]] = {}


async def scripted_run(client, tmp_path_factory, name: str, **overrides) -> tuple[str, str]:  # noqa: ANN001
    """(store URL, run id) of a finished scripted run."""
    if name not in _RUNS:
        db_url = f"sqlite:///{tmp_path_factory.mktemp(name) / 'results.db'}"
        store = Store(db_url)
        cfg = config(run_id=f"{name}-{uuid.uuid4().hex[:6]}", **overrides)
        started = time.monotonic()
        await run_to_end(client, store, cfg)
        print(f"\n{name}: {cfg.total_trials()} trials in {time.monotonic() - started:.0f} s")
        store.close()
        _RUNS[name] = (db_url, cfg.run_id)
    return _RUNS[name]


def noisy_run(client, tmp_path_factory):  # noqa: ANN001, ANN201
    return scripted_run(client, tmp_path_factory, "noisy10", agent_models=["scripted/noisy-0.6"],
                        limit=10, trials=4)


def report_json(run_id: str, env: dict[str, str]) -> dict:
    """The report's numbers per model and domain, as {"run_id", "results": [...]} with
    pass^k as plain values (the report's JSON also has their intervals)."""
    result = passhat("report", run_id, "--output", "json", env=env)
    assert result.returncode == 0, result.stderr
    [run] = json.loads(result.stdout)["runs"]
    keep = ("agent_model", "user_model", "domain", "tasks", "trials", "evaluable", "avg_reward", "pass_at_k")
    return {"run_id": run["run_id"], "results": [
        {**{k: g[k] for k in keep}, "pass_hat_k": {k: e["value"] for k, e in g["pass_hat_k"].items()},
         "pass_hat_k_leaderboard": {k: e["value"] for k, e in (g["pass_hat_k_leaderboard"] or {}).items()}}
        for g in run["groups"]]}


# ---------------------------------------------------------------------------------------


async def test_tau2_evaluate_trajs_recomputes_every_reward(client, tmp_path_factory, tmp_path):
    """The required check: tau2's own evaluator, run on the export of a scripted run with
    successes and failures, gives every simulation the reward passhat gave the trial
    (on 1.0.x, a trial given up on has none in the file, and tau2 grades it 0)."""
    from tau2.data_model.simulation import Results
    from tau2.metrics.agent_metrics import compute_metrics

    db_url, run_id = await noisy_run(client, tmp_path_factory)
    env = cli_env(db_url, tmp_path)
    exported = passhat("export", run_id, "--format", "tau2", "--output-dir", str(tmp_path / "out"), env=env)
    assert exported.returncode == 0, exported.stderr
    [path] = exported.stdout.split()
    assert Path(path).name == f"{run_id}__scripted_noisy-0.6__airline.json"

    evaluated = tau2("evaluate-trajs", path, "-o", str(tmp_path / "rescored"), env=env)
    assert evaluated.returncode == 0, evaluated.stdout[-3000:]
    assert "Computed rewards for 40 simulation(s)" in evaluated.stdout
    ours = Results.model_validate_json(Path(path).read_text())
    theirs = Results.model_validate_json((tmp_path / "rescored" / f"updated_{Path(path).name}").read_text())

    store = Store(db_url)
    stored = {row.trial_id: row for row in store.trials(run_id)}
    store.close()
    assert len(ours.simulations) == len(theirs.simulations) == len(stored) == 40
    equal = 0
    for mine, recomputed in zip(ours.simulations, theirs.simulations):
        assert mine.id == recomputed.id
        row = stored[mine.id]
        assert (mine.task_id, mine.trial, mine.seed) == (row.task_id, row.trial_index, row.seed)
        if mine.termination_reason in GIVEN_UP:
            assert (mine.reward_info, recomputed.reward_info.reward, row.status) == (None, 0.0, "not_evaluable")
            continue
        assert recomputed.reward_info.reward == mine.reward_info.reward == row.reward
        for field in ("reward_basis", "reward_breakdown", "db_check", "action_checks",
                      "communicate_checks", "env_assertions"):
            assert getattr(recomputed.reward_info, field) == getattr(mine.reward_info, field), field
        equal += 1
    rewards = [s.reward_info.reward for s in theirs.simulations]
    assert {0.0, 1.0} <= set(rewards)  # the check is not vacuous
    print(f"\ntau2 evaluate-trajs: {equal}/{len(rewards)} rewards equal, {rewards.count(1.0)} successes")
    # tau2's pass^k of the file is passhat's; with trials given up on (1.0.x), passhat's
    # as the leaderboard counts: tau2 leaves them out, and stops k at a task's fewest.
    [row] = report_json(run_id, env)["results"]
    expected = row["pass_hat_k_leaderboard"] or row["pass_hat_k"]
    assert {str(k): v for k, v in compute_metrics(theirs).pass_hat_ks.items()} == pytest.approx(expected)


async def test_export_import_report_round_trip(client, tmp_path_factory, tmp_path):
    """export -> import -> report gives the same table; the imported run answers every
    read-only command, refuses resume and cancel, and importing it again changes nothing."""
    db_url, run_id = await noisy_run(client, tmp_path_factory)
    source_env = cli_env(db_url, tmp_path)
    exported = passhat("export", run_id, "--output-dir", str(tmp_path / "out"), env=source_env)
    assert exported.returncode == 0, exported.stderr
    [path] = exported.stdout.split()

    env = cli_env(f"sqlite:///{tmp_path / 'imported.db'}", tmp_path)
    imported = passhat("import", path, env=env)
    assert imported.returncode == 0, imported.stderr
    new_id = imported.stdout.strip()
    assert new_id.startswith("import-") and "imported run" in imported.stderr

    before, after = report_json(run_id, source_env), report_json(new_id, env)
    assert after["results"] == before["results"] and after["run_id"] == new_id
    table = passhat("report", new_id, env=env)
    assert table.returncode == 0 and "scripted/noisy-0.6" in table.stdout

    # Importing the same file again is a no-op that says so.
    rows = snapshot(env["PASSHAT_DB_URL"])
    again = passhat("import", path, env=env)
    assert again.returncode == 0 and again.stdout.strip() == new_id
    assert f"already imported as run {new_id}; nothing changed" in again.stderr
    assert snapshot(env["PASSHAT_DB_URL"]) == rows

    status = passhat("status", new_id, env=env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert f"run {new_id}: imported; workflow none (imported from {Path(path).name})" in status.stdout
    assert "trials done 40/40" in status.stdout
    for command, verb in (("resume", "resume"), ("cancel", "cancel")):
        line = one_error_line(passhat(command, new_id, env=env, timeout=60))
        assert f"run {new_id} is imported from results files: it has no workflows and nothing to {verb}" in line

    trials = passhat("trials", new_id, "--failed", env=env)
    assert trials.returncode == 0
    failed = [line.split("\t") for line in trials.stdout.strip().splitlines()[1:]]
    # tau2 1.0.x re-runs a simulation whose model failed, then gives up on it: not evaluable
    given_up = installed_rules().exhausted_reason is not None
    outcome = "not_evaluable" if given_up else "failure"
    assert failed and all(f[1] == outcome and "EmptyReply" in f[3] for f in failed)
    shown = passhat("show", failed[0][0], env=env)
    assert shown.returncode == 0
    assert ("EmptyReply" if given_up else "Hi! How can I help you today?") in shown.stdout, shown.stdout

    # The imported run exports to the same simulations.
    re_exported = passhat("export", new_id, "--output-dir", str(tmp_path / "again"), env=env)
    assert re_exported.returncode == 0, re_exported.stderr
    first, second = (json.loads(Path(p).read_text()) for p in (path, re_exported.stdout.strip()))
    assert first["info"] == second["info"] and first["tasks"] == second["tasks"]
    for a, b in zip(first["simulations"], second["simulations"]):
        assert a["reward_info"] == b["reward_info"] and a["termination_reason"] == b["termination_reason"]
        assert a["messages"] == b["messages"]
        assert (a["trial"], a["seed"], a["task_id"]) == (b["trial"], b["seed"], b["task_id"])


@pytest.mark.timeout(1200)  # 200 conversations: about 4-5 minutes on a busy 2-core machine
async def test_full_airline_run_passes_tau2_submit(client, tmp_path_factory, tmp_path):
    """A full airline run (50 base tasks, k=4) exported and put through `tau2 submit
    prepare` and `tau2 submit validate`."""
    db_url, run_id = await scripted_run(client, tmp_path_factory, "airline-full", limit=None,
                                        trials=4, concurrency=32)
    env = cli_env(db_url, tmp_path)
    path = export_one(run_id, env, tmp_path)
    submission = submit(path, env, tmp_path)
    body = json.loads((submission / "submission.json").read_text())
    [row] = report_json(run_id, env)["results"]
    assert body["model_name"] == "scripted/oracle"
    assert body["methodology"]["user_simulator"] == "scripted/oracle"
    assert body["results"]["airline"] == {
        **{f"pass_{k}": pytest.approx(100 * row["pass_hat_k"][str(k)]) for k in range(1, 5)},
        "cost": 0.0,
    }


def export_one(run_id: str, env: dict[str, str], tmp_path: Path) -> str:
    """The path of the run's one tau2 file."""
    exported = passhat("export", run_id, "--output-dir", str(tmp_path / "out"), env=env)
    assert exported.returncode == 0, exported.stderr
    [path] = exported.stdout.split()
    return path


def submit(path: str, env: dict[str, str], tmp_path: Path) -> Path:
    """`tau2 submit prepare` (which verifies the trajectories) and `tau2 submit validate`
    of one tau2 file, both accepting it; the submission's folder."""
    submission = tmp_path / "submission"
    started = time.monotonic()
    prepared = tau2("submit", "prepare", path, "-o", str(submission), env=env, stdin=SUBMIT_ANSWERS)
    assert prepared.returncode == 0, prepared.stdout[-3000:]
    assert "All trajectories passed verification" in prepared.stdout, prepared.stdout[-3000:]
    assert "Submission prepared successfully" in prepared.stdout
    # 1.0.x writes the submission into a folder of its own inside the output folder.
    [submission] = {p.parent for p in submission.rglob("submission.json")}
    validated = tau2("submit", "validate", str(submission), env=env)
    print(f"\ntau2 submit prepare + validate: {time.monotonic() - started:.0f} s")
    assert validated.returncode == 0, validated.stdout[-3000:]
    assert "Submission validation successful" in validated.stdout
    assert "Submission metrics validation successful" in validated.stdout
    assert "❌" not in validated.stdout
    return submission


@pytest.mark.skipif(installed_rules().exhausted_reason is None,
                    reason="needs tau2 1.0.x (the installed tau2 gives up on no simulation)")
@pytest.mark.timeout(1500)  # 200 conversations, a quarter of them run 4 times
async def test_given_up_trials_keep_a_full_airline_export_acceptable_to_tau2_submit(
        client, tmp_path_factory, tmp_path):
    """tau2 1.0.x re-runs a simulation whose model failed and then gives up on it
    (infrastructure_error; not evaluable in passhat): scripted/noisy-0.7's failing trials.
    The export holds them as tau2's own files do, so every task has its k=4 simulations
    and `tau2 submit verify-trajs`, `prepare` and `validate` accept it; an import reads
    them back as not evaluable."""
    reason = installed_rules().exhausted_reason
    db_url, run_id = await scripted_run(client, tmp_path_factory, "airline-full-noisy", limit=None,
                                        agent_models=["scripted/noisy-0.7"], trials=4, concurrency=32)
    env = cli_env(db_url, tmp_path)
    store = Store(db_url)
    given_up = [t for t in store.trials(run_id) if t.termination_reason == reason]
    assert given_up and all(t.status == "not_evaluable" for t in given_up)
    path = export_one(run_id, env, tmp_path)
    simulations = json.loads(Path(path).read_text())["simulations"]
    assert len(simulations) == 200
    written = {s["id"]: s for s in simulations if s["termination_reason"] == reason}
    assert set(written) == {t.trial_id for t in given_up}
    assert all(s["messages"] == [] and s["reward_info"] is None and s["info"]["error_type"] == "EmptyReply"
               for s in written.values())
    verified = tau2("submit", "verify-trajs", path, env=env)
    assert verified.returncode == 0 and "All files passed all checks" in verified.stdout, verified.stdout[-3000:]
    body = json.loads((submit(path, env, tmp_path) / "submission.json").read_text())
    # tau2 1.0.1's submission leaves them out (and stops k at a task's fewest evaluable
    # trials), as passhat's leaderboard line does; a missing pass^k is left out of it.
    [row] = report_json(run_id, env)["results"]
    board = row["pass_hat_k_leaderboard"]
    assert body["results"]["airline"] == {
        **{f"pass_{k}": pytest.approx(100 * board[str(k)]) for k in range(1, 5) if str(k) in board},
        "cost": 0.0,
    }
    imported = passhat("import", path, "--run-id", "reimported", env=env)
    assert imported.returncode == 0, imported.stderr
    again = [t for t in store.trials("reimported") if t.termination_reason == reason]
    store.close()
    assert sorted((t.task_id, t.trial_index) for t in again) == sorted((t.task_id, t.trial_index) for t in given_up)
    assert all((t.status, t.error_class) == ("not_evaluable", "EmptyReply") for t in again)


def _synthetic_run(db_url: str, *, agent_args: dict) -> str:
    """A run written through the store's own methods, without Temporal: airline tasks 0
    and 1, k=2; one trial scored 1, one scored 0, one not evaluable, one still running.
    The config is made directly: `passhat run` refuses secrets in model arguments, but a
    store may hold a run from before it did."""
    store = Store(db_url)
    cfg = RunConfig(run_id="synthetic", agent_models=["scripted/oracle"], user_model="scripted/oracle",
                    domains=["airline"], task_ids={"airline": ["0", "1"]}, trials=2, agent_args=agent_args)
    store.create_run(cfg, cfg.total_trials())
    specs = [unit.trial(i) for unit in cfg.units() for i in range(2)]
    for n, spec in enumerate(specs):
        store.begin_trial(spec)
        store.record_step(spec.trial_id, spec.run_id, 0, "assistant",
                          [Message(role="assistant", content="Hi! How can I help you today?")])
        if n == 3:
            continue  # still running
        store.record_step(spec.trial_id, spec.run_id, 1, "user", [Message(role="user", content="Help.")],
                          model="scripted/oracle", input_tokens=10, output_tokens=2, cost=0.01)
        if n == 2:
            store.mark_not_evaluable(spec.trial_id, "RateLimitError: 429 after 8 attempts", "RateLimitError")
            continue
        store.record_step(spec.trial_id, spec.run_id, 2, "assistant",
                          [Message(role="assistant", content="Done.")], model="scripted/oracle", cost=0.02)
        store.record_step(spec.trial_id, spec.run_id, 3, "user", [Message(role="user", content="###STOP###")],
                          model="scripted/oracle")
        reward = 1.0 - n
        store.finish_trial(
            spec.trial_id, reward=reward, success=reward == 1.0, termination_reason="user_stop", n_steps=3,
            reward_info={"breakdown": {"DB": reward}, "reward_basis": ["DB"],
                         "db_check": {"db_match": bool(reward), "db_reward": reward}, "note": None},
        )
    store.close()
    return cfg.run_id


def test_export_of_an_unfinished_run_needs_partial_and_keeps_secrets_out(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'results.db'}"
    run_id = _synthetic_run(db_url, agent_args={
        "api_key": "sk-live-SECRET", "extra_headers": {"Authorization": "Bearer sk-live-SECRET"},
        "api_key_env": "PROVIDER_KEY", "max_tokens": 64, "temperature": 0.0,
    })
    env = cli_env(db_url, tmp_path)
    out = tmp_path / "out"
    line = one_error_line(passhat("export", run_id, "--output-dir", str(out), env=env))
    assert f"run {run_id} is running (3/4 trials finished)" in line and "--partial" in line
    assert not out.exists()

    partial = passhat("export", run_id, "--output-dir", str(out), "--partial", env=env)
    assert partial.returncode == 0, partial.stderr
    [path] = partial.stdout.split()
    assert path.endswith(f"{run_id}__scripted_oracle__airline.partial.json")
    assert "PARTIAL" in partial.stderr and "2 trial(s) not scored" in partial.stderr
    written = Path(path).read_text()
    assert "sk-live-SECRET" not in written and '"api_key"' not in written
    body = json.loads(written)
    # The name of the variable that holds the key is not a secret: it stays.
    assert body["info"]["agent_info"]["llm_args"] == {
        "extra_headers": {}, "api_key_env": "PROVIDER_KEY", "max_tokens": 64, "temperature": 0.0}
    assert [(s["task_id"], s["trial"], s["reward_info"]["reward"]) for s in body["simulations"]] == [
        ("0", 0, 1.0), ("0", 1, 0.0)]
    assert [t["id"] for t in body["tasks"]] == ["0", "1"] and body["info"]["num_trials"] == 2
    first = body["simulations"][0]
    assert [m["role"] for m in first["messages"]] == ["assistant", "user", "assistant", "user"]
    assert first["messages"][1]["usage"] == {"completion_tokens": 2, "prompt_tokens": 10}
    assert (first["agent_cost"], first["user_cost"]) == (pytest.approx(0.02), pytest.approx(0.01))

    lines = passhat("export", run_id, "--format", "jsonl", "--output-dir", str(out), "--partial", env=env)
    assert lines.returncode == 0, lines.stderr
    [jsonl] = lines.stdout.split()
    assert jsonl.endswith(f"{run_id}.partial.jsonl")
    trials = [json.loads(x) for x in Path(jsonl).read_text().splitlines()]
    assert [t["status"] for t in trials] == ["scored", "scored", "not_evaluable", "running"]
    expected_keys = {"run_id", "trial_id", "agent_model", "user_model", "domain", "task_id", "trial",
                     "seed", "status", "reward", "termination_reason", "error_class", "error_side",
                     "error", "cost", "tokens", "started_at", "finished_at", "reward_info", "messages",
                     "domain_digest", "tau2_version", "tau2_data", "reviews", "agent", "error_at"}
    assert all(set(t) == expected_keys for t in trials)
    lost = trials[2]
    assert (lost["error_class"], lost["reward"], lost["tokens"]) == ("RateLimitError", None, {"input": 10, "output": 2})
    assert trials[0]["messages"][3] == {"step": 3, "role": "user", "content": "###STOP###", "tool_calls": None,
                                        "tool_call_id": None, "requestor": None, "error": False}
    assert trials[0]["seed"] == 626729 and trials[1]["seed"] == 373753
    assert "sk-live-SECRET" not in Path(jsonl).read_text()


def test_tau_bench_file_imports_with_the_papers_pass_hat(tmp_path):
    results = [tau_bench_result(t, trial, float((t + trial) % 3 != 0)) for t in range(5) for trial in range(3)]
    results.append(tau_bench_result(5, 0, 0.0, error="litellm.RateLimitError"))
    results += [tau_bench_result(5, trial, 1.0) for trial in (1, 2)]
    path = write_tau_bench_file(tmp_path, results)
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    imported = passhat("import", str(path), "--run-id", "v1", env=env)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "v1"
    [row] = report_json("v1", env)["results"]
    assert (row["agent_model"], row["user_model"], row["domain"]) == ("gpt-4o", "gpt-4o", "tau-bench-airline")
    assert (row["tasks"], row["trials"], row["evaluable"]) == (6, 18, 18)
    paper = tau_bench_pass_hat(results)
    assert row["pass_hat_k"] == pytest.approx({str(k): v for k, v in paper.items()})
    trials = passhat("trials", "v1", env=env)
    assert "v1/gpt-4o/tau-bench-airline/5/trial-0\tfailure\t0\tTauBenchError: litellm.RateLimitError" in trials.stdout
    shown = passhat("show", "v1/gpt-4o/tau-bench-airline/0/trial-1", env=env)
    assert shown.returncode == 0 and "calls get_reservation_details" in shown.stdout
    line = one_error_line(passhat("export", "v1", "--output-dir", str(tmp_path / "out"), env=env))
    assert "from a tau-bench v1 file" in line and "--format jsonl" in line
    jsonl = passhat("export", "v1", "--format", "jsonl", "--output-dir", str(tmp_path / "out"), env=env)
    assert jsonl.returncode == 0 and len(Path(jsonl.stdout.strip()).read_text().splitlines()) == 18


def _bad_input_cases(tmp_path: Path) -> dict[str, tuple[tuple[str, ...], str]]:
    """name -> (passhat arguments, a fragment of the one error line)."""
    files = tmp_path / "files"
    files.mkdir()
    tau2_file = json.loads(TAU2_MOCK_RESULTS.read_text())

    def put(name: str, content: str) -> str:
        (files / name).write_text(content)
        return str(files / name)

    unknown_task = json.loads(json.dumps(tau2_file))
    unknown_task["simulations"][2]["task_id"] = "no_such_task"
    mixed = [tau_bench_result(0, 0, 1.0), tau_bench_result(3, 0, 1.0, domain="retail")]
    return {
        "neither": (("import", put("neither.json", '{"results": [1, 2, 3]}')),
                    "is neither a tau2 results file"),
        "truncated": (("import", put("truncated.json", TAU2_MOCK_RESULTS.read_text()[:5000])),
                      "is truncated"),
        "unknown-task-tau2": (("import", put("unknown.json", json.dumps(unknown_task))),
                              "task id(s) 'no_such_task' are not tasks of the mock domain"),
        "unknown-task-v1": (("import", put("v1.json", json.dumps([tau_bench_result(0, 0, 1.0), tau_bench_result(77, 0, 0.0)]))),
                            "task id(s) 77 are not tasks of tau-bench's airline test split"),
        "mixed-domains": (("import", put("mixed.json", json.dumps(mixed))),
                          "mixes domains in one tau-bench file (airline: results 0; retail: results 1)"),
        "one-bad-of-two": (("import", str(TAU2_MOCK_RESULTS), put("bad2.json", "[1, 2")), "is truncated"),
        "running-run": (("export", "synthetic", "--output-dir", str(tmp_path / "never")),
                        "run synthetic is running (3/4 trials finished)"),
        "run-id-taken": (("import", str(TAU2_MOCK_RESULTS), "--run-id", "synthetic"),
                         "run synthetic already exists in the results store"),
        "bad-format": (("export", "synthetic", "--format", "csv", "--partial"), "--format must be tau2 or jsonl"),
    }


def test_bad_input_is_one_line_and_changes_nothing(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'results.db'}"
    _synthetic_run(db_url, agent_args={})
    env = cli_env(db_url, tmp_path)
    cases = _bad_input_cases(tmp_path)
    before = snapshot(db_url)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = dict(zip(cases, pool.map(lambda args: passhat(*args, env=env), [a for a, _ in cases.values()])))
    for name, (_, fragment) in cases.items():
        line = one_error_line(results[name])
        assert fragment in line, (name, line)
    assert snapshot(db_url) == before
    assert not (tmp_path / "never").exists()
