"""The results store's tables (passhat.infra.store reads and writes them): runs, trials,
recorded steps, per-task results and the copies of task files' tasks. JSON payloads are
stored as text: portable, and read back exactly as written. Also the keys of steps, and
the columns added to a database an earlier passhat wrote."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Text, text
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from passhat.contracts import RunConfig, task_workflow_id
from passhat.messages import Message
from passhat.outcomes import RUN_RUNNING, TRIAL_RUNNING, TaskOutcome


def utc_now() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both back ends (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: datetime | None, dialect: Any
    ) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(
        self, value: datetime | None, dialect: Any
    ) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"

    run_id: str = Field(primary_key=True)
    config_json: str = Field(sa_type=Text)
    fingerprint: str
    status: str = RUN_RUNNING
    total_trials: int = 0
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())
    updated_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())

    def run_config(self) -> RunConfig:
        return RunConfig.model_validate_json(self.config_json)


class TrialRow(SQLModel, table=True):
    __tablename__ = "trials"

    trial_id: str = Field(primary_key=True)
    run_id: str = Field(index=True)
    agent_model: str
    user_model: str
    # The user persona the trial ran under (passhat.personas label); None: tau2's user.
    user_persona: str | None = None
    domain: str
    task_id: str
    trial_index: int
    # Seeds are 60-bit; a 32-bit INTEGER column would overflow on PostgreSQL.
    seed: int = Field(sa_type=BigInteger)
    status: str = TRIAL_RUNNING
    reward: float | None = None
    success: bool | None = None
    reward_info_json: str = Field(default="{}", sa_type=Text)
    termination_reason: str | None = None
    # Why the trial is not evaluable (an infrastructure error), or, on a scored trial,
    # the model failure that ended it (tau2's agent_error) and which side produced it.
    error: str | None = Field(default=None, sa_type=Text)
    error_class: str | None = None
    error_side: str | None = None  # "agent" | "user"
    # Where in the agent's own code its failure happened ("my_agents.py:41 in
    # generate_next_message"), for an agent of tau2's registry whose code ended the trial.
    error_at: str | None = None
    n_steps: int = 0
    input_tokens: int = Field(default=0, sa_type=BigInteger)
    output_tokens: int = Field(default=0, sa_type=BigInteger)
    cost: float = 0.0
    trace_id: str | None = None
    started_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime())
    attempts: int = 1
    # While the trial's model call is retried after a transient error: that error's
    # class (and HTTP status), the attempt that failed, and when. Cleared when a call
    # succeeds or the trial ends.
    retry_error: str | None = None
    retry_attempt: int | None = None
    retried_at: datetime | None = Field(default=None, sa_type=UTCDateTime())
    # A scored trial below reward 1: its diagnosis against the gold path (JSON with a
    # "version"; domains/diagnosis.py). Null on passing trials and older databases.
    diagnosis_json: str | None = Field(default=None, sa_type=Text)

    def reward_info(self) -> dict[str, Any]:
        return json.loads(self.reward_info_json)

    def diagnosis(self) -> dict[str, Any] | None:
        return json.loads(self.diagnosis_json) if self.diagnosis_json else None


class StepRow(SQLModel, table=True):
    __tablename__ = "steps"

    # f"{trial_id}#{step}": the idempotency key of a step (the run is part of trial_id).
    id: str = Field(primary_key=True)
    trial_id: str = Field(index=True)
    run_id: str = Field(index=True)
    step: int
    role: str
    messages_json: str = Field(sa_type=Text)
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    finish_reason: str | None = None
    # A model failure this step ended the conversation with (passhat.contracts).
    failure_class: str | None = None
    failure: str | None = Field(default=None, sa_type=Text)
    # Where in the agent's own code, when its code (not its model) failed the step.
    failure_at: str | None = None
    # The turn of an agent from tau2's registry (--agent): its state after the turn and
    # whether it stopped, as JSON ({"class", "state", "stop"}); the next turn starts from it.
    agent_state_json: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())

    def agent_turn(self) -> dict[str, Any] | None:
        return None if self.agent_state_json is None else json.loads(self.agent_state_json)

    def message_list(self) -> list[Message]:
        return [Message.model_validate(m) for m in json.loads(self.messages_json)]


class RunTasksRow(SQLModel, table=True):
    """A copy of the tasks a run read from a task file (domains.task_file), kept as the
    file held them when the run was recorded: an edited or moved file changes neither
    the run's exports nor, unnoticed, the tasks a resumed run plays."""

    __tablename__ = "run_tasks"

    run_id: str = Field(primary_key=True)
    domain: str = Field(primary_key=True)  # "airline@/path/tasks.json"
    digest: str  # of the tasks, not of the file's bytes (passhat.run_identity.tasks_digest)
    tasks_json: str = Field(sa_type=Text)

    def tasks(self) -> list[Any]:
        return json.loads(self.tasks_json)


def _task_result_row() -> type[SQLModel]:
    """The task_results table: one row per task, whose columns are TaskOutcome's fields
    (so the two cannot drift apart), keyed by the task's workflow id, with the pass^k
    dict as JSON text."""
    outcome_fields = {n: f for n, f in TaskOutcome.model_fields.items() if n != "pass_hat"}

    def outcome(self) -> TaskOutcome:
        return TaskOutcome(
            **self.model_dump(exclude={"id", "pass_hat_json"}),
            pass_hat=json.loads(self.pass_hat_json),
        )

    body: dict[str, Any] = {
        "__module__": __name__,
        "__tablename__": "task_results",
        "__annotations__": {
            "id": str,
            **{n: f.annotation for n, f in outcome_fields.items()},
            "pass_hat_json": str,
        },
        "id": Field(primary_key=True),  # contracts.task_workflow_id
        "run_id": Field(index=True),
        "pass_hat_json": Field(default="{}", sa_type=Text),
        "outcome": outcome,
    }
    return type("TaskResultRow", (SQLModel,), body, table=True)


TaskResultRow = _task_result_row()


def task_result_values(outcome: TaskOutcome) -> dict[str, Any]:
    """A TaskResultRow's columns for `outcome`, its key included."""
    values = outcome.model_dump(exclude={"pass_hat"})
    values["pass_hat_json"] = json.dumps(outcome.pass_hat)
    values["id"] = task_workflow_id(
        outcome.run_id, outcome.agent_model, outcome.domain, outcome.task_id, outcome.user_persona
    )
    return values


class ReviewCallRow(SQLModel, table=True):
    """One model call of a review (`passhat review`): the judge's answer as it came, with
    what it cost, written once under (review, call) before the activity reports, so a
    call that was answered is never paid for again. Call 0 is the request, call 1 the
    one resend a rejected answer gets."""

    __tablename__ = "review_calls"

    id: str = Field(primary_key=True)  # f"{review_id}#{call}"
    review_id: str = Field(index=True)
    review_key: str = Field(index=True)
    run_id: str = Field(index=True)
    call: int
    model: str | None = None
    reply: str | None = Field(default=None, sa_type=Text)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())


class ReviewRow(SQLModel, table=True):
    """A trial's review by one judge (model and args) under one prompt version: the
    errors found, or why the trial is not reviewable; its tokens and cost are its
    calls' (ReviewCallRow)."""

    __tablename__ = "reviews"

    id: str = Field(primary_key=True)  # f"{trial_id}~review-{review key}"
    review_key: str = Field(index=True)  # passhat.domains.review: judge, args, prompt version
    run_id: str = Field(index=True)
    trial_id: str = Field(index=True)
    judge_model: str
    judge_args_json: str = Field(default="{}", sa_type=Text)
    prompt_version: str
    status: str  # "reviewed" | "not_reviewable"
    blame: str | None = None  # agent | user | both | none
    errors_json: str = Field(default="[]", sa_type=Text)
    reason: str | None = Field(default=None, sa_type=Text)  # why not reviewable
    # tau2 1.0.x's reviewer: its Review as tau2 writes it (SimulationRun.review), for exports.
    tau2_review_json: str | None = Field(default=None, sa_type=Text)
    # tau2 1.0.x's full mode: its AuthenticationClassification (SimulationRun.auth_classification)
    # as a JSON object, or {"status": "not_classifiable", "reason": ...} (domains/tau2_review).
    auth_classification_json: str | None = Field(default=None, sa_type=Text)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    created_at: datetime = Field(default_factory=utc_now, sa_type=UTCDateTime())

    def errors(self) -> list[dict[str, Any]]:
        return json.loads(self.errors_json)


TABLES = [
    RunRow.__table__,
    TrialRow.__table__,
    StepRow.__table__,
    TaskResultRow.__table__,
    RunTasksRow.__table__,
    ReviewCallRow.__table__,
    ReviewRow.__table__,
]


DISCARDED = "~discarded-"


def discarded_trial_id(trial_id: str, attempt: int) -> str:
    """Where the steps of a trial's attempt that was set aside (Store.discard_attempt)
    are kept."""
    return f"{trial_id}{DISCARDED}{attempt}"


def step_id(trial_id: str, step: int) -> str:
    return f"{trial_id}#{step}"


def conversation(rows: list[StepRow]) -> list[Message]:
    """Every step's messages, in the rows' (step) order."""
    return [m for row in rows for m in row.message_list()]


def add_missing_columns(conn: Any) -> None:
    """A database written by an earlier passhat gets the nullable columns added since
    (create_all only creates missing tables). Nothing is dropped or rewritten."""
    from sqlalchemy import inspect
    from sqlalchemy.schema import CreateColumn

    inspector = inspect(conn)
    for table in TABLES:
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present and column.nullable:
                ddl = CreateColumn(column).compile(dialect=conn.dialect)
                conn.execute(text(f'ALTER TABLE "{table.name}" ADD COLUMN {ddl}'))
