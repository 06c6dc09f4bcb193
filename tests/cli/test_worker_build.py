"""What a worker is built with."""

from __future__ import annotations

import uuid
from pathlib import Path

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


def test_build_id_is_the_same_in_every_process_and_names_the_workflow_code(tmp_path, monkeypatch):
    """Workers of one checkout, in any process, report one build id, and a change to the
    workflow code gives another: the id identifies the code a history must replay on."""
    import subprocess
    import sys

    import passhat.workflows

    here = build_id()
    assert here.startswith("passhat-")
    probe = "from passhat.workflows.worker import build_id; print(build_id())"
    others = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True).stdout.strip() for _ in range(2)}
    assert others == {here}

    changed = tmp_path / "workflows"
    changed.mkdir()
    for folder in passhat.workflows.__path__:
        for source in Path(folder).glob("*.py"):
            (changed / source.name).write_bytes(source.read_bytes())
    trial = changed / "trial.py"
    trial.write_text(trial.read_text() + "\n# a change to the workflow code\n")
    monkeypatch.setattr(passhat.workflows, "__path__", [str(changed)])
    assert build_id() != here
