"""Helpers for tests that run real workflows: a run configuration with test defaults, a
worker on a task queue of the test's own, and running a run to its end."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager

from passhat.workflows.client import follow, start_run
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions
from passhat.workflows.worker import build_worker
from passhat.contracts import RunSummary


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
