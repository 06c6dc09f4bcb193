"""The Temporal UI names each step: a tool step's summary lists the tools it runs."""

from __future__ import annotations

import json

from passhat.workflows.trial import tool_summary
from tests.runs import config, run_to_end


async def test_tool_steps_name_their_tools(client, sqlite_store):
    cfg = config(task_ids=["1"])  # the oracle calls airline tools on this task
    await run_to_end(client, sqlite_store, cfg)
    [trial] = sqlite_store.trials(cfg.run_id)
    # What the agent asked for, step by step, from the store.
    asked = {}
    for step in sqlite_store.steps(trial.trial_id):
        for m in step.message_list():
            if m.tool_calls:
                asked[step.step + 1] = [c.name for c in m.tool_calls]
    assert asked, "the oracle called no tool"
    history = await client.get_workflow_handle(trial.trial_id).fetch_history()
    # Tool steps are local activities: each is recorded as a marker, carrying the summary.
    summaries = {}
    for event in history.events:
        if event.HasField("marker_recorded_event_attributes") and event.user_metadata.HasField("summary"):
            summary = json.loads(event.user_metadata.summary.data)
            if summary.startswith("tools"):
                summaries[int(summary.rsplit("step ", 1)[1])] = summary
    assert summaries == {step: f"tools: {', '.join(dict.fromkeys(names))}, step {step}"
                         for step, names in asked.items()}


def test_tool_summary_without_names_and_when_long():
    assert tool_summary([], 4) == "tools, step 4"  # steps recorded before names were
    assert tool_summary(["update_b", "get_a", "update_b"], 3) == "tools: update_b, get_a, step 3"
    long = tool_summary([f"tool_{i:03d}" for i in range(50)], 9)
    assert len(long) < 220 and long.endswith(", ..., step 9") and long.startswith("tools: tool_000, tool_001")
