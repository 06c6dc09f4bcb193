"""Results files: tau2's schema (tau2.data_model.simulation.Results) and tau-bench v1's
result lists, converted to and from passhat's trials.

Pure conversions, no store and no CLI: `passhat.cli.exchange` reads the store, calls
these, and writes or records what they return. Trials cross this boundary as
`TrialRecord` / `StepRecord`, whose field names are the results store's column names.

tau2 is imported inside functions only (it takes seconds to import).

What a tau2 file holds for a passhat trial, and what it cannot hold:

- messages: the conversation as tau2 records it (greeting or the task's initial
  messages first, tool results right after their call, `turn_idx` 0..n-1, each
  message's timestamp the time passhat recorded its step, cost and token usage of the
  model call that produced it). As in passhat's scoring, tool calls that never ran
  (arguments that were not a JSON object) are left out with their answers, and so is
  the reply that ended a conversation as `agent_error`: tau2 never records that reply.
  The failure's class, side and message go to `reward_info.info["passhat_failure"]`.
- not-evaluable trials have no tau2 equivalent and are left out (they are left out of
  pass^k too).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# tau2 imports litellm, which fetches a model price list at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from passhat.contracts import (  # noqa: E402
    AGENT_GREETING,
    OUT_OF_SCOPE_TOKEN,
    STOP_TOKEN,
    TRANSFER_TOKEN,
    TRIAL_NOT_EVALUABLE,
    TRIAL_SCORED,
    Message,
    ToolCall,
)
from passhat.domains.tau2_domain import answered_calls  # noqa: E402

TAU2_FORMAT = "tau2"
TAU_BENCH_FORMAT = "tau-bench"
# passhat's tau2 domains; a tau2 file of another domain cannot be imported.
TAU2_DOMAINS = ("airline", "retail", "telecom", "mock")
# tau-bench v1 runs are recorded under these domain names: v1's task ids are indices
# into v1's own task lists, which are not tau2's (v1 airline task 0 is tau2 airline
# task 20), so they must not be filed under tau2's domains.
TAU_BENCH_PREFIX = "tau-bench-"
# Sizes of tau-bench v1's test split (tau_bench/envs/*/tasks_test.py), the split its
# run.py uses by default and the one the paper reports.
TAU_BENCH_TEST_TASKS = {"airline": 50, "retail": 115}
# tau-bench's run.py default max_num_steps (the files do not record it).
TAU_BENCH_MAX_STEPS = 30
# The tools of tau-bench v1's environments, to tell a file's domain.
_V1_AIRLINE_TOOLS = {
    "book_reservation", "calculate", "cancel_reservation", "get_reservation_details",
    "get_user_details", "list_all_airports", "search_direct_flight",
    "search_onestop_flight", "send_certificate", "think", "transfer_to_human_agents",
    "update_reservation_baggages", "update_reservation_flights",
    "update_reservation_passengers",
}
_V1_RETAIL_TOOLS = {
    "calculate", "cancel_pending_order", "exchange_delivered_order_items",
    "find_user_id_by_email", "find_user_id_by_name_zip", "get_order_details",
    "get_product_details", "get_user_details", "list_all_product_types",
    "modify_pending_order_address", "modify_pending_order_items",
    "modify_pending_order_payment", "modify_user_address", "modify_user_email",
    "return_delivered_order_items", "think", "transfer_to_human_agents",
}
_V1_DISTINCT_TOOLS = {
    "airline": _V1_AIRLINE_TOOLS - _V1_RETAIL_TOOLS,
    "retail": _V1_RETAIL_TOOLS - _V1_AIRLINE_TOOLS,
}
# tau-bench's result file name: {agent strategy}-{model}-{temperature}_range_{start}-
# {end}_user-{user model}-{user strategy}_{MMDDhhmmss}.json
_V1_FILE_NAME = re.compile(
    r"^(?:tool-calling|act|react|few-shot)-(?P<model>.+)-(?P<temperature>\d+(?:\.\d+)?)"
    r"_range_-?\d+--?\d+_user-(?P<user>.+)-(?:llm|react|verify|reflection|human)"
    r"_\d{10}\.json$"
)


class ResultsFileError(ValueError):
    """A results file that cannot be imported or written; the message is one line that
    names the file and says what is wrong."""


# ---------------------------------------------------------------------------------------
# Records: a trial in the shape of the results store's rows


@dataclass
class StepRecord:
    step: int
    role: str  # "assistant" | "user" | "tool"
    messages: list[Message]
    model: str | None = None  # set when a model call produced the step
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    created_at: datetime | None = None
    failure_class: str | None = None
    failure: str | None = None


@dataclass
class TrialRecord:
    task_id: str
    trial_index: int
    seed: int
    status: str = TRIAL_SCORED
    reward: float | None = None
    reward_info: dict[str, Any] = field(default_factory=dict)
    termination_reason: str | None = None
    error: str | None = None
    error_class: str | None = None
    error_side: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[StepRecord] = field(default_factory=list)
    trial_id: str = ""
    cost: float | None = None  # None: the sum over steps

    def total_cost(self) -> float:
        return self.cost if self.cost is not None else sum(s.cost for s in self.steps)


@dataclass
class ResultsFile:
    """What one results file holds, in passhat's terms: one agent model on one domain."""

    path: str
    format: str  # TAU2_FORMAT | TAU_BENCH_FORMAT
    domain: str
    agent_model: str
    user_model: str
    agent_args: dict[str, Any]
    user_args: dict[str, Any]
    task_ids: list[str]  # every task of the run, in the file's order
    trials: int
    seed: int
    max_steps: int
    max_errors: int
    records: list[TrialRecord]


# ---------------------------------------------------------------------------------------
# Secrets

# passhat's argument naming the environment variable a worker reads a key from.
_KEY_VARIABLE = "api_key_env"
_SECRET_KEY = re.compile(
    r"(^|[_-])(api[_-]?key|key|secret|password|passwd|token|credentials?|authorization"
    r"|cookie)($|[_-])|access[_-]?key",
    re.IGNORECASE,
)


def strip_secrets(value: Any) -> Any:
    """`value` without any dict entry whose key names a secret (api_key, token,
    Authorization, aws_secret_access_key, ...), at any depth. max_tokens stays, and so
    does api_key_env, which names the variable that holds a key, not the key."""
    if isinstance(value, dict):
        return {
            k: strip_secrets(v)
            for k, v in value.items()
            if not (isinstance(k, str) and _SECRET_KEY.search(k) and k != _KEY_VARIABLE)
        }
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
# passhat -> tau2


def tau2_tasks(domain: str, task_ids: list[str]) -> list[Any]:
    """tau2 Task models of `domain` ("airline", or "airline@/path/tasks.json" for a task
    file), in the order of `task_ids`."""
    _quiet_tau2()
    from tau2.data_model.tasks import Task

    base, _, path = domain.partition("@")
    if base not in TAU2_DOMAINS:
        raise ResultsFileError(f"domain {domain!r} is not a tau2 domain")
    if path:
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
            tasks = [Task.model_validate(item) for item in raw]
        except (OSError, ValueError) as err:
            raise ResultsFileError(
                f"cannot read the run's task file {path}: {' '.join(str(err).split())[:300]}"
            ) from None
    else:
        tasks = _registry_tasks(base)
    by_id = {task.id: task for task in tasks}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise ResultsFileError(
            f"domain {domain} no longer has task(s) {', '.join(map(repr, missing[:5]))}"
        )
    return [by_id[t] for t in task_ids]


def _registry_tasks(domain: str) -> list[Any]:
    """The tasks tau2 (and passhat) run by default for a domain: its base split."""
    _quiet_tau2()
    from tau2.registry import registry

    return list(registry.get_tasks_loader(domain)())


def domain_task_ids(domain: str) -> list[str]:
    return [task.id for task in _registry_tasks(domain)]


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
) -> str:
    """One tau2 Results file (JSON text) for one agent model on one domain. Only scored
    trials are written. The text is loaded back with tau2's Results model before it is
    returned, so what is written is what tau2 reads."""
    _quiet_tau2()
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
            llm_args=strip_secrets(user_args),
            global_simulation_guidelines=get_global_user_sim_guidelines(),
        ),
        agent_info=AgentInfo(
            implementation="llm_agent", llm=agent_model, llm_args=strip_secrets(agent_args)
        ),
        environment_info=get_environment_info(base, include_tool_info=False),
        seed=seed,
    )
    simulations = [
        tau2_simulation(r)
        for r in sorted(records, key=lambda r: (r.trial_index, _task_order(task_ids, r.task_id)))
        if r.status == TRIAL_SCORED
    ]
    results = Results(info=info, tasks=tau2_tasks(domain, task_ids), simulations=simulations)
    text = results.model_dump_json(indent=2)
    try:
        Results.model_validate_json(text)
    except ValueError as err:  # a bug: say what, rather than write a file tau2 refuses
        raise ResultsFileError(f"the tau2 file for {agent_model} on {domain} does not load "
                               f"back as tau2 Results: {_first_problem(err)}") from None
    return text


def _task_order(task_ids: list[str], task_id: str) -> int:
    try:
        return task_ids.index(task_id)
    except ValueError:
        return len(task_ids)


def tau2_simulation(record: TrialRecord) -> Any:
    """A scored trial as tau2's SimulationRun."""
    _quiet_tau2()
    from tau2.data_model.simulation import SimulationRun

    messages = to_tau2_messages(record.steps)
    started = record.started_at or record.finished_at or _now()
    finished = record.finished_at or started
    agent_cost, user_cost = _tau2_costs(messages)
    return SimulationRun(
        id=record.trial_id or f"{record.task_id}_{record.trial_index}",
        task_id=record.task_id,
        timestamp=_iso(finished),
        start_time=_iso(started),
        end_time=_iso(finished),
        duration=max(0.0, (_aware(finished) - _aware(started)).total_seconds()),
        termination_reason=record.termination_reason,
        agent_cost=agent_cost,
        user_cost=user_cost,
        reward_info=tau2_reward_info(record),
        messages=messages,
        trial=record.trial_index,
        seed=record.seed,
    )


def to_tau2_messages(steps: list[StepRecord]) -> list[Any]:
    """A trial's steps as tau2's saved trajectory (see the module docstring)."""
    _quiet_tau2()
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
    _quiet_tau2()
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




# ---------------------------------------------------------------------------------------
# Files -> passhat


def read_results_file(
    path: str | Path,
    *,
    domain: str | None = None,
    agent_model: str | None = None,
    user_model: str | None = None,
) -> ResultsFile:
    """A tau2 Results file or a tau-bench v1 result list, checked and converted.
    `domain`, `agent_model` and `user_model` are for tau-bench files, whose JSON does
    not name them. Raises ResultsFileError with one line for anything wrong."""
    path = Path(path)
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsFileError(f"{where} does not exist") from None
    except IsADirectoryError:
        raise ResultsFileError(f"{where} is a directory; give the results files in it") from None
    except UnicodeDecodeError as err:
        raise ResultsFileError(f"{where} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise ResultsFileError(f"cannot read {where}: {err.strerror or err}") from None
    if not text.strip():
        raise ResultsFileError(f"{where} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        stripped = text.rstrip()
        if err.pos >= len(stripped) or not stripped.endswith(("}", "]")):
            raise ResultsFileError(
                f"{where} is truncated: its JSON is cut off ({err.msg} at line {err.lineno}, "
                f"column {err.colno}, and the file ends at line {stripped.count(chr(10)) + 1})"
            ) from None
        raise ResultsFileError(
            f"{where} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}"
        ) from None
    if isinstance(data, dict) and {"info", "simulations"} <= data.keys():
        if domain is not None:
            raise ResultsFileError(
                f"{where} is a tau2 results file, which names its domain; --domain is for "
                "tau-bench files"
            )
        return _read_tau2(where, data)
    if isinstance(data, list) and data and all(
        isinstance(item, dict) and {"task_id", "reward", "traj"} <= item.keys() for item in data
    ):
        return _read_tau_bench(where, data, domain, agent_model, user_model)
    if isinstance(data, list) and not data:
        raise ResultsFileError(f"{where} is an empty list: no results to import")
    raise ResultsFileError(
        f"{where} is neither a tau2 results file (a JSON object with info, tasks and "
        "simulations) nor a tau-bench result file (a JSON list of {task_id, reward, info, "
        "traj, trial})"
    )


def _read_tau2(where: str, data: dict[str, Any]) -> ResultsFile:
    _quiet_tau2()
    from tau2.data_model.simulation import Results

    try:
        results = Results.model_validate(data)
    except ValueError as err:
        raise ResultsFileError(
            f"{where} is not a valid tau2 results file: {_first_problem(err)}"
        ) from None
    info = results.info
    domain = info.environment_info.domain_name
    if domain not in TAU2_DOMAINS:
        raise ResultsFileError(
            f"{where}: domain {domain!r} is not one passhat has ({', '.join(TAU2_DOMAINS)})"
        )
    known = set(domain_task_ids(domain))
    task_ids = list(dict.fromkeys([t.id for t in results.tasks] + [s.task_id for s in results.simulations]))
    unknown = [t for t in task_ids if t not in known]
    if unknown:
        raise ResultsFileError(
            f"{where}: task id(s) {_listing(unknown)} are not tasks of the {domain} domain "
            f"(`passhat tasks {domain}` lists them)"
        )
    agent_model = info.agent_info.llm or info.agent_info.implementation
    user_model = info.user_info.llm or info.user_info.implementation
    records = []
    used: dict[str, set[int]] = {}
    for number, sim in enumerate(results.simulations):
        taken = used.setdefault(sim.task_id, set())
        index = sim.trial if sim.trial is not None else min(set(range(len(taken) + 1)) - taken)
        if index in taken:
            raise ResultsFileError(
                f"{where}: simulation {number} repeats trial {index} of task {sim.task_id!r}"
            )
        taken.add(index)
        records.append(_from_tau2_simulation(sim, index, agent_model, user_model))
    most = max((len(t) for t in used.values()), default=0)
    return ResultsFile(
        path=where,
        format=TAU2_FORMAT,
        domain=domain,
        agent_model=agent_model,
        user_model=user_model,
        agent_args=strip_secrets(info.agent_info.llm_args or {}),
        user_args=strip_secrets(info.user_info.llm_args or {}),
        task_ids=task_ids,
        trials=max(info.num_trials, most),
        seed=info.seed if info.seed is not None else 0,
        max_steps=info.max_steps,
        max_errors=info.max_errors,
        records=records,
    )


def _from_tau2_simulation(sim: Any, index: int, agent_model: str, user_model: str) -> TrialRecord:
    steps: list[StepRecord] = []
    for message in _flatten(sim.messages):
        when = _parse_time(message.timestamp)
        if message.role == "tool":
            answer = Message(
                role="tool", content=message.content, tool_call_id=message.id,
                requestor=message.requestor, error=message.error,
            )
            if steps and steps[-1].role == "tool":
                steps[-1].messages.append(answer)
            else:
                steps.append(StepRecord(step=len(steps), role="tool", messages=[answer], created_at=when))
            continue
        if message.role not in ("assistant", "user"):
            continue  # system messages are not part of a saved trajectory
        calls = [
            ToolCall(id=c.id, name=c.name, arguments=c.arguments, requestor=c.requestor)
            for c in message.tool_calls or []
        ]
        usage = message.usage or {}
        steps.append(
            StepRecord(
                step=len(steps),
                role=message.role,
                messages=[Message(role=message.role, content=message.content, tool_calls=calls or None)],
                model=(agent_model if message.role == "assistant" else user_model)
                if message.usage is not None
                else None,
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                cost=float(message.cost or 0.0),
                created_at=when,
            )
        )
    record = TrialRecord(
        task_id=sim.task_id,
        trial_index=index,
        seed=sim.seed if sim.seed is not None else 0,
        termination_reason=getattr(sim.termination_reason, "value", sim.termination_reason),
        started_at=_parse_time(sim.start_time),
        finished_at=_parse_time(sim.end_time),
        steps=steps,
    )
    if sim.reward_info is None:
        record.status = TRIAL_NOT_EVALUABLE
        record.error_class = "NotEvaluated"
        record.error = "the file has no reward for this simulation (run `tau2 evaluate-trajs` on it)"
        return record
    dumped = sim.reward_info.model_dump(mode="json")
    info = dict(dumped.get("info") or {})
    failure = info.pop("passhat_failure", None)
    record.reward = float(sim.reward_info.reward)
    record.reward_info = {
        "breakdown": dumped.get("reward_breakdown") or {},
        **{k: dumped.get(k) for k in (
            "reward_basis", "db_check", "action_checks", "communicate_checks",
            "env_assertions", "nl_assertions",
        )},
        "note": info.pop("note", None),
        **({"info": info} if info else {}),
    }
    if isinstance(failure, dict):
        record.error_class = failure.get("class")
        record.error_side = failure.get("side")
        record.error = failure.get("message")
    elif sim.skipped:
        record.error_class = "SkippedSample"
        record.error = "tau2 recorded this simulation as skipped: it raised an error (--skip-failed-samples)"
    return record


def _flatten(messages: list[Any]) -> list[Any]:
    out = []
    for m in messages:
        out.extend(m.tool_messages if hasattr(m, "tool_messages") else [m])
    return out


def _read_tau_bench(
    where: str,
    items: list[dict[str, Any]],
    domain: str | None,
    agent_model: str | None,
    user_model: str | None,
) -> ResultsFile:
    for number, item in enumerate(items):
        problem = _tau_bench_item_problem(item)
        if problem:
            raise ResultsFileError(f"{where}: result {number} {problem}")
    wanted = domain.removeprefix(TAU_BENCH_PREFIX) if domain else None
    if wanted is not None and wanted not in TAU_BENCH_TEST_TASKS:
        raise ResultsFileError(
            f"{where}: --domain for a tau-bench file must be {' or '.join(TAU_BENCH_TEST_TASKS)}, not {domain!r}"
        )
    seen: dict[str, list[int]] = {}
    for number, item in enumerate(items):
        found = _tau_bench_domains(item)
        if len(found) > 1:
            raise ResultsFileError(
                f"{where}: result {number} (task {item['task_id']}) uses both airline and "
                "retail tools: mixed domains in one tau-bench file"
            )
        for name in found:
            seen.setdefault(name, []).append(number)
    if len(seen) > 1:
        parts = "; ".join(f"{name}: results {_listing(nums)}" for name, nums in sorted(seen.items()))
        raise ResultsFileError(
            f"{where} mixes domains in one tau-bench file ({parts}); a run file holds one "
            "domain: split it by domain and import each part"
        )
    inferred = next(iter(seen), None)
    if wanted is not None and inferred is not None and wanted != inferred:
        raise ResultsFileError(f"{where} holds {inferred} results, not {wanted} (--domain)")
    name = wanted or inferred
    if name is None:
        raise ResultsFileError(
            f"{where}: cannot tell the domain (no result names a tool or a policy); "
            "give it with --domain airline or --domain retail"
        )
    size = TAU_BENCH_TEST_TASKS[name]
    unknown = sorted({i["task_id"] for i in items if not 0 <= i["task_id"] < size})
    if unknown:
        raise ResultsFileError(
            f"{where}: task id(s) {_listing(unknown)} are not tasks of tau-bench's {name} "
            f"test split (ids 0-{size - 1})"
        )
    pairs = Counter((i["task_id"], i["trial"]) for i in items)
    repeated = [pair for pair, n in pairs.items() if n > 1]
    if repeated:
        task, trial = repeated[0]
        raise ResultsFileError(f"{where}: task {task} trial {trial} appears more than once")
    named = _V1_FILE_NAME.match(Path(where).name)
    agent_args: dict[str, Any] = {}
    if named:
        agent_args["temperature"] = float(named["temperature"])
    records = [_from_tau_bench_result(item) for item in items]
    return ResultsFile(
        path=where,
        format=TAU_BENCH_FORMAT,
        domain=TAU_BENCH_PREFIX + name,
        agent_model=agent_model or (named["model"] if named else "unknown"),
        user_model=user_model or (named["user"] if named else "unknown"),
        agent_args=agent_args,
        user_args={},
        task_ids=[str(t) for t in sorted({i["task_id"] for i in items})],
        # tau-bench's pass^k uses the number of distinct trials as every task's n.
        trials=len({i["trial"] for i in items}),
        seed=0,
        max_steps=TAU_BENCH_MAX_STEPS,
        max_errors=10,
        records=records,
    )


def _tau_bench_item_problem(item: dict[str, Any]) -> str | None:
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(item.get("task_id")) or item["task_id"] < 0:
        return f"has task_id {item.get('task_id')!r}, not a task index (a whole number)"
    if not is_int(item.get("trial", 0)) or item.get("trial", 0) < 0:
        return f"has trial {item.get('trial')!r}, not a trial index"
    if isinstance(item.get("reward"), bool) or not isinstance(item.get("reward"), (int, float)):
        return f"has reward {item.get('reward')!r}, not a number"
    if not isinstance(item.get("info", {}), dict):
        return "has an info that is not a JSON object"
    if not isinstance(item["traj"], list) or not all(isinstance(m, dict) for m in item["traj"]):
        return "has a traj that is not a list of messages"
    for m in item["traj"]:
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            return f"has a message with role {m.get('role')!r}"
    item.setdefault("trial", 0)
    return None


def _tau_bench_domains(item: dict[str, Any]) -> set[str]:
    """Which v1 domain(s) a result's policy and tool names point to."""
    found: set[str] = set()
    names: set[str] = set()
    info = item.get("info") or {}
    task = info.get("task") if isinstance(info.get("task"), dict) else {}
    for action in task.get("actions") or []:
        if isinstance(action, dict):
            names.add(str(action.get("name")))
    for m in item["traj"]:
        if m.get("role") == "system":
            head = str(m.get("content") or "")[:200].lower()
            found |= {d for d in TAU_BENCH_TEST_TASKS if f"{d} agent policy" in head}
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                names.add(str((call.get("function") or {}).get("name")))
        if m.get("role") == "tool" and m.get("name"):
            names.add(str(m["name"]))
    found |= {d for d, tools in _V1_DISTINCT_TOOLS.items() if names & tools}
    return found


def _from_tau_bench_result(item: dict[str, Any]) -> TrialRecord:
    info = item.get("info") or {}
    steps: list[StepRecord] = []
    for number, m in enumerate(item["traj"]):
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            answer = Message(
                role="tool", content=_text(m.get("content")), tool_call_id=m.get("tool_call_id"),
                requestor="assistant",
            )
            if steps and steps[-1].role == "tool":
                steps[-1].messages.append(answer)
            else:
                steps.append(StepRecord(step=len(steps), role="tool", messages=[answer]))
            continue
        calls = []
        for n, call in enumerate(m.get("tool_calls") or [] if role == "assistant" else []):
            function = call.get("function") or {}
            raw = function.get("arguments")
            arguments, invalid = _arguments(raw)
            calls.append(ToolCall(
                id=str(call.get("id") or f"call_{number}_{n}"), name=str(function.get("name") or ""),
                arguments=arguments, invalid_arguments=invalid,
            ))
        steps.append(StepRecord(
            step=len(steps), role=role,
            messages=[Message(role=role, content=_text(m.get("content")), tool_calls=calls or None)],
        ))
    reward = float(item["reward"])
    record = TrialRecord(
        task_id=str(item["task_id"]),
        trial_index=item["trial"],
        seed=0,
        reward=reward,
        termination_reason=_tau_bench_termination(item, steps),
        steps=steps,
        cost=float(info.get("user_cost") or 0.0),
        reward_info={
            "breakdown": {},
            "reward_basis": None,
            "tau_bench": info.get("reward_info"),
            "tau_bench_task": info.get("task"),
            "note": "scored by tau-bench v1",
        },
    )
    if "error" in info:
        record.error_class = "TauBenchError"
        record.error = str(info.get("error"))
    return record


def _tau_bench_termination(item: dict[str, Any], steps: list[StepRecord]) -> str:
    """tau-bench files record no termination reason; the nearest tau2 one is inferred:
    an error is agent_error, a user stop token user_stop, a final transfer to a human
    agent (tau-bench's terminating tool) agent_stop, anything else max_steps."""
    if "error" in (item.get("info") or {}):
        return "agent_error"
    messages = [m for s in steps for m in s.messages]
    last = next((m for m in reversed(messages) if m.role != "tool"), None)
    if last is not None and last.role == "user" and any(
        t in (last.content or "") for t in (STOP_TOKEN, TRANSFER_TOKEN, OUT_OF_SCOPE_TOKEN)
    ):
        return "user_stop"
    if last is not None and any(c.name == "transfer_to_human_agents" for c in last.tool_calls or []):
        return "agent_stop"
    return "max_steps"


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        return value, None
    return {}, raw if isinstance(raw, str) else json.dumps(raw)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


# ---------------------------------------------------------------------------------------
# helpers


def _quiet_tau2() -> None:
    from loguru import logger

    logger.disable("tau2")


def _first_problem(err: Any) -> str:
    errors = getattr(err, "errors", None)
    if not callable(errors):
        return " ".join(str(err).split())[:300]
    problems = errors(include_url=False)
    first = problems[0]
    where = ".".join(str(p) for p in first["loc"]) or "(the file)"
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _listing(values: list[Any], most: int = 5) -> str:
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _iso(value: datetime | None) -> str | None:
    """A timestamp as tau2 writes them (ISO 8601), in UTC with its offset."""
    return None if value is None else _aware(value).astimezone(UTC).isoformat()


def _parse_time(value: str | None) -> datetime | None:
    """tau2 writes local time without an offset; it is read as UTC."""
    if not value:
        return None
    try:
        return _aware(datetime.fromisoformat(value))
    except ValueError:
        return None
