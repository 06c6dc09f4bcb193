"""TrialWorkflow: one conversation between the agent, the user simulator and the tools.

The workflow holds only the turn-taking state; every model call and tool execution is an
activity that reads the conversation from the results store and records its own step, so
the workflow's history grows linearly with the number of steps."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from passhat.activities.conversation import ConversationActivities
    from passhat.activities.mcp_tools import UPDATE as MCP_TOOL_CALL, McpCall, McpCallRef
    from passhat.activities.results import NotEvaluable, ResultActivities, ScoreRequest
    from passhat.contracts import StepRef, StepResult, TrialSpec
    from passhat.outcomes import TrialOutcome
    from passhat.domains.a2a_protocol import MAX_RESTARTS as MAX_A2A_RESTARTS, RESTART as A2A_RESTART
    from passhat.domains.nl_judge import JUDGE_ERROR
    from passhat.domains.tau2_version import Tau2Rules, rules_for
    from passhat.infra import search_attributes as sa
    from passhat.workflows.activity_options import bookkeeping, model_call
    from passhat.workflows.cancellation import stop_if_cancelled

# Opening, tool steps and scoring run as local activities: in the worker that runs the
# workflow, recorded as one marker each. They touch only the store and the domain, and a
# tool step in the process that ran the conversation's previous one finds its
# environment in that process's session cache. patched: a history written with them as
# ordinary activities (by an earlier passhat) replays as it was written.
LOCAL_STEPS_PATCH = "local-steps"
# The re-run budget counted by the workflow, and a judge failure re-run as a model
# failure is (tau2 1.0.x). patched: histories recorded before replay on the earlier code.
RERUN_BUDGET_PATCH = "rerun-budget"

# The signal a trial started by a run's sliding window (workflows/window.py) sends that
# run when it ends: the run may have continued as new since it started the trial, and a
# new execution learns of the ends of trials it did not start only this way.
TRIAL_ENDED_SIGNAL = "trial_ended"
REPORT_TO_MEMO = "report_to"


class TrialEnded(BaseModel):
    trial_id: str
    outcome: TrialOutcome | None = None  # None: ended without one (failed, terminated)


class Turns:
    """tau2's orchestrator rules, as a small deterministic state machine: whose turn it
    is, the step count, the tool errors, and why the conversation ended."""

    def __init__(self, spec: TrialSpec, rules: Tau2Rules):
        self.spec = spec
        # The time limit, where the version has one (tau2 1.0.x's --timeout).
        self.timeout_reason = rules.timeout_reason if spec.timeout is not None else None
        self.to_role = "user"  # after the agent's greeting, the user speaks
        self.caller = "assistant"  # who made the pending tool calls
        self.pending_tools: list[str] = []  # their tool names, for the tool step's summary
        self.steps = 0
        self.errors = 0
        self.termination_reason: str | None = None
        self.model_failure: str | None = None  # the failure that ended it, if one did

    def apply(self, r: StepResult, elapsed_s: float | None = None) -> None:
        """Take in a step's result. `elapsed_s` is how long the conversation has run when
        the step ended (workflow time); None for a step recorded by an earlier execution,
        whose time is not known (a resumed conversation's clock starts again)."""
        if r.step == 0:  # the opening: greeting or the task's initial conversation
            self._route(r)
            if r.is_stop:
                self.termination_reason = _stop_reason(r)
            return
        self.steps += 1
        if r.failure:
            # The model's output ended the conversation. tau2 records this as agent_error
            # (whichever side failed) and checks nothing more; a version that re-runs
            # such a simulation has the workflow do that (TrialWorkflow._run).
            self.termination_reason = "agent_error"
            self.model_failure = r.failure
            return
        if r.role == "tool":
            self.errors += r.tool_errors
            self.to_role = self.caller
        else:
            if r.is_stop:
                self.termination_reason = _stop_reason(r)
            self._route(r)
        # tau2 checks the limits after every step that is not followed by tool execution,
        # in this order, each overriding what the step decided (a user stop on the last
        # allowed step ends as max_steps); the time limit comes last and only ends a
        # conversation nothing else ended on that step.
        if self.to_role != "env":
            if self.steps >= self.spec.max_steps:
                self.termination_reason = "max_steps"
            if self.errors >= self.spec.max_errors:
                self.termination_reason = "too_many_errors"
            if (self.timeout_reason and self.termination_reason is None and elapsed_s is not None
                    and elapsed_s >= self.spec.timeout):
                self.termination_reason = self.timeout_reason

    def _route(self, r: StepResult) -> None:
        if r.role == "tool":
            self.to_role = "assistant"
        elif r.is_tool_call:
            self.caller, self.to_role = r.role, "env"
            self.pending_tools = r.tool_names
        else:
            self.to_role = "user" if r.role == "assistant" else "assistant"


def _stop_reason(r: StepResult) -> str:
    """Who ended the conversation: the user (its stop tokens), or an agent of tau2's
    registry whose is_stop said so."""
    return "agent_stop" if r.role == "assistant" else "user_stop"


class _McpTurn:
    """An agent turn in MCP mode that takes tool calls: the conversation's state machine,
    the next free step, and the conversation's clock."""

    def __init__(self, turns: Turns, step: int, started):  # noqa: ANN001 - a datetime
        self.turns = turns
        self.next_step = step
        self.started = started


@workflow.defn
class TrialWorkflow:
    _mcp_turn: _McpTurn | None = None
    _mcp_lock: asyncio.Lock | None = None

    @workflow.run
    async def run(self, spec: TrialSpec) -> TrialOutcome:
        # The id of the run workflow to signal once the trial has ended, in the memo it
        # was started with (the input stays the TrialSpec that recorded histories hold).
        # A trial of a task workflow, as started before the sliding window, has none.
        report_to = workflow.memo_value(REPORT_TO_MEMO, None, type_hint=str)
        outcome = await self._run(spec)
        # Shown in the UI: the outcome as a search attribute, reward and reason as memo.
        label = outcome.label
        workflow.upsert_search_attributes([sa.OUTCOME.value_set(label)])
        workflow.upsert_memo({
            "outcome": label,
            "reward": outcome.reward,
            "termination_reason": outcome.termination_reason,
            "error": outcome.error,
        })
        workflow.set_current_details(
            f"**{label}**: reward {outcome.reward}, {outcome.termination_reason or outcome.error}"
        )
        if report_to is not None:
            await report_end(report_to, outcome)
        if not outcome.evaluable:
            # Red in the Temporal UI, with the error; the task workflow records it, leaves
            # it out of pass^k and lets the siblings finish, and resume runs it again.
            raise ApplicationError(
                f"not evaluable: {outcome.error}",
                outcome,
                type=outcome.error_class or "NotEvaluable",
                non_retryable=True,
            )
        return outcome

    async def _run(self, spec: TrialSpec) -> TrialOutcome:
        options = self._store_options = bookkeeping(spec.retry)
        self._local = workflow.patched(LOCAL_STEPS_PATCH)
        try:
            scored = await self._store_step(ResultActivities.open_trial, spec)
            if scored is not None:  # already scored by an earlier execution: resume skips it
                return scored
            rules = rules_for(spec.tau2_version)
            if not workflow.patched(RERUN_BUDGET_PATCH):
                return await self._run_before_rerun_budget(spec, rules)
            # tau2 1.0.x's run_with_retry: a simulation that raises (a model failure, or
            # a judge reply its evaluator cannot read) runs again from the start, up to
            # `simulation_retries` times, and then ends as `exhausted_reason`. The budget
            # is this execution's: tau2's resume runs a simulation it gave up on afresh.
            reruns = restarts = 0
            while True:
                turns, step = await self._converse(spec, rules)
                if turns.model_failure == A2A_RESTART:
                    # An A2A turn whose outcome is not known: the conversation restarts
                    # in a fresh context, outside tau2's re-run budget (the agent did
                    # not fail; what it saw is not known). Not without end: an agent
                    # that keeps failing mid-turn would be paid for again and again.
                    if restarts >= MAX_A2A_RESTARTS:
                        return await workflow.execute_activity_method(
                            ResultActivities.mark_not_evaluable,
                            NotEvaluable(trial=spec, error_class=A2A_RESTART, error=(
                                f"restarted {restarts} times in a fresh A2A context, and a turn's outcome was "
                                "not known again: given up")),
                            **options)
                    restarts += 1
                    await self._store_step(ResultActivities.set_attempt_aside, spec)
                    continue
                failure = turns.model_failure if rules.on_model_failure == "rerun" else None
                if turns.model_failure is None and rules.grades_nl_assertions \
                        and turns.termination_reason in ("user_stop", "agent_stop"):
                    failure = await self._judged(spec, step, turns.termination_reason, rules)
                if failure is None:
                    break
                # (--rejudge has re-asked the judge alone as many times as tau2 re-runs)
                judge_final = failure == JUDGE_ERROR and (spec.rejudge or rules.on_judge_failure != "rerun")
                if reruns >= rules.simulation_retries or judge_final:
                    return await self._given_up(spec, rules, failure, reruns + 1)
                reruns += 1
                await self._store_step(ResultActivities.set_attempt_aside, spec)
            return await self._store_step(
                ResultActivities.score_trial,
                ScoreRequest(trial=spec, termination_reason=turns.termination_reason, n_steps=step),
            )
        except (ActivityError, asyncio.CancelledError) as err:
            if is_cancelled_exception(err):
                # The run is being cancelled: not the trial's failure. The trial says so in
                # the store (its recorded steps stay), and resume continues it.
                await workflow.execute_activity_method(
                    ResultActivities.mark_cancelled, spec, **options
                )
                raise
            cause = err.cause
            error_class = cause.type if isinstance(cause, ApplicationError) and cause.type else (
                type(cause).__name__ if cause else "ActivityError"
            )
            message = str(cause) if cause else str(err)
            workflow.logger.warning("trial %s not evaluable: %s", spec.trial_id, message)
            return await workflow.execute_activity_method(
                ResultActivities.mark_not_evaluable,
                NotEvaluable(trial=spec, error=message, error_class=error_class),
                **options,
            )

    async def _judged(self, spec: TrialSpec, step: int, reason: str, rules: Tau2Rules) -> str | None:
        """The judge's step; JUDGE_ERROR when its reply cannot be read (after re-asking
        the judge alone `simulation_retries` times, where the run opted into that)."""
        for asked in range(1 + (rules.simulation_retries if spec.rejudge else 0)):
            if asked:
                await self._store_step(ResultActivities.set_judge_aside, spec)
            if await self._judge(spec, step, reason):
                return None
        return JUDGE_ERROR

    async def _given_up(self, spec: TrialSpec, rules: Tau2Rules, failure: str, attempts: int) -> TrialOutcome:
        """The trial the version gave up on: not evaluable, recorded as tau2 records it."""
        what = "the NL-assertion judge's reply could not be read" if failure == JUDGE_ERROR else failure
        rejudged = failure == JUDGE_ERROR and spec.rejudge
        tries = 1 + rules.simulation_retries if rejudged else attempts
        return await workflow.execute_activity_method(
            ResultActivities.mark_not_evaluable,
            NotEvaluable(
                trial=spec,
                error=f"{what}, on every one of {tries} "
                      + ("judge calls" if rejudged else "attempt" if tries == 1 else "attempts"),
                error_class=failure,
                termination_reason=rules.exhausted_reason,
            ),
            **self._store_options,
        )

    async def _run_before_rerun_budget(self, spec: TrialSpec, rules: Tau2Rules) -> TrialOutcome:
        """The trial as executions recorded before RERUN_BUDGET_PATCH ran it (they replay
        on it): the re-run budget counted in the store, a judge failure not re-run."""
        options = self._store_options
        while True:
            turns, step = await self._converse(spec, rules)
            if turns.model_failure is None or rules.on_model_failure != "rerun":
                break
            if await self._store_step(ResultActivities.restart_trial, spec) is None:
                return await workflow.execute_activity_method(
                    ResultActivities.mark_not_evaluable,
                    NotEvaluable(
                        trial=spec,
                        error=f"{turns.model_failure} on every one of "
                        f"{1 + rules.simulation_retries} attempts",
                        error_class=turns.model_failure,
                        termination_reason=rules.exhausted_reason,
                    ),
                    **options,
                )
        if rules.grades_nl_assertions and turns.termination_reason in ("user_stop", "agent_stop"):
            if not await self._judge(spec, step, turns.termination_reason):
                return await workflow.execute_activity_method(
                    ResultActivities.mark_not_evaluable,
                    NotEvaluable(trial=spec, error="the NL-assertion judge's reply could not be read",
                                 error_class="JudgeError", termination_reason=rules.exhausted_reason),
                    **options,
                )
        return await self._store_step(
            ResultActivities.score_trial,
            ScoreRequest(trial=spec, termination_reason=turns.termination_reason, n_steps=step),
        )

    async def _converse(self, spec: TrialSpec, rules: Tau2Rules) -> tuple[Turns, int]:
        """Run the conversation from its recorded steps until it ends."""
        # The conversation's clock, for a time limit: workflow time, which a replay of
        # this history reads back unchanged, so the limit ends it at the same step.
        started = workflow.now()
        recorded = await self._store_step(ResultActivities.recorded_steps, spec)
        turns = Turns(spec, rules)
        for result in recorded:
            turns.apply(result)
        step = len(recorded)
        while turns.termination_reason is None:
            # A cancel that arrived while the previous step ran, and did not stop it,
            # stops the conversation here: no model call starts after it.
            stop_if_cancelled()
            if spec.agent_tools == "mcp" and turns.to_role == "assistant":
                step = await self._mcp_agent_turn(spec, turns, step, started)
                continue
            result = await self._step(spec, turns.to_role, step, turns.pending_tools)
            turns.apply(result, elapsed_s=(workflow.now() - started).total_seconds())
            step += 1
        return turns, step

    async def _mcp_agent_turn(self, spec: TrialSpec, turns: Turns, step: int, started) -> int:  # noqa: ANN001
        """The agent's turn when its tools are served over MCP: while it runs, the agent's
        tool calls arrive as updates (mcp_tool_call), each recorded as a tool-call step
        and a tool step; the reply is recorded after them. The next step's number."""
        if self._mcp_lock is None:
            self._mcp_lock = asyncio.Lock()
        self._mcp_turn = _McpTurn(turns, step, started)
        try:
            result = await self._step(spec, "assistant", step, [])
        finally:
            self._mcp_turn = None  # no call is taken from here on
        await workflow.wait_condition(lambda: not self._mcp_lock.locked())
        if turns.termination_reason is None:  # not already ended by a tool call's step
            turns.apply(result, elapsed_s=(workflow.now() - started).total_seconds())
        return result.step + 1

    @workflow.update(name=MCP_TOOL_CALL)
    async def mcp_tool_call(self, call: McpCall) -> StepResult:
        """One tool call of the agent's over MCP (passhat.activities.mcp_tools; the update
        id is the call's idempotency key): the call recorded as the agent's step, then
        executed as the trial's tool step. The tool step's result."""
        async with self._mcp_lock:
            turn = self._mcp_turn
            if turn is None or turn.turns.termination_reason is not None:
                raise ApplicationError("the agent's turn is over: no tool call is taken now", type="McpTurnOver")
            spec, step = turn.turns.spec, turn.next_step
            called = await self._store_step(ConversationActivities.record_mcp_call,
                                            McpCallRef(trial=spec, step=step, call=call))
            turn.turns.apply(called)
            answered = await self._store_step(ConversationActivities.tool_turn, StepRef(trial=spec, step=step + 1),
                                              summary=tool_summary([call.name], step + 1))
            turn.turns.apply(answered, elapsed_s=(workflow.now() - turn.started).total_seconds())
            turn.next_step = step + 2
            return answered

    @mcp_tool_call.validator
    def _mcp_turn_open(self, call: McpCall) -> None:
        if self._mcp_turn is None or self._mcp_turn.turns.termination_reason is not None:
            raise ValueError("no agent turn of this trial is waiting for tool calls")

    async def _step(self, spec: TrialSpec, to_role: str, step: int, tools: list[str]) -> StepResult:
        ref = StepRef(trial=spec, step=step)
        if to_role == "env":
            return await self._store_step(
                ConversationActivities.tool_turn, ref, summary=tool_summary(tools, step)
            )
        # A capped provider's calls go to its own task queue, where the Temporal server
        # holds them to the cap for every worker.
        options = model_call(spec.retry)
        if to_role == "assistant":
            return await workflow.execute_activity_method(
                ConversationActivities.agent_turn, ref, **options,
                task_queue=spec.model_queue(spec.agent_model),
                summary=f"agent {spec.agent_model}, step {step}",
            )
        return await workflow.execute_activity_method(
            ConversationActivities.user_turn, ref, **options,
            task_queue=spec.model_queue(spec.user_model),
            summary=f"user {spec.user_model}, step {step}",
        )

    async def _judge(self, spec: TrialSpec, step: int, reason: str) -> bool:
        """The NL-assertion judge's step (a model call: its options and queue)."""
        return await workflow.execute_activity_method(
            ConversationActivities.judge_turn,
            StepRef(trial=spec, step=0, termination_reason=reason),
            **model_call(spec.retry),
            task_queue=spec.model_queue(spec.judge_model or ""),
            summary=f"judge {spec.judge_model}, after step {step - 1}",
        )

    async def _store_step(self, activity, arg, summary: str | None = None):  # noqa: ANN001, ANN202
        """Run a step that works on the store and the domain (not a model call)."""
        run = workflow.execute_local_activity_method if self._local else workflow.execute_activity_method
        return await run(activity, arg, **self._store_options, summary=summary)


async def report_end(run_workflow_id: str, outcome: TrialOutcome) -> None:
    """Tell the run (its current execution: the signal goes by workflow id) that this
    trial has ended. A run that has closed meanwhile (cancelled, terminated) needs no
    news: the failure to deliver is logged, not raised."""
    try:
        await workflow.get_external_workflow_handle(run_workflow_id).signal(
            TRIAL_ENDED_SIGNAL, TrialEnded(trial_id=outcome.trial_id, outcome=outcome)
        )
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the server answered
        workflow.logger.warning("trial %s could not report to run %s: %s", outcome.trial_id, run_workflow_id, err)


def tool_summary(tools: list[str], step: int, limit: int = 200) -> str:
    """The Temporal UI's line for a tool step: the tools it runs, in the order called
    ("tools: get_reservation_details, update_reservation_flights, step 9"). Built from
    the step result that asked for them, so a replay builds the same line."""
    if not tools:  # a step recorded before tool names were (histories of older runs)
        return f"tools, step {step}"
    names = ", ".join(dict.fromkeys(tools))
    if len(names) > limit:
        names = names[: limit - 3].rsplit(",", 1)[0] + ", ..."
    return f"tools: {names}, step {step}"
