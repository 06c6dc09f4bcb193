#!/usr/bin/env python
"""The cost of the A2A hop: passhat's CPU and throughput on the same conversations with
the agent reached directly (the scripted oracle as the agent model) and behind A2A (the
reference agent, examples/a2a_agent, forwarding to the same scripted oracle).

The scripted model runs in a process of its own (bench/throughput.py's model server), the
agent in another, the Temporal server in a third: none of their CPU is passhat's. passhat
runs here, one in-process worker on an embedded dev server, and its CPU is this
process's (time.process_time). For each path it prints conversations per hour, passhat's
CPU per conversation and per agent turn, and the agent process's CPU; then the ratio of
passhat's CPU per agent turn, A2A over direct (issue 44 asks at most 1.5). Figures are
printed, never asserted; on a shared machine compare runs made close together.

    python bench/a2a_hop.py                               # airline tasks 0-9, k=2, c=4
    python bench/a2a_hop.py --tasks 20 --trials 2 --concurrency 8 --latency 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent


def _throughput():
    """bench/throughput.py, for its model server and process CPU reading."""
    spec = importlib.util.spec_from_file_location("passhat_bench_throughput", ROOT / "bench" / "throughput.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class AgentProcess:
    """The reference A2A agent in a process of its own, its model the scripted one."""

    def __init__(self, model_url: str, port: int, log: Path):
        from passhat.testing.a2a_agents import wait_for_card
        from passhat.testing.scripted_http import TEST_KEY_ENV, http_args

        http_args(model_url)  # sets the loopback key variable the agent reads
        self.url = f"http://127.0.0.1:{port}"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "examples" / "a2a_agent" / "agent.py"), "--port", str(port),
                 "--model", "openai/oracle", "--api-base", f"{model_url}/v1", "--api-key-env", TEST_KEY_ENV],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for_card(self.url, self.proc, log, timeout=120)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


async def measure(client, store, queue: str, options: dict, label: str) -> dict:  # noqa: ANN001
    from passhat.cli.run_config import build_config
    from passhat.cli.run_options import RunOptions
    from passhat.workflows.client import follow, start_run

    cfg = build_config(RunOptions(run_id=f"hop-{label}-{uuid.uuid4().hex[:6]}", domains=["airline"], **options))
    cpu, wall = time.process_time(), time.monotonic()
    handle = await start_run(client, store, cfg, task_queue=queue)
    await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.5)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    trials = store.trials(cfg.run_id)
    turns = sum(1 for t in trials for s in store.steps(t.trial_id) if s.role == "assistant" and s.step > 0)
    return {"conversations": len(trials), "rewarded": sum(t.reward == 1.0 for t in trials), "turns": turns,
            "wall": wall, "cpu": cpu}


async def main(args: argparse.Namespace) -> None:
    from passhat.infra.store import Store
    from passhat.infra.temporal_client import connect
    from passhat.infra.temporal_server import EmbeddedServer
    from passhat.testing.harness import free_port
    from passhat.testing.scripted_http import http_args
    from passhat.workflows.worker import build_worker

    throughput = _throughput()
    tasks = [str(t) for t in range(args.tasks)]
    with tempfile.TemporaryDirectory(prefix="passhat-a2a-hop-") as home:
        home = Path(home)
        model = throughput.ModelServer("airline", args.latency, home / "model.log")
        agent = AgentProcess(model.url, free_port(), home / "agent.log")
        server = EmbeddedServer(home / "temporal", port=free_port(), ui_port=free_port())
        await server.start()
        try:
            client = await connect(server.address)
            store = Store(f"sqlite:///{home}/results.db")
            common = {"user_model": "openai/oracle", "user_args": http_args(model.url), "trials": args.trials,
                      "concurrency": args.concurrency}
            paths = {
                "direct": {"agent_models": ["openai/oracle"], "agent_args": http_args(model.url)},
                "a2a": {"agent": f"a2a:{agent.url}"},
            }
            queue = f"bench-a2a-hop-{uuid.uuid4().hex[:6]}"
            results: dict[str, list[dict]] = {name: [] for name in paths}
            async with build_worker(client, store, task_queue=queue):
                for name, path in paths.items():  # warm-up: imports, caches, the agent's first calls
                    await measure(client, store, queue, {**common, **path, "task_ids": tasks[:2], "trials": 1}, name)
                for _ in range(args.repeat):
                    for name, path in paths.items():
                        agent_cpu = throughput.cpu_of(agent.proc.pid)
                        result = await measure(client, store, queue, {**common, **path, "task_ids": tasks}, name)
                        result["agent_cpu"] = throughput.cpu_of(agent.proc.pid) - agent_cpu
                        results[name].append(result)
                        print(f"  {name:6}: {result['conversations']} conversations ({result['rewarded']} reward 1) "
                              f"in {result['wall']:.1f} s, passhat CPU {result['cpu']:.2f} s, "
                              f"agent process CPU {result['agent_cpu']:.2f} s", flush=True)
        finally:
            server.stop()
            agent.stop()
            model.stop()
    print(f"\nairline tasks 0-{args.tasks - 1} x {args.trials} trials, concurrency {args.concurrency}, "
          f"model latency {args.latency} s; median of {args.repeat} (passhat's own process only)")
    per_turn = {}
    for name, runs in results.items():
        runs.sort(key=lambda r: r["cpu"] / max(r["turns"], 1))
        r = runs[len(runs) // 2]
        per_turn[name] = r["cpu"] / max(r["turns"], 1)
        print(f"{name:6}: {r['conversations'] / r['wall'] * 3600:8.0f} conversations/hour, "
              f"CPU {r['cpu'] / r['conversations'] * 1000:6.1f} ms per conversation, "
              f"{per_turn[name] * 1000:6.1f} ms per agent turn ({r['turns']} agent turns); "
              f"agent process {r['agent_cpu'] / max(r['turns'], 1) * 1000:.1f} ms per agent turn")
    print(f"A2A / direct, passhat CPU per agent turn: {per_turn['a2a'] / per_turn['direct']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10, help="airline tasks 0..N-1")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the model takes per answer")
    parser.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
