"""What a run is, and what may change under its id.

A run id names one experiment. What it measures is its identity: the agent (its models
and their args, its prompt, its code), the user model, the domains and their tasks, k,
the seed, the tau2 version and the departures from tau2's rules. A run is attached to
(`passhat run` with its id again, `passhat resume`, a gate's round) only with the same
identity; anything else under its id is refused in one line that names what differs,
before anything is recorded. How a run goes may change freely (concurrency, retries,
provider caps, the order its tasks start in), and so may its budget, through `resume`
once its workflow has stopped (budget_refusal).

Part of the identity is measured from the world when the run is recorded, and measured
again whenever it is attached to, each subject part by part so that a refusal names the
part (MEASURED):

- each domain (domains/digest.py): its policy, tool schemas, database and tasks;
- the agent (domains/agent_identity.py, one function per kind of agent): the source
  files of a plugin agent's modules, the prompt of tau2's LLM agent;
- each task file: the tasks themselves (tasks_digest), kept with the run, so that a
  refusal names the tasks that differ (check_task_files).

- each user persona (passhat.personas): its text, a team's file read again.

A subject a run was recorded without (a run made before passhat measured it) is not a
change: such a run attaches as it did. A new subject is one more RunConfig field of
{name: {part: digest}}, one Measured line below, and the function that measures it
beside domains/digest.py.

The results store keeps a run with its fingerprint and never decides; this module does.
It imports only the contracts, so every layer may ask it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from passhat.contracts import DEFAULT_AGENT, RunConfig, stable_hash


class ConfigMismatchError(ValueError):
    """A run id was reused for another experiment (a different configuration, or a
    domain, agent or task file that changed since the run was recorded)."""


class BudgetChangeRefused(ConfigMismatchError):
    """A run was asked for a budget other than its own in a way that cannot apply it;
    the message says how to give the run a new budget."""


# RunConfig fields passhat began to record after runs already existed. A stored run
# without a tau2_version was made on tau2 26.3, the only tau2 passhat ran on before;
# tau2_data is also None for a run whose domains have no tau2 data (plugins' own).
RECORDED_LATER = ("tau2_version", "tau2_data", "judge_model")

# What RunConfig.domain_digests holds per domain (domains/digest.py), in the order a
# refusal names the parts that changed.
DOMAIN_DIGEST_PARTS = ("policy", "tools", "db", "tasks")


@dataclass(frozen=True)
class Measured:
    """A subject of the identity measured from the world: the RunConfig field that holds
    {subject name: {part: digest}}, and the order a refusal names its parts in (parts
    not listed: in the order recorded)."""

    noun: str
    field: str
    order: tuple[str, ...] = ()


MEASURED = (
    Measured("domain", "domain_digests", DOMAIN_DIGEST_PARTS),
    Measured("agent", "agent_digests"),
    Measured("user persona", "persona_digests", ("text",)),
)


# ---- the fingerprint --------------------------------------------------------------------

# Settings that change how a run goes, not what it measures.
_HOW_IT_RUNS = {"concurrency", "retry", "provider_limits", "max_cost", "expected_calls"}
# Fields that count only when a run has them, so a run stored before they existed keeps
# its fingerprint.
_ONLY_WHEN_SET = ("agent_model_args", "agent", "agent_protocol", "agent_tools", "agent_prompt", "plugins", "timeout", "rejudge",
                  "curtail", "user_personas", "a2a_agents")


def fingerprint(config: RunConfig) -> str:
    """The run's identity as one digest: what the store records with the run, and what
    a configuration attaching to it must have (or have as the run was recorded:
    as_recorded_by)."""
    exclude = set(_HOW_IT_RUNS)
    for name in _ONLY_WHEN_SET:
        if not getattr(config, name):
            exclude.add(name)
    for name in (*RECORDED_LATER, *(m.field for m in MEASURED)):
        if getattr(config, name) is None:
            exclude.add(name)
    if config.judge_model is None:
        exclude.add("judge_args")
    body = config.model_dump(mode="json", exclude=exclude)
    return stable_hash(json.dumps(body, sort_keys=True))


def as_recorded_by(config: RunConfig, stored: RunConfig) -> RunConfig:
    """`config` without the fields `stored` (a run recorded before they existed) lacks,
    so the two compare on what both record: the measured subjects always, the
    RECORDED_LATER fields only while `config` is on tau2 26.3 too."""
    update: dict[str, Any] = {m.field: None for m in MEASURED if getattr(stored, m.field) is None}
    if stored.tau2_version is None and (config.tau2_version or "26.3").split(".")[0] == "26":
        update.update({name: None for name in RECORDED_LATER})
    return config.model_copy(update=update) if update else config


# ---- attaching to a recorded run ---------------------------------------------------------


@dataclass
class Recorded:
    """A run as the store holds it: its fingerprint, its configuration (None when it no
    longer reads as one), and the tasks it kept of each task file, {domain: (digest,
    tasks)}."""

    run_id: str
    fingerprint: str
    config: RunConfig | None
    task_files: dict[str, tuple[str, list[Any]]] = field(default_factory=dict)


def check_attach(config: RunConfig, recorded: Recorded | None,
                 task_files: dict[str, tuple[str, list[Any]]]) -> None:
    """Refuse `config` under the id of `recorded` unless it is the same experiment
    (ConfigMismatchError, naming what differs); nothing to check for a new run.
    `task_files`: the tasks each of the run's task files holds now, with their digest."""
    if recorded is None:
        return
    check_task_files(config.run_id, recorded.task_files, task_files)
    same_experiment(recorded, config)


def check_task_files(run_id: str, kept: dict[str, tuple[str, list[Any]]],
                     current: dict[str, tuple[str, list[Any]]]) -> None:
    """A task file whose tasks differ from those the run kept is refused, naming the
    tasks. Checked before the rest of the configuration, whose task ids an added or
    removed task changes too."""
    for domain, (digest, tasks) in current.items():
        if domain not in kept or kept[domain][0] == digest:
            continue
        differ = differing_tasks(kept[domain][1], tasks)
        shown = ", ".join(differ[:5]) + (f" and {len(differ) - 5} more" if len(differ) > 5 else "")
        path = domain.partition("@")[2]
        raise ConfigMismatchError(
            f"task file {path} changed since run {run_id} recorded its tasks "
            f"(tasks that differ: {shown or 'none by id'}); restore the file to go on with "
            "this run, or give the changed tasks a new --run-id"
        )


def same_experiment(recorded: Recorded, config: RunConfig) -> None:
    """Refuse `config` unless it has the recorded run's fingerprint (as that run would
    have recorded it). A measured subject that changed is named with its parts;
    otherwise the fields that differ are named with both values."""
    stored = recorded.config
    if recorded.fingerprint == fingerprint(config):
        return
    if stored is not None and recorded.fingerprint == fingerprint(as_recorded_by(config, stored)):
        return
    for subject in MEASURED:
        changed = changed_subjects(stored, config, subject) if stored is not None else []
        if changed:
            raise ConfigMismatchError(
                f"the {subject.noun} changed since run {config.run_id!r} was recorded: {'; '.join(changed)} "
                f"differ; restore the {subject.noun} to go on with this run, or use a new --run-id"
            )
    differ = differences(stored, as_recorded_by(config, stored)) if stored is not None else []
    raise ConfigMismatchError(
        f"run {config.run_id!r} already exists with a different configuration"
        + (f" ({'; '.join(differ)})" if differ else "")
        + "; resume it with the same settings, or use a new --run-id"
    )


def changed_subjects(stored: RunConfig, config: RunConfig, subject: Measured) -> list[str]:
    """What differs between the recorded and the current digests of one measured
    subject, in words: "airline (policy, db)" per domain that changed. A subject only
    one side has (a domain added, another agent) is a difference of the configuration,
    named as such; a run recorded without the subject has nothing to compare."""
    recorded, current = getattr(stored, subject.field), getattr(config, subject.field)
    if recorded is None or current is None:
        return []
    out = []
    for name in [n for n in recorded if n in current]:
        old, new = recorded[name], current[name]
        listed = [p for p in subject.order if p in old or p in new]
        rest = [p for p in dict.fromkeys([*old, *new]) if p not in listed]
        parts = [p for p in [*listed, *rest] if old.get(p) != new.get(p)]
        if parts:
            out.append(f"{name} ({', '.join(parts)})")
    return out


def differences(stored: RunConfig, config: RunConfig) -> list[str]:
    """The fields of the identity on which `config` differs from the stored one, each
    with both values when they are short. The measured subjects are named by
    changed_subjects; a subject one side lacks follows from a field named here (the
    domains, the agent)."""
    out = []
    measured = {m.field for m in MEASURED}
    for name in RunConfig.model_fields:
        if name in measured:
            continue
        theirs, ours = getattr(stored, name), getattr(config, name)
        if theirs == ours or fingerprint(stored.model_copy(update={name: ours})) == fingerprint(stored):
            continue  # equal, or a setting that is not part of the identity
        shown = [v if isinstance(v, str) else json.dumps(v, default=str) for v in (theirs, ours)]
        gone, new = _only_in(theirs, ours), _only_in(ours, theirs)
        if max(map(len, shown)) <= 40:
            out.append(f"{name}: {shown[0]} in the run, {shown[1]} now")
        elif gone or new:  # a list (the agent models of a sweep): which items differ
            out.append(f"{name}: " + "; ".join(
                [f"{', '.join(gone)} only in the run"] * bool(gone) + [f"{', '.join(new)} only now"] * bool(new)))
        else:
            out.append(f"{name} differs")
    return out


def _only_in(values: Any, others: Any) -> list[str]:
    """The strings of one list that the other lacks; none unless both are lists."""
    if not isinstance(values, list) or not isinstance(others, list):
        return []
    return [str(v) for v in values if v not in others]


def recorded_config(config_json: str) -> RunConfig | None:
    """A stored configuration, or None when it no longer reads as one."""
    try:
        return RunConfig.model_validate_json(config_json)
    except ValueError:
        return None


# ---- the budget -------------------------------------------------------------------------


def describe_budget(max_cost: float | None) -> str:
    return "no budget" if max_cost is None else f"a budget of {max_cost:g} USD"


def budget_refusal(stored: RunConfig, config: RunConfig, *, resume: bool,
                   running: bool) -> BudgetChangeRefused | None:
    """The budget is not part of what a run measures, but the run's workflow holds it:
    a run takes a new one through resume, once its workflow has stopped (`running`:
    whether it runs now). The refusal, or None when the change may go ahead."""
    if stored.max_cost == config.max_cost:
        return None
    run_id = config.run_id
    if not resume:
        return BudgetChangeRefused(
            f"run {run_id} exists with {describe_budget(stored.max_cost)}; "
            f"`passhat resume {run_id} --max-cost USD` continues it with another"
        )
    if running:
        return BudgetChangeRefused(
            f"run {run_id} is running with {describe_budget(stored.max_cost)}: a new budget "
            f"applies once it has stopped (`passhat cancel {run_id}`, then "
            f"`passhat resume {run_id} --max-cost USD`)"
        )
    return None


# ---- task files -------------------------------------------------------------------------


def tasks_digest(raw: list[Any]) -> str:
    """A digest of a task file's tasks themselves: reformatting the file, or reordering
    its tasks or a task's keys, leaves it as it was (a run names its tasks by id);
    changing any value changes it."""
    canonical = sorted(_canonical(t) for t in raw)
    return hashlib.sha256("\n".join(canonical).encode()).hexdigest()


def _canonical(task: Any) -> str:
    return json.dumps(task, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def differing_tasks(kept: list[Any], current: list[Any]) -> list[str]:
    """The ids of the tasks that differ between two versions of a task file, each with
    how ("0 (changed)", "7 (added)", "3 (removed)"), in the files' order."""

    def by_id(raw: list[Any]) -> dict[str, str]:
        return {
            str(t.get("id") if isinstance(t, dict) else f"at index {i}"): _canonical(t)
            for i, t in enumerate(raw)
        }

    old, new = by_id(kept), by_id(current)
    out = [f"{i} (changed)" if i in old else f"{i} (added)" for i in new if old.get(i) != new[i]]
    return out + [f"{i} (removed)" for i in old if i not in new]


# ---- the agent, as reports and exports name it --------------------------------------------


class AgentIdentity(BaseModel):
    """The agent one agent model of a run was: its name (in tau2's agent registry, or
    the kind's own), the digest of everything that makes it (its recorded parts, the
    model string and the model's args), and its recorded parts. No digest for a run
    recorded before passhat measured its agent."""

    name: str
    digest: str | None = None
    parts: dict[str, str] = {}

    def words(self) -> str:
        """"notes_agent sha256:1a2b3c4d5e6f (module notes 9f8e7d6c)", for reports."""
        text = self.name + (f" sha256:{self.digest}" if self.digest else "")
        if self.parts:
            # digests shortened; a value that is no digest (an A2A card's name, version
            # and URL) shown whole
            text += " (" + ", ".join(f"{p} {v[:8] if re.fullmatch('[0-9a-f]{16,}', v) else v}"
                                     for p, v in self.parts.items()) + ")"
        return text


def agent_name(config: RunConfig, model: str | None = None) -> str:
    return (config.agent if model is None else config.agent_for(model)) or DEFAULT_AGENT


def agent_identity(config: RunConfig, model: str) -> AgentIdentity:
    """The agent a run measured with one of its agent models (in a sweep of A2A agents,
    the agent that model names)."""
    name = agent_name(config, model)
    if config.agent_digests is None:
        return AgentIdentity(name=name)
    parts = config.agent_digests.get(name, {})
    body = {"agent": name, "parts": parts, "model": model, "args": config.agent_args_for(model)}
    return AgentIdentity(name=name, parts=parts,
                         digest=stable_hash(json.dumps(body, sort_keys=True, default=str))[:12])
