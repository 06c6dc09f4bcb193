"""A run of an agent behind A2A survives its worker being SIGKILLed while agent turns
wait for the agent, and the agent never receives a message twice: the turn's task id is
noted (in the activity's heartbeat) before the wait, and the retry on the next worker
follows that task instead of sending the message again.

passhat runs as real processes (`run --detach`, `passhat worker`) on a Temporal server
of the test's own; the agent is the reference agent (examples/a2a_agent) answering with
Tasks, served in this process over loopback HTTP, in front of the scripted oracle over
HTTP. It holds its answer to chosen messages until the test has killed the worker."""

from __future__ import annotations

import asyncio
import json
import threading

from passhat.domains import a2a_protocol as protocol
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.a2a_agents import A2AAgentServer, example, task_noted
from passhat.testing.harness import rewards, run_result, until
from passhat.testing.scripted_http import http_args

RUN_ID = "a2a-worker-kill"
HOLD_AT = (2, 4, 6)  # the agent holds its answer to its 2nd, 4th and 6th messages: one kill each


def holding_agent(model_args: dict, gates: dict[int, threading.Event], reply_as: str = "task"):
    """The reference agent (Task replies, or plain Messages) that waits, before answering
    its Nth message, until gates[N] is set (bounded: 120 s)."""
    import os

    args = {**model_args, "api_key": os.environ[model_args["api_key_env"]]}
    args.pop("api_key_env")

    class Holding(example().ChatAgent):
        answered = 0

        async def answer(self, context_id: str, text: str) -> str:
            Holding.answered += 1
            gate = gates.get(Holding.answered)
            if gate is not None:
                await asyncio.to_thread(gate.wait, 120)
            return await super().answer(context_id, text)

    return Holding("openai/oracle", args, reply_as=reply_as)


async def started_run(ph, agent: A2AAgentServer, run_id: str):  # noqa: ANN001, ANN201 - harness objects
    """Task 4, one trial, against `agent`, started detached, and a worker to run it:
    (store, trial id, Temporal client, worker)."""
    started = ph.cli("run", "--domain", "airline", "--task", "4", "--agent", f"a2a:{agent.url}",
                     "--user-model", "scripted/oracle", "--trials", "1", "--run-id", run_id, "--detach")
    assert started.returncode == 0, started.stderr
    worker = ph.start_worker()
    await worker.ready()
    return Store(ph.db_url), f"{run_id}/a2a/airline/4/trial-0", await connect(ph.temporal_address), worker


async def test_a_worker_killed_mid_turn_never_makes_the_agent_see_a_message_twice(passhat_procs, model_server):
    ph, srv = passhat_procs, model_server
    gates = {n: threading.Event() for n in HOLD_AT}
    try:
        with A2AAgentServer(holding_agent(http_args(srv.url), gates)) as agent:
            store, trial_id, client, worker = await started_run(ph, agent, RUN_ID)
            for n in HOLD_AT:
                await until(lambda n=n: len(agent.received) >= n, f"the agent's message {n}", 120)
                await until(lambda: task_noted(client, trial_id), "the turn's task noted", 60)
                worker.kill()  # mid-turn: the agent has the message, its answer is held
                worker = ph.start_worker()
                await worker.ready()
                gates[n].set()
            await run_result(client, RUN_ID, timeout=300)
            received = agent.received
    finally:
        for gate in gates.values():
            gate.set()
    assert rewards(store, RUN_ID) == {trial_id: 1.0}
    turns = [s for s in store.steps(trial_id) if s.agent_state_json]
    assert len(received) == len(set(received)) == len(turns) > max(HOLD_AT)


async def test_a_plain_message_agent_killed_mid_turn_restarts_in_a_fresh_context(passhat_procs, model_server):
    """An agent that answers with plain Messages leaves no task to follow: the turn in
    flight when the worker died may or may not have reached it, so the trial restarts
    in a fresh A2A context, and the conversation scored is the one the agent saw."""
    ph, srv = passhat_procs, model_server
    run_id = "a2a-restart"
    gates = {2: threading.Event()}
    try:
        with A2AAgentServer(holding_agent(http_args(srv.url), gates, reply_as="message")) as agent:
            store, trial_id, client, worker = await started_run(ph, agent, run_id)
            await until(lambda: len(agent.received) >= 2, "the agent's second message", 120)
            worker.kill()  # mid-turn: the agent has the message, its answer is held
            worker = ph.start_worker()
            await worker.ready()
            gates[2].set()
            await run_result(client, run_id, timeout=300)
            histories = agent.counting.inner.histories
    finally:
        for gate in gates.values():
            gate.set()
    assert rewards(store, run_id) == {trial_id: 1.0}
    assert store.set_aside_ending(run_id, protocol.RESTART) == {trial_id: 1}
    turns = [s for s in store.steps(trial_id) if s.agent_state_json]
    contexts = {s.agent_turn()["a2a"]["context_id"] for s in turns}
    assert len(contexts) == 1 and len(histories) == 2  # the first context, then the fresh one
    seen = histories[contexts.pop()]  # the agent's view of the trial's final context
    assert [m["role"] for m in seen] == ["user", "assistant"] * len(turns)
    scored = [m for s in turns for m in s.message_list()]
    assert [protocol.parse_action(m["content"]).message(f"a2a-{s.step}") for m, s in zip(seen[1::2], turns)] == scored
    assert "User message:" in seen[0]["content"] and all("User message:" not in m["content"] for m in seen[2::2])
    shown = ph.cli("show", trial_id)
    assert "restarted 1 time in a fresh A2A context" in shown.stdout, shown.stdout
    assert json.loads(ph.cli("show", trial_id, "-o", "json").stdout)["a2a_restarts"] == 1
    report = ph.cli("report", run_id)
    assert "A2A restarts: 1 in 1 trial(s)" in report.stdout, report.stdout
    assert json.loads(ph.cli("report", run_id, "-o", "json").stdout)["runs"][0]["a2a_restarts"] == {trial_id: 1}
