"""What a domain is, as a run measured it: a digest of its policy, tool schemas,
database and tasks, each apart, so a run refused after the domain changed can say which
of them changed. And how a recorded run's measured subjects (its domains, its agent:
passhat.run_identity.MEASURED) are measured again when it is attached to.

Why not tau2_version.data_digest (RunConfig.tau2_data): that one hashes the data files of
tau2's shipped domains, which a plugin domain does not have, and it hashes them as one,
so it cannot name what changed; nor does it see the tool schemas, which are code. It
stays in the run's identity as it was (runs recorded with it keep attaching); this
digest is read from the domain as loaded, the same way for every kind of domain: tau2's
shipped ones, a plugin's registered with tau2's registry, and passhat-protocol domains.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from passhat.contracts import RunConfig, stable_hash
from passhat.domains.agent_identity import agent_digests
from passhat.personas import persona_digests
from passhat.run_identity import DOMAIN_DIGEST_PARTS as PARTS


def domain_digest(domain: Any) -> dict[str, str]:
    """{part: digest} of a loaded domain (domains.base.Domain). The policy is the
    domain's `policy()` where it has one, else its agent system prompt; the database is
    `database_json()` where the domain can give it (a passhat-protocol domain without it
    has no "db" part)."""
    policy = domain.policy() if callable(getattr(domain, "policy", None)) else domain.agent_system_prompt()
    parts = {
        "policy": _digest(policy),
        "tools": _digest(_json({"agent": domain.agent_tools(), "user": domain.user_tools()})),
        "tasks": _digest(_json([_task(domain, t) for t in domain.task_ids()])),
    }
    database = getattr(domain, "database_json", None)
    if callable(database):
        parts["db"] = _digest(database())
    return {part: parts[part] for part in PARTS if part in parts}


def run_digests(names: list[str]) -> dict[str, dict[str, str]]:
    """The digest of each of a run's domains (by registry name), as loaded now."""
    from passhat.domains.registry import get_domain

    return {name: domain_digest(get_domain(name)) for name in names}


# How each subject the run's identity measures from the world (run_identity.MEASURED) is
# measured, by the RunConfig field that records it.
MEASURE: dict[str, Callable[[RunConfig], Any]] = {
    "domain_digests": lambda config: run_digests(config.domains),
    "agent_digests": lambda config: agent_digests(config.agent, config.agent_prompt, *config.a2a_agents),
    "persona_digests": lambda config: persona_digests(list(config.user_personas)) or None,
}


def measured_again(config: RunConfig) -> RunConfig:
    """A recorded run's configuration with each subject it recorded measured again, as
    it is now: what `resume` attaches with, so that run_identity refuses a domain or an
    agent that changed since. A subject the run was recorded without stays absent."""
    return config.model_copy(update={
        field: measure(config) for field, measure in MEASURE.items() if getattr(config, field) is not None
    })


def digest_line(digests: dict[str, str]) -> str:
    """A domain's digest as reports show it: "policy 1a2b3c4d tools ... tasks ..."."""
    return " ".join(f"{part} {value[:8]}" for part, value in digests.items())


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _digest(text: str) -> str:
    return stable_hash(text)[:16]


def _task(domain: Any, task_id: str) -> Any:
    # A tau2 task whole (its initial state and evaluation criteria included), where the
    # domain has one; else the task as passhat's contracts describe it.
    tau2_task = getattr(domain, "tau2_task", None)
    task = tau2_task(task_id) if callable(tau2_task) else domain.task(task_id)
    return _without_load_times(task.model_dump(mode="json"))


def _without_load_times(task: dict) -> dict:
    """The task without the timestamps of its initial conversation that its file leaves
    out: tau2 stamps those messages with the time the task was loaded, which differs in
    every process, and a digest that changed with it would refuse every resume."""
    history = (task.get("initial_state") or {}).get("message_history")
    if not history:
        return task
    stripped = [{k: v for k, v in m.items() if k != "timestamp"} for m in history]
    return {**task, "initial_state": {**task["initial_state"], "message_history": stripped}}
