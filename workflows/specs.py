"""Contracts between the CLI, the workflows and the activities.

Everything here is small and JSON-serialisable: these objects travel through Temporal's
history, so they carry references (ids) rather than conversations.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

TASK_QUEUE = "passhat"

# tau2's conversation conventions.
AGENT_GREETING = "Hi! How can I help you today?"
STOP_TOKEN = "###STOP###"
TRANSFER_TOKEN = "###TRANSFER###"
OUT_OF_SCOPE_TOKEN = "###OUT-OF-SCOPE###"
DEFAULT_MAX_STEPS = 100
DEFAULT_MAX_ERRORS = 10


class RetryConfig(BaseModel):
    """How hard to retry a model call that failed for a transient reason."""

    max_attempts: int = 8
    initial_interval_s: float = 1.0
    backoff: float = 2.0
    max_interval_s: float = 60.0
    model_call_timeout_s: float = 300.0
    # A model call heartbeats every third of this: a killed worker's call is retried
    # elsewhere after at most this long.
    heartbeat_timeout_s: float = 10.0


class RunConfig(BaseModel):
    """What a user asked for. Two runs with the same id must have the same config."""

    run_id: str
    agent_models: list[str]
    user_model: str
    domains: list[str]
    # Per domain, the task ids to run; an empty list means every task of the domain.
    task_ids: dict[str, list[str]] = Field(default_factory=dict)
    trials: int = 1
    concurrency: int = 8
    agent_args: dict[str, Any] = Field(default_factory=dict)
    user_args: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    retry: RetryConfig = Field(default_factory=RetryConfig)

    def fingerprint(self) -> str:
        """Identity of the experiment, used to refuse a different config under one run id.
        Concurrency and retry settings change how it runs, not what it measures."""
        body = self.model_dump(mode="json", exclude={"concurrency", "retry"})
        return stable_hash(json.dumps(body, sort_keys=True))


class _TaskFields(BaseModel):
    """What identifies one (agent model, domain, task) and how its conversations run."""

    run_id: str
    agent_model: str
    user_model: str
    domain: str
    task_id: str
    agent_args: dict[str, Any] = Field(default_factory=dict)
    user_args: dict[str, Any] = Field(default_factory=dict)
    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    retry: RetryConfig = Field(default_factory=RetryConfig)

    @property
    def task_workflow_id(self) -> str:
        return task_workflow_id(self.run_id, self.agent_model, self.domain, self.task_id)


class TaskUnit(_TaskFields):
    """The unit a TaskWorkflow owns: k trials of one task."""

    trials: int

    def trial(self, index: int) -> "TrialSpec":
        return TrialSpec(
            **self.model_dump(exclude={"trials"}),
            trial_index=index,
            seed=trial_seed(self.run_id, self.agent_model, self.domain, self.task_id, index),
        )


class TrialSpec(_TaskFields):
    trial_index: int
    seed: int

    @property
    def trial_id(self) -> str:
        """Also the TrialWorkflow id and the results-store key of the trial."""
        return trial_workflow_id(
            self.run_id, self.agent_model, self.domain, self.task_id, self.trial_index
        )


class StepRef(BaseModel):
    """Reference passed to a step activity: which trial, which step index to produce."""

    trial: TrialSpec
    step: int


class StepResult(BaseModel):
    """What the workflow needs to know about a recorded step (never the content itself)."""

    step: int
    role: str  # "assistant" | "user" | "tool"
    is_tool_call: bool = False
    is_stop: bool = False
    is_empty: bool = False
    tool_errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class TrialOutcome(BaseModel):
    trial_id: str
    task_id: str
    trial_index: int
    evaluable: bool
    reward: float | None = None
    termination_reason: str | None = None
    error: str | None = None  # why the trial is not evaluable


class TaskOutcome(BaseModel):
    run_id: str
    agent_model: str
    user_model: str
    domain: str
    task_id: str
    trials: int
    evaluable: int
    successes: int
    avg_reward: float | None
    pass_hat: dict[str, float]


class ModelDomainSummary(BaseModel):
    agent_model: str
    user_model: str
    domain: str
    tasks: int
    trials: int
    evaluable: int
    avg_reward: float | None
    pass_hat_k: dict[str, float]


class RunSummary(BaseModel):
    run_id: str
    results: list[ModelDomainSummary]


def stable_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def trial_seed(run_id: str, agent_model: str, domain: str, task_id: str, index: int) -> int:
    """A seed that is the same on every machine and every run of Python (unlike hash())."""
    key = "\x1f".join([run_id, agent_model, domain, task_id, str(index)])
    return int(stable_hash(key)[:15], 16)


def run_workflow_id(run_id: str) -> str:
    return f"{run_id}"


def task_workflow_id(run_id: str, agent_model: str, domain: str, task_id: str) -> str:
    return f"{run_id}/{agent_model}/{domain}/{task_id}"


def trial_workflow_id(
    run_id: str, agent_model: str, domain: str, task_id: str, index: int
) -> str:
    return f"{task_workflow_id(run_id, agent_model, domain, task_id)}/trial-{index}"
