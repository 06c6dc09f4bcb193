"""A registered agent's model calls over real HTTP (the loopback fault server): usage
recorded with the turn, transient provider errors retried as a whole turn and never the
agent's failure, and resume continuing from the last recorded turn and state. The agent
is the test agents' plugin (tests/plugin_modules), which the runs load."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.testing import ActivityEnvironment

from passhat.activities.conversation import ConversationActivities
from passhat.contracts import StepRef
from passhat.messages import AGENT_GREETING, Message
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import until
from passhat.testing.scripted_http import http_args
from passhat.workflows.client import follow, start_run
from tests.plugins.notes_model import NotesOracle, is_notes_request, turn_of
from tests.helpers import TEST_AGENTS
from tests.runs import config, http_config, run_to_end, worker_for

oracle = NotesOracle(["airline"]).answer


def agent_requests(srv: FaultServer) -> list[dict]:
    return [b for b in srv.requests if is_notes_request(b)]


async def test_transient_errors_in_a_turn_are_retried_and_usage_recorded(client, sqlite_store):
    """Every third agent request fails with a 503: the turn is retried (the agent never
    sees the error) and the trial scores as an uninterrupted one would."""
    def faults(n: int, body: dict) -> str | None:
        return "503" if is_notes_request(body) and n % 3 == 1 else None

    with FaultServer(responder=oracle, faults=faults) as srv:
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"],
                          agent="notes_agent", plugins=[TEST_AGENTS])
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
            if is_notes_request(body):
                seen.append(body)
                return "401" if len(seen) == 3 else None
            return None

        srv.set_faults(third_agent_request_fails)
        cfg = http_config(srv, trials=1, task_ids=["1"], agent_models=["openai/oracle"],
                          agent="notes_agent", plugins=[TEST_AGENTS])
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
    assert turn_of(resumed[0]) == 3
    assert [turn_of(b) for b in resumed] == list(range(3, 3 + len(resumed)))
    states = [s.agent_turn()["state"]["turns"] for s in sqlite_store.steps(trial.trial_id) if s.agent_state_json]
    assert states == list(range(1, len(states) + 1)) and len(states) > 2


class SilentModel:
    """A chat-completions endpoint that never answers: it counts the connections made to
    it and notices when the client closes one."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = 0
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> "SilentModel":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:  # noqa: ANN002
        self._server.close()

    @property
    def url(self) -> str:
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while await reader.read(65536):  # the request, then nothing until the client hangs up
            pass
        self.closed += 1
        writer.close()


async def test_a_cancelled_turn_closes_its_model_call(sqlite_store):
    """The agent's thread cannot be stopped, but the model call it waits on can: a turn
    whose activity is cancelled (a cancelled run) closes the HTTP call in flight and
    records nothing."""
    async with SilentModel() as model:
        cfg = config(agent="notes_agent", plugins=[TEST_AGENTS], agent_models=["openai/silent"],
                     task_ids=["1"], trials=1, agent_args=json.dumps(http_args(model.url)))
        spec = cfg.units()[0].trial(0)
        sqlite_store.begin_trial(spec)
        for step, role, text in ((0, "assistant", AGENT_GREETING), (1, "user", "I need to change my flight.")):
            sqlite_store.record_step(spec.trial_id, spec.run_id, step, role, [Message(role=role, content=text)])
        env = ActivityEnvironment()
        turn = asyncio.ensure_future(
            env.run(ConversationActivities(sqlite_store).agent_turn, StepRef(trial=spec, step=2)))
        await until(lambda: model.connections, "the agent's model call", 120)
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 30)
        await until(lambda: model.closed, "the model call's connection closed", 30)
        assert model.connections == 1
    assert [s.step for s in sqlite_store.steps(spec.trial_id)] == [0, 1]
