"""The workflows replay their recorded histories deterministically.

Temporal resumes a workflow on any worker by replaying its history against the current
code; code that would make different decisions for the same history cannot resume the
runs that were in flight when it was deployed. Two guards:

  * histories recorded now, from a small real run, replay against the code that made them;
  * histories recorded earlier and committed under tests/durability/histories/ replay
    against the current code, so a change that breaks determinism fails here first.

The recorded run covers every path of the workflows: oracle trials with tool calls (one
retried after a 429), a noisy agent that fails, an agent model the provider does not
know (the trial is recorded as not evaluable), the task workflows and the run workflow.
A second run covers the run workflow's budget path: the cost it asks for before each
task, the stop, and the run closed as budget_exhausted.

After an intended, incompatible change to a workflow (one that needs a new workflow
type or versioning for the runs in flight), record the files again:

    PASSHAT_RECORD_HISTORIES=1 pytest tests/durability/test_replay.py -k live
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner


from passhat.domains.tau2_version import installed_rules
from passhat.testing.harness import workflow_ids
from passhat.testing.fault_server import Fault
from passhat.testing.scripted_http import expected_reward, http_args
from tests.runs import config, worker_for
from passhat.workflows.run import RunWorkflow
from passhat.contracts import TrialSpec
from passhat.outcomes import TrialOutcome
from passhat.workflows.task import TaskWorkflow
from passhat.workflows.trial import TrialWorkflow
from passhat.workflows.client import follow, start_run
from passhat.workflows.worker import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"
RUN_ID = "replay-fixture"
BUDGET_RUN_ID = "replay-budget-fixture"
ROUNDS_RUN_ID = "replay-rounds-fixture"


def replayer(workflows=WORKFLOWS, **kwargs) -> Replayer:  # noqa: ANN001
    return Replayer(workflows=list(workflows), data_converter=pydantic_data_converter, **kwargs)


def workflow_type(history: WorkflowHistory) -> str:
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def committed() -> list[WorkflowHistory]:
    return [
        WorkflowHistory.from_json(path.stem, path.read_text())
        for path in sorted(HISTORIES.glob("*.json"))
    ]


class OracleAgentRateLimitedOnce:
    """Fault plan: the first call of the oracle agent gets a 429 (and is retried)."""

    def __init__(self) -> None:
        self.done = False

    def __call__(self, n: int, body: dict):  # noqa: ANN204
        if not self.done and body.get("model") == "oracle" and body.get("tools"):
            self.done = True
            return Fault("429", retry_after=0.2)
        return None


async def record_run(client, store, srv, responder) -> dict[str, WorkflowHistory]:  # noqa: ANN001
    args = json.dumps(http_args(srv.url))
    cfg = config(
        run_id=RUN_ID, task_ids=["1"], trials=2, concurrency=6, user_model="openai/oracle",
        agent_models=["openai/oracle", "openai/noisy-0.5", "openai/bad-model"],
        agent_args=args, user_args=args,
    )
    cfg.retry.initial_interval_s = 0.1
    srv.set_faults(OracleAgentRateLimitedOnce())
    async with worker_for(client, store) as queue:
        handle = await start_run(client, store, cfg, task_queue=queue)
        await follow(handle, store, cfg.run_id, lambda *a: None, poll_s=0.2)
    histories = {}
    for _, wf_id in workflow_ids(cfg):
        histories[wf_id] = await client.get_workflow_handle(wf_id).fetch_history()
    return histories


def failed(trial) -> bool:  # noqa: ANN001
    """Whether the trial ended as the installed tau2 ends a model's failure: agent_error
    with reward 0 (26.3), or given up after its re-runs (1.0.x)."""
    rules = installed_rules()
    if rules.on_model_failure == "rerun":
        return (trial.status, trial.termination_reason) == ("not_evaluable", rules.exhausted_reason)
    return (trial.reward, trial.termination_reason) == (0.0, "agent_error")


def pick_committed(histories: dict[str, WorkflowHistory], store) -> dict[str, WorkflowHistory]:  # noqa: ANN001
    """One history of each kind, named by what it shows."""
    trials = {t.trial_id: t for t in store.trials(RUN_ID)}

    def retried(h: WorkflowHistory) -> bool:
        return any(
            e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and e.activity_task_started_event_attributes.attempt > 1
            for e in h.events
        )

    def first(pred) -> WorkflowHistory:  # noqa: ANN001
        return next(h for wf_id, h in sorted(histories.items()) if pred(wf_id, h))

    return {
        "window-run": histories[RUN_ID],
        "window-trial-oracle-retried": first(lambda i, h: "/openai/oracle/" in i and i in trials and retried(h)),
        # (the noisy agent's failure, as the installed tau2 counts it)
        "window-trial-noisy-failure": first(lambda i, h: i in trials and "noisy" in i and failed(trials[i])),
        "window-trial-not-evaluable": first(lambda i, h: i in trials and trials[i].status == "not_evaluable"),
    }


async def test_live_histories_replay(client, sqlite_store, model_server, responder):
    """Every workflow of a real run replays against the code that ran it."""
    histories = await record_run(client, sqlite_store, model_server, responder)
    trials = {t.trial_id: t for t in sqlite_store.trials(RUN_ID)}
    # The run exercised each path the committed files are meant to cover: the noisy
    # agent's failure is a reward of 0 (26.3), or re-runs given up on (1.0.x).
    assert {t.status for t in trials.values()} == {"scored", "not_evaluable"}
    assert any(failed(t) for t in trials.values() if "noisy" in t.agent_model)
    assert all(failed(t) == (expected_reward(t.agent_model, t.seed, t.domain, t.task_id) == 0.0)
               for t in trials.values() if "noisy" in t.agent_model)
    # The run starts its trials itself (the sliding window): no task workflows.
    assert {workflow_type(h) for h in histories.values()} == {"RunWorkflow", "TrialWorkflow"}

    async def each():
        for history in histories.values():
            yield history

    result = await replayer().replay_workflows(each(), raise_on_replay_failure=False)
    assert len(histories) == 1 + 6 and result.replay_failures == {}

    chosen = pick_committed(histories, sqlite_store)
    if os.environ.get("PASSHAT_RECORD_HISTORIES") == "1":
        # The files of earlier shapes stay: runs of those shapes may still be in flight.
        HISTORIES.mkdir(exist_ok=True)
        for name, history in chosen.items():
            (HISTORIES / f"{name}.json").write_text(history.to_json())


def test_committed_histories_cover_every_workflow():
    histories = committed()
    assert {workflow_type(h) for h in histories} == {w.__name__ for w in WORKFLOWS}
    names = {h.workflow_id for h in histories}
    # Task workflows, as the run started them before the sliding window ...
    assert {"run", "task-oracle", "trial-oracle-retried", "trial-noisy-failure", "trial-not-evaluable",
            "run-budget-exhausted"} <= names
    # ... and the run's window of trial workflows that signal their end.
    assert {"window-run", "window-trial-oracle-retried", "window-trial-noisy-failure",
            "window-trial-not-evaluable", "window-run-budget-exhausted"} <= names
    # ... and a gate's rounds.
    assert "rounds-gate" in names
    # ... and a review (`passhat review`).
    assert "review" in names
    # ... and `passhat diagnose` (recorded by tests/cli/test_diagnose_command.py).
    assert "rediagnosis" in names


async def test_live_budget_stop_history_replays(client, sqlite_store, model_server):
    """A run that stops at its budget replays against the code that ran it. Runs after
    test_live_histories_replay, which clears the directory when recording."""
    # Priced by the model args (litellm's custom prices); noisy with P = 1 is the oracle
    # under a name of its own, as litellm keeps a price for the whole process.
    args = json.dumps(http_args(model_server.url, input_cost_per_token=1e-6, output_cost_per_token=2e-6))
    cfg = config(
        run_id=BUDGET_RUN_ID, task_ids=["1", "2"], trials=1, concurrency=1,
        agent_models=["openai/noisy-1.00"], user_model="openai/noisy-1.00",
        agent_args=args, user_args=args, max_cost=1e-9,
    )
    async with worker_for(client, sqlite_store) as queue:
        handle = await start_run(client, sqlite_store, cfg, task_queue=queue)
        await follow(handle, sqlite_store, cfg.run_id, lambda *a: None, poll_s=0.2)
    # One task at a time: the first ran (task 2, the longer one by its gold actions, starts
    # first), its cost reached the budget, the second never started.
    assert sqlite_store.get_run(BUDGET_RUN_ID).status == "budget_exhausted"
    assert [t.task_id for t in sqlite_store.trials(BUDGET_RUN_ID)] == ["2"]
    history = await client.get_workflow_handle(BUDGET_RUN_ID).fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled == ["run_cost", "run_cost", "close_run_over_budget", "summarize_run"]
    # The window's shape: the trial is the run's child, and it signalled its end.
    types = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in types
    await replayer().replay_workflow(history)
    if os.environ.get("PASSHAT_RECORD_HISTORIES") == "1":
        (HISTORIES / "window-run-budget-exhausted.json").write_text(history.to_json())


async def test_live_rounds_history_replays(client, sqlite_store):
    """A gate's rounds (RoundsWorkflow: its choices, recorded as activities, and its
    rounds as child runs) replay against the code that ran them."""
    from dataclasses import asdict

    from passhat.results import gate
    from passhat.workflows.client import start_rounds
    from passhat.workflows.round_choice import Measure
    from passhat.workflows.rounds import RoundsRequest

    cfg = config(run_id=ROUNDS_RUN_ID, task_ids=["0", "1"], trials=1, concurrency=4)
    req = RoundsRequest(config=cfg, fixed_trials=8, measure=Measure(
        kind="gate", max_trials=4, criteria=[asdict(gate.absolute(1, 0.5))]))
    async with worker_for(client, sqlite_store) as queue:
        handle = await start_rounds(client, sqlite_store, req, task_queue=queue)
        record = await handle.result()
    assert record["verdict"] == "PASS" and len(record["rounds"]) >= 2
    history = await handle.fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled.count("choose_round") == len(record["rounds"]) + 1 and scheduled[-1] == "measure_record"
    await replayer().replay_workflow(history)
    if os.environ.get("PASSHAT_RECORD_HISTORIES") == "1":
        (HISTORIES / "rounds-gate.json").write_text(history.to_json())


@pytest.mark.parametrize("name", sorted(p.stem for p in HISTORIES.glob("*.json")))
async def test_committed_history_replays_on_current_code(name):
    history = WorkflowHistory.from_json(name, (HISTORIES / f"{name}.json").read_text())
    await replayer().replay_workflow(history)  # raises on any nondeterminism


# A TrialWorkflow that decides differently: it scores before it opens the trial.
@workflow.defn(name="TrialWorkflow")
class ChangedTrialWorkflow:
    @workflow.run
    async def run(self, spec: TrialSpec) -> TrialOutcome:
        return await workflow.execute_activity(
            "score_trial", spec, start_to_close_timeout=timedelta(minutes=1),
            result_type=TrialOutcome,
        )


async def test_replay_catches_a_nondeterministic_change():
    """The guard has teeth: a changed workflow fails on the committed history."""
    history = WorkflowHistory.from_json("t", (HISTORIES / "trial-oracle-retried.json").read_text())
    result = await replayer(
        [ChangedTrialWorkflow], workflow_runner=UnsandboxedWorkflowRunner()
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "nondetermin" in repr(result.replay_failure).lower()
