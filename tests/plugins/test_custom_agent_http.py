"""A registered agent's model calls over real HTTP (the loopback fault server): usage
recorded with the turn, transient provider errors retried as a whole turn and never the
agent's failure, and resume continuing from the last recorded turn and state."""

from __future__ import annotations

import json
import re

from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder
from passhat.workflows.client import follow, start_run
from tests.runs import http_config, run_to_end, worker_for

SCRIPTED = ScriptedResponder(["airline"])


def oracle(body: dict) -> dict:
    """The scripted oracle, which knows tau2's prompt, answering the notes agent (whose
    prompt is tau2's plus its notes): the notes are left out of what it reads."""
    first = body["messages"][0]
    content = re.sub(r"\n<notes>.*</notes>", "", first.get("content") or "", flags=re.S)
    return SCRIPTED.answer({**body, "messages": [{**first, "content": content}, *body["messages"][1:]]})


def agent_requests(srv: FaultServer) -> list[dict]:
    return [b for b in srv.requests if "<notes>" in json.dumps(b.get("messages", [])[:1])]


def turns_of(body: dict) -> int:
    system = body["messages"][0]["content"]
    return int(system.split("<notes>turn ", 1)[1].split(";", 1)[0])


async def test_transient_errors_in_a_turn_are_retried_and_usage_recorded(client, sqlite_store):
    """Every third agent request fails with a 503: the turn is retried (the agent never
    sees the error) and the trial scores as an uninterrupted one would."""
    def faults(n: int, body: dict) -> str | None:
        return "503" if "<notes>" in json.dumps(body["messages"][:1]) and n % 3 == 1 else None

    with FaultServer(responder=oracle, faults=faults) as srv:
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"], agent="notes_agent")
        cfg.retry.initial_interval_s = 0.05
        cfg.retry.max_interval_s = 0.1
        await run_to_end(client, sqlite_store, cfg)
        failed = srv.counts.get("503", 0)
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward, trial.error_class) == ("scored", 1.0, None)
    assert failed >= 1
    turns = [s for s in sqlite_store.steps(trial.trial_id) if s.agent_state_json]
    assert all(s.input_tokens > 0 and s.output_tokens > 0 and s.model for s in turns)
    assert trial.input_tokens == sum(s.input_tokens for s in sqlite_store.steps(trial.trial_id))
    # each retried turn started again from the recorded state: turn counts 1, 2, 3, ...
    assert [s.agent_turn()["state"]["turns"] for s in turns] == list(range(1, len(turns) + 1))


async def test_resume_continues_from_the_last_recorded_turn_and_state(client, sqlite_store):
    """The agent's third request fails for good (401): the trial is not evaluable with
    two turns recorded. Resumed, the agent's next request says turn 3, and no recorded
    turn is asked for again."""
    with FaultServer(responder=oracle) as srv:
        seen = []

        def third_agent_request_fails(n: int, body: dict) -> str | None:
            if "<notes>" in json.dumps(body["messages"][:1]):
                seen.append(body)
                return "401" if len(seen) == 3 else None
            return None

        srv.set_faults(third_agent_request_fails)
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"], agent="notes_agent")
        await run_to_end(client, sqlite_store, cfg)
        [trial] = sqlite_store.trials(cfg.run_id)
        assert trial.status == "not_evaluable"
        before = [s.agent_turn()["state"]["turns"] for s in sqlite_store.steps(trial.trial_id) if s.agent_state_json]
        assert before == [1, 2]
        sent_before = len(agent_requests(srv))

        srv.set_faults(None)
        async with worker_for(client, sqlite_store) as queue:
            handle = await start_run(client, sqlite_store, cfg, task_queue=queue, resume=True)
            await follow(handle, sqlite_store, cfg.run_id, lambda *a: None, poll_s=0.2)
        resumed = agent_requests(srv)[sent_before:]
    [trial] = sqlite_store.trials(cfg.run_id)
    assert (trial.status, trial.reward) == ("scored", 1.0)
    assert turns_of(resumed[0]) == 3
    assert [turns_of(b) for b in resumed] == list(range(3, 3 + len(resumed)))
    states = [s.agent_turn()["state"]["turns"] for s in sqlite_store.steps(trial.trial_id) if s.agent_state_json]
    assert states == list(range(1, len(states) + 1)) and len(states) > 2
