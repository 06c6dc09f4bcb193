"""A saturated machine does not make a worker pay for a model call twice.

On a machine at load average 12, duplicate paid model calls were seen: the worker's event
loop fell behind, a model call's heartbeats missed their timeout, and Temporal started
attempt 2 of the call while attempt 1 was still waiting on the provider. Nothing crashed;
the machine was only busy.

Here the machine is made that busy on purpose, beside a `passhat worker` process running
a run whose model calls are slow: busy-loop processes (several per CPU, at the worker's
own nice value, started and stopped by the test) compete with the worker, its Temporal
server and the model server for the CPU while every model call takes LATENCY_S, longer
than the interval at which a call heartbeats, and a failing noisy agent's call (asked
1 + EMPTY_REPLY_RETRIES times within one activity) lasts longer than the heartbeat
timeout itself. Heartbeats and retries are passhat's defaults: the point is that they
hold under load.

With no crash and no provider fault, the contract is strict: every distinct model call
(passhat.testing.scripted_http.request_key) is served exactly as many times as passhat
sends it by design (sends_of). The test also checks that the machine really was
saturated while the run went on (the CPUs were never idle, and the busy processes really
ran), so it cannot pass by testing a quiet machine.

The model calls Temporal had to start again (a lapsed heartbeat) are listed with any
failure: the worker's log (worker-0.log in the test's home) shows where the timed-out
attempt was when it learnt it had been given up on.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError

from passhat.contracts import RetryConfig
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.cpu_load import CpuHogs, machine_ticks
from passhat.testing.harness import (
    MODEL_CALLS,
    CallLedger,
    expected_rewards,
    model_calls_of,
    model_steps,
    rewards,
    run_result,
    sends_of,
    store_integrity,
    trial_specs,
    until,
)
from passhat.testing.scripted_http import http_args, request_key
from tests.helpers import needs_agent_errors

RUN_ID = "durability-cpu-saturation"
# The two of harness.TASKS with the shortest conversations (5 and 6 model calls when the
# agent succeeds): the run's length is its longest conversation's, times the load.
SHORT_TASKS = ["1", "17"]
# Busy processes per CPU: 6 on two CPUs is the load average of 12 where the duplicates
# were seen.
BUSY_PER_CPU = 6
# Each model call: longer than a call's heartbeat interval (a third of the default
# heartbeat timeout), so every call heartbeats while it waits under load.
DEFAULTS = RetryConfig()
HEARTBEAT_EVERY_S = max(1.0, DEFAULTS.heartbeat_timeout_s / 3)
LATENCY_S = HEARTBEAT_EVERY_S + 0.5
# What "saturated" means, over the whole run: the CPUs were idle at most this share of
# the time, and the busy processes got at least this share of it (about 0.75 on a
# machine that is otherwise quiet; less when other processes compete too, and 0 if they
# never ran).
MAX_IDLE_SHARE = 0.1
MIN_BUSY_SHARE = 0.3
# Bounds, on a machine that may be busier still: the run, under load (it takes about
# a minute), and each busy process's life, should this process die without stopping it.
RUN_TIMEOUT_S = 240
@pytest.fixture
def cpu_hogs():
    """Start busy processes with `start(n)`; whatever the test did, every one of them is
    killed at teardown (before the workers: this fixture is requested after theirs)."""
    started: list[CpuHogs] = []

    def start(n: int) -> CpuHogs:
        hogs = CpuHogs.start(n)
        started.append(hogs)
        return hogs

    try:
        yield start
    finally:
        for hogs in started:
            hogs.stop()


async def retried_model_calls(client, config) -> list[str]:
    """Model calls that needed a second attempt, and why the attempt before ended: those
    that completed (their ActivityTaskStarted event carries the attempt that completed)
    and those still pending. Without a fault or a crash, only a timeout starts one."""
    found = []
    for spec in trial_specs(config):
        handle = client.get_workflow_handle(spec.trial_id)
        try:
            pending = (await handle.describe()).raw_description.pending_activities
        except RPCError:
            continue  # never started: the run ended early or has not got that far
        for act in pending:
            if act.activity_type.name in MODEL_CALLS and act.attempt > 1:
                found.append(f"{spec.trial_id} {act.activity_type.name} pending in attempt "
                             f"{act.attempt} after: {act.last_failure.message}")
        scheduled: dict[int, str] = {}
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                name = scheduled.get(started.scheduled_event_id)
                if name in MODEL_CALLS and started.attempt > 1:
                    found.append(f"{spec.trial_id} {name} completed in attempt "
                                 f"{started.attempt} after: {started.last_failure.message}")
    return found


def over_served(requests: list[dict], sends) -> list[str]:
    """Model calls the model server received more often than passhat sends them by
    design (sends_of): each one a call paid for twice. Meaningful for a run that has not
    finished too (unlike CallLedger's count of recorded steps)."""
    bodies = {request_key(b): b for b in requests if isinstance(b, dict)}
    counts = Counter(request_key(b) for b in requests if isinstance(b, dict))
    return [
        f"sent {n} times, {sends(bodies[key])} by design: {call_name(bodies[key])}"
        for key, n in counts.items() if n > sends(bodies[key])
    ]


def call_name(body: dict) -> str:
    """A model call in words: its model, seed, and where the conversation stands."""
    messages = body.get("messages") or []
    last = str(messages[-1].get("content") or "")[:80] if messages else ""
    return f"{body.get('model')} seed {body.get('seed')}, {len(messages)} messages, last: {last!r}"


@needs_agent_errors
async def test_saturated_cpu_serves_each_model_call_once(passhat_procs, model_server, responder, cpu_hogs):
    ph, srv = passhat_procs, model_server
    responder.latency = LATENCY_S
    t_start = time.monotonic()
    # The worker starts while the run is being started: each loads tau2 for seconds.
    worker = ph.start_worker()
    args = json.dumps(http_args(srv.url))
    started = ph.cli(
        "run", "--domain", "airline", *[a for t in SHORT_TASKS for a in ("--task", t)],
        # One agent model (see test_worker_kill: the ledger tells calls apart by their
        # request). The noisy agent's failing trials resend an empty answer within one
        # activity: model calls that outlast the heartbeat timeout.
        "--agent-model", "openai/noisy-0.7",
        "--user-model", "openai/oracle", "--trials", "4", "--concurrency", "8",
        "--agent-args", args, "--user-args", args, "--run-id", RUN_ID, "--detach",
    )
    assert started.returncode == 0, started.stderr
    store = Store(ph.db_url)
    config = store.get_run(RUN_ID).run_config()
    # The defaults are under test: nothing about heartbeats or retries is tuned here.
    assert config.retry == DEFAULTS
    client = await connect(ph.temporal_address)
    specs = trial_specs(config)
    total_calls = sum(model_calls_of(s) for s in specs)
    await worker.ready()

    # The load starts with the run's first model call. Before it the worker loads tau2's
    # data (seconds of CPU, in a bookkeeping activity), which under this load would take
    # most of the time budget on its own; it is not what is tested.
    await until(lambda: srv.received >= 1, "the first model call", 120)
    hogs = cpu_hogs(BUSY_PER_CPU * len(os.sched_getaffinity(0)))
    await until(hogs.running, "every busy process to run", 60)
    machine0, hogs0, t_load = machine_ticks(), hogs.ticks(), time.monotonic()
    served_quiet = srv.served
    try:
        summary = await run_result(client, RUN_ID, timeout=RUN_TIMEOUT_S)
    except TimeoutError:
        summary = None  # reported below, after what matters more: calls paid twice
    # Measured before the busy processes stop, which leaves the checks below a quiet
    # machine.
    (had1, idle1), hogs1, t_end = machine_ticks(), hogs.ticks(), time.monotonic()
    alive = hogs.alive()
    hogs.stop()
    had, idle = had1 - machine0[0], idle1 - machine0[1]
    load = {
        "busy_processes": len(hogs.procs),
        "busy_share": round((hogs1 - hogs0) / had, 2),
        "idle_share": round(idle / had, 2),
        "calls_served_before_load": served_quiet,
        "calls_served": srv.served,
        "s_before_load": round(t_load - t_start, 1),
        "s_under_load": round(t_end - t_load, 1),
    }
    print(f"load: {load}")  # shown with -s, or with a failure

    # Not one model call paid for twice, even if the run did not finish.
    retried = await retried_model_calls(client, config)
    sends = sends_of(responder)
    twice = over_served(srv.requests, sends)
    assert not twice, "\n".join(
        [f"{len(twice)} model calls paid for more than once under load:", *twice,
         "model calls that needed another attempt:", *retried, str(load)]
    )
    assert summary is not None, (
        f"run not finished after {RUN_TIMEOUT_S}s under load; model calls retried: "
        f"{retried}; {load}"
    )

    # The load lasted the whole run and saturated the machine: every busy process still
    # alive at the end and a good share of the CPU time theirs, hardly any of it idle;
    # and most of the model calls were served under it.
    assert alive == len(hogs.procs), f"{len(hogs.procs) - alive} busy processes died: {load}"
    assert load["busy_share"] >= MIN_BUSY_SHARE and load["idle_share"] <= MAX_IDLE_SHARE, load
    assert served_quiet <= len(specs), load
    assert worker.alive(), worker.output()[-3000:]

    # The run completed, each trial and step recorded once, with the rewards an
    # uninterrupted run gets.
    assert store.get_run(RUN_ID).status == "completed"
    assert store_integrity(store, config) == []
    assert {r["agent_model"] for r in summary["results"]} == set(config.agent_models)
    want = expected_rewards(config)
    assert rewards(store, RUN_ID) == want
    assert 0 < sum(want.values()) < len(want)  # both outcomes occur: long calls too

    # The full account: nothing crashed, so no model call may have run again; each
    # distinct call is one recorded step.
    stats = CallLedger().check(srv.requests, srv.served, model_steps(store, RUN_ID), sends)
    assert stats["problems"] == [], (stats, retried, load)
    assert stats["re_executed"] == 0 and stats["sends_by_design"] == total_calls, stats
    assert srv.served == srv.received == total_calls and srv.counts == {"ok": total_calls}
