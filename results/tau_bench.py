"""A tau-bench v1 result file (the JSON list of results tau-bench's run.py writes) as
passhat's trials, for `passhat import`. v1 files do not name their domain or models:
the domain is told from the tools and policy the trajectories show (or --domain), the
models from tau-bench's file name (or --agent-model, --user-model).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from passhat.messages import OUT_OF_SCOPE_TOKEN, STOP_TOKEN, TRANSFER_TOKEN, Message, ToolCall
from passhat.results.records import (
    TAU_BENCH_FORMAT,
    ResultsFile,
    ResultsFileError,
    StepRecord,
    TrialRecord,
    listing,
)

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


def read_tau_bench(
    where: str,
    items: list[dict[str, Any]],
    domain: str | None,
    agent_model: str | None,
    user_model: str | None,
) -> ResultsFile:
    """A tau-bench result list (`where` names its file in messages), checked and
    converted: one domain per file, task ids within its test split, each trial once."""
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
        parts = "; ".join(f"{name}: results {listing(nums)}" for name, nums in sorted(seen.items()))
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
            f"{where}: task id(s) {listing(unknown)} are not tasks of tau-bench's {name} "
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
