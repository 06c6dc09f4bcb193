#!/usr/bin/env python
"""Durability bench: what killing the worker costs a real sweep.

Runs the same sweep twice, each on a Temporal dev server and a results database of its
own, under the same run id (so every trial has the same seed in both):

  1. uninterrupted: one `passhat worker` process from start to end;
  2. interrupted: the worker is SIGKILLed at N random moments (random numbers of model
     calls served) and a new `passhat worker` is started each time.

The models are scripted (passhat.testing.scripted_http) behind a loopback OpenAI-compatible
server with a fixed latency per call (passhat.testing.fault_server), so every model call is an
HTTP request that the server counts. Printed: trials recorded, duplicate trials and
steps, model calls re-executed (served - recorded), what each kill left stranded on the
dead worker, whether the rewards are identical, and both wall times.

    python bench/durability.py                      # 50 airline tasks x k=4, 5 kills
    python bench/durability.py --tasks 10 --kills 2 # quicker

Loopback only; every wait is bounded by --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


from temporalio.api.enums.v1 import PendingActivityState

from passhat.workflows.client import start_run
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.infra.temporal_server import EmbeddedServer
from passhat.testing.harness import (
    Passhat,
    describe_raw,
    model_calls_of,
    model_steps,
    sends_of,
    rewards,
    run_result,
    store_integrity,
    trial_specs,
    until,
    workflow_ids,
)
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import free_ports
from passhat.testing.scripted_http import ScriptedResponder, http_args, request_key


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50, help="airline tasks (the first N)")
    ap.add_argument("--trials", "-k", type=int, default=4, help="trials per task")
    ap.add_argument("--agent-model", default="noisy-0.7", help="scripted agent: oracle or noisy-P")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    ap.add_argument("--concurrency", type=int, default=16, help="conversations in flight")
    ap.add_argument("--kills", type=int, default=5, help="worker SIGKILLs in the interrupted sweep")
    ap.add_argument("--seed", type=int, default=1, help="seed of the kill moments")
    ap.add_argument("--heartbeat-timeout", type=float, default=None,
                    help="model-call heartbeat timeout (s); default: passhat's")
    ap.add_argument("--timeout", type=float, default=1800, help="bound on each sweep (s)")
    ap.add_argument("--run-id", default="bench-durability")
    return ap.parse_args(argv)


def distinct_calls(requests: list[dict]) -> int:
    return len({request_key(b) for b in requests if isinstance(b, dict)})


def sends_by_design(requests: list[dict], responder) -> int:  # noqa: ANN001
    """Requests the run sends when nothing crashes (an empty answer is asked for again)."""
    sends = sends_of(responder)
    return sum(sends(b) for b in {request_key(b): b for b in requests if isinstance(b, dict)}.values())


async def stranded(client, cfg) -> Counter:  # noqa: ANN001
    """Activities Temporal still believes started on a worker (the one just killed)."""
    found: Counter = Counter()
    for _, wf_id in workflow_ids(cfg):
        d = await describe_raw(client, wf_id)
        if d is None:
            continue
        for act in d.pending_activities:
            if act.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
                found[act.activity_type.name] += 1
    return found


async def sweep(args, label: str, home: Path, srv: FaultServer, responder, kills: int) -> dict:  # noqa: ANN001
    port, ui_port = free_ports(2)
    server = EmbeddedServer(home / "temporal", port=port, ui_port=ui_port)
    await server.start()
    ph = Passhat(home=home, temporal_address=server.address)
    worker = None
    try:
        store = Store(ph.db_url)
        client = await connect(server.address)
        model_args = json.dumps(http_args(srv.url))
        from passhat.domains.registry import get_domain

        cfg = build_config(RunOptions(
            run_id=args.run_id, domains=["airline"],
            task_ids=get_domain("airline").task_ids()[: args.tasks],
            agent_models=[f"openai/{args.agent_model}"], user_model="openai/oracle",
            trials=args.trials, concurrency=args.concurrency, agent_args=model_args,
            user_args=model_args, max_steps=100, max_errors=10, max_attempts=8,
        ))
        if args.heartbeat_timeout:
            cfg.retry.heartbeat_timeout_s = args.heartbeat_timeout
        estimate = sum(model_calls_of(s) for s in trial_specs(cfg))
        rng = random.Random(args.seed)
        targets = sorted(rng.randint(int(estimate * 0.05), int(estimate * 0.9)) for _ in range(kills))
        srv.reset()

        start = time.monotonic()
        deadline = start + args.timeout
        worker = ph.start_worker()
        await worker.ready()
        handle = await start_run(client, store, cfg)
        result = asyncio.ensure_future(handle.result())
        kill_log = []
        for target in targets:
            await until(lambda: result.done() or srv.served >= target,
                        f"{target} calls served", max(1.0, deadline - time.monotonic()), poll=0.01)
            if result.done():
                break
            worker.kill()
            at = time.monotonic() - start
            in_flight = distinct_calls(srv.requests) - model_steps(store, cfg.run_id)
            kill_log.append({"at_s": round(at, 1), "served": srv.served, "model_calls_in_flight": in_flight,
                             "stranded_activities": dict(await stranded(client, cfg))})
            worker = ph.start_worker()
            await worker.ready()
        await asyncio.wait_for(result, max(1.0, deadline - time.monotonic()))
        wall = time.monotonic() - start
        recorded = model_steps(store, cfg.run_id)
        trials = store.trials(cfg.run_id)
        integrity = store_integrity(store, cfg)
        return {
            "label": label,
            "wall_s": wall,
            "config": cfg,
            "trials": len(trials),
            "scored": sum(t.status == "scored" for t in trials),
            "integrity_problems": integrity,
            "served": srv.served,
            "received": srv.received,
            "distinct_calls": distinct_calls(srv.requests),
            "recorded_model_steps": recorded,
            "re_executed": srv.served - sends_by_design(srv.requests, responder),
            "kills": kill_log,
            "rewards": rewards(store, cfg.run_id),
            "summary": await run_result(client, cfg.run_id, 30),
        }
    finally:
        if worker is not None:
            worker.stop()
        server.stop()


def report(clean: dict, crashed: dict) -> None:
    cfg = crashed["config"]
    n_trials = len(trial_specs(cfg))
    print(f"sweep: {len(cfg.task_ids['airline'])} airline tasks x k={cfg.trials} = {n_trials} trials, "
          f"agent {cfg.agent_models[0]}, user {cfg.user_model}, concurrency {cfg.concurrency}, "
          f"model-call heartbeat timeout {cfg.retry.heartbeat_timeout_s:g}s")
    for r in (clean, crashed):
        print(f"\n[{r['label']}]")
        print(f"  wall time                      {r['wall_s']:8.1f} s")
        print(f"  trials recorded (scored)       {r['trials']:8d} ({r['scored']})")
        dup = [p for p in r["integrity_problems"] if "recorded" in p and "times" in p]
        print(f"  duplicate trial/step rows      {len(dup):8d}")
        print(f"  other integrity problems       {len(r['integrity_problems']) - len(dup):8d}")
        print(f"  model calls served             {r['served']:8d}")
        print(f"  distinct model calls           {r['distinct_calls']:8d}")
        print(f"  model steps recorded           {r['recorded_model_steps']:8d}")
        print(f"  re-executed (served-recorded)  {r['re_executed']:8d}")
        if r["kills"]:
            total = sum(k["model_calls_in_flight"] for k in r["kills"])
            print(f"  worker kills                   {len(r['kills']):8d}")
            print(f"  model calls in flight at kills {total:8d}  (received, unrecorded; summed over kills)")
            for i, k in enumerate(r["kills"], 1):
                print(f"    kill {i}: t={k['at_s']:6.1f}s served={k['served']:5d} in flight={k['model_calls_in_flight']:3d} "
                      f"stranded activities={k['stranded_activities']}")
        for res in r["summary"]["results"]:
            curve = " ".join(f"pass^{j}={v:.3f}" for j, v in sorted(res["pass_hat_k"].items()))
            print(f"  {curve}")
    mismatched = [t for t, v in clean["rewards"].items() if crashed["rewards"].get(t) != v]
    print("\n[comparison]")
    print(f"  rewards identical              {'yes' if not mismatched and len(clean['rewards']) == n_trials else 'NO'}"
          f" ({len(mismatched)} of {len(clean['rewards'])} differ)")
    print(f"  wall time, interrupted / clean {crashed['wall_s'] / clean['wall_s']:8.2f}x "
          f"(+{crashed['wall_s'] - clean['wall_s']:.1f} s)")


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    responder = ScriptedResponder(["airline"], latency=args.latency)
    with tempfile.TemporaryDirectory(prefix="passhat-bench-") as tmp, FaultServer(responder=responder) as srv:
        clean = await sweep(args, "uninterrupted", Path(tmp) / "clean", srv, responder, kills=0)
        crashed = await sweep(args, f"{args.kills} worker SIGKILLs", Path(tmp) / "crashed", srv, responder, kills=args.kills)
    report(clean, crashed)
    ok = (not clean["integrity_problems"] and not crashed["integrity_problems"]
          and clean["rewards"] == crashed["rewards"]
          and crashed["re_executed"] <= sum(k["model_calls_in_flight"] for k in crashed["kills"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
