"""A run's size, said before it starts: its conversations and an estimate of its model
calls. A big run started from a terminal asks for confirmation first."""

from __future__ import annotations

from dataclasses import dataclass

from passhat.contracts import RunConfig
from passhat.messages import TaskInfo

# A run of more conversations than this asks "Start?" on an interactive terminal.
CONFIRM_ABOVE = 1000


@dataclass(frozen=True)
class RunSize:
    conversations: int
    tasks: int  # per agent model
    model_calls: int  # estimated: every conversation goes straight to its solution
    max_model_calls: int  # every conversation runs to --max-steps


def direct_calls(task: TaskInfo) -> int:
    """Model calls of a conversation that goes straight to the task's solution: the
    user's request, one agent call per gold action of the agent's, two per action the
    user performs (the agent asks, the user acts), the agent's answer and the user's
    stop. Real models talk more; this is the floor the estimate is built on."""
    by_agent = sum(a.requestor == "assistant" for a in task.gold_actions)
    return 3 + by_agent + 2 * (len(task.gold_actions) - by_agent)


def run_size(config: RunConfig) -> RunSize:
    """From the config's per-task estimates (build_config computes them with
    direct_calls)."""
    per_trial = sum(sum(config.expected_calls.get(domain, {}).values()) for domain in config.domains)
    # A curtailed round (a gate's, passhat.curtailment) runs at most its blocks' trials
    # a task, and more only to replace not-evaluable ones.
    trials = max(config.curtail) if config.curtail else config.trials
    conversations = config.total_trials() // config.trials * trials
    return RunSize(
        conversations=conversations,
        tasks=sum(len(config.task_ids[d]) for d in config.domains),
        model_calls=per_trial * trials * len(config.agent_models),
        max_model_calls=conversations * config.max_steps,
    )


def describe(config: RunConfig, size: RunSize) -> str:
    """One line: what the run is about to start, and how the model calls are estimated."""
    models = len(config.agent_models)
    budget = "" if config.max_cost is None else f"; budget {config.max_cost:g} USD"
    per_task = config.trials_label() if config.curtail else f"{config.trials} trial{'s' if config.trials != 1 else ''}"
    return (
        f"run {config.run_id}: {'up to ' if config.curtail else ''}{size.conversations:,} conversations "
        f"({models} agent model{'s' if models != 1 else ''} x {size.tasks:,} task{'s' if size.tasks != 1 else ''} "
        f"x {per_task}); about "
        f"{size.model_calls:,} model calls, estimated as conversations that go straight to each "
        f"task's gold actions (3 + 1 per agent action + 2 per user action), up to "
        f"{size.max_model_calls:,} if every conversation runs to --max-steps {config.max_steps}{budget}"
    )


def needs_confirmation(size: RunSize, *, yes: bool, interactive: bool) -> bool:
    """Only a big run, started from a terminal, without --yes, asks before it starts."""
    return size.conversations > CONFIRM_ABOVE and interactive and not yes
