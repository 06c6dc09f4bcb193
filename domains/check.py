"""`passhat domains check`: does each task's evaluation hold up, before a run pays for it?

For every task, offline, three conversations are played the way the scripted oracle
plays them (its gold actions in order, each by its requestor, then the information the
task says must be communicated, then the user stops) and scored by the domain:

- the oracle's conversation must score 1.0, else the gold actions do not solve the
  task (a typo in an argument, an action the tools refuse, an unmet assertion);
- without the last gold action that changes the database, it must not score 1.0;
- with nothing communicated, it must not score 1.0 when the task has information to
  communicate; a task that changes nothing must not score 1.0 when the agent does
  nothing and says nothing.

A conversation that still scores 1.0 in those cases is an evaluation that cannot fail.

Before that, each task is held to what a task file is (domains/task_file.py): its gold
actions must name tools the domain has, with arguments their JSON schemas accept. Every
finding names the field of the task it is about (`evaluation_criteria.actions.2: ...`);
the CLI prints it after the task's id. (Mistakes that keep the tasks from loading at all,
a JSON error, a task that does not validate, two tasks with one id, are refused when the
domain loads: domains/task_load.py.)

It also reads each `communicate_info` string as tau2's COMMUNICATE check does (a
case-insensitive substring of an agent's message, commas removed): one that the agent's
greeting or an ordinary reply naming no task data (ORDINARY_REPLIES) already contains
passes by chance, whatever the agent told the user.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from passhat.messages import AGENT_GREETING, STOP_TOKEN, GoldAction, Message, TaskInfo, ToolCall
from passhat.outcomes import is_success
from passhat.domains.base import Domain
from passhat.domains.plugins import last_line
from passhat.domains.task_file import gold_action_problems, tool_schemas

NOTHING_SAID = "Your request has been handled."
# The fields of a task (tau2's format) that findings name.
ACTIONS = "evaluation_criteria.actions"
INFO = "evaluation_criteria.communicate_info"
# What an agent says in any domain without naming a task's data: a communicate_info
# string inside one of them is met by replies like these (docs/plugins.md lists them).
ORDINARY_REPLIES = (
    AGENT_GREETING,
    NOTHING_SAID,
    "Thank you. Let me look up your account and check the details.",
    "Could you confirm your name, your user id or the email address on the account?",
    "I have already checked: your request is pending and will be processed shortly.",
    "I'm sorry, I cannot do that under our policy. Is there anything else I can help you with?",
    "Done. You will receive a confirmation by email; have a nice day!",
)


@dataclass
class TaskCheck:
    task_id: str
    findings: list[str] = field(default_factory=list)


def check_domain(domain: Domain, task_ids: list[str] | None = None) -> list[TaskCheck]:
    return [check_task(domain, task_id) for task_id in task_ids or domain.task_ids()]


def check_task(domain: Domain, task_id: str) -> TaskCheck:
    task = domain.task(task_id)
    result = TaskCheck(task_id)
    # First what a task file is held to (domains/task_file.py): gold actions that name a
    # tool the domain lacks, or arguments its schema refuses. Playing such a task would
    # only report their consequences (an unknown tool's call changes nothing, so the
    # task "still scores 1.0 without" it).
    user_tools = domain.user_tools()
    problems = gold_action_problems(task.gold_actions, domain.name, tool_schemas(domain.agent_tools()),
                                    None if user_tools is None else tool_schemas(user_tools))
    if problems:
        result.findings += [f"{field}: {problem}" for field, problem in problems]
        return result
    session = f"check-{task_id}"
    try:
        full = _score(domain, task, task.gold_actions, _said(task), f"{session}-gold")
    except ScoringFailed as err:
        result.findings.append(f"{ACTIONS}: scoring its gold actions raised {err}")
        return result
    if not is_success(full):
        result.findings.append(f"{ACTIONS}: its gold actions score {full:g}, not 1.0")
    writes = _state_changing(domain, task)
    if writes:
        last = writes[-1]
        without = [a for i, a in enumerate(task.gold_actions) if i != last]
        try:
            reward = _score(domain, task, without, _said(task), f"{session}-drop")
        except ScoringFailed:
            reward = 0.0  # the evaluation does fail without it
        if is_success(reward):
            name = task.gold_actions[last].name
            result.findings.append(
                f"{ACTIONS}.{last}: still scores 1.0 without its last state-changing gold action ({name})")
    # Saying nothing may rightly score 1.0 when the task has nothing to communicate and
    # changes the state: the state is what is checked. A task that changes nothing must
    # at least fail an agent that does nothing and says nothing.
    result.findings += [f"{INFO}.{n}: {weak_info_finding(info)}" for n, info in enumerate(task.communicate_info)
                        if ordinary_reply_with(info) is not None]
    if is_success(full) and (task.communicate_info or not writes):
        actions = task.gold_actions if writes else []
        try:
            reward = _score(domain, task, actions, NOTHING_SAID, f"{session}-mute")
        except ScoringFailed:
            reward = 0.0
        if is_success(reward):
            # With information to communicate, that is what failed to guard the reward;
            # without, the task has nothing its evaluation can fail on.
            field = INFO if task.communicate_info else "evaluation_criteria"
            result.findings.append(f"{field}: still scores 1.0 when the agent communicates nothing")
    return result


def ordinary_reply_with(info: str) -> str | None:
    """The first ordinary reply (ORDINARY_REPLIES) in which tau2's COMMUNICATE check
    would find `info`, or None."""
    return next((r for r in ORDINARY_REPLIES if info.lower() in r.lower().replace(",", "")), None)


def weak_info_finding(info: str) -> str:
    reply = ordinary_reply_with(info)
    return (f"{info!r} is met by chance: tau2 looks for it in the agent's messages "
            f"(any case), and a reply naming no task data already has it ({reply!r}); "
            "name the task's data (an amount, an id, a date) instead")


def _said(task: TaskInfo) -> str:
    info = " ".join(task.communicate_info)
    return f"Here is what you need to know: {info}" if info else NOTHING_SAID


def _conversation(domain: Domain, task: TaskInfo, actions: list[GoldAction], said: str,
                  session: str) -> list[Message]:
    """The oracle's conversation: the request, each action run by its requestor, the
    agent's closing words, the user's stop."""
    messages = [*task.initial_messages,
                Message(role="user", content=task.reason_for_call or task.user_scenario)]
    for i, action in enumerate(actions):
        call = ToolCall(id=f"gold-{i}", name=action.name, arguments=action.arguments,
                        requestor=action.requestor)
        messages.append(Message(role=action.requestor, tool_calls=[call]))
        messages += domain.execute(task.id, messages, [call], session=session)
    messages.append(Message(role="assistant", content=said))
    messages.append(Message(role="user", content=STOP_TOKEN))
    return messages


def _score(domain: Domain, task: TaskInfo, actions: list[GoldAction], said: str, session: str) -> float:
    """The reward; a scoring that raises (tau2's evaluator raises when an environment
    assertion's own function fails) is a reward of 0 with the error said."""
    try:
        return domain.score(task.id, _conversation(domain, task, actions, said, session), "user_stop").reward
    except Exception as err:  # noqa: BLE001 - the domain's code: reported, not fatal
        raise ScoringFailed(last_line(err)) from err


class ScoringFailed(Exception):
    pass


def _state_changing(domain: Domain, task: TaskInfo) -> list[int]:
    """Indexes of the gold actions that change the state: tau2's write tools where the
    domain says (its ToolKit's tool types), else every gold action."""
    kinds = getattr(domain, "tool_kinds", None)
    if kinds is None:
        return list(range(len(task.gold_actions)))
    known = kinds()
    return [i for i, a in enumerate(task.gold_actions) if known.get(a.name, "write") == "write"]
