"""Helpers for tests that run real workflows: a run configuration with test defaults, a
worker on a task queue of the test's own, running a run to its end, and cancelling one
midway."""

from __future__ import annotations

import asyncio
import threading
import uuid
from contextlib import asynccontextmanager

from passhat.workflows.client import cancel_run, follow, start_run
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions
from passhat.workflows.worker import build_worker
from passhat.outcomes import RunSummary
from passhat.domains.registry import get_domain
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import until
from passhat.testing.scripted_http import ScriptedResponder, message_text, opening_request


def config(limit: int | None = None, **overrides):
    args = dict(
        run_id=f"t-{uuid.uuid4().hex[:8]}", domains=["airline"],
        agent_models=["scripted/oracle"], user_model="scripted/oracle", concurrency=16,
    )
    args.update(overrides)
    return build_config(RunOptions(**args), limit=limit)


@asynccontextmanager
async def worker_for(client, store):
    queue = f"test-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, store, task_queue=queue):
        yield queue


async def run_to_end(client, store, cfg) -> RunSummary:
    async with worker_for(client, store) as queue:
        handle = await start_run(client, store, cfg, task_queue=queue)
        return await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)


def http_config(srv, **overrides):
    return config(**{
        "agent_models": ["openai/agent"], "task_ids": ["0"], "trials": 2,
        "agent_args": f'{{"api_base": "{srv.url}/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}}', **overrides,
    })


class HoldTask:
    """An oracle agent over HTTP that answers one task's requests only once released.
    Trials of the other tasks finish while the held task's trials wait mid-conversation,
    so a cancel always finds both finished and unfinished trials, however busy the
    machine is."""

    def __init__(self, held_task: str):
        self.scripted = ScriptedResponder(["airline"])
        self.opening = opening_request(get_domain("airline").task(held_task))
        self.release = threading.Event()
        self.waiting = 0

    async def __call__(self, body: dict) -> dict:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        if users and message_text(users[0].get("content")) == self.opening:
            self.waiting += 1
            await asyncio.to_thread(self.release.wait, 300)
            self.waiting -= 1
        return self.scripted.answer(body)


async def cancel_midway(client, store, srv: FaultServer, agent: HoldTask, queue: str):  # noqa: ANN001, ANN201
    """Start a run of tasks 0 and 1 (k=2) on `queue` and cancel it once task 0's two
    trials are scored and task 1's two wait on their first agent call; its config."""
    cfg = http_config(srv, task_ids=["0", "1"], agent_models=["openai/oracle"])
    await start_run(client, store, cfg, task_queue=queue)
    await until(lambda: store.run_progress(cfg.run_id).done == 2 and agent.waiting == 2,
                timeout=120, what="task 0 scored while task 1 waits")
    assert await cancel_run(client, store, cfg.run_id) == "cancelled"
    return cfg
