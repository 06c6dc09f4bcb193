"""What a worker is built with."""

from __future__ import annotations

import uuid

import temporalio.worker._worker as temporal_worker

from passhat.workflows.worker import build_id, build_worker
from passhat.contracts import ProviderLimit


async def test_workers_name_their_build_without_hashing_every_loaded_module(client, sqlite_store, monkeypatch):
    """temporalio's default build id hashes the bytecode of every module loaded (litellm,
    tau2, openai), reading each from disk, before a worker can poll. passhat's workers,
    the run's and a capped provider's, name their build themselves."""
    def refuse(*args, **kwargs):
        raise AssertionError("a worker computed temporalio's default build id")

    monkeypatch.setattr(temporal_worker, "load_default_build_id", refuse)
    queue = f"test-{uuid.uuid4().hex[:8]}"
    group = build_worker(client, sqlite_store, task_queue=queue,
                         provider_limits={"openai": ProviderLimit(per_minute=60)})
    async with group:
        pass
    assert len(group.workers) == 2
    assert build_id() == build_id() and build_id().startswith("passhat-")
