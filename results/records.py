"""A trial as results files carry it: `TrialRecord` and its `StepRecord`s, whose field
names are the results store's column names, and `ResultsFile`, what one file holds.

The file formats (tau2_writer, tau2_reader, tau_bench) convert between these and their
JSON; export and import move them between the files and the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from passhat.messages import Message
from passhat.outcomes import TRIAL_SCORED

TAU2_FORMAT = "tau2"
TAU_BENCH_FORMAT = "tau-bench"
# Key in a tau2 simulation's reward_info.info holding the trial's token and cost totals,
# when its messages do not add up to them (tau2_writer).
TOTALS_KEY = "passhat_totals"
# Key in a tau2 file's info.agent_info holding what passhat measured of the agent: its
# digest and the parts of its identity (run_identity.AgentIdentity). tau2 reads past it.
AGENT_KEY = "passhat_agent"


class ResultsError(ValueError):
    """A mistake in what an export or import was asked to do; the message is one line
    that says how to fix it, and nothing has been written."""


class ResultsFileError(ResultsError):
    """A results file that cannot be imported or written; the message is one line that
    names the file and says what is wrong."""


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
    failure_at: str | None = None  # where in the agent's own code it failed


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
    error_at: str | None = None  # where in the agent's own code it failed
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[StepRecord] = field(default_factory=list)
    trial_id: str = ""
    # The trial's totals; None: the sums over its steps. A file may carry steps it does
    # not record (the reply that ended a failed conversation), so it carries these too.
    cost: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def total_cost(self) -> float:
        return self.cost if self.cost is not None else sum(s.cost for s in self.steps)

    def total_tokens(self) -> tuple[int, int]:
        """(input, output) tokens of every model call of the trial."""
        return (
            self.input_tokens if self.input_tokens is not None else sum(s.input_tokens for s in self.steps),
            self.output_tokens if self.output_tokens is not None else sum(s.output_tokens for s in self.steps),
        )


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
    # The tau2 version and data digest passhat's own export names (None: not named).
    tau2_version: str | None = None
    tau2_data: str | None = None
    # The agent's name (tau2's agent_info.implementation) and, from passhat's own
    # export, the parts of its identity (run_identity.AgentIdentity; None: not named).
    agent: str | None = None
    agent_parts: dict[str, str] | None = None


def trial_record(row, steps) -> TrialRecord:  # noqa: ANN001 - a TrialRow, its StepRows
    """A trial of the results store as a record."""
    return TrialRecord(
        trial_id=row.trial_id,
        task_id=row.task_id,
        trial_index=row.trial_index,
        seed=row.seed,
        status=row.status,
        reward=row.reward,
        reward_info=row.reward_info(),
        termination_reason=row.termination_reason,
        error=row.error,
        error_class=row.error_class,
        error_side=getattr(row, "error_side", None),
        error_at=getattr(row, "error_at", None),
        started_at=row.started_at,
        finished_at=row.finished_at,
        cost=row.cost,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        steps=[
            StepRecord(
                step=s.step,
                role=s.role,
                messages=s.message_list(),
                model=s.model,
                input_tokens=s.input_tokens,
                output_tokens=s.output_tokens,
                cost=s.cost,
                created_at=s.created_at,
                failure_class=getattr(s, "failure_class", None),
                failure=getattr(s, "failure", None),
                failure_at=getattr(s, "failure_at", None),
            )
            for s in steps
        ],
    )


def listing(values: list[Any], most: int = 5) -> str:
    """Values for a one-line message: the first `most`, then how many more."""
    shown = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def aware(value: datetime) -> datetime:
    """A recorded time with its zone: the store keeps UTC, and SQLite drops the zone."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
