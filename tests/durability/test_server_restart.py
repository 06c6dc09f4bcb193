"""A run survives its Temporal server being SIGKILLed and restarted on the same database.

The dev server (fresh_temporal_server: a real `temporal server start-dev` on a SQLite
file) is killed while every open conversation waits on a model call, and started again
with EmbeddedServer.start on the same home and ports. The worker process is left alone.

What happens, as observed with temporalio 1.35 and the 1.9.1 dev server, and asserted:
  * the worker survives the outage and reconnects by itself (same process throughout);
  * the activities it had running finish during the outage and record their steps;
    reporting their completion is retried by the SDK for several seconds (log:
    "gRPC call respond_activity_task_completed retried N times"), so after a short outage
    the completion gets through and the activity counts as done on its first attempt;
  * after a longer outage the SDK gives up ("Network error while completing activity"),
    the server times the attempt out on its heartbeat and runs it again; the retry finds
    the step in the results store and returns it without calling the model.
"""

from __future__ import annotations

import json
import os
import signal

from temporalio.api.enums.v1 import EventType

from passhat.infra.logs import LOG_NAME
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

RUN_ID = "durability-server-restart"
GAVE_UP = "Network error while completing activity"


def diagnostics(ph) -> str:  # noqa: ANN001 - a Passhat
    """What passhat processes logged (the SDK's warnings go to the log file, not the
    console)."""
    try:
        return (ph.home / "logs" / LOG_NAME).read_text(errors="replace")
    except OSError:
        return ""


@needs_agent_errors
async def test_run_survives_server_sigkill_and_restart(fresh_temporal_server, passhat_procs, model_server, responder):
    server, ph, srv = fresh_temporal_server, passhat_procs, model_server
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
    store = Store(ph.db_url)
    config = store.get_run(RUN_ID).run_config()
    client = await connect(server.address)
    total_calls = sum(model_calls_of(s) for s in trial_specs(config))
    ledger = CallLedger()
    address, db = server.address, server.db_path

    worker = ph.start_worker()
    await worker.ready()
    dropped_completions = 0
    for outage in ("short", "long"):
        target = total_calls * (1 if outage == "short" else 2) // 3
        await until(lambda: srv.served >= target, f"{target} model calls served", 180)
        held = await hold_still(client, config, responder)
        assert held > 0
        in_flight, recorded = responder.held_keys(), model_steps(store, RUN_ID)
        log_offset = len(diagnostics(ph))

        pid = server.status().pid
        os.kill(pid, signal.SIGKILL)
        await until(lambda: server.status().pid is None, "the server to die", 10)
        ledger.crash(in_flight)
        responder.thaw()
        # With the server down the worker still finishes its calls and records them.
        await until(lambda: model_steps(store, RUN_ID) == recorded + held,
                    "the calls in flight to be recorded with the server down", 30)
        if outage == "long":
            # Until the SDK stops retrying the completion of every one of them.
            await until(lambda: diagnostics(ph)[log_offset:].count(GAVE_UP) >= held,
                        "the worker to give up reporting the completions", 60)
        await server.start()  # same home, database file and ports
        assert (server.address, server.db_path) == (address, db) and worker.alive()
        dropped_completions += diagnostics(ph)[log_offset:].count(GAVE_UP)

    summary = await run_result(client, RUN_ID, timeout=300)
    # The one worker process did all the work: it reconnected by itself twice.
    assert worker.alive() and len(ph.logs) == 1
    assert {r["agent_model"] for r in summary["results"]} == set(config.agent_models)
    assert store.get_run(RUN_ID).status == "completed"
    assert store_integrity(store, config) == []
    assert rewards(store, RUN_ID) == expected_rewards(config)

    # Served - recorded <= in flight at the crashes; here nothing ran twice at all.
    stats = ledger.check(srv.requests, srv.served, model_steps(store, RUN_ID), sends_of(responder))
    assert stats["problems"] == []
    assert stats["sends_by_design"] == total_calls and stats["re_executed"] == 0

    # Each completion the SDK gave up on is one activity the server timed out on its
    # heartbeat and started again (attempt 2); every other activity ran once.
    retried = []
    for spec in trial_specs(config):
        async for event in client.get_workflow_handle(spec.trial_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started_attrs = event.activity_task_started_event_attributes
                if started_attrs.attempt > 1:
                    retried.append((started_attrs.attempt, started_attrs.last_failure))
    assert dropped_completions >= held  # the long outage lost every completion
    assert len(retried) == dropped_completions
    assert all(attempt == 2 and failure.HasField("timeout_failure_info") for attempt, failure in retried)
