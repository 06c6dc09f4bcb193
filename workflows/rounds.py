"""RoundsWorkflow: a measurement in rounds (`passhat gate`, `passhat run --adaptive`), each
round a run of its own that picks its tasks from the rounds before it.

Round r is the run `ID-rR` in the results store, started as a child RunWorkflow: it runs
the tasks the measurement chooses (workflows/round_choice.py) from the rounds recorded
before it, each `size` trials, with the seed shifted by seed_offset + r so its trials are
new draws. Which tasks a round runs follows only from the rounds recorded before it, so
the rounds are the same whichever execution builds them: a round found complete in the
store is read back, an interrupted one is resumed (its scored trials kept), and nothing
finished runs twice. A trial a round leaves not evaluable (a provider, the network or
passhat failed it after its calls' retries) is continued before the round's evidence is
read, up to CONTINUATIONS times: the same trial, from its recorded steps, only the failed
call made again; never a new draw in its place. What is still not evaluable after that,
each test reads against itself (passhat.results.gate_units; docs/gate.md, Not
evaluable). A gate on pass^k with k > 1 curtails its rounds (passhat.curtailment): a
task's trials run one after another until its blocks of the round are decided.

The rounds are orchestration: here they survive a killed command (the workers that serve
them are forked once, before anything else), show in the Temporal UI under the
measurement's id, and end with its record as the workflow's result."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy

with workflow.unsafe.imports_passed_through():
    from passhat.activities.results import (
        ContinuationRequest,
        ResultActivities,
        RoundOutcomesRequest,
        RoundState,
    )
    from passhat.contracts import RunConfig
    from passhat.outcomes import RUN_BUDGET_EXHAUSTED, RUN_COMPLETED, TrialOutcome
    from passhat.workflows.activity_options import bookkeeping
    from passhat.workflows.round_choice import (
        Choice,
        ChoiceRequest,
        Measure,
        RecordRequest,
        choose_round,
        measure_record,
    )
    from passhat.results import gate_rounds
    from passhat.results.gate_personas import outcome_keys
    from passhat.workflows.run import RunRequest, RunWorkflow


CONTINUATIONS = gate_rounds.CONTINUATIONS
# Marks the executions that continue a round's not-evaluable trials. patched: histories
# recorded before replay without them.
CONTINUE_PATCH = "continue-not-evaluable"


def round_id(run_id: str, r: int) -> str:
    return f"{run_id}-r{r}"


class RoundsRequest(BaseModel):
    config: RunConfig  # the whole suite; its run id names the measurement
    measure: Measure
    seed_offset: int = 0  # round r runs with config.seed + seed_offset + r
    fixed_trials: int  # trials per task of the fixed design the record is compared with

    def fingerprint(self) -> str:
        """What the rounds measure: the experiment (run_identity.fingerprint), the
        measurement and the seeds. A command that attaches to them must say the same."""
        from passhat.contracts import stable_hash
        from passhat.run_identity import fingerprint

        # whole_blocks and baseline_curtail count only when set: rounds recorded before they
        # existed keep theirs.
        unset = {name for name in ("whole_blocks", "baseline_curtail") if not getattr(self.measure, name)}
        measure = self.measure.model_dump_json(exclude=unset)
        return stable_hash(f"{fingerprint(self.config)}/{measure}/{self.seed_offset}")

    def tasks(self) -> list[str]:
        return [f"{d}/{t}" for d in self.config.domains for t in self.config.task_ids[d]]

    def outcome_keys(self) -> list[str]:
        """What the rounds' outcomes are keyed by: each task, and each task under each user
        persona (its own unit: passhat.results.gate_personas); without personas, the tasks."""
        return outcome_keys(self.tasks(), list(self.config.user_personas))

    def round_config(self, r: int, chosen: list[str], spent: float) -> RunConfig:
        """Round r's run: the chosen tasks, each one block of trials, with what is left
        of the budget."""
        base = self.config
        per_domain = {d: [t for t in base.task_ids[d] if f"{d}/{t}" in chosen] for d in base.domains}
        return base.model_copy(update={
            "run_id": round_id(base.run_id, r), "trials": self.measure.round_trials(),
            "curtail": self.measure.curtail(),
            "seed": base.seed + self.seed_offset + r,
            "domains": [d for d in base.domains if per_domain[d]],
            "task_ids": {d: ids for d, ids in per_domain.items() if ids},
            "expected_calls": {d: c for d, c in base.expected_calls.items() if per_domain.get(d)},
            "max_cost": None if base.max_cost is None else base.max_cost - spent,
        })


@workflow.defn
class RoundsWorkflow:
    def __init__(self) -> None:
        self._request: RoundsRequest | None = None
        self._rounds: list[str] = []

    @workflow.query
    def request(self) -> RoundsRequest | None:
        """What the rounds measure: a command that attaches to them checks it is the same."""
        return self._request

    @workflow.query
    def rounds(self) -> list[str]:
        """The round runs so far, the last one possibly still running."""
        return list(self._rounds)

    @workflow.run
    async def run(self, req: RoundsRequest) -> dict[str, Any]:
        self._request = req
        config = req.config
        opts = bookkeeping(config.retry)
        # The measurement's own computations run a while on a large suite.
        computing = opts | {"start_to_close_timeout": timedelta(minutes=10)}
        done: list[str] = []
        stopped: str | None = None
        while True:
            data = await workflow.execute_activity_method(
                ResultActivities.round_outcomes, RoundOutcomesRequest(run_ids=done, tasks=req.outcome_keys()), **opts)
            spent = await workflow.execute_activity_method(ResultActivities.runs_cost, done, **opts)
            choice: Choice = await workflow.execute_activity(
                choose_round, ChoiceRequest(measure=req.measure, rounds=data), **computing)
            if not choice.tasks:
                stopped = choice.stopped
                break
            if config.max_cost is not None and spent >= config.max_cost:
                stopped = f"the budget of {config.max_cost:g} USD is spent"
                break
            round_config = req.round_config(len(done), choice.tasks, spent)
            self._rounds = [*done, round_config.run_id]
            state = await self._run_round(round_config, opts)
            done.append(round_config.run_id)
            if state.status == RUN_BUDGET_EXHAUSTED:
                stopped = "the budget (--max-cost) ran out during the round"
                break
        data = await workflow.execute_activity_method(
            ResultActivities.round_outcomes, RoundOutcomesRequest(run_ids=done, tasks=req.outcome_keys()), **opts)
        cost = await workflow.execute_activity_method(ResultActivities.runs_cost, done, **opts)
        return await workflow.execute_activity(measure_record, RecordRequest(
            measure=req.measure, run_id=config.run_id, rounds=done, outcomes=data, tasks=len(req.outcome_keys()),
            fixed_trials=req.fixed_trials, cost_usd=cost, stopped=stopped, seed_offset=req.seed_offset,
        ), **computing)

    async def _run_round(self, config: RunConfig, opts: dict[str, Any]) -> RoundState:
        """Run the round (or finish an interrupted one) as a child run, then continue its
        not-evaluable trials. A round recorded complete is read back, its trials continued
        if they have not been as many times as they may.

        A continuation is the round's run again, on the same trial ids: a scored trial
        stands (RunRequest.ended), a not-evaluable one starts again from its recorded steps
        (TrialWorkflow: the failed call is made again, nothing recorded runs twice). The
        round's trials were fixed with the round, before any outcome, and a continued trial
        that completes shows the outcome it would have had had its call not failed; one
        that does not is read against each test. A new draw in its place would give a
        would-be failure a second chance (docs/gate.md, Not evaluable), so a trial that
        its tau2 version gave up on, whose resume runs it afresh, stands as it is."""
        state: RoundState = await workflow.execute_activity_method(ResultActivities.open_round, config, **opts)
        continuing = workflow.patched(CONTINUE_PATCH)
        if state.status != RUN_COMPLETED:
            ended: list[TrialOutcome] = []
            if continuing and state.status != "new":  # interrupted: what ended stands
                ended = (await self._continuation(config, opts)).ended
            state = await self._run(config, ended, opts)
        if not continuing:
            return state
        for _ in range(CONTINUATIONS):
            if state.status != RUN_COMPLETED:  # over its budget: no more conversations
                break
            continuation = await self._continuation(config, opts)
            if not continuation.continued:
                break
            state = await self._run(config, continuation.ended, opts)
        return state

    async def _continuation(self, config: RunConfig, opts: dict[str, Any]):  # noqa: ANN202 - a Continuation
        return await workflow.execute_activity_method(
            ResultActivities.round_continuation,
            ContinuationRequest(run_id=config.run_id, continuations=CONTINUATIONS), **opts)

    async def _run(self, config: RunConfig, ended: list[TrialOutcome], opts: dict[str, Any]) -> RoundState:
        await workflow.execute_child_workflow(
            # On the rounds' own task queue (a child's default), which serves the run's plugins.
            RunWorkflow.run, RunRequest(config=config, ended=ended), id=config.run_id,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            static_summary=f"round {config.run_id}: {sum(len(t) for t in config.task_ids.values())} "
                           f"task(s) x {config.trials_label()}"
                           + (", continuing its not-evaluable trials" if ended else ""),
        )
        return await workflow.execute_activity_method(ResultActivities.round_state, config.run_id, **opts)
