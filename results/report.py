"""`passhat report`: what one or more runs measured, assembled from the results store.

Everything is computed from the trial rows, not from the per-task results the workflows
record when a task finishes, so a run that is still going, or was cancelled, reports the
trials it did finish, and says plainly that it is partial and what is missing.

The statistics (pass^k, bootstrap intervals, paired differences) are passhat.metrics';
this module groups trials, counts failures and builds the `Report` that every output
format renders (the CLI's render module for table, markdown, csv and json, its
html_report for html). Its pydantic models are the JSON schema.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, Field

from passhat import metrics
from passhat.results.estimate import Estimate
from passhat.results.robustness import PersonaRobustness, persona_robustness
from passhat.results.divergence import CauseChange, TaskDivergence, cause_changes, cause_of, run_divergences
from passhat.results.records import ResultsError
from passhat.domains.a2a_protocol import RESTART as A2A_RESTART
from passhat.run_identity import AgentIdentity, agent_identity
from passhat.contracts import DEFAULT_AGENT
from passhat.outcomes import (
    TRIAL_CANCELLED,
    TRIAL_NOT_EVALUABLE,
    TRIAL_RUNNING,
    TRIAL_SCORED,
    is_success,
    outcome_label,
)

# A trial the run expects but never started: it has no row in the store.
MISSING = "missing"
# The metric the paired comparison uses: a task's pass^1 is its share of successful
# evaluable trials, defined for every task with at least one, whatever k the runs had.
COMPARISON_METRIC = "pass^1"

# tau2's reward is the product of the parts in the task's reward basis; these are the
# breakdown keys of those parts and what a reader calls them.
REWARD_PARTS = {
    "DB": "database",
    "COMMUNICATE": "communicated info",
    "ACTION": "actions",
    "ENV_ASSERTION": "environment assertions",
    "NL_ASSERTION": "NL assertions",
}
# A trial below 1 whose breakdown has no failed part: tau2 gave 0 without checking,
# because the conversation did not end with the user or agent stopping.
NOT_CHECKED = "none checked (conversation ended early)"


# ---- the schema -------------------------------------------------------------------------


class Failures(BaseModel):
    """Why trials did not succeed."""

    below_one: int = Field(description="scored trials with reward < 1")
    termination: dict[str, int] = Field(
        description="termination reasons of scored trials (user_stop, agent_error, max_steps, ...)")
    failed_parts: dict[str, int] = Field(
        description="of the trials below 1, how many failed each part of tau2's reward "
                    "(database, communicated info, actions, environment assertions, NL "
                    "assertions; a trial can fail several)")
    model_errors: dict[str, int] = Field(
        description='scored trials ended by a model failure, by "side class" (e.g. "agent EmptyReply")')
    agent_code: dict[str, int] = Field(default_factory=dict, description=(
        'scored trials ended by the agent\'s own code (an exception it raised, a reply tau2 '
        'rejects, a state passhat cannot record), by "class at file:line in function"'))
    not_evaluable: dict[str, int] = Field(description="not-evaluable trials by error class")
    causes: dict[str, int] = Field(default_factory=dict, description=(
        "of the trials below 1 with a stored diagnosis, how many had each kind of first step "
        "off the gold path (wrong_argument, skipped_write, ...; 'agent DB differs' or 'user DB differs': "
        "none found, yet the final state differs; 'on the gold path': neither)"))


class TaskReport(BaseModel):
    task_id: str
    trials: int = Field(description="trials the run expects of the task")
    evaluable: int
    successes: int
    pass_hat_k: dict[str, float]
    outcomes: list[str] = Field(
        description="per trial index: success, failure, not_evaluable, running, cancelled or missing")
    divergence: TaskDivergence | None = Field(default=None, description=(
        "a task with a failed trial: where its trials part from the passing ones, or the most "
        "common first step off the gold path when every trial failed (docs/failures.md)"))


class GroupReport(BaseModel):
    """One agent model, user model (with its persona) and domain of a run."""

    run_id: str
    agent_model: str
    user_model: str
    user_persona: str | None = Field(default=None, description=(
        "the user persona the trials ran under (docs/personas.md); null: tau2's user"))
    domain: str
    tasks: int
    trials: int = Field(description="trials expected")
    evaluable: int = Field(description="scored trials: the ones pass^k counts")
    not_evaluable: int
    unfinished: int = Field(description="trials expected but neither scored nor not evaluable")
    avg_reward: float | None
    pass_hat_k: dict[str, Estimate]
    pass_hat_k_leaderboard: dict[str, Estimate] | None = Field(default=None, description=(
        "pass^k as the public leaderboard counts it, what tau2 1.0.1's `submit prepare` "
        "computes from these trials: trials that were not evaluable (infrastructure_error "
        "in a tau2 file) left out, not counted as failures; tasks without an evaluable "
        "trial left out; k only up to the fewest evaluable trials of a remaining task. "
        "Present only when some trial is not evaluable"))
    leaderboard_left_out: int = Field(default=0, description=(
        "trials expected that the leaderboard's count leaves out (not evaluable, or never "
        "scored)"))
    pass_hat_k_failures_counted: dict[str, float] | None = Field(default=None, description=(
        "pass^k with the left-out trials counted as failures instead: what the leaderboard's "
        "figure would be if they had been scored and failed; present with pass_hat_k_leaderboard"))
    pass_at_k: dict[str, float]
    cost_usd: float = Field(description="total, every recorded trial")
    cost_per_trial: float | None
    input_tokens_per_trial: float | None
    output_tokens_per_trial: float | None
    failures: Failures
    task_results: list[TaskReport]
    agent: AgentIdentity | None = Field(default=None, description=(
        "the agent that played with this agent model: its name, the digest of what makes "
        "it (null for a run recorded before passhat measured it) and its parts"))

    def k(self) -> str | None:
        """The largest k with a pass^k, as a key."""
        return max(self.pass_hat_k, key=int) if self.pass_hat_k else None


class Completeness(BaseModel):
    complete: bool = Field(description="the run has finished and every trial it expects is scored")
    run_status: str = Field(description="running, completed, cancelled, failed or imported")
    expected: int
    scored: int
    not_evaluable: int
    running: int
    cancelled: int
    never_started: int
    note: str = Field(description='e.g. "PARTIAL: run cancelled, 7 of 16 trials scored, 9 missing (2 cancelled, 7 never started)"')


class RunReport(BaseModel):
    run_id: str
    imported: bool
    departures: list[str] = Field(description="how the run departs from tau2's rules; empty: none")
    agent: str = Field(default=DEFAULT_AGENT, description=(
        "the agent that played: its name in tau2's agent registry, and the sha256 digest "
        "(first 12 hex digits) of an agent prompt of the user's own"))
    tau2_version: str | None = Field(default=None, description=(
        "the tau2 the run was made with (\"26.3.0\", \"1.0.1\"); null: not recorded (a run "
        "made before passhat recorded it, on 26.3, or an imported run)"))
    tau2_data: str | None = Field(default=None, description=(
        "digest of the tau2 data files the run read (tasks, databases, policies); null: not recorded"))
    completeness: Completeness
    groups: list[GroupReport]
    domain_digests: dict[str, dict[str, str]] = Field(default_factory=dict, description=(
        "per domain, the sha256 digests (first 16 hex digits) of its policy, tool schemas, "
        "database and tasks as the run measured them; empty for a run recorded before them"))
    a2a_restarts: dict[str, int] = Field(default_factory=dict, description=(
        "per trial of an agent behind A2A that restarted in a fresh context (a turn whose "
        "outcome was not known, with no task to follow), how many times; trials that did not are left out"))

    def tau2(self) -> str:
        """The run's tau2 in words, for report headers."""
        return tau2_words(self.tau2_version, self.tau2_data, self.imported)


class GroupRef(BaseModel):
    run_id: str
    agent_model: str
    user_model: str
    user_persona: str | None = None


class Comparison(BaseModel):
    """a - b in per-task pass^1 over the tasks both have in a domain, paired by task."""

    domain: str
    a: GroupRef
    b: GroupRef
    metric: Literal["pass^1"] = COMPARISON_METRIC
    shared_tasks: int
    difference: Estimate
    distinguishable: bool = Field(description="the confidence interval excludes 0")
    statement: str
    causes: list[CauseChange] = Field(default_factory=list, description=(
        "failure causes (failures.causes) of a and of b, the largest change first"))

    def measured(self) -> str:
        d = self.difference
        return f"{self.metric} {d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}] over {self.shared_tasks} shared tasks"

    def verdict(self) -> str:
        return ("distinguishable from noise (the 95% interval excludes 0)" if self.distinguishable else
                "not distinguishable from noise (the 95% interval includes 0)")


class Report(BaseModel):
    schema_version: Literal[1] = 1
    confidence: float
    resamples: int
    seed: int
    runs: list[RunReport]
    comparisons: list[Comparison]
    across_tau2_versions: bool = Field(default=False, description=(
        "the runs were made with different tau2 versions, compared because asked to "
        "(--across-tau2-versions): their conversations and grading differ"))
    robustness: list[PersonaRobustness] = Field(default_factory=list, description=(
        "per agent model, domain and user persona of a run with personas: pass^k under the "
        "persona, under tau2's own user, and the drop paired by task (docs/personas.md)"))

    def groups(self) -> list[GroupReport]:
        return [g for r in self.runs for g in r.groups]

    def label(self, group: GroupReport | GroupRef) -> str:
        """How a group is named where runs and models mix: the model, and the run when
        the report covers several."""
        persona = "" if group.user_persona is None else f" [{group.user_persona}]"
        if len(self.runs) > 1:
            return f"{group.run_id}:{group.agent_model}{persona}"
        return group.agent_model + persona


# ---- assembling -------------------------------------------------------------------------


ACROSS_VERSIONS_NOTE = ("ACROSS tau2 VERSIONS: these runs were made with different tau2 "
                        "versions, which hold and grade conversations differently; their "
                        "differences are not the agents' alone")


def tau2_words(version: str | None, data: str | None, imported: bool = False) -> str:
    """Which tau2 a run was made with, in words: "tau2 1.0.1, data 3f2a...". """
    if version is None:
        words = ("tau2 version not recorded in the imported files" if imported else
                 "tau2 26.3 (recorded before passhat kept the version)")
    else:
        words = f"tau2 {version}"
    return words + (f", data {data}" if data else "")


def _same_tau2(a: str, b: str) -> bool:
    # A run recorded before the version was kept says only "26.3": any 26.3.x matches it.
    short, long = sorted((a, b), key=len)
    return a == b or (short.count(".") < 2 and long.startswith(short + "."))


def check_tau2_versions(runs: list[RunReport], allow: bool) -> bool:
    """Whether the runs were made with different tau2 versions; refused (ResultsError)
    unless `allow`: the versions hold conversations and grade them differently."""
    versions = [(r.run_id, recorded_tau2(r.tau2_version, r.imported)) for r in runs]
    known = [(run_id, version) for run_id, version in versions if version is not None]
    clash = next(((a, b) for a in known for b in known if not _same_tau2(a[1], b[1])), None)
    if clash is None:
        return False
    if not allow:
        (a, va), (b, vb) = clash
        raise ResultsError(
            f"runs {a} (tau2 {va}) and {b} (tau2 {vb}) were made with different tau2 versions, "
            "which hold and grade conversations differently; compare them anyway with "
            "--across-tau2-versions (the report then says so)"
        )
    return True


def recorded_tau2(version: str | None, imported: bool) -> str | None:
    """The version a run's numbers belong to: its recorded tau2, or 26.3 for a run of
    passhat's made before the version was recorded (the only one passhat ran on then);
    None when nobody knows (imported files)."""
    return version or (None if imported else "26.3")


def build_report(store, run_ids: list[str], *, across_tau2_versions: bool = False) -> Report:  # noqa: ANN001 - a Store
    """The report of `run_ids`. Runs of different tau2 versions are refused (ResultsError)
    unless `across_tau2_versions`, and then the report says so."""
    runs = [_run_report(store, run_id) for run_id in dict.fromkeys(run_ids)]
    report = Report(
        confidence=metrics.CONFIDENCE, resamples=metrics.BOOTSTRAP_RESAMPLES,
        seed=metrics.BOOTSTRAP_SEED, runs=runs, comparisons=[],
        across_tau2_versions=check_tau2_versions(runs, across_tau2_versions),
    )
    report.comparisons = _comparisons(report)
    report.robustness = persona_robustness(report.groups())
    return report


def _run_report(store, run_id: str) -> RunReport:  # noqa: ANN001
    row = store.get_run(run_id)
    config = row.run_config()
    imported = store.import_source(run_id) is not None
    rows = store.trials(run_id)
    personas = list(dict.fromkeys([*config.personas(), *(t.user_persona for t in rows)]))
    # A task's divergence is read among the trials of its persona.
    divergences = {persona: run_divergences([t for t in rows if t.user_persona == persona],
                                            _steps_reader(store, run_id))
                   for persona in personas}
    by_group: dict[tuple[str, str | None, str, str], list[Any]] = {}
    # A run expects every (model, persona, domain) of its config, even one with no trial
    # yet; an imported run has exactly the trials its files held.
    if not imported:
        for model in config.agent_models:
            for persona in config.personas():
                for domain in config.domains:
                    by_group[(model, persona, config.user_model, domain)] = []
    for trial in rows:
        by_group.setdefault((trial.agent_model, trial.user_persona, trial.user_model, trial.domain),
                            []).append(trial)
    groups = []
    for (agent, persona, user, domain), trials in by_group.items():
        if imported:
            task_ids = list(dict.fromkeys(t.task_id for t in trials))
            k = max((t.trial_index + 1 for t in trials), default=0)
        else:
            task_ids = list(config.task_ids.get(domain, []))
            task_ids += [t for t in dict.fromkeys(t.task_id for t in trials) if t not in task_ids]
            k = config.trials
        group = _group_report(run_id, agent, user, domain, task_ids, k, trials,
                              {t: d for (a, u, dm, t), d in divergences[persona].items()
                               if (a, u, dm) == (agent, user, domain)})
        groups.append(group.model_copy(update={"agent": agent_identity(config, agent),
                                               "user_persona": persona}))
    statuses = Counter(t.status for t in rows)
    expected = len(rows) if imported else max(row.total_trials, len(rows))
    completeness = _completeness(row.status, expected, statuses, len(rows))
    return RunReport(
        run_id=run_id, imported=imported, departures=config.departures(),
        agent=config.agent_label(), tau2_version=config.tau2_version, tau2_data=config.tau2_data,
        completeness=completeness, groups=groups, domain_digests=config.domain_digests or {},
        a2a_restarts=store.set_aside_ending(run_id, A2A_RESTART) if not imported else {},
    )


def _steps_reader(store, run_id: str):  # noqa: ANN001, ANN202 - a Store; trial id -> steps
    """A trial's steps as (number, messages), the run's steps read in one query when
    the first is asked for (a run with no flaky task reads none)."""
    loaded: dict[str, list[tuple[int, str]]] = {}

    def steps_of(trial_id: str) -> list[tuple[int, list[dict[str, Any]]]]:
        if not loaded:
            loaded.update(store.run_messages(run_id) or {"": []})
        return [(step, json.loads(messages)) for step, messages in loaded.get(trial_id, [])]

    return steps_of


def _group_report(run_id: str, agent: str, user: str, domain: str, task_ids: list[str],
                  k: int, trials: list[Any], divergences: dict[str, TaskDivergence]) -> GroupReport:
    by_task: dict[str, dict[int, Any]] = {t: {} for t in task_ids}
    for trial in trials:
        by_task[trial.task_id][trial.trial_index] = trial
    tasks = []
    for task_id, indexed in by_task.items():
        rewards = [t.reward for t in indexed.values() if t.status == TRIAL_SCORED and t.reward is not None]
        successes = sum(is_success(r) for r in rewards)
        tasks.append(TaskReport(
            task_id=task_id, trials=k, evaluable=len(rewards), successes=successes,
            pass_hat_k=metrics.pass_hat_curve(successes, len(rewards)) if rewards else {},
            outcomes=[
                outcome_label(indexed[i].status, indexed[i].reward) if i in indexed else MISSING
                for i in range(max(k, max(indexed, default=-1) + 1))
            ],
            divergence=divergences.get(task_id),
        ))
    scored = [t for t in trials if t.status == TRIAL_SCORED and t.reward is not None]
    evaluated = [t for t in tasks if t.evaluable]
    lost = any(t.status == TRIAL_NOT_EVALUABLE for t in trials)
    left_out = len(tasks) * k - len(scored)
    n = len(trials)
    return GroupReport(
        run_id=run_id, agent_model=agent, user_model=user, domain=domain,
        tasks=len(tasks), trials=len(tasks) * k, evaluable=len(scored),
        not_evaluable=sum(t.status == TRIAL_NOT_EVALUABLE for t in trials),
        unfinished=len(tasks) * k - len(scored) - sum(t.status == TRIAL_NOT_EVALUABLE for t in trials),
        avg_reward=sum(t.reward for t in scored) / len(scored) if scored else None,
        pass_hat_k={
            j: Estimate(value=i.value, low=i.low, high=i.high)
            for j, i in metrics.bootstrap_curve([t.pass_hat_k for t in evaluated]).items()
        },
        pass_hat_k_leaderboard=_as_the_leaderboard_counts(tasks, k) if lost else None,
        leaderboard_left_out=left_out if lost else 0,
        pass_hat_k_failures_counted=_counting_lost_as_failures(tasks) if lost else None,
        pass_at_k=metrics.mean_over_tasks(
            [metrics.pass_at_curve(t.successes, t.evaluable) for t in evaluated]),
        cost_usd=sum(t.cost for t in trials),
        # Per recorded trial, unfinished ones included: what a trial costs to run.
        cost_per_trial=sum(t.cost for t in trials) / n if n else None,
        input_tokens_per_trial=sum(t.input_tokens for t in trials) / n if n else None,
        output_tokens_per_trial=sum(t.output_tokens for t in trials) / n if n else None,
        failures=_failures(trials),
        task_results=tasks,
    )


def _as_the_leaderboard_counts(tasks: list[TaskReport], trials: int) -> dict[str, Estimate]:
    """pass^k as tau2 1.0.1's `submit prepare` computes it (metrics.leaderboard_curves)."""
    curves = metrics.leaderboard_curves([(t.successes, t.evaluable) for t in tasks], trials)
    return {j: Estimate(value=i.value, low=i.low, high=i.high)
            for j, i in metrics.bootstrap_curve(curves).items()}


def _counting_lost_as_failures(tasks: list[TaskReport]) -> dict[str, float]:
    """pass^k with every trial a task was expected to have and has no score for counted
    as a failed trial."""
    return metrics.mean_over_tasks([metrics.pass_hat_curve(t.successes, t.trials)
                                    for t in tasks if t.trials])


def _failures(trials: list[Any]) -> Failures:
    scored = [t for t in trials if t.status == TRIAL_SCORED and t.reward is not None]
    below = [t for t in scored if not is_success(t.reward)]
    parts: Counter[str] = Counter()
    for trial in below:
        breakdown = trial.reward_info().get("breakdown") or {}
        failed = [REWARD_PARTS.get(key, key) for key, value in breakdown.items()
                  if value is not None and not is_success(float(value))]
        parts.update(failed or [NOT_CHECKED])
    return Failures(
        below_one=len(below),
        termination=_counts(t.termination_reason or "unknown" for t in scored),
        failed_parts=_counts(parts.elements()),
        model_errors=_counts(f"{t.error_side or 'unknown'} {t.error_class}"
                             for t in scored if t.error_class and not getattr(t, "error_at", None)),
        agent_code=_counts(f"{t.error_class} at {t.error_at}" for t in scored if getattr(t, "error_at", None)),
        not_evaluable=_counts(t.error_class or "unknown"
                              for t in trials if t.status == TRIAL_NOT_EVALUABLE),
        causes=_counts(cause_of(d) for d in (t.diagnosis() for t in below) if d),
    )


def _counts(items) -> dict[str, int]:  # noqa: ANN001 - an iterable of str
    """Most frequent first, then by name: stable output."""
    return dict(sorted(Counter(items).items(), key=lambda kv: (-kv[1], kv[0])))


def _completeness(run_status: str, expected: int, statuses: Counter, recorded: int) -> Completeness:
    scored, not_eval = statuses[TRIAL_SCORED], statuses[TRIAL_NOT_EVALUABLE]
    running, cancelled = statuses[TRIAL_RUNNING], statuses[TRIAL_CANCELLED]
    never = max(0, expected - recorded)
    missing = expected - scored - not_eval
    # A not-evaluable trial is a measurement the run lacks, as an unfinished one is: a
    # run whose trials were all not evaluable has measured nothing, and is not complete.
    complete = run_status in ("completed", "imported") and scored == expected
    if complete:
        note = f"complete: {scored} of {expected} trials scored"
    else:
        why = ", ".join(f"{n} {what}" for n, what in (
            (running, "running"), (cancelled, "cancelled"), (never, "never started")) if n)
        note = f"PARTIAL: run {run_status}, {scored} of {expected} trials scored"
        if missing:
            note += f", {missing} missing" + (f" ({why})" if why else "")
    if not_eval:
        note += f"; {not_eval} not evaluable (left out of pass^k)"
    return Completeness(
        complete=complete, run_status=run_status, expected=expected, scored=scored,
        not_evaluable=not_eval, running=running, cancelled=cancelled, never_started=never,
        note=note,
    )


def _comparisons(report: Report) -> list[Comparison]:
    """Every pair of groups on the same domain and persona, in the order the runs and their models
    were given: per-task pass^1 of a minus b over the tasks both evaluated."""
    out = []
    groups = report.groups()
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            # Agents are compared under the same user; the drop a persona makes is the
            # robustness section's (results/robustness.py).
            if a.domain != b.domain or a.user_persona != b.user_persona:
                continue
            paired = metrics.paired_difference(_pass1_by_task(a), _pass1_by_task(b))
            if paired is None:
                continue
            d = paired.difference
            comparison = Comparison(
                domain=a.domain,
                a=GroupRef(run_id=a.run_id, agent_model=a.agent_model, user_model=a.user_model,
                           user_persona=a.user_persona),
                b=GroupRef(run_id=b.run_id, agent_model=b.agent_model, user_model=b.user_model,
                           user_persona=b.user_persona),
                shared_tasks=paired.shared_tasks,
                difference=Estimate(value=d.value, low=d.low, high=d.high),
                distinguishable=d.excludes_zero(), statement="",
                causes=cause_changes(a.failures.causes, b.failures.causes),
            )
            comparison.statement = (f"{report.label(a)} - {report.label(b)} on {a.domain}: "
                                    f"{comparison.measured()}: {comparison.verdict()}"
                                    + (" (ACROSS tau2 VERSIONS)" if report.across_tau2_versions else ""))
            out.append(comparison)
    return out


def _pass1_by_task(group: GroupReport) -> dict[str, float]:
    return {t.task_id: t.pass_hat_k["1"] for t in group.task_results if t.evaluable}
