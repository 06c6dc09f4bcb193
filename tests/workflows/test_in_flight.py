"""The run keeps `--concurrency` conversations in flight (workflows/window.py), counted at
a real loopback HTTP model that holds every call until the test releases it, one call at
a time, oldest first. A conversation waits on at most one call, so while every call is
held the calls open at the server are the conversations in flight. Nothing is timed:
each step waits for a state with a deadline."""

from __future__ import annotations

import asyncio
import json
import threading

from temporalio.client import Client

from passhat.outcomes import TRIAL_RUNNING
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import until
from passhat.testing.scripted_http import ScriptedResponder, http_args
from passhat.workflows.client import follow, start_run
from passhat.workflows.run import RunRequest, RunWorkflow
from tests.runs import config, worker_for

MODEL = "openai/fixed-3"  # every conversation: the user's request, the agent's reply, the stop


class OneCallAtATime:
    """Holds each model call until release_oldest(); remembers the most open at once."""

    def __init__(self) -> None:
        self.scripted = ScriptedResponder(["airline"])
        self.lock = threading.Lock()
        self.open: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.most = 0

    async def __call__(self, body: dict) -> dict:
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self.lock:
            self.open.append(entry)
            self.most = max(self.most, len(self.open))
        try:
            await asyncio.wait_for(entry[1].wait(), 300)  # bounded, whatever the test does
        finally:
            with self.lock:
                if entry in self.open:
                    self.open.remove(entry)
        return self.scripted.answer(body)

    @property
    def held(self) -> int:
        with self.lock:
            return len(self.open)

    def release_oldest(self) -> None:
        with self.lock:
            loop, gate = self.open.pop(0)
        loop.call_soon_threadsafe(gate.set)


def held_config(srv: FaultServer, **overrides):  # noqa: ANN001, ANN201
    args = json.dumps(http_args(srv.url))
    return config(agent_models=[MODEL], user_model=MODEL, agent_args=args, user_args=args, **overrides)


async def release_to_the_end(model: OneCallAtATime, store, cfg, concurrency: int) -> int:  # noqa: ANN001
    """Release the calls one by one until every conversation has ended. Before each
    release, the conversations in flight are exactly min(concurrency, those not ended):
    a slot freed by a trial's end is taken by the next trial, whatever its task. Returns
    how many releases that took."""
    total = cfg.total_trials()

    def ended() -> int:
        return sum(t.status != TRIAL_RUNNING for t in store.trials(cfg.run_id))

    releases = 0
    while ended() < total:
        await until(lambda: model.held == min(concurrency, total - ended()),
                    "as many conversations in flight as allowed, or as are left", timeout=120)
        assert model.most <= concurrency, model.most
        # store.trials: never more conversations open than allowed either.
        assert sum(t.status == TRIAL_RUNNING for t in store.trials(cfg.run_id)) <= concurrency
        if model.held:
            model.release_oldest()
            releases += 1
    return releases


async def test_a_slot_is_refilled_as_soon_as_a_trial_ends(client: Client, sqlite_store):
    """k=3 and concurrency 4: four conversations in flight, never five, a fourth one of
    the next task beside the first task's three, and a new one as each ends, while its
    task's other trials are still held."""
    model = OneCallAtATime()
    with FaultServer(responder=model) as srv:
        cfg = held_config(srv, task_ids=["1", "2", "8"], trials=3, concurrency=4)
        async with worker_for(client, sqlite_store) as queue:
            handle = await start_run(client, sqlite_store, cfg, task_queue=queue)
            releases = await release_to_the_end(model, sqlite_store, cfg, concurrency=4)
            summary = await follow(handle, sqlite_store, cfg.run_id, lambda *a: None, poll_s=0.2)
    assert model.most == 4
    assert releases == 9 * 3  # every call was held, and each released once
    [row] = summary.results
    assert row.tasks == 3 and row.evaluable == 9
    assert sorted((r.task_id, r.trials) for r in sqlite_store.task_results(cfg.run_id)) == [
        ("1", 3), ("2", 3), ("8", 3)]


async def test_no_drain_at_continue_as_new(client: Client, sqlite_store):
    """Two trials per execution: each execution continues as new while the conversations
    it started are still waiting on their calls, the next one takes them over (their
    ends come as signals), and every task's pass^k is recorded once its last trial ends,
    whichever execution saw the others."""
    model = OneCallAtATime()
    with FaultServer(responder=model) as srv:
        cfg = held_config(srv, task_ids=["1", "2", "8"], trials=2, concurrency=3)
        sqlite_store.create_run(cfg, cfg.total_trials())
        async with worker_for(client, sqlite_store) as queue:
            handle = await client.start_workflow(
                RunWorkflow.run, RunRequest(config=cfg, trial_batch=2), id=cfg.run_id, task_queue=queue
            )

            async def continued() -> bool:
                desc = await client.get_workflow_handle(cfg.run_id).describe()
                return desc.run_id != handle.first_execution_run_id

            # The first three conversations wait on their first call, none released: the
            # first execution has already handed them to the next.
            await until(lambda: model.held == 3, "three conversations in flight", timeout=120)
            await until(continued, "the run to continue as new with its trials in flight", timeout=120)
            assert model.held == 3
            await release_to_the_end(model, sqlite_store, cfg, concurrency=3)
            summary = await follow(handle, sqlite_store, cfg.run_id, lambda *a: None, poll_s=0.2)
    assert model.most == 3
    [row] = summary.results
    assert row.tasks == 3 and row.evaluable == 6
    assert sorted((r.task_id, r.trials) for r in sqlite_store.task_results(cfg.run_id)) == [
        ("1", 2), ("2", 2), ("8", 2)]
