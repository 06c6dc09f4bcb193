"""Provider caps hold across every worker process. `passhat run --workers 3
--rate-limit openai=60/min` sends the openai model's calls to the provider's own task
queue, which the Temporal server dispatches no faster than the cap whichever of the
three processes polls; the other provider's calls stay on the run's queue, unthrottled.
`--max-concurrent openai=1` has the run workflow start the openai conversations one at
a time (fewer than a task's k trials: the task workflow runs them in turn), while the
other provider's conversations run side by side.

The loopback model server records when each request arrives, per model name: the capped
agent model is `openai/oracle`, the uncapped one `hosted_vllm/noisy-1.0` (the same
scripted oracle under another provider and name).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import defaultdict

from temporalio.api.enums.v1 import EventType

from passhat.contracts import TASK_QUEUE, provider_task_queue
from passhat.infra.temporal_client import connect
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import PASSHAT, Passhat
from passhat.testing.scripted_http import ScriptedResponder, http_args

CAP_PER_MINUTE = 60
# Temporal splits a queue's rate over the queue's partitions (4 by default), and each
# partition may let one task through at once after an idle spell: over any window the
# calls may exceed the rate by that many.
SERVER_BURST = 4
CAPPED, FREE = "openai/oracle", "hosted_vllm/noisy-1.0"


class ArrivalTimes:
    """A responder that notes when each request arrived, per model name, then answers
    as the scripted models do."""

    def __init__(self, inner: ScriptedResponder):
        self.inner = inner
        self.times: dict[str, list[float]] = defaultdict(list)

    async def __call__(self, body: dict) -> dict:
        self.times[str(body.get("model"))].append(time.monotonic())
        return await self.inner(body)


def most_in_window(times: list[float], window_s: float) -> int:
    """The largest number of requests that arrived within any window_s seconds."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] > window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


async def activity_queues(address: str, run_id: str) -> dict[str, set[str]]:
    """For each model-call activity type, the task queues the trials scheduled it on,
    keyed by the model in the activity's summary."""
    client = await connect(address)
    queues: dict[str, set[str]] = defaultdict(set)
    async for wf in client.list_workflows(f"PasshatRun = '{run_id}'"):
        history = await client.get_workflow_handle(wf.id).fetch_history()
        for e in history.events:
            if e.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            attrs = e.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "agent_turn":
                model = CAPPED if "openai/" in (e.user_metadata.summary.data or b"").decode() else FREE
                queues[model].add(attrs.task_queue.name)
    return queues


async def test_rate_cap_holds_over_three_worker_processes(fresh_temporal_server, tmp_path):
    address = fresh_temporal_server.address
    arrivals = ArrivalTimes(ScriptedResponder(["airline"]))
    with FaultServer(responder=arrivals) as srv:
        args = json.dumps(http_args(srv.url))
        ph = Passhat(home=tmp_path / "home", temporal_address=address)
        proc = subprocess.run(
            [str(PASSHAT), "run", "--domain", "airline", "--task", "1", "--task", "2",
             "--agent-model", CAPPED, "--agent-model", FREE, "--user-model", "scripted/oracle",
             "--agent-args", args, "--trials", "2", "--concurrency", "8", "--workers", "3",
             "--rate-limit", f"openai={CAP_PER_MINUTE}/min", "--run-id", "capped", "--output", "json"],
            env=ph.env(), capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        assert {r["agent_model"]: r["pass_hat_k"]["2"] for r in summary["results"]} == {CAPPED: 1.0, FREE: 1.0}

    capped, free = arrivals.times["oracle"], arrivals.times["noisy-1.0"]
    assert len(capped) >= 10 and len(free) >= 10, (len(capped), len(free))
    # The capped model's calls: within the cap over every window, but for the burst the
    # server's limiter allows after an idle spell.
    for window in (10.0, 20.0):
        assert most_in_window(capped, window) <= window * CAP_PER_MINUTE / 60 + SERVER_BURST, (
            f"{most_in_window(capped, window)} capped calls within {window} s: {capped}")
    # The uncapped model was not held back: all its calls came in less time than the cap
    # would have needed for them.
    at_the_cap_s = (len(free) - SERVER_BURST) * 60 / CAP_PER_MINUTE
    assert max(free) - min(free) < at_the_cap_s, sorted(free)

    queues = await activity_queues(address, "capped")
    assert queues == {CAPPED: {provider_task_queue("openai")}, FREE: {TASK_QUEUE}}, queues


class InFlight:
    """A responder that answers after `latency` seconds and notes, per model name, the
    most requests it held at once."""

    def __init__(self, inner: ScriptedResponder, latency: float):
        self.inner, self.latency = inner, latency
        self.now: dict[str, int] = defaultdict(int)
        self.most: dict[str, int] = defaultdict(int)

    async def __call__(self, body: dict) -> dict:
        model = str(body.get("model"))
        self.now[model] += 1
        self.most[model] = max(self.most[model], self.now[model])
        try:
            await asyncio.sleep(self.latency)
            return self.inner.answer(body)
        finally:
            self.now[model] -= 1


async def test_max_concurrent_holds_over_three_worker_processes(fresh_temporal_server, tmp_path):
    in_flight = InFlight(ScriptedResponder(["airline"]), latency=0.3)
    with FaultServer(responder=in_flight) as srv:
        args = json.dumps(http_args(srv.url))
        ph = Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)
        proc = subprocess.run(
            [str(PASSHAT), "run", "--domain", "airline", "--task", "1", "--task", "2", "--task", "8",
             "--agent-model", CAPPED, "--agent-model", FREE, "--user-model", "scripted/oracle",
             "--agent-args", args, "--trials", "2", "--concurrency", "12", "--workers", "3",
             "--max-concurrent", "openai=1", "--run-id", "one-at-a-time", "--output", "json"],
            env=ph.env(), capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
        assert {r["agent_model"]: r["pass_hat_k"]["2"] for r in summary["results"]} == {CAPPED: 1.0, FREE: 1.0}
    assert in_flight.most["oracle"] == 1, dict(in_flight.most)
    # The other provider's six conversations were not held back: they overlapped.
    assert in_flight.most["noisy-1.0"] > 1, dict(in_flight.most)


def test_bad_caps_are_one_line_and_record_nothing(tmp_path):
    """A cap that cannot be read, or one on a provider no model of the run uses (a typo
    would otherwise cap nothing), is refused before anything is recorded or started."""
    ph = Passhat(home=tmp_path / "home", temporal_address="127.0.0.1:1")  # never reached
    run = ("run", "--domain", "airline", "--task", "1", "--agent-model", "openai/gpt-4.1",
           "--user-model", "scripted/oracle", "--run-id", "refused")
    for cap, says in [
        ("openai=60", "--rate-limit must be PROVIDER=N/min"),
        ("openai=0/min", "--rate-limit must be PROVIDER=N/min"),
        ("openia=60/min", "no model of the run uses provider 'openia' (its models use: openai, scripted)"),
    ]:
        result = ph.cli(*run, "--rate-limit", cap)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    for cap, says in [
        ("openai=0", "--max-concurrent must be PROVIDER=N with N >= 1"),
        ("anthropic=4", "no model of the run uses provider 'anthropic'"),
    ]:
        result = ph.cli(*run, "--max-concurrent", cap)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert ph.cli("runs").stdout.count("refused") == 0
