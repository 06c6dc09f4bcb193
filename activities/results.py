"""Activities that open, score and record trials, and aggregate tasks and runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from passhat import metrics
from passhat.activities.conversation import recorded_result
from passhat.contracts import RunConfig, StepResult, TrialSpec
from passhat.messages import AGENT_GREETING, Message
from passhat.outcomes import (
    RUN_BUDGET_EXHAUSTED,
    RUN_COMPLETED,
    RUN_RUNNING,
    TRIAL_NOT_EVALUABLE,
    TRIAL_SCORED,
    RunSummary,
    TaskOutcome,
    TrialOutcome,
    is_success,
    outcome_label,
)
from passhat.domains.nl_judge import JUDGE_ERROR, judge_key, parse_verdicts
from passhat.domains.registry import get_domain
from passhat.domains.task_file import TaskFileError, task_files_now
from passhat.domains.tau2_version import GIVEN_UP, rules_for
from passhat.infra import tracing
from passhat.infra.store import Store
from passhat.infra.store_tables import RunRow
from passhat.personas import outcome_key
from passhat.run_identity import ConfigMismatchError, Recorded, check_attach, recorded_config, same_experiment


class ScoreRequest(BaseModel):
    trial: TrialSpec
    termination_reason: str
    n_steps: int


class NotEvaluable(BaseModel):
    trial: TrialSpec
    error: str
    error_class: str
    termination_reason: str | None = None  # as tau2 would record it, if it would


class RoundOutcomesRequest(BaseModel):
    run_ids: list[str]  # the rounds so far, in order
    tasks: list[str]  # every task of the measurement, "domain/task"


class RoundState(BaseModel):
    status: str  # the round run's status in the store
    not_evaluable: int  # its trials left not evaluable


class ContinuationRequest(BaseModel):
    run_id: str  # a round's run
    continuations: int  # how many times a trial left not evaluable is continued


class Continuation(BaseModel):
    """A round's trials as its run continues them (workflows/rounds.py)."""

    continued: int  # trials to continue: not evaluable, continued fewer than `continuations` times
    ended: list[TrialOutcome]  # trials whose outcome stands: the run does not start them again


@dataclass
class Attaching:
    """A configuration checked against the run recorded under its id: that run (None for
    a new one), and the tasks of its task files as they are now, to keep with it."""

    stored: RunRow | None
    task_files: dict[str, tuple[str, list[Any]]]


def check_run(store: Store, config: RunConfig) -> Attaching:
    """Read what the store holds under config's id and refuse (run_identity's
    ConfigMismatchError, one line) a configuration that may not attach to it; nothing
    is written. What `passhat run` checks before it asks anything, and record_run first."""
    task_files = task_files_now(config.domains)
    stored = store.get_run(config.run_id)
    recorded = None
    if stored is not None:
        kept = {domain: (row.digest, row.tasks()) for domain, row in store.run_tasks(config.run_id).items()}
        recorded = Recorded(config.run_id, stored.fingerprint, recorded_config(stored.config_json), kept)
    check_attach(config, recorded, task_files)
    return Attaching(stored, task_files)


def record_run(store: Store, config: RunConfig, checked: Attaching | None = None) -> RunRow | None:
    """Record a run before its workflow starts, or find it again (a configuration that
    may not attach to it is refused): what `passhat run` and each round of a gate write
    first. `checked`: check_run's answer, when the caller has it already. The run
    recorded before, or None."""
    checked = checked or check_run(store, config)
    row = store.create_run(config, config.total_trials())
    if checked.stored is None:  # another process may have recorded the id meanwhile
        same_experiment(Recorded(config.run_id, row.fingerprint, recorded_config(row.config_json)), config)
    for domain, (digest, tasks) in checked.task_files.items():
        store.keep_run_tasks(config.run_id, domain, digest, tasks)
    return checked.stored


def trial_outcomes(store: Store, run_ids: list[str]) -> dict[str, list[bool | None]]:
    """"domain/task" -> its trials' outcomes (True, False, None: not evaluable) in the
    order they ran: run by run, trial index within a run. A persona's trials are their own
    task, "domain/task@PERSONA" (passhat.personas.outcome_key): never pooled with another
    user's."""
    out: dict[str, list[bool | None]] = {}
    for run_id in run_ids:
        for row in sorted(store.trials(run_id), key=lambda t: (t.domain, t.task_id, t.user_persona or "",
                                                               t.trial_index)):
            scored = row.status == TRIAL_SCORED and row.reward is not None
            key = outcome_key(f"{row.domain}/{row.task_id}", row.user_persona)
            out.setdefault(key, []).append(is_success(row.reward) if scored else None)
    return out


def diagnose_trial(domain: str, task_id: str, steps: list, reward_info: dict, termination_reason: str | None,
                   verdicts: list | None = None):  # noqa: ANN201 - dict | None
    """A failed trial's diagnosis, for domains that diagnose (tau2's and plugins built on
    them); `verdicts`, the NL-assertion judge's as recorded (with its reasons)."""
    diagnose = getattr(get_domain(domain), "diagnose", None)
    if diagnose is None:
        return None
    recorded = [(s.step, s.message_list()) for s in steps]
    diagnosed = {**reward_info, "nl_checks": verdicts} if verdicts else reward_info
    return diagnose(task_id, recorded, diagnosed, termination_reason)


def recorded_verdicts(store: Store, trial_id: str, tau2_version: str | None) -> list | None:
    """The NL-assertion judge's verdicts the trial recorded (tau2 1.0.x), or None."""
    judged = store.get_step(judge_key(trial_id), 0)
    return parse_verdicts(judged.message_list()[-1].content, rules_for(tau2_version)) if judged else None


def outcome_of(row) -> TrialOutcome:  # noqa: ANN001 - a TrialRow
    return TrialOutcome(
        trial_id=row.trial_id,
        task_id=row.task_id,
        trial_index=row.trial_index,
        evaluable=row.status == TRIAL_SCORED,
        reward=row.reward,
        termination_reason=row.termination_reason,
        error=row.error,
        error_class=row.error_class,
    )


class ResultActivities:
    def __init__(self, store: Store):
        self.store = store

    @activity.defn
    def open_trial(self, spec: TrialSpec) -> TrialOutcome | None:
        """Open the trial record, or reopen it on resume. A trial that was scored by an
        earlier execution is final: its outcome is returned and nothing runs again. A
        trial its tau2 version gave up on (1.0.x: infrastructure_error, after re-running
        it) starts again from the beginning, as tau2's resume drops such a simulation and
        runs it afresh: its last attempt is set aside (or, where the run re-asks only the
        judge, the judge's failed step)."""
        prior = self.store.get_trial(spec.trial_id)
        if prior is not None and prior.status == TRIAL_NOT_EVALUABLE and prior.termination_reason in GIVEN_UP:
            if spec.rejudge and prior.error_class == JUDGE_ERROR:
                self.store.discard_judge(spec.trial_id)
            else:
                self.store.discard_attempt(spec.trial_id)
        row = self.store.begin_trial(spec)
        if row.status == TRIAL_SCORED:
            return outcome_of(row)
        if tracing.enabled():
            self.store.set_trace_id(spec.trial_id, tracing.trace_id_hex(spec.trial_id))
        return None

    @activity.defn
    def recorded_steps(self, spec: TrialSpec) -> list[StepResult]:
        """The steps recorded so far, starting with step 0 (the task's initial
        conversation, or the agent's greeting), which is written here the first time."""
        if self.store.get_step(spec.trial_id, 0) is None:
            task = get_domain(spec.domain).task(spec.task_id)
            opening = task.initial_messages or [Message(role="assistant", content=AGENT_GREETING)]
            self.store.record_step(spec.trial_id, spec.run_id, 0, opening[-1].role, opening)
        return [recorded_result(s) for s in self.store.steps(spec.trial_id)]

    @activity.defn
    def score_trial(self, req: ScoreRequest) -> TrialOutcome:
        spec = req.trial
        steps = self.store.steps(spec.trial_id)
        messages = [m for step in steps for m in step.message_list()]
        last = steps[-1]
        # A conversation the model's own output, or the agent's code, ended (tau2's
        # agent_error): say which, and where in the agent's code.
        failure = (
            (last.failure_class, "agent" if last.role == "assistant" else "user", last.failure)
            if last.failure_class
            else None
        )
        verdicts = recorded_verdicts(self.store, spec.trial_id, spec.tau2_version)
        with tracing.span("passhat.score", spec.trial_id, tracing.trial_attributes(spec)) as span:
            judged = {} if verdicts is None else {"nl_checks": verdicts}  # only judged domains take it
            score = get_domain(spec.domain).score(spec.task_id, messages, req.termination_reason, **judged)
            span.set_attributes({
                "passhat.reward": score.reward,
                "passhat.termination_reason": req.termination_reason,
                **{f"passhat.reward.{k}": v for k, v in score.breakdown.items()},
            })
        reward_info = {"breakdown": score.breakdown, **score.info}
        diagnosis = None
        if not is_success(score.reward):
            diagnosis = diagnose_trial(spec.domain, spec.task_id, steps, reward_info, req.termination_reason, verdicts)
        self.store.finish_trial(
            spec.trial_id,
            reward=score.reward,
            success=is_success(score.reward),
            reward_info=reward_info,
            termination_reason=req.termination_reason,
            n_steps=req.n_steps,
            model_failure=failure,
            error_at=last.failure_at if failure else None,
            diagnosis=diagnosis,
        )
        return self._closed(spec)

    @activity.defn
    def mark_cancelled(self, spec: TrialSpec) -> None:
        self.store.mark_cancelled(spec.trial_id)

    @activity.defn
    def mark_not_evaluable(self, req: NotEvaluable) -> TrialOutcome:
        self.store.mark_not_evaluable(
            req.trial.trial_id, req.error, req.error_class, req.termination_reason
        )
        return self._closed(req.trial)

    @activity.defn
    def restart_trial(self, spec: TrialSpec) -> int | None:
        """Set the trial's conversation aside so that it runs again from the start, as
        the tau2 version's rules re-run a simulation that failed. The number of attempts
        set aside, or None when the rules allow no more (the current attempt stands).
        Histories recorded before set_attempt_aside (RERUN_BUDGET_PATCH) replay with it."""
        return self.store.discard_attempt(
            spec.trial_id, rules_for(spec.tau2_version).simulation_retries
        )

    @activity.defn
    def set_attempt_aside(self, spec: TrialSpec) -> int:
        """Set the trial's attempt (its conversation and the judge's step) aside so that
        it runs again from the start; the workflow counts the re-runs. The number of
        attempts now set aside."""
        return self.store.discard_attempt(spec.trial_id) or 0

    @activity.defn
    def set_judge_aside(self, spec: TrialSpec) -> int:
        """Set the judge's failed step aside so that the judge is asked again (the run's
        opt-in departure `rejudge`); the conversation stays."""
        return self.store.discard_judge(spec.trial_id)

    def _closed(self, spec: TrialSpec) -> TrialOutcome:
        """The trial's outcome, and its root span in the trace."""
        row = self.store.get_trial(spec.trial_id)
        outcome = outcome_of(row)
        tracing.record_trial_root(
            spec.trial_id,
            row.started_at,
            {
                **tracing.trial_attributes(spec),
                "passhat.outcome": outcome_label(row.status, row.reward),
                "passhat.reward": row.reward,
                "passhat.termination_reason": row.termination_reason,
                "passhat.error_class": row.error_class,
                "gen_ai.usage.input_tokens": row.input_tokens,
                "gen_ai.usage.output_tokens": row.output_tokens,
            },
            error=row.error,
        )
        return outcome

    @activity.defn
    def record_task(self, outcome: TaskOutcome) -> None:
        self.store.record_task(outcome)

    @activity.defn
    def summarize_run(self, run_id: str) -> RunSummary:
        """pass^k per (agent model, domain), from the task results recorded so far."""
        run = self.store.get_run(run_id)
        departures = run.run_config().departures() if run is not None else []
        return metrics.summarize(run_id, self.store.task_results(run_id), departures)

    @activity.defn
    def close_run(self, run_id: str) -> None:
        """A curtailed round (RunConfig.curtail) ran the trials its blocks needed, fewer
        than its config's most: those are what it was to run."""
        row = self.store.get_run(run_id)
        curtailed = row is not None and row.run_config().curtail
        self.store.set_run_status(run_id, RUN_COMPLETED,
                                  total_trials=len(self.store.trials(run_id)) if curtailed else None)

    @activity.defn
    def run_cost(self, run_id: str) -> float:
        """What the run has recorded spending so far (USD), for its budget."""
        return self.store.run_cost(run_id)

    @activity.defn
    def close_run_over_budget(self, run_id: str) -> None:
        """The run stopped starting conversations at its budget; resume continues it."""
        self.store.set_run_status(run_id, RUN_BUDGET_EXHAUSTED)

    # ---- rounds (workflows/rounds.py) ----------------------------------------------------

    @activity.defn
    def round_outcomes(self, req: RoundOutcomesRequest) -> list[dict[str, list[bool | None]]]:
        """Each round's outcomes; the first lists every task (before any round: none run)."""
        data = [trial_outcomes(self.store, [run_id]) for run_id in req.run_ids] or [{}]
        data[0] = {task: [] for task in req.tasks} | data[0]
        return data

    @activity.defn
    def runs_cost(self, run_ids: list[str]) -> float:
        return sum(self.store.run_cost(run_id) for run_id in run_ids)

    @activity.defn
    def open_round(self, config: RunConfig) -> RoundState:
        """Record a round's run (or find it again) and mark it running unless it is
        complete; its state as it was found."""
        row = self.store.get_run(config.run_id)
        if row is not None and row.status == RUN_COMPLETED:
            return self.round_state(config.run_id)
        try:
            stored = record_run(self.store, config)
        except (ConfigMismatchError, TaskFileError) as err:
            raise ApplicationError(str(err), type="ConfigMismatchError", non_retryable=True) from None
        if stored is not None:
            self.store.set_run_status(config.run_id, RUN_RUNNING)
        return RoundState(status=stored.status if stored is not None else "new",
                          not_evaluable=len(self.store.trials(config.run_id, status=TRIAL_NOT_EVALUABLE)))

    @activity.defn
    def round_continuation(self, req: ContinuationRequest) -> Continuation:
        """Which of a round's trials its run continues: those left not evaluable (by a
        provider, the network or passhat, after their calls' retries) that have been
        continued fewer than `continuations` times, each from its recorded steps. Every
        other trial that ended stands: scored, continued enough, or given up on by its
        tau2 version, whose resume would run it afresh (a new draw, not a continuation)."""
        continued, ended = 0, []
        for row in self.store.trials(req.run_id):
            if row.status == TRIAL_NOT_EVALUABLE and row.termination_reason not in GIVEN_UP \
                    and row.attempts <= req.continuations:
                continued += 1
            elif row.status in (TRIAL_SCORED, TRIAL_NOT_EVALUABLE):
                ended.append(outcome_of(row))
        return Continuation(continued=continued, ended=ended)

    @activity.defn
    def round_state(self, run_id: str) -> RoundState:
        row = self.store.get_run(run_id)
        return RoundState(status=row.status if row is not None else "new",
                          not_evaluable=len(self.store.trials(run_id, status=TRIAL_NOT_EVALUABLE)))
