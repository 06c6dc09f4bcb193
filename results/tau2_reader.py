"""A tau2 Results file (tau2.data_model.simulation.Results, what `tau2 run` writes) as
passhat's trials, for `passhat import`.

tau2 is imported inside functions only (it takes seconds to import).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from passhat.messages import Message, ToolCall
from passhat.outcomes import TRIAL_NOT_EVALUABLE
from passhat.domains.input_files import first_problem
from passhat.domains.tau2_catalog import TAU2_DOMAINS, is_tau2_domain
from passhat.domains.tau2_data import default_tasks, quiet_tau2
from passhat.domains.tau2_version import GIVEN_UP
from passhat.infra.secrets import without_secrets
from passhat.results.records import (
    AGENT_KEY,
    TOTALS_KEY,
    TAU2_FORMAT,
    ResultsFile,
    ResultsFileError,
    StepRecord,
    TrialRecord,
    aware,
    listing,
)


def read_tau2(where: str, data: dict[str, Any]) -> ResultsFile:
    """The JSON of a tau2 Results file (`where` names it in messages), checked and
    converted: its domain and tasks must be passhat's, its trials unique per task."""
    quiet_tau2()
    from tau2.data_model.simulation import Results

    try:
        results = Results.model_validate(data)
    except ValueError as err:
        raise ResultsFileError(
            f"{where} is not a valid tau2 results file: {first_problem(err)}"
        ) from None
    info = results.info
    domain = info.environment_info.domain_name
    if not is_tau2_domain(domain):  # shipped, or registered with tau2's registry by a plugin
        raise ResultsFileError(
            f"{where}: domain {domain!r} is not one passhat has ({', '.join(TAU2_DOMAINS)}, "
            "or one a --plugin registers)"
        )
    known = {task.id for task in default_tasks(domain)}
    task_ids = list(dict.fromkeys([t.id for t in results.tasks] + [s.task_id for s in results.simulations]))
    unknown = [t for t in task_ids if t not in known]
    if unknown:
        raise ResultsFileError(
            f"{where}: task id(s) {listing(unknown)} are not tasks of the {domain} domain "
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
        agent_args=without_secrets(info.agent_info.llm_args or {}),
        user_args=without_secrets(info.user_info.llm_args or {}),
        task_ids=task_ids,
        trials=max(info.num_trials, most),
        seed=info.seed if info.seed is not None else 0,
        max_steps=info.max_steps,
        max_errors=info.max_errors,
        records=records,
        **_passhat_tau2(info.git_commit),
        **_agent(info.agent_info.implementation, data["info"].get("agent_info")),
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
        info = getattr(sim, "info", None) or {}
        if record.termination_reason in GIVEN_UP:  # tau2 gave up on it after its re-runs
            record.error_class = info.get("error_type") or record.termination_reason
            record.error = info.get("error") or f"tau2 recorded {record.termination_reason}"
            return record
        record.error_class = "NotEvaluated"
        record.error = "the file has no reward for this simulation (run `tau2 evaluate-trajs` on it)"
        return record
    dumped = sim.reward_info.model_dump(mode="json")
    info = dict(dumped.get("info") or {})
    failure = info.pop("passhat_failure", None)
    totals = info.pop(TOTALS_KEY, None)
    if isinstance(totals, dict):  # what a passhat export says the trial spent in all
        record.input_tokens = int(totals.get("input_tokens") or 0)
        record.output_tokens = int(totals.get("output_tokens") or 0)
        record.cost = float(totals.get("cost") or 0.0)
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
        record.error_at = failure.get("at")
    elif getattr(sim, "skipped", False):  # 26.3's --skip-failed-samples; 1.0.x has no such field
        record.error_class = "SkippedSample"
        record.error = "tau2 recorded this simulation as skipped: it raised an error (--skip-failed-samples)"
    return record


def _flatten(messages: list[Any]) -> list[Any]:
    out = []
    for m in messages:
        out.extend(m.tool_messages if hasattr(m, "tool_messages") else [m])
    return out


def _parse_time(value: str | None) -> datetime | None:
    """tau2 writes local time without an offset; it is read as UTC."""
    if not value:
        return None
    try:
        return aware(datetime.fromisoformat(value))
    except ValueError:
        return None


def _agent(name: str, raw: Any) -> dict[str, Any]:
    """The agent a file names: its name, and the parts of its identity passhat's own
    export writes beside tau2's fields (AGENT_KEY)."""
    measured = raw.get(AGENT_KEY) if isinstance(raw, dict) else None
    parts = measured.get("parts") if isinstance(measured, dict) else None
    ok = isinstance(parts, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in parts.items())
    return {"agent": name, "agent_parts": parts if ok else None}


# passhat's export names the tau2 a run was made with in the free-text version field
# (results.exporting): "passhat 0.1.0; tau2 26.3.0, data 752ff3b18fa100b6".
_PASSHAT_TAU2 = re.compile(r"^passhat [^;]+; tau2 (\d[\w.+-]*)(?:, data ([0-9a-f]+))?$")


def _passhat_tau2(version_field: str | None) -> dict[str, str | None]:
    """The tau2 version and data digest of passhat's own export; {} for other files."""
    match = _PASSHAT_TAU2.match(version_field or "")
    return {"tau2_version": match.group(1), "tau2_data": match.group(2)} if match else {}
