"""A run survives its worker being SIGKILLed again and again.

The run is started with `passhat run --detach` and executed by `passhat worker`
processes; the models are scripted/oracle and scripted/noisy-0.7 served over real HTTP
(passhat.testing.scripted_http), so every model call is a request the fault server counts.

Each crash is placed, by condition, where it costs the most: the model is frozen until
every open conversation waits on a model call (checked through Temporal's describe and
the server's held requests), then the worker is SIGKILLed with those calls in flight.
A fresh worker picks the run up again once Temporal times the dead attempts out.
"""

from __future__ import annotations

import json

from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.harness import (
    TASKS,
    CallLedger,
    sends_of,
    expected_rewards,
    hold_still,
    model_calls_of,
    model_steps,
    rewards,
    run_result,
    store_integrity,
    trial_specs,
    until,
)
from passhat.testing.scripted_http import http_args
from tests.helpers import needs_agent_errors

RUN_ID = "durability-worker-kill"
KILLS = 3


@needs_agent_errors
async def test_run_survives_repeated_worker_sigkill(passhat_procs, model_server, responder):
    ph, srv = passhat_procs, model_server
    args = json.dumps(http_args(srv.url))
    started = ph.cli(
        "run", "--domain", "airline", *[a for t in TASKS for a in ("--task", t)],
        # One agent model: with tau2's seeds (one per trial index), trials of two agent
        # models facing one user model would send the user identical first requests,
        # and the ledger tells calls apart by their request.
        "--agent-model", "openai/noisy-0.7",
        "--user-model", "openai/oracle", "--trials", "2", "--concurrency", "4",
        "--agent-args", args, "--user-args", args, "--run-id", RUN_ID, "--detach",
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == RUN_ID

    store = Store(ph.db_url)
    config = store.get_run(RUN_ID).run_config()
    client = await connect(ph.temporal_address)
    specs = trial_specs(config)
    total_calls = sum(model_calls_of(s) for s in specs)
    ledger = CallLedger()

    worker = ph.start_worker()
    await worker.ready()
    pids = [worker.pid]
    for i in range(1, KILLS + 1):
        # Crash points spread over the run: after a quarter, half, three quarters of it.
        target = total_calls * i // (KILLS + 1)
        await until(lambda: srv.served >= target, f"{target} model calls served", 180)
        held = await hold_still(client, config, responder)
        assert held > 0, "the run ended before the crash point"
        in_flight = responder.held_keys()
        recorded = model_steps(store, RUN_ID)
        worker.kill()
        ledger.crash(in_flight)
        # Nothing of the dead worker records anything any more: what it had in flight
        # is exactly what was received and not recorded.
        assert model_steps(store, RUN_ID) == recorded
        responder.thaw()
        worker = ph.start_worker()
        await worker.ready()
        pids.append(worker.pid)

    summary = await run_result(client, RUN_ID, timeout=300)
    assert len(set(pids)) == KILLS + 1 and ledger.in_flight_total >= KILLS

    # The run completed, each trial and each step recorded exactly once.
    assert store.get_run(RUN_ID).status == "completed"
    assert store_integrity(store, config) == []
    assert {r["agent_model"] for r in summary["results"]} == set(config.agent_models)
    # The rewards an uninterrupted run with these seeds gets: oracle 1.0, noisy-0.7 the
    # seeded draw of passhat.infra.scripted_provider (computed, not taken from another run).
    want = expected_rewards(config)
    assert rewards(store, RUN_ID) == want
    assert 0 < sum(want.values()) < len(want)  # both outcomes occur: the check has teeth

    # Only calls in flight at a crash ran twice; every distinct call is one step.
    stats = ledger.check(srv.requests, srv.served, model_steps(store, RUN_ID), sends_of(responder))
    assert stats["problems"] == []
    assert stats["sends_by_design"] == total_calls
    # Every call in flight at a crash was lost with the worker and paid for again.
    assert stats["re_executed"] >= ledger.in_flight_total
    assert srv.counts == {"ok": srv.received}
