"""A run of a registered agent (`--agent notes_agent`) survives its worker being SIGKILLed
while agent turns are calling their model, and no completed turn runs twice.

As tests/durability/test_worker_kill.py, with passhat as real processes (`run --detach`,
`passhat worker`) on the scripted oracle over loopback HTTP. The agent comes from a
plugin (tests/plugin_modules/passhat_test_agents.py): the run is started with `--plugin`,
and the workers are `passhat worker --plugin`. The model holds only the agent's
requests when frozen, so at each crash every open trial waits on an agent turn's model
call. The notes agent writes its turn count (its recorded state) into every request, so
the server's requests say which turn of which trial each one was."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.harness import (
    TASKS,
    CallLedger,
    Passhat,
    hold_still,
    model_calls_of,
    model_steps,
    rewards,
    run_result,
    store_integrity,
    stopping_workers,
    trial_specs,
    until,
)
from passhat.testing.scripted_http import http_args, message_text, opening_request, request_key
from tests.helpers import PLUGIN_MODULES, TEST_AGENTS
from tests.plugins.notes_model import NotesOracle, is_notes_request, turn_of

RUN_ID = "agent-worker-kill"
KILLS = 2


# The durability tests' fixtures (conftest.py), with the notes agent's model, and
# processes that can import the plugin (its folder on PYTHONPATH, as a user puts it).
@pytest.fixture
def responder():
    return NotesOracle(["airline"], latency=0.3, hold_agent_only=True)


@pytest.fixture
def passhat_procs(fresh_temporal_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(PLUGIN_MODULES))
    yield from stopping_workers(
        Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)
    )


def turn_key(seed: int | None, opening: str, turn: int) -> tuple:
    return seed, opening, turn


def request_turn(body: dict) -> tuple:
    """(seed, the user's opening, turn) of a notes-agent request: its trial and turn."""
    opening = next(message_text(m.get("content")) for m in body["messages"] if m.get("role") == "user")
    return turn_key(body.get("seed"), opening, turn_of(body))


def recorded_turns(store: Store, run_id: str) -> dict[tuple, list[int]]:
    """Per (seed, opening), the turn counts of the states recorded, in step order."""
    out = {}
    for trial in store.trials(run_id):
        opening = opening_request(get_domain(trial.domain).task(trial.task_id))
        out[(trial.seed, opening)] = [
            s.agent_turn()["state"]["turns"] for s in store.steps(trial.trial_id) if s.agent_state_json
        ]
    return out


async def test_agent_turns_survive_worker_sigkill_without_running_twice(passhat_procs, model_server, responder):
    ph, srv = passhat_procs, model_server
    args = json.dumps(http_args(srv.url))
    started = ph.cli(
        "run", "--plugin", TEST_AGENTS, "--domain", "airline", *[a for t in TASKS for a in ("--task", t)],
        "--agent", "notes_agent", "--agent-model", "openai/oracle", "--user-model", "openai/oracle",
        "--trials", "2", "--concurrency", "4", "--agent-args", args, "--user-args", args,
        "--run-id", RUN_ID, "--detach",
    )
    assert started.returncode == 0, started.stderr
    store = Store(ph.db_url)
    config = store.get_run(RUN_ID).run_config()
    assert (config.agent, config.plugins) == ("notes_agent", [TEST_AGENTS])
    client = await connect(ph.temporal_address)
    total_calls = sum(model_calls_of(s) for s in trial_specs(config))
    ledger = CallLedger()
    held_turns: list[tuple] = []

    worker = ph.start_worker("--plugin", TEST_AGENTS)
    await worker.ready()
    for i in range(1, KILLS + 1):
        target = total_calls * i // (KILLS + 1)
        await until(lambda: srv.served >= target, f"{target} model calls served", 180)
        held = await hold_still(client, config, responder)
        assert held > 0, "the run ended before the crash point"
        in_flight = responder.held_keys()
        # every call in flight is an agent turn's (the user's are never held)
        held_bodies = [b for b in srv.requests if isinstance(b, dict) and request_key(b) in in_flight]
        assert held_bodies and all(is_notes_request(b) for b in held_bodies)
        held_turns += {request_turn(b) for b in held_bodies}
        recorded = model_steps(store, RUN_ID)
        worker.kill()
        ledger.crash(in_flight)
        assert model_steps(store, RUN_ID) == recorded  # the dead worker records nothing more
        responder.thaw()
        worker = ph.start_worker("--plugin", TEST_AGENTS)
        await worker.ready()

    await run_result(client, RUN_ID, timeout=300)
    assert store.get_run(RUN_ID).status == "completed"
    assert store_integrity(store, config) == []
    assert set(rewards(store, RUN_ID).values()) == {1.0}

    # The agent's requests, per trial and turn: each turn recorded was asked for once,
    # except the turns in flight at a crash, asked for once more by the new worker with
    # the identical request (it started again from the same recorded state).
    sent = Counter(request_turn(b) for b in srv.requests if isinstance(b, dict) and is_notes_request(b))
    turns = recorded_turns(store, RUN_ID)
    recorded_keys = {turn_key(seed, opening, n) for (seed, opening), ns in turns.items() for n in ns}
    assert set(sent) == recorded_keys
    assert len(held_turns) == len(set(held_turns)) >= KILLS
    assert {k: n for k, n in sent.items() if n != 1} == {k: 2 for k in held_turns}
    # The states continue across the crashes: turn counts 1, 2, 3, ... in every trial.
    assert all(ns == list(range(1, len(ns) + 1)) and len(ns) > 2 for ns in turns.values()), turns

    # And over all model calls (the user's too): only those in flight ran twice.
    stats = ledger.check(srv.requests, srv.served, model_steps(store, RUN_ID))
    assert stats["problems"] == []
    assert stats["re_executed"] == ledger.in_flight_total
