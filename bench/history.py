"""Prints the Temporal history (events and bytes) of scripted-oracle trials of different
lengths, on a throwaway embedded dev server.

    python bench/history.py [--pair airline:17 --pair retail:4 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from pathlib import Path


from passhat.workflows.client import follow, start_run
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.infra.temporal_server import EmbeddedServer
from passhat.workflows.worker import build_worker
from passhat.testing.harness import free_port


async def main(pairs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as home:
        server = EmbeddedServer(Path(home), port=free_port(), ui_port=free_port())
        await server.start()
        try:
            client = await connect(server.address)
            store = Store(f"sqlite:///{home}/results.db")
            print(f"{'domain':8} {'task':>5} {'steps':>6} {'events':>7} {'bytes':>8} {'bytes/step':>10}")
            async with build_worker(client, store, task_queue="bench-history"):
                for pair in pairs:
                    domain, task = pair.split(":")
                    cfg = build_config(RunOptions(
                        run_id=f"hist-{uuid.uuid4().hex[:6]}", domains=[domain], task_ids=[task],
                        agent_models=["scripted/oracle"], user_model="scripted/oracle", trials=1,
                        concurrency=1, max_steps=100, max_errors=10, max_attempts=8,
                    ))
                    handle = await start_run(client, store, cfg, task_queue="bench-history")
                    await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
                    [trial] = store.trials(cfg.run_id)
                    history = await client.get_workflow_handle(trial.trial_id).fetch_history()
                    steps = len(store.steps(trial.trial_id))
                    size = sum(e.ByteSize() for e in history.events)
                    print(f"{domain:8} {task:>5} {steps:>6} {len(history.events):>7} {size:>8} {size / steps:>10.0f}")
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", action="append", help="domain:task (repeat)")
    args = parser.parse_args()
    asyncio.run(main(args.pair or ["airline:17", "retail:4", "airline:44"]))
