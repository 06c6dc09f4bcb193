"""The conversation step activities, called directly in Temporal's ActivityEnvironment."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.testing import ActivityEnvironment

from passhat.activities.conversation import ConversationActivities, Heartbeat
from passhat.contracts import StepRef, StepResult, TaskUnit
from passhat.messages import AGENT_GREETING, Message
from tests.helpers import conversation


def airline_trial(task_id: str = "1"):  # noqa: ANN201 - a TrialSpec
    unit = TaskUnit(
        run_id="r", agent_model="scripted/oracle", user_model="scripted/oracle",
        domain="airline", task_id=task_id, seeds=[7],
    )
    return unit.trial(0)


async def test_an_attempt_that_loses_the_race_returns_the_recorded_step(sqlite_store, monkeypatch):
    """Two attempts of one step (a heartbeat timeout started a second while the first was
    still calling the model): the one whose insert loses returns the winner's step, not
    its own reply, so the workflow follows the conversation that is stored."""
    store, spec = sqlite_store, airline_trial()
    store.begin_trial(spec)
    record = lambda step, role, text: store.record_step(  # noqa: E731
        spec.trial_id, spec.run_id, step, role, [Message(role=role, content=text)]
    )
    record(0, "assistant", AGENT_GREETING)
    record(1, "user", "I need to change my flight.")
    # This attempt reads the conversation before the other attempt (the winner) writes
    # step 2, so it calls the (oracle) model, which answers with a tool call, and then
    # loses the insert.
    real_step_or_history, looked = store.step_or_history, []

    def step_or_history_then_the_winner_writes(trial_id: str, step: int):  # noqa: ANN202
        looked.append(real_step_or_history(trial_id, step))
        record(2, "assistant", "The winner answered in words.")
        return looked[-1]

    monkeypatch.setattr(store, "step_or_history", step_or_history_then_the_winner_writes)
    result = await ActivityEnvironment().run(
        ConversationActivities(store).agent_turn, StepRef(trial=spec, step=2)
    )
    assert [recorded for recorded, _history in looked] == [None]  # it did not see step 2
    assert result == StepResult(step=2, role="assistant")  # the winner's text turn
    assert conversation(store, spec.trial_id)[-1].content == "The winner answered in words."

async def test_a_cancelled_activity_cancels_its_model_call():
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_model_call() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def activity_body() -> str:
        return await Heartbeat(every_s=0.05).around(slow_model_call())

    env = ActivityEnvironment()
    running = asyncio.ensure_future(env.run(activity_body))
    await asyncio.wait_for(started.wait(), 10)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 10)
    assert cancelled.is_set()


async def test_heartbeats_are_sent_only_when_due_counted_across_the_attempt():
    """No heartbeat before every_s (Temporal times the attempt from its start, and each
    heartbeat is a server request and write); once due, the next awaited work sends one
    at once, however short it is, because the time counts across all of the attempt."""
    beats: list[str] = []
    beat = asyncio.Event()

    def on_heartbeat(*_: object) -> None:
        beats.append("beat")
        beat.set()

    async def block_the_loop() -> None:
        time.sleep(0.1)  # noqa: ASYNC251 - on purpose: past every_s, with no heartbeat sent meanwhile

    async def activity_body() -> list[int]:
        await Heartbeat(every_s=60).around(asyncio.sleep(0))
        counts = [len(beats)]  # a step shorter than every_s: none
        slow = Heartbeat(every_s=0.05)
        await slow.around(asyncio.wait_for(beat.wait(), 10))  # ends once one was sent
        counts.append(min(len(beats), 1))
        await slow.around(block_the_loop())
        beats.clear()
        await slow.around(asyncio.sleep(0))  # the next work, however short: one at once
        return [*counts, len(beats)]

    env = ActivityEnvironment()
    env.on_heartbeat = on_heartbeat
    assert await env.run(activity_body) == [0, 1, 1]


async def test_a_paid_answer_waits_out_a_store_that_is_down(sqlite_store, monkeypatch):
    """The store fails while a model answer is being recorded: the activity keeps the
    answer and retries the write (heartbeating) instead of failing, which would throw the
    answer away and pay for the call again."""
    import dataclasses
    from datetime import datetime, timedelta, timezone

    from passhat.infra import llm
    from passhat.infra.store import StoreError

    store, spec = sqlite_store, airline_trial()
    spec.retry.initial_interval_s = 0.01
    store.begin_trial(spec)
    store.record_step(spec.trial_id, spec.run_id, 0, "assistant", [Message(role="assistant", content=AGENT_GREETING)])
    calls, outage = [], ["down", "down"]
    real_complete, real_record = llm.complete, store.record_step

    async def complete(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(args[0])
        return await real_complete(*args, **kwargs)

    def record_step(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if outage:
            outage.pop()
            raise StoreError("results store at sqlite:///x failed: database is down")
        return real_record(*args, **kwargs)

    monkeypatch.setattr(llm, "complete", complete)
    monkeypatch.setattr(store, "record_step", record_step)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=datetime.now(timezone.utc),
                                   start_to_close_timeout=timedelta(seconds=60))
    result = await env.run(ConversationActivities(store).user_turn, StepRef(trial=spec, step=1))
    assert (result.step, result.role, outage, calls) == (1, "user", [], ["scripted/oracle"])
    assert "(task 1)" in conversation(store, spec.trial_id)[-1].content  # the answer, recorded
