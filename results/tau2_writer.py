"""passhat's trials as a tau2 Results file (tau2.data_model.simulation.Results): what
`passhat export --format tau2` writes, and what tau2's evaluate-trajs and submit read.

What a tau2 file holds for a passhat trial, and what it cannot hold:

- messages: the conversation as tau2 records it (greeting or the task's initial
  messages first, tool results right after their call, `turn_idx` 0..n-1, each
  message's timestamp the time passhat recorded its step, cost and token usage of the
  model call that produced it). As in passhat's scoring, tool calls that never ran
  (arguments that were not a JSON object) are left out with their answers, and so is
  the reply that ended a conversation as `agent_error`: tau2 never records that reply.
  The failure's class, side and message go to `reward_info.info["passhat_failure"]`.
- when the messages do not add up to the trial's tokens and cost (the reply left out
  above was paid for), the trial's totals go to `reward_info.info["passhat_totals"]`,
  so an import keeps them.
- a trial the tau2 version gave up on after re-running it (1.0.x: `infrastructure_error`,
  which passhat records as not evaluable) is written as tau2's run_with_retry writes it:
  no messages, no reward info, the error and its class in `info`. tau2's files hold
  such simulations, and its submission tools count each task's simulations.
- other not-evaluable trials have no tau2 equivalent and are left out (they are left out
  of pass^k too).
- model arguments lose every secret (infra.secrets): keys come from the environment.
- the agent: `agent_info.implementation` is its name (`llm_agent`, or the `--agent`),
  `llm` and `llm_args` its model and args; its digest and the parts of its identity
  (run_identity.AgentIdentity) go beside them, under `agent_info.passhat_agent`, which
  tau2 reads past. Where the agent's own code failed goes with the failure (`at`).

tau2 is imported inside functions only (it takes seconds to import).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from passhat.contracts import DEFAULT_AGENT
from passhat.messages import AGENT_GREETING, Message
from passhat.outcomes import TRIAL_NOT_EVALUABLE, TRIAL_SCORED
from passhat.domains.input_files import first_problem
from passhat.domains.tau2_catalog import is_tau2_domain
from passhat.domains.tau2_data import default_tasks, quiet_tau2
from passhat.domains.tau2_messages import answered_calls
from passhat.domains.tau2_version import GIVEN_UP
from passhat.infra.secrets import without_secrets
from passhat.results.records import AGENT_KEY, TOTALS_KEY, ResultsFileError, StepRecord, TrialRecord, aware
from passhat.run_identity import AgentIdentity


def written_to_tau2(status: str, termination_reason: str | None) -> bool:
    """Whether a trial goes into a tau2 file: scored, or given up on as tau2 gives up."""
    return status == TRIAL_SCORED or (status == TRIAL_NOT_EVALUABLE and termination_reason in GIVEN_UP)


def tau2_tasks(domain: str, task_ids: list[str], kept: list[Any] | None = None) -> list[Any]:
    """tau2 Task models of `domain` ("airline", or "airline@/path/tasks.json" for a task
    file), in the order of `task_ids`. `kept` is the copy of a task file's tasks the run
    kept (infra.store.RunTasksRow): what the run played, whatever the file holds now."""
    quiet_tau2()
    from tau2.data_model.tasks import Task

    import tau2.registry  # noqa: F401 - loaded, it answers which domains are tau2's

    base, _, path = domain.partition("@")
    if not is_tau2_domain(base):  # shipped, or registered with tau2's registry by a plugin
        raise ResultsFileError(f"domain {domain!r} is not a tau2 domain")
    if path:
        try:
            raw = kept if kept is not None else json.loads(Path(path).read_text(encoding="utf-8"))
            tasks = [Task.model_validate(item) for item in raw]
        except (OSError, ValueError) as err:
            raise ResultsFileError(
                f"cannot read the run's task file {path}: {' '.join(str(err).split())[:300]}"
            ) from None
    else:
        tasks = default_tasks(base)
    by_id = {task.id: task for task in tasks}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise ResultsFileError(
            f"domain {domain} no longer has task(s) {', '.join(map(repr, missing[:5]))}"
        )
    return [by_id[t] for t in task_ids]


def to_tau2_results(
    *,
    domain: str,
    agent_model: str,
    user_model: str,
    agent_args: dict[str, Any],
    user_args: dict[str, Any],
    task_ids: list[str],
    trials: int,
    seed: int,
    max_steps: int,
    max_errors: int,
    records: list[TrialRecord],
    git_commit: str = "unknown",
    kept_tasks: list[Any] | None = None,
    reviews: dict[str, dict[str, str]] | None = None,
    agent: AgentIdentity | None = None,
) -> str:
    """One tau2 Results file (JSON text) for one agent model on one domain. Only scored
    trials are written. The text is loaded back with tau2's Results model before it is
    returned, so what is written is what tau2 reads. `reviews`: trial id -> what tau2
    1.0.x's reviewer made of it, by SimulationRun field ("review": its Review as JSON,
    "auth_classification": its AuthenticationClassification as JSON), written where tau2
    writes them. `agent`: the agent that played (its name is agent_info's implementation;
    its digest and parts go beside, under AGENT_KEY)."""
    quiet_tau2()
    from tau2.data_model.simulation import AgentInfo, Info, Results, UserInfo
    from tau2.run import get_environment_info
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    base = domain.partition("@")[0]
    info = Info(
        git_commit=git_commit,
        num_trials=trials,
        max_steps=max_steps,
        max_errors=max_errors,
        # As `tau2 run` records them (it stores the guidelines without tools even for
        # telecom); no secrets: keys come from the environment.
        user_info=UserInfo(
            implementation="user_simulator",
            llm=user_model,
            llm_args=without_secrets(user_args),
            global_simulation_guidelines=get_global_user_sim_guidelines(),
        ),
        agent_info=AgentInfo(
            implementation=agent.name if agent is not None else DEFAULT_AGENT, llm=agent_model,
            llm_args=without_secrets(agent_args),
        ),
        environment_info=get_environment_info(base, include_tool_info=False),
        seed=seed,
    )
    simulations = [
        tau2_simulation(r, (reviews or {}).get(r.trial_id)) if r.status == TRIAL_SCORED else given_up_simulation(r)
        for r in sorted(records, key=lambda r: (r.trial_index, _task_order(task_ids, r.task_id)))
        if written_to_tau2(r.status, r.termination_reason)
    ]
    results = Results(info=info, tasks=tau2_tasks(domain, task_ids, kept_tasks), simulations=simulations)
    text = results.model_dump_json(indent=2)
    if agent is not None and agent.digest is not None:  # tau2's AgentInfo has no field for it
        body = json.loads(text)
        body["info"]["agent_info"][AGENT_KEY] = {"digest": agent.digest, "parts": agent.parts}
        text = json.dumps(body, indent=2, ensure_ascii=False)
    try:
        Results.model_validate_json(text)
    except ValueError as err:  # a bug: say what, rather than write a file tau2 refuses
        raise ResultsFileError(f"the tau2 file for {agent_model} on {domain} does not load "
                               f"back as tau2 Results: {first_problem(err)}") from None
    return text


def _task_order(task_ids: list[str], task_id: str) -> int:
    try:
        return task_ids.index(task_id)
    except ValueError:
        return len(task_ids)


def tau2_simulation(record: TrialRecord, review: dict[str, str] | None = None) -> Any:
    """A scored trial as tau2's SimulationRun, with tau2's reviewer's review of it and its
    authentication classification when there are (JSON by field name; only tau2 1.0.x
    has the fields, and only its reviewer writes them)."""
    quiet_tau2()
    from tau2.data_model.simulation import SimulationRun

    extra: dict[str, Any] = {}
    if review:
        from tau2.data_model.simulation import AuthenticationClassification, Review

        kinds = {"review": Review, "auth_classification": AuthenticationClassification}
        extra = {field: kinds[field].model_validate_json(text) for field, text in review.items()}

    messages = to_tau2_messages(record.steps)
    started = record.started_at or record.finished_at or _now()
    finished = record.finished_at or started
    agent_cost, user_cost = _tau2_costs(messages)
    reward_info = tau2_reward_info(record)
    totals = _totals_not_in(messages, record)
    if totals:
        reward_info.info = {**(reward_info.info or {}), TOTALS_KEY: totals}
    return SimulationRun(
        id=record.trial_id or f"{record.task_id}_{record.trial_index}",
        task_id=record.task_id,
        timestamp=_iso(finished),
        start_time=_iso(started),
        end_time=_iso(finished),
        duration=max(0.0, (aware(finished) - aware(started)).total_seconds()),
        termination_reason=record.termination_reason,
        agent_cost=agent_cost,
        user_cost=user_cost,
        reward_info=reward_info,
        messages=messages,
        trial=record.trial_index,
        seed=record.seed,
        **extra,
    )


def given_up_simulation(record: TrialRecord) -> Any:
    """A trial the version gave up on, as tau2's run_with_retry records one: no messages
    and no reward info (its evaluator never ran), the last error in `info`."""
    quiet_tau2()
    from tau2.data_model.simulation import SimulationRun

    when = _iso(record.finished_at or record.started_at or _now())
    return SimulationRun(
        id=record.trial_id or f"{record.task_id}_{record.trial_index}",
        task_id=record.task_id,
        timestamp=when,
        start_time=when,
        end_time=when,
        duration=0.0,
        termination_reason=record.termination_reason,
        messages=[],
        trial=record.trial_index,
        seed=record.seed,
        info={"error": record.error, "error_type": record.error_class},
    )


def _totals_not_in(messages: list[Any], record: TrialRecord) -> dict[str, Any] | None:
    """The trial's token and cost totals, when its tau2 messages do not add up to them
    (the reply that ended a failed conversation was paid for, but tau2 does not record
    it); None when they do."""
    input_tokens, output_tokens = record.total_tokens()
    cost = record.total_cost()
    usages = [m.usage or {} for m in messages if m.role != "tool"]
    carried = (
        sum(int(u.get("prompt_tokens") or 0) for u in usages),
        sum(int(u.get("completion_tokens") or 0) for u in usages),
        sum(float(m.cost or 0.0) for m in messages if m.role != "tool"),
    )
    if carried[:2] == (input_tokens, output_tokens) and abs(carried[2] - cost) < 1e-12:
        return None
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cost": cost}


def to_tau2_messages(steps: list[StepRecord]) -> list[Any]:
    """A trial's steps as tau2's saved trajectory (see the module docstring)."""
    quiet_tau2()
    from tau2.data_model.message import AssistantMessage, ToolMessage, UserMessage
    from tau2.data_model.message import ToolCall as Tau2ToolCall

    usable = [s for s in steps if s.failure_class is None]
    flat = [(s, m) for s in usable for m in s.messages]
    step_of = {id(m): s for s, m in flat}
    answered = {
        id(call): answer
        for call, answer in answered_calls([m for _, m in flat])
        if call.invalid_arguments is None
    }
    out: list[Any] = []
    for step, message in flat:
        if message.role == "tool":
            continue  # written right after the call it answers
        calls = [c for c in message.tool_calls or [] if id(c) in answered]
        if not calls and not message.has_text():
            continue
        cost, usage = _cost_and_usage(step, message)
        caller = UserMessage if message.role == "user" else AssistantMessage
        out.append(
            caller(
                role=message.role,
                content=message.content,
                tool_calls=[
                    Tau2ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor=c.requestor)
                    for c in calls
                ]
                or None,
                timestamp=_iso(step.created_at),
                cost=cost,
                usage=usage,
            )
        )
        for call in calls:
            answer = answered[id(call)]
            out.append(
                ToolMessage(
                    id=call.id,
                    role="tool",
                    content=answer.content,
                    requestor=call.requestor,
                    error=answer.error,
                    timestamp=_iso(step_of[id(answer)].created_at),
                )
            )
    for turn, message in enumerate(out):
        message.turn_idx = turn
    return out


def _cost_and_usage(step: StepRecord, message: Message) -> tuple[float | None, dict | None]:
    if step.model is not None:  # a model call produced it
        usage = {"completion_tokens": step.output_tokens, "prompt_tokens": step.input_tokens}
        return step.cost, usage
    if step.step == 0 and not (message.role == "assistant" and message.content == AGENT_GREETING):
        return None, None  # a task's initial messages: tau2 records them without a cost
    return step.cost, None  # the greeting: cost 0.0, as in tau2


def _tau2_costs(messages: list[Any]) -> tuple[float | None, float | None]:
    """tau2's get_cost: sums per side, None when some message has no cost."""
    agent, user = 0.0, 0.0
    for m in messages:
        if m.role == "tool":
            continue
        if m.cost is None:
            return None, None
        if m.role == "assistant":
            agent += m.cost
        else:
            user += m.cost
    return agent, user


def tau2_reward_info(record: TrialRecord) -> Any:
    """tau2's RewardInfo from what the results store keeps of the score."""
    quiet_tau2()
    from tau2.data_model.simulation import RewardInfo

    stored = dict(record.reward_info or {})
    info: dict[str, Any] = dict(stored.get("info") or {})
    if "tau_bench" in stored:
        info.update(note="scored by tau-bench v1", tau_bench=stored.get("tau_bench"))
    if stored.get("note"):
        info["note"] = stored["note"]
    if record.error_class:
        info["passhat_failure"] = {
            "class": record.error_class, "side": record.error_side, "message": record.error,
            **({"at": record.error_at} if record.error_at else {}),
        }
    basis = stored.get("reward_basis")
    return RewardInfo(
        reward=float(record.reward or 0.0),
        db_check=stored.get("db_check"),
        env_assertions=stored.get("env_assertions"),
        action_checks=stored.get("action_checks"),
        nl_assertions=stored.get("nl_assertions"),
        communicate_checks=stored.get("communicate_checks"),
        reward_basis=basis,
        reward_breakdown=stored.get("breakdown") if basis is not None else None,
        info=info or None,
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime | None) -> str | None:
    """A timestamp as tau2 writes them (ISO 8601), in UTC with its offset."""
    return None if value is None else aware(value).astimezone(UTC).isoformat()
