"""A results store that goes away mid-run is waited out, and nothing is lost.

passhat runs as processes (`passhat run --detach`, then `passhat worker`) against a
PostgreSQL server of the test's own (passhat.testing.postgres: Debian's initdb/pg_ctl on
a free port), with scripted models over loopback HTTP. Once some trials are scored the
server is stopped and kept down for OUTAGE_S seconds: every bookkeeping activity and every
step that tries to read or write meanwhile fails and is retried by Temporal with backoff
(RetryConfig.bookkeeping_for_s, 600 s by default), except a model step whose call was
answered: it waits the store out in its activity, so that the answer is not paid for
twice. Then the server starts again on the
same data directory and port, and the run must complete as an uninterrupted run would:
every trial scored exactly once, no duplicate steps, the seeded rewards, nothing not
evaluable.

The outage is the point of the test, so the test takes more than OUTAGE_S seconds
(about 2 minutes on a 2-core machine, processes' start-up included).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.harness import (
    MODEL_CALLS,
    TASKS,
    Passhat,
    describe_raw,
    expected_rewards,
    local_activity,
    model_steps,
    rewards,
    run_result,
    sends_of,
    stopping_workers,
    store_integrity,
    trial_specs,
    until,
    workflow_ids,
)
from tests.helpers import needs_agent_errors
from passhat.testing.postgres import ThrowawayPostgres
from passhat.testing.scripted_http import http_args, request_key
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus

from passhat.contracts import EMPTY_REPLY_RETRIES

RUN_ID = "durability-store-outage"
OUTAGE_S = 30.0
TRIALS = 2


@pytest.fixture
def postgres():
    with ThrowawayPostgres() as pg:
        yield pg


@pytest.fixture
def pg_passhat(fresh_temporal_server, tmp_path, postgres):
    yield from stopping_workers(Passhat(
        home=tmp_path / "home", temporal_address=fresh_temporal_server.address,
        store_url=postgres.url,
    ))


async def pending_retries(client, config) -> dict[tuple[str, str], tuple[int, str]]:
    """(workflow id, activity type) -> (attempt, last failure) of every pending activity
    that is past its first attempt."""
    found = {}
    for _kind, wf_id in workflow_ids(config):
        d = await describe_raw(client, wf_id)
        if d is None:
            continue
        for act in d.pending_activities:
            if act.attempt > 1:
                found[(wf_id, act.activity_type.name)] = (act.attempt, act.last_failure.message)
    return found


async def retried_in_histories(client, config) -> Counter:
    """Per activity type, how many activities of the run took more than one attempt
    (the attempt of an ActivityTaskStarted event is that of the attempt that finished;
    a local activity's marker records the attempt that completed it)."""
    retried: Counter = Counter()
    for _kind, wf_id in workflow_ids(config):
        history = await client.get_workflow_handle(wf_id).fetch_history()
        names = {}
        for ev in history.events:
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                names[ev.event_id] = ev.activity_task_scheduled_event_attributes.activity_type.name
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                attrs = ev.activity_task_started_event_attributes
                if attrs.attempt > 1:
                    retried[names[attrs.scheduled_event_id]] += 1
            elif (local := local_activity(ev)) is not None and local["attempt"] > 1:
                retried[local["activity_type"]] += 1
    return retried


@needs_agent_errors
@pytest.mark.timeout(240)  # slow by design: the store stays down for OUTAGE_S (30 s); ~2 min in all
async def test_run_waits_out_a_store_outage(pg_passhat, postgres, model_server, responder):
    ph, pg, srv = pg_passhat, postgres, model_server
    args = json.dumps(http_args(srv.url))  # the responder answers each call after 0.3 s
    started = ph.cli(
        "run", "--domain", "airline", *[a for t in TASKS for a in ("--task", t)],
        "--agent-model", "openai/noisy-0.7", "--user-model", "openai/oracle",
        "--trials", str(TRIALS), "--concurrency", "4",
        "--agent-args", args, "--user-args", args, "--run-id", RUN_ID, "--detach",
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == RUN_ID

    store = Store(pg.url)
    config = store.get_run(RUN_ID).run_config()
    assert config.retry.bookkeeping_for_s > OUTAGE_S  # the window the product promises
    total = len(trial_specs(config))
    client = await connect(ph.temporal_address)
    worker = ph.start_worker()
    await worker.ready()

    # Mid-run: some trials scored, most still to go.
    done_before = await until(
        lambda: (done := store.run_progress(RUN_ID).done) >= 2 and done, "2 trials finished", 120)
    store.close()  # the test's own connections must not outlive the server
    pg.stop()
    down_at = time.monotonic()
    assert done_before < total, "the run finished before the outage"

    # The outage: OUTAGE_S seconds by the clock, during which the worker stays up, the
    # run stays open, and activities fail against the dead store and are retried.
    retrying: dict[tuple[str, str], tuple[int, str]] = {}
    deadline = down_at + OUTAGE_S
    while (remaining := deadline - time.monotonic()) > 0:
        assert worker.alive(), f"the worker died during the outage:\n{worker.output()[-3000:]}"
        assert not pg.accepts_connections()
        retrying.update(await pending_retries(client, config))
        await asyncio.sleep(min(1.0, max(remaining, 0)))
    run_desc = await describe_raw(client, RUN_ID)
    assert run_desc.workflow_execution_info.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
    pg.start()
    outage = time.monotonic() - down_at
    assert outage >= OUTAGE_S
    # Whether the outage reached the run is read from the histories once it has ended:
    # steps of the store (tool steps, opening, scoring) are local activities, whose
    # retries no description of a workflow shows while they happen.
    attempts = max((a for a, _ in retrying.values()), default=1)
    print(f"\noutage {outage:.1f}s with {done_before}/{total} trials done; "
          f"{len(retrying)} activities seen retrying during it (max attempt {attempts}): "
          f"{sorted(Counter(name for _, name in retrying).items())}; "
          f"last failures {sorted({m[:120] for _, m in retrying.values()})}")

    summary = await run_result(client, RUN_ID, timeout=150)
    print(f"run completed {time.monotonic() - down_at:.1f}s after the store went down")

    store = Store(pg.url)
    try:
        assert store.get_run(RUN_ID).status == "completed"
        assert store_integrity(store, config) == []
        assert {r["agent_model"] for r in summary["results"]} == set(config.agent_models)
        assert sum(r["evaluable"] for r in summary["results"]) == total
        assert not [t.trial_id for t in store.trials(RUN_ID) if t.status != "scored"]
        want = expected_rewards(config)
        assert rewards(store, RUN_ID) == want
        assert 0 < sum(want.values()) < len(want)  # both outcomes occur: the check has teeth
        recorded = model_steps(store, RUN_ID)
    finally:
        store.close()
    retried = await retried_in_histories(client, config)
    # A model call sent again can only be one whose step write (or read) the outage broke:
    # at most one call per model-call activity that needed more than one attempt.
    bodies = {request_key(b): b for b in srv.requests if isinstance(b, dict)}
    sends = sends_of(responder)
    re_sent = srv.served - sum(sends(b) for b in bodies.values())
    retried_calls = sum(retried[name] for name in MODEL_CALLS)
    # A model call answered during the outage keeps its paid answer: its activity waits
    # the store out in place (logging each failed write) instead of failing. When every
    # trial in flight is in such a call, nothing is retried by Temporal at all.
    log = (ph.home / "logs" / "passhat.log").read_text()
    waited = {line.split(" not recorded yet")[0].rsplit("step ", 1)[-1]
              for line in log.splitlines() if " not recorded yet, retrying" in line}
    print(f"activities that completed on attempt > 1, by type: {sorted(retried.items())}; "
          f"paid answers that waited for the store: {len(waited)}; model calls sent again: {re_sent}")
    # The outage reached the run: activities failed against the store and were retried,
    # or answers waited in their activities until the store was back.
    assert sum(retried.values()) + len(waited) >= 1, "the outage did not touch the run"
    assert len(bodies) == recorded
    assert 0 <= re_sent <= retried_calls * (1 + EMPTY_REPLY_RETRIES)
    assert worker.alive()
