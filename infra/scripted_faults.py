"""Ground truth for the diagnosis: the one mistake `scripted/faulty-P` makes as the agent,
and the one error `scripted/faulty-user-P` makes as the user, planned before the trial.

Each plan is a pure function of the task, its domain's facts (tool types and schemas,
the other tasks), the trial's seed and P, so a bench or a test recomputes it from what
the run recorded; the conversation never carries it. The draws are seeded per trial and
task (tau2 sends every task of a trial index the same seed): first whether the trial
errs (probability P), then the kind among those that make sense for the task, then where.

Agent mistakes (the names the diagnosis reports as a trial's first step off the gold
path):
- `wrong_argument`: a gold write, one argument value changed (a string's last letter or
  digit moved on by one, a number plus one, a boolean flipped).
- `skipped_write`: a gold write never made.
- `extra_write`: a write no gold action explains: the first write of another task of the
  domain whose arguments share no value with this task's gold actions.
- `wrong_tool`: another write tool called where a gold write is due, with the gold call's
  arguments that tool takes.
- `missing_info`: one communicate_info string left out of the closing message.
- `write_before_read`: the gold read just before a gold write skipped, so the write comes
  without it. Reads change no database, so where the reward is DB and COMMUNICATE (tau2's
  airline and retail) such a trial still passes.

User errors: `user_early_stop` (the user ends the conversation at one of its turns before
the agent is done: with its request, at the opening) and `user_invented_detail` (its
opening request carries a reference number its instructions do not have; the oracle agent
does not act on it, so the trial's outcome is unchanged).

"Write" and "read" are tau2's tool types (ToolType.WRITE, ToolType.READ).
"""

from __future__ import annotations

import json
import random
import re
import string
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from passhat.messages import GoldAction, Message, TaskInfo

AgentFaultKind = Literal[
    "wrong_argument", "skipped_write", "extra_write", "wrong_tool", "missing_info", "write_before_read"
]
AGENT_FAULT_KINDS: tuple[AgentFaultKind, ...] = (
    "wrong_argument", "skipped_write", "extra_write", "wrong_tool", "missing_info", "write_before_read",
)
UserFaultKind = Literal["user_early_stop", "user_invented_detail"]
USER_FAULT_KINDS: tuple[UserFaultKind, ...] = ("user_early_stop", "user_invented_detail")
WRITE, READ = "write", "read"


@dataclass(frozen=True)
class DomainFacts:
    """What a plan needs to know of the domain besides the task."""

    tool_kinds: dict[str, str]  # tool -> tau2 tool type: read, write, think, generic
    tool_params: dict[str, tuple[str, ...]]  # agent tool -> its parameter names
    tasks: tuple[TaskInfo, ...]  # every task, in the domain's order


def facts_of(domain: Any) -> DomainFacts:
    """A Domain's facts (duck-typed: infra does not import domains). A domain without
    tool types (a plugin that does not say) has no writes, so only missing_info and the
    user's errors can be planned on it."""
    kinds = domain.tool_kinds() if hasattr(domain, "tool_kinds") else {}
    params = {
        t["function"]["name"]: tuple((t["function"].get("parameters") or {}).get("properties") or ())
        for t in domain.agent_tools()
    }
    return DomainFacts(kinds, params, tuple(domain.task(t) for t in domain.task_ids()))


class AgentFault(BaseModel):
    kind: AgentFaultKind
    # The gold action at which the mistake is made (for extra_write: the one it comes
    # before; len(gold) means before the closing message); None for missing_info.
    index: int | None = None
    # The call made instead (wrong_argument, wrong_tool) or in addition (extra_write).
    action: GoldAction | None = None
    # missing_info: the communicate_info string left out.
    info: str | None = None

    def call_id(self) -> str | None:
        """The id of the injected call, as the conversation records it."""
        if self.kind == "extra_write":
            return f"gold-{self.index}b"
        if self.kind in ("wrong_argument", "wrong_tool"):
            return f"gold-{self.index}"
        return None


class UserFault(BaseModel):
    kind: UserFaultKind
    # The user's turn it happens at, counted from its opening request (0).
    turn: int = 0
    # user_early_stop: what the user says; user_invented_detail: the invented sentence.
    text: str


# ---- planning -------------------------------------------------------------------------


def planned_fault(domain: str, task: TaskInfo, facts: DomainFacts, seed: int | None, p: float) -> AgentFault | None:
    """The mistake scripted/faulty-P makes on this trial of this task, or None."""
    rng = random.Random(f"faulty/{seed}/{domain}/{task.id}")
    if not rng.random() < p:
        return None
    options = {kind: sites for kind, sites in _agent_sites(task, facts).items() if sites}
    if not options:
        return None
    kind = rng.choice(sorted(options))
    return options[kind][rng.randrange(len(options[kind]))](rng)


def planned_user_fault(domain: str, task: TaskInfo, facts: DomainFacts, seed: int | None, p: float) -> UserFault | None:
    """The error scripted/faulty-user-P makes on this trial of this task, or None."""
    rng = random.Random(f"faulty-user/{seed}/{domain}/{task.id}")
    if not rng.random() < p:
        return None
    kinds = ["user_invented_detail"]
    if any(_kind(facts, a) == WRITE for a in task.gold_actions) or task.communicate_info:
        kinds.append("user_early_stop")  # there is something left undone when it stops
    kind = rng.choice(sorted(kinds))
    if kind == "user_early_stop":
        # Its turns before the oracle agent is done: the opening, and one per run of
        # actions the agent asks it to perform.
        runs = sum(1 for i, a in enumerate(task.gold_actions)
                   if a.requestor == "user" and (i == 0 or task.gold_actions[i - 1].requestor != "user"))
        turn = rng.randrange(1 + runs)
        return UserFault(kind=kind, turn=turn, text="Actually, never mind: I will sort this out another time.")
    code = "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(8))
    return UserFault(kind=kind, text=f"The agent I spoke to before gave me the reference number {code}.")


def _kind(facts: DomainFacts, action: GoldAction) -> str | None:
    return facts.tool_kinds.get(action.name)


def _agent_sites(task: TaskInfo, facts: DomainFacts) -> dict[str, list]:
    """Each kind's possible mistakes on this task, as functions of the draw."""
    gold = task.gold_actions
    mine = [i for i, a in enumerate(gold) if a.requestor == "assistant"]
    writes = [i for i in mine if _kind(facts, gold[i]) == WRITE]
    sites: dict[str, list] = {kind: [] for kind in AGENT_FAULT_KINDS}
    for i in writes:
        if _leaves(gold[i].arguments):
            sites["wrong_argument"].append(lambda rng, i=i: AgentFault(
                kind="wrong_argument", index=i, action=_with_wrong_value(gold[i], rng)))
        sites["skipped_write"].append(lambda rng, i=i: AgentFault(kind="skipped_write", index=i))
        others = [t for t, k in sorted(facts.tool_kinds.items()) if k == WRITE and t != gold[i].name
                  and t in facts.tool_params]
        if others:
            sites["wrong_tool"].append(lambda rng, i=i, others=others: AgentFault(
                kind="wrong_tool", index=i, action=_other_tool(gold[i], others, facts, rng)))
    for i in mine:
        if i + 1 < len(gold) and _kind(facts, gold[i]) == READ and i + 1 in writes:
            sites["write_before_read"].append(lambda rng, i=i: AgentFault(kind="write_before_read", index=i))
    extras = _foreign_writes(task, facts)
    if extras:
        sites["extra_write"].append(lambda rng: AgentFault(
            kind="extra_write", index=rng.choice(mine + [len(gold)]), action=rng.choice(extras)))
    for j, info in enumerate(task.communicate_info):
        rest = " ".join(s for k, s in enumerate(task.communicate_info) if k != j)
        if info.lower() not in rest.lower().replace(",", ""):  # tau2's communicate check
            sites["missing_info"].append(lambda rng, info=info: AgentFault(kind="missing_info", info=info))
    return sites


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to the scalar values (strings, numbers, booleans) inside an argument."""
    if isinstance(value, dict):
        return [p for k in sorted(value) for p in _leaves(value[k], path + (k,))]
    if isinstance(value, list):
        return [p for k, v in enumerate(value) for p in _leaves(v, path + (k,))]
    if isinstance(value, (str, int, float)) and value != "":
        return [path]
    return []


def _with_wrong_value(action: GoldAction, rng: random.Random) -> GoldAction:
    arguments = json.loads(json.dumps(action.arguments))
    path = rng.choice(_leaves(arguments))
    holder = arguments
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = _changed(holder[path[-1]])
    return GoldAction(name=action.name, arguments=arguments, requestor=action.requestor)


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    # The last letter or digit moves on by one: an id, a date or a word that is off by
    # one character, as a mistyped value is.
    for k in range(len(value) - 1, -1, -1):
        c = value[k]
        for alphabet in (string.digits, string.ascii_lowercase, string.ascii_uppercase):
            if c in alphabet:
                return value[:k] + alphabet[(alphabet.index(c) + 1) % len(alphabet)] + value[k + 1:]
    return value + "x"


def _other_tool(action: GoldAction, others: list[str], facts: DomainFacts, rng: random.Random) -> GoldAction:
    """The other write tool that takes the most of the gold call's arguments (the draw
    breaks ties), called with those."""
    shared = {t: [a for a in action.arguments if a in facts.tool_params[t]] for t in others}
    most = max(len(s) for s in shared.values())
    tool = rng.choice([t for t in others if len(shared[t]) == most])
    return GoldAction(name=tool, arguments={a: action.arguments[a] for a in shared[tool]})


def _foreign_writes(task: TaskInfo, facts: DomainFacts) -> list[GoldAction]:
    """The first write of each other task whose arguments share no value with this
    task's gold actions, so it touches records this task does not."""
    own = {json.dumps(v, sort_keys=True) for a in task.gold_actions for v in _values(a.arguments)}
    found = []
    for other in facts.tasks:
        first = next((a for a in other.gold_actions if a.requestor == "assistant" and _kind(facts, a) == WRITE), None)
        if other.id == task.id or first is None:
            continue
        if not own & {json.dumps(v, sort_keys=True) for v in _values(first.arguments)}:
            found.append(first)
    return found


def _values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _values(v)]
    if isinstance(value, list):
        return [x for v in value for x in _values(v)]
    return [value]


# ---- where it shows -------------------------------------------------------------------

Step = tuple[int, list[Message]]  # a recorded step: its number and its messages


def fault_step(fault: AgentFault, task: TaskInfo, steps: list[Step]) -> int | None:
    """The step (as `passhat show` numbers them) where the planned mistake shows: the
    injected call; for a skipped action, the agent's turn that came in its place (the
    next call, or the closing message); for missing_info, the closing message."""
    agent = [(n, m) for n, ms in steps for m in ms if m.role == "assistant"]
    if fault.call_id() is not None:
        return next((n for n, m in agent if any(c.id == fault.call_id() for c in m.tool_calls or [])), None)
    if fault.kind == "missing_info":
        return next((n for n, m in reversed(agent) if m.has_text()), None)
    after = fault.index + 1
    for n, m in agent:
        ids = [_GOLD_ID.fullmatch(c.id) for c in m.tool_calls or []]
        if any(g and int(g.group(1)) >= after for g in ids):
            return n
        if m.has_text() and any(int(t) >= after for t in re.findall(r"\[gold-(\d+)\]", m.content or "")):
            return n
    closing = [n for n, m in agent if m.has_text() and not m.tool_calls]
    return closing[-1] if closing else None


def user_fault_step(fault: UserFault, task: TaskInfo, steps: list[Step]) -> int | None:
    """The step of the user's turn the error is made at, counted from its opening request
    (the first user turn that names the task, as scripted users do)."""
    user = [(n, ms[-1]) for n, ms in steps if ms and ms[-1].role == "user"]
    opening = next((k for k, (_, m) in enumerate(user) if f"(task {task.id})" in (m.content or "")), None)
    if opening is None or opening + fault.turn >= len(user):
        return None
    return user[opening + fault.turn][0]


_GOLD_ID = re.compile(r"gold-(\d+)")
