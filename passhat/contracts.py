"""The contracts every layer shares: ids, a run's configuration and its task and trial specs
(passhat.messages holds a conversation's vocabulary, passhat.outcomes what runs come to).
It imports nothing of passhat, so any layer may import it.

Everything here is small and JSON-serialisable: specs travel through Temporal's history,
so they carry references (ids) rather than conversations.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from pydantic import BaseModel, Field, model_serializer

TASK_QUEUE = "passhat"

# `tau2 run`'s defaults: a run that keeps them is comparable with the leaderboard.
DEFAULT_MAX_STEPS = 200
DEFAULT_MAX_ERRORS = 10
DEFAULT_SEED = 300
DEFAULT_TEMPERATURE = 0.0
# tau2's generate sends a request again when the reply is empty (no text, no tool calls),
# this many times, before the conversation fails.
EMPTY_REPLY_RETRIES = 3
# Where a trial's NL-assertion judge step is recorded in the results store: under
# "<trial id>~judge", beside the conversation (steps kept beside it count in its cost).
JUDGE_SUFFIX = "~judge"

# The agent prompt template (--agent-prompt): the domain's policy goes where this is.
POLICY_PLACEHOLDER = "{policy}"
# tau2's LLM agent, whose requests passhat builds itself; the agent a run without --agent has.
DEFAULT_AGENT = "llm_agent"


class RetryConfig(BaseModel):
    """How hard to retry a model call that failed for a transient reason: for up to
    retry_for_s (a provider outage of minutes is ridden out), and at most max_attempts
    times when that is not 0."""

    retry_for_s: float = 900.0
    max_attempts: int = 0
    initial_interval_s: float = 1.0
    backoff: float = 2.0
    max_interval_s: float = 60.0
    model_call_timeout_s: float = 300.0
    # A model call heartbeats every third of this (none if it answers sooner): a killed
    # worker's call is retried elsewhere after at most this long.
    heartbeat_timeout_s: float = 10.0
    # How long bookkeeping (the results store) is retried before a trial gives up: a
    # store that is down for a few minutes is waited out.
    bookkeeping_for_s: float = 600.0


# ---- provider rate caps ------------------------------------------------------------------


def provider_of(model: str) -> str:
    """The provider part of a litellm model string ("openai/gpt-4.1" -> "openai"); a bare
    model name is litellm's default provider, openai."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def plugin_task_queue(plugins: list[str]) -> str:
    """The task queue of a run that needs these plugins (passhat.domains.plugins): only
    workers that imported exactly this set poll it, so a worker lacking one never takes
    the run's work. A run without plugins uses the plain queue."""
    if not plugins:
        return TASK_QUEUE
    digest = stable_hash(json.dumps(sorted(set(plugins))))[:12]
    return f"{TASK_QUEUE}-plugins-{digest}"


def provider_task_queue(provider: str, plugins: list[str] | None = None) -> str:
    """The task queue a capped provider's model calls are scheduled on. The Temporal
    server dispatches a queue's activities no faster than the rate its workers ask for,
    whichever worker polls: one limit for every worker on every machine. A run with
    plugins has its own (a plugin's agent makes those calls)."""
    return f"{plugin_task_queue(plugins or [])}-provider-{provider}"


class ProviderLimit(BaseModel):
    """A cap on one provider's model calls, over all the workers of a run."""

    per_minute: float | None = None  # calls started per minute
    max_concurrent: int | None = None  # calls in flight at once


class TrialSettings(BaseModel):
    """How every conversation of a run is held. The run, each of its tasks and each trial
    carry the same values; they are declared here once."""

    user_model: str
    agent_args: dict[str, Any] = Field(default_factory=dict)
    user_args: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    # tau2 1.0.x's --timeout: seconds a conversation may run, measured in workflow time
    # from its start; past it, the conversation ends as the version's timeout_reason
    # (domains/tau2_version.RULES). None: no limit (tau2's default, and 26.3's only).
    timeout: float | None = None
    # A departure from tau2 (opt-in): tool calls whose arguments are not valid JSON are
    # answered with an error tool message and the conversation goes on. tau2 ends the
    # conversation as agent_error instead.
    lenient_tool_arguments: bool = False
    # A departure from tau2 1.0.x (opt-in): a judge reply that cannot be read re-asks the
    # judge alone (as many times as tau2 re-runs a simulation), keeping the conversation.
    # tau2 re-runs the whole simulation instead (its evaluation raised).
    rejudge: bool = False
    # The tau2 version the run is made with ("26.3", "1.0.1"): its rules (domains/
    # tau2_version.RULES) decide the conversation. None: recorded before passhat kept
    # it, when 26.3 was the only one.
    tau2_version: str | None = None
    # tau2 1.0.x: the judge of NL assertions (None where the version grades none).
    judge_model: str | None = None
    judge_args: dict[str, Any] = Field(default_factory=dict)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    # Provider -> its cap. A capped provider's calls go to its own task queue.
    provider_limits: dict[str, ProviderLimit] = Field(default_factory=dict)
    # The agent from tau2's agent registry that plays the agent side (--agent); None is
    # tau2's LLM agent, whose requests passhat builds itself.
    agent: str | None = None
    # An agent behind A2A (agent "a2a:URL") in text mode: the convention of the messages
    # passhat sends it, "agentify" or "agentbeats" (domains/a2a_protocol.py). None for
    # every other agent.
    agent_protocol: str | None = None
    # An agent behind A2A: how it gets the trial's tools. None is text mode (actions in
    # its replies); "mcp": passhat serves them over MCP at a URL of the trial's own
    # (activities/mcp_tools.py).
    agent_tools: str | None = None
    # The system prompt template of tau2's LLM agent (--agent-prompt), POLICY_PLACEHOLDER
    # where the domain's policy goes; None is tau2's own prompt. The text itself travels
    # with the run, not the file's path: a file edited later cannot change a run.
    agent_prompt: str | None = None

    def agent_label(self) -> str:
        """Which agent plays, in words for reports: its name, and the digest of a prompt
        of the user's own."""
        label = self.agent or DEFAULT_AGENT
        if self.agent_prompt is not None:
            label += f", prompt sha256:{prompt_digest(self.agent_prompt)}"
        return label
    # The plugin modules (passhat.domains.plugins) every worker of the run imports; they
    # choose the run's task queues (plugin_task_queue).
    plugins: list[str] = Field(default_factory=list)

    def task_queue(self) -> str:
        """The queue of the run's workflows and activities."""
        return plugin_task_queue(self.plugins)

    def model_queue(self, model: str) -> str | None:
        """The task queue of a model's calls: its provider's, when the provider's calls
        per minute are capped; None for the run's own queue."""
        provider = provider_of(model)
        limit = self.provider_limits.get(provider)
        if limit and limit.per_minute is not None:
            return provider_task_queue(provider, self.plugins)
        return None

    def concurrency_caps(self, agent_model: str) -> dict[str, int]:
        """The providers a conversation of this agent model calls (agent and user side)
        that cap their calls in flight, with the caps. A conversation calls its models one
        at a time, so capping conversations in flight caps the calls in flight."""
        providers = {provider_of(agent_model), provider_of(self.user_model)}
        return {
            p: limit.max_concurrent
            for p, limit in sorted(self.provider_limits.items())
            if p in providers and limit.max_concurrent is not None
        }

    def departures(self) -> list[str]:
        """How these settings depart from tau2's rules, in words for report headers."""
        out = []
        if self.lenient_tool_arguments:
            out.append("lenient tool arguments (invalid JSON answered with a tool error)")
        if self.rejudge:
            out.append("rejudge (an unreadable judge reply re-asks the judge alone; tau2 "
                       "re-runs the whole simulation)")
        return out


class RunConfig(TrialSettings):
    """What a user asked for. Two runs with the same id must be the same experiment
    (passhat.run_identity says what that is)."""

    run_id: str
    agent_models: list[str]
    domains: list[str]
    # Per domain, the task ids to run; an empty list means every task of the domain.
    task_ids: dict[str, list[str]] = Field(default_factory=dict)
    trials: int = 1
    # tau2's --seed: trial t of every task sends the provider trial_seeds(seed, k)[t].
    seed: int = DEFAULT_SEED
    # A gate's round on pass^k, k > 1 (passhat.curtailment): the k of each criterion. A
    # task's trials then run one after another and stop once every criterion's blocks of
    # the round are decided; `trials` is the most it may run. Empty: all trials run.
    curtail: list[int] = Field(default_factory=list)
    concurrency: int = 8
    # Per agent model, the litellm args of its calls when the models have their own (a
    # sweep config gives each model its args); a model not named here uses agent_args.
    agent_model_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Budget in USD: once the run's recorded cost reaches it, no new conversation starts.
    max_cost: float | None = None
    # Per domain, each task's estimated model calls per conversation (cli.preview's
    # direct_calls). The run starts its longest tasks first: a long conversation started
    # last would run on alone after the others have ended, and set the run's wall time.
    expected_calls: dict[str, dict[str, int]] = Field(default_factory=dict)
    # A digest of the tau2 data files of the run's domains (tasks, databases, policies):
    # two runs with the same version but edited data are not the same experiment.
    tau2_data: str | None = None
    # Per domain, the digest of its policy, tool schemas, database and tasks
    # (domains/digest.py), for every kind of domain: a run attached to after its domain
    # changed is refused, naming what changed. None: recorded before passhat kept it.
    domain_digests: dict[str, dict[str, str]] | None = None
    # What makes the run's agent (domains/agent_identity.py), {agent name: {part:
    # digest}}: a plugin agent's module sources, the prompt of tau2's LLM agent. An agent
    # changed since is refused like a domain. None: recorded before passhat kept it.
    agent_digests: dict[str, dict[str, str]] | None = None
    # The user personas (passhat.personas) every task and trial also runs under, besides
    # tau2's own user, {label: text} in the order given; empty: tau2's user alone, whose
    # requests stay as they were.
    user_personas: dict[str, str] = Field(default_factory=dict)
    # {persona label: {"text": digest}}, measured like a domain; None without personas.
    persona_digests: dict[str, dict[str, str]] | None = None
    # A sweep of agents behind A2A (--agent a2a:URL given more than once): each agent's
    # name "a2a:URL", which is also its agent model, and the convention of its messages
    # (agent_protocol's values). Empty: one agent (`agent`, with `agent_protocol`).
    a2a_agents: dict[str, str] = Field(default_factory=dict)

    def personas(self) -> list[str | None]:
        """The users every task and trial runs under: tau2's own (None) first, the
        baseline each persona's drop is measured from, then each persona."""
        return [None, *self.user_personas]

    def trials_label(self) -> str:
        """A task's trials, in words: a curtailed round's stop early."""
        if self.curtail:
            return f"up to {max(self.curtail)} trials, a block ending at its first failure"
        return f"{self.trials} trials"

    def agent_args_for(self, model: str) -> dict[str, Any]:
        """The litellm args of one agent model's calls."""
        return self.agent_model_args.get(model, self.agent_args)

    def agent_label(self) -> str:
        """Which agent plays, in words for reports; a sweep of A2A agents names each."""
        if self.a2a_agents:
            return f"{len(self.a2a_agents)} agents behind A2A ({', '.join(self.a2a_agents)})"
        return super().agent_label()

    def agent_for(self, model: str) -> str | None:
        """The agent that plays with one agent model: in a sweep of A2A agents, the
        agent that model names; else the run's agent."""
        return model if model in self.a2a_agents else self.agent

    def _a2a_agent(self, model: str) -> dict[str, Any]:
        """The settings one agent model of a sweep of A2A agents has of its own."""
        if model not in self.a2a_agents:
            return {}
        return {"agent": model, "agent_protocol": self.a2a_agents[model]}

    def units(self) -> list["TaskUnit"]:
        """Every (agent model, persona, domain, task) of the run, in the order they start: the most
        expected model calls first, and otherwise as given (a config without estimates,
        like one stored by an earlier passhat, keeps the order it was run in)."""
        settings = self.model_dump(include=set(TrialSettings.model_fields))
        seeds = trial_seeds(self.seed, self.trials)
        units = [
            TaskUnit(
                **{**settings, "agent_args": self.agent_args_for(model), **self._a2a_agent(model)},
                run_id=self.run_id,
                agent_model=model,
                domain=domain,
                task_id=task_id,
                seeds=seeds,
                **({} if persona is None else
                   {"user_persona": persona, "user_persona_text": self.user_personas[persona]}),
            )
            for model in self.agent_models
            for persona in self.personas()
            for domain in self.domains
            for task_id in self.task_ids[domain]
        ]
        # sorted() is stable: equal estimates keep the given order.
        return sorted(units, key=lambda u: -self.expected_calls.get(u.domain, {}).get(u.task_id, 0))

    def total_trials(self) -> int:
        return (len(self.agent_models) * len(self.personas()) * sum(map(len, self.task_ids.values()))
                * self.trials)


def without_unset_persona(model: BaseModel, data: Any, *fields: str) -> Any:
    """`data`, a model's serialized form, without its persona `fields` when the model has no
    persona: what a run without --user-persona records and prints is as it was before
    personas existed."""
    if getattr(model, "user_persona", None) is None and isinstance(data, dict):
        for name in fields:
            data.pop(name, None)
    return data


class _TaskKey(TrialSettings):
    """Which (run, agent model, persona, domain, task) a task or trial belongs to."""

    run_id: str
    agent_model: str
    domain: str
    task_id: str
    # The user persona (its label) and its text, added to the user simulator's prompt
    # (passhat.personas.with_persona); None: tau2's user as it is.
    user_persona: str | None = None
    user_persona_text: str | None = None

    @model_serializer(mode="wrap")
    def _persona_only_when_set(self, handler: Any) -> dict[str, Any]:
        """Without a persona, the two fields are left out: every activity's input (and so
        each trial's history) stays as it was before personas, byte for byte."""
        return without_unset_persona(self, handler(self), "user_persona", "user_persona_text")

    @property
    def task_workflow_id(self) -> str:
        return task_workflow_id(self.run_id, self.agent_model, self.domain, self.task_id, self.user_persona)


class TaskUnit(_TaskKey):
    """The unit a TaskWorkflow owns: k trials of one task, with the seed of each."""

    seeds: list[int]

    @property
    def trials(self) -> int:
        return len(self.seeds)

    def trial(self, index: int) -> "TrialSpec":
        return TrialSpec(
            **self.model_dump(exclude={"seeds"}), trial_index=index, seed=self.seeds[index]
        )


class TrialSpec(_TaskKey):
    trial_index: int
    seed: int

    @property
    def trial_id(self) -> str:
        """Also the TrialWorkflow id and the results-store key of the trial."""
        return trial_workflow_id(
            self.run_id, self.agent_model, self.domain, self.task_id, self.trial_index, self.user_persona
        )


class StepRef(BaseModel):
    """Reference passed to a step activity: which trial, which step index to produce."""

    trial: TrialSpec
    step: int
    # The judge's step only: how the conversation ended (grading depends on it).
    termination_reason: str | None = None


class StepResult(BaseModel):
    """What the workflow needs to know about a recorded step (never the content itself)."""

    step: int
    role: str  # "assistant" | "user" | "tool"
    is_tool_call: bool = False
    # The tools a tool-call step asks for, in order (named in the Temporal UI's summary
    # of the tool step that runs them).
    tool_names: list[str] = Field(default_factory=list)
    is_stop: bool = False
    tool_errors: int = 0
    # The class of a model failure that ends the conversation (INVALID_TOOL_ARGUMENTS,
    # EMPTY_REPLY, ContextWindowExceededError, ...), None for a usable step.
    failure: str | None = None


def stable_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prompt_digest(text: str) -> str:
    """The short digest an agent prompt is shown by (its sha256's first 12 hex digits)."""
    return stable_hash(text)[:12]


def render_agent_prompt(template: str, policy: str) -> str:
    """An agent prompt template with the domain's policy in its place. Only the
    placeholder is replaced: other braces in the template (JSON examples) stay as written."""
    return template.replace(POLICY_PLACEHOLDER, policy)


def trial_seeds(seed: int, trials: int) -> list[int]:
    """The provider seed of each trial index, as `tau2 run --seed` derives them: the same
    for every task and for both the agent and the user (300 gives 626729, 373753, ...)."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def task_workflow_id(run_id: str, agent_model: str, domain: str, task_id: str,
                     user_persona: str | None = None) -> str:
    """RUN/MODEL/DOMAIN/TASK; under a user persona RUN/MODEL/DOMAIN/TASK@PERSONA (a run
    without personas keeps the ids it always had)."""
    persona = "" if user_persona is None else f"@{user_persona}"
    return f"{run_id}/{agent_model}/{domain}/{task_id}{persona}"


def trial_workflow_id(
    run_id: str, agent_model: str, domain: str, task_id: str, index: int, user_persona: str | None = None
) -> str:
    return f"{task_workflow_id(run_id, agent_model, domain, task_id, user_persona)}/trial-{index}"


RUN_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
RUN_ID_RULE = "must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
