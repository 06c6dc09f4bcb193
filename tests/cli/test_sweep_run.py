"""`passhat run --config`, `--max-cost` and the size preview, as a user runs them: real
processes, a real Temporal server, and the scripted model over real HTTP (the loopback
server records every request, so the args each model's calls carried can be read)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time

from passhat.contracts import trial_seeds
from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import SCENARIO_TAG, TEST_KEY_ENV, ScriptedResponder, http_args, message_text
from passhat.testing.harness import passhat


def store_of(env: dict) -> Store:
    return Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")


def test_a_sweep_config_gives_each_model_its_args_and_options_override_it(env, tmp_path):
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        server = f'api_base = "{srv.url}/v1", api_key_env = "{TEST_KEY_ENV}"'
        sweep = tmp_path / "sweep.toml"
        sweep.write_text(f"""
domains = ["airline"]
trials = 3
seed = 11
concurrency = 4

[tasks]
airline = ["1", "2"]

[user]
model = "openai/oracle"
args = {{ {server}, temperature = 0.1 }}

[[agents]]
model = "openai/oracle"
args = {{ {server}, temperature = 0.25, max_tokens = 777 }}

[[agents]]
model = "openai/noisy-1"
args = {{ {server}, temperature = 0.5 }}
""")
        result = passhat("run", "--config", str(sweep), "--trials", "1", "--run-id", "swept",
                         "--output", "json", env=env)
        requests = srv.requests
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert {(r["agent_model"], r["tasks"], r["trials"], r["avg_reward"]) for r in body["results"]} == {
        ("openai/oracle", 2, 2, 1.0), ("openai/noisy-1", 2, 2, 1.0)}
    # The options given override the file; the rest comes from it.
    store = store_of(env)
    try:
        config = store.get_run("swept").run_config()
    finally:
        store.close()
    assert (config.trials, config.seed, config.concurrency, config.task_ids) == (1, 11, 4, {"airline": ["1", "2"]})
    # Before it started, the run said how big it is: 3 model calls a conversation, 1 per
    # gold action of the agent's and 2 per one of the user's, per agent model (on tau2
    # 26.3 tasks 1 and 2 have 2 and 4 of the agent's: 5 + 7, so 24 in all).
    straight = 2 * sum(3 + sum(1 if a.requestor == "assistant" else 2 for a in task.gold_actions)
                       for task in (get_domain("airline").task(i) for i in ("1", "2")))
    assert (f"run swept: 4 conversations (2 agent models x 2 tasks x 1 trial); about {straight} model calls, "
            "estimated as conversations that go straight to each task's gold actions") in result.stderr
    assert len(requests) == straight  # the scripted oracle goes straight there
    # Each model's calls carried its own args, and every call the seed from the file.
    seen = set()
    for request in requests:
        system = message_text(request["messages"][0]["content"])
        side = "user" if SCENARIO_TAG in system else request["model"]
        seen.add(side)
        expected = {"user": {"temperature": 0.1}, "oracle": {"temperature": 0.25, "max_tokens": 777},
                    "noisy-1": {"temperature": 0.5}}[side]
        assert {k: request.get(k) for k in ("temperature", "max_tokens") if k in request} == expected, side
        assert request["seed"] == trial_seeds(11, 1)[0]
    assert seen == {"user", "oracle", "noisy-1"}


PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


def test_a_budget_stops_the_run_and_resume_with_a_new_one_finishes_it(env):
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        args = json.dumps(http_args(srv.url, **PRICES))  # litellm prices the calls from these
        # One task at a time: the first one's cost reaches the budget, the second never starts.
        first = passhat("run", "--domain", "airline", "--task", "1", "--task", "2",
                        "--agent-model", "openai/oracle", "--user-model", "openai/oracle",
                        "--agent-args", args, "--user-args", args, "--concurrency", "1",
                        "--run-id", "capped", "--max-cost", "0.000001", env=env)
        assert first.returncode == 1, first.stderr
        assert "budget 1e-06 USD" in first.stderr  # the preview says so
        assert re.search(r"budget reached: run capped recorded [0-9.e-]+ USD of its 1e-06 USD budget and "
                         r"started no more conversations \(1 of 2 trials started\); "
                         r"`passhat resume capped --max-cost USD` continues it", first.stderr), first.stderr
        status = passhat("status", "capped", env=env)
        assert status.returncode == 0 and "budget_exhausted" in status.stdout and "1/2" in status.stdout, status.stdout

        resumed = passhat("resume", "capped", "--max-cost", "100", env=env)
        assert resumed.returncode == 0, resumed.stderr
    assert "budget reached" not in resumed.stderr
    status = passhat("status", "capped", env=env)
    assert "completed" in status.stdout and "2/2" in status.stdout, status.stdout
    store = store_of(env)
    try:
        assert store.get_run("capped").run_config().max_cost == 100.0
        assert [(t.task_id, t.status, t.attempts) for t in store.trials("capped")] == [("1", "scored", 1), ("2", "scored", 1)]
    finally:
        store.close()


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(args: list[str], env: dict, answer: str | None, timeout: float = 180) -> tuple[str, int]:
    """Run passhat with a pseudo-terminal as stdin, stdout and stderr, answering its
    question with `answer` when it asks one. (its output, its exit code)"""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "passhat.cli.main", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out, answered = b"", False
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no output for {timeout}s: {out[-2000:]!r}"
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            out += chunk
            if answer is not None and not answered and b"[y/N]" in out:
                os.write(master, answer.encode())
                answered = True
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return ANSI.sub("", out.decode(errors="replace")), proc.returncode


def test_a_big_run_asks_before_it_starts_on_a_terminal_only(fresh_temporal_server, tmp_path):
    """More than 1000 conversations: a terminal is asked (no: nothing is recorded), --yes
    is not, and neither is a process whose input is not a terminal. The runs that start
    are detached on a server of the test's own, where no worker runs them."""
    env = {**os.environ, "PASSHAT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "TEMPORAL_ADDRESS": fresh_temporal_server.address}
    env.pop("PASSHAT_DB_URL", None)
    big = ["run", "--domain", "airline", "--agent-model", "scripted/oracle", "--user-model",
           "scripted/oracle", "--trials", "21", "--detach"]  # 50 tasks x 21 = 1050 conversations

    out, code = on_terminal([*big, "--run-id", "declined"], env, answer="n\n")
    assert code == 1, out
    assert "run declined: 1,050 conversations" in out and "Start 1,050 conversations? [y/N]" in out
    assert "not started: nothing of run declined was recorded" in out

    out, code = on_terminal([*big, "--run-id", "confirmed", "--yes"], env, answer=None)
    assert code == 0, out
    assert "run confirmed: 1,050 conversations" in out and "[y/N]" not in out

    piped = subprocess.run([sys.executable, "-m", "passhat.cli.main", *big, "--run-id", "piped"],
                           env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert piped.returncode == 0, piped.stderr
    assert "run piped: 1,050 conversations" in piped.stderr and "[y/N]" not in piped.stderr

    store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
    try:
        assert store.get_run("declined") is None
        assert store.get_run("confirmed").total_trials == 1050 and store.get_run("piped") is not None
    finally:
        store.close()
