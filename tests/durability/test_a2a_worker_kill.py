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
import threading

from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.a2a_agents import A2AAgentServer, example, task_noted
from passhat.testing.harness import rewards, run_result, until
from passhat.testing.scripted_http import http_args

RUN_ID = "a2a-worker-kill"
HOLD_AT = (2, 4)  # the agent holds its answer to its 2nd and 4th messages: one kill each


def holding_agent(model_args: dict, gates: dict[int, threading.Event]):
    """The reference agent (Task replies) that waits, before answering its Nth message,
    until gates[N] is set (bounded: 120 s)."""
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

    return Holding("openai/oracle", args, reply_as="task")


async def test_a_worker_killed_mid_turn_never_makes_the_agent_see_a_message_twice(passhat_procs, model_server):
    ph, srv = passhat_procs, model_server
    gates = {n: threading.Event() for n in HOLD_AT}
    try:
        with A2AAgentServer(holding_agent(http_args(srv.url), gates)) as agent:
            started = ph.cli("run", "--domain", "airline", "--task", "4", "--agent", f"a2a:{agent.url}",
                             "--user-model", "scripted/oracle", "--trials", "1", "--run-id", RUN_ID, "--detach")
            assert started.returncode == 0, started.stderr
            store = Store(ph.db_url)
            trial_id = f"{RUN_ID}/a2a/airline/4/trial-0"
            client = await connect(ph.temporal_address)
            worker = ph.start_worker()
            await worker.ready()
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
