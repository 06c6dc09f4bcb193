"""The results store: runs, trials, recorded steps and per-task results.

Temporal's history holds only references; the conversations themselves live here, so a
step activity that is retried (or a worker that crashes and resumes) must be able to write
the same step again without duplicating it. Every write is therefore idempotent and keyed
by the ids in passhat.contracts. It stores those contracts, and a run with the fingerprint
passhat.run_identity gives it (whether a configuration may attach to a run is that
module's to decide, not the store's); its tables are in passhat.infra.store_tables, how
it connects in passhat.infra.store_engine.

SQLite (a file under PASSHAT_HOME) by default, PostgreSQL when PASSHAT_DB_URL says so.
All methods are synchronous and open one short session each: activities call them from
threads, and several worker processes may share one database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlmodel import Session, SQLModel, col, delete, select, update

from passhat.contracts import JUDGE_SUFFIX, RunConfig, TrialSpec
from passhat.messages import Message
from passhat.outcomes import (
    RUN_IMPORTED,
    RUN_RUNNING,
    RUN_STATUSES,
    TRIAL_CANCELLED,
    TRIAL_NOT_EVALUABLE,
    TRIAL_RUNNING,
    TRIAL_SCORED,
    RunStatus,
    TaskOutcome,
)
from passhat.infra import settings
from passhat.infra.store_engine import READ_ONLY, create_tables, make_engine
from passhat import run_identity
# Importable from here as before; passhat.run_identity decides what a mismatch is.
from passhat.run_identity import ConfigMismatchError  # noqa: F401
from passhat.infra.store_tables import (
    DISCARDED,
    RunRow,
    RunTasksRow,
    StepRow,
    TaskResultRow,
    TrialRow,
    conversation,
    discarded_trial_id,
    step_id,
    task_result_values,
    utc_now,
)

# Key in an imported run's config_json (beside RunConfig's fields, which ignore it)
# naming the files it came from.
IMPORT_SOURCE_KEY = "passhat_import"


class StoreError(RuntimeError):
    """The results store cannot be used (bad URL, unwritable path, unreachable server)."""


class NotFoundError(StoreError, LookupError):
    """A run or trial the caller expected to exist is not in the store."""


@dataclass(frozen=True)
class RunProgress:
    done: int  # trials finished: scored or not evaluable
    total: int
    pass1: float | None  # over the scored trials so far
    not_evaluable: int
    cost: float  # USD, every recorded model call of the run
    # Attempts summed over the not-evaluable trials: it moves when one fails again.
    not_evaluable_attempts: int = 0
    retrying: int = 0  # running trials whose model call is being retried
    retry_error: str | None = None  # the latest of their errors, e.g. "InternalServerError (HTTP 500)"


# A trial whose model call is not being retried.
_NO_RETRY = {"retry_error": None, "retry_attempt": None, "retried_at": None}


# ---------------------------------------------------------------------------------------


def _run_cost(s: Session, run_id: str) -> float:
    """The cost of every model call a run's steps recorded (USD)."""
    return float(s.exec(
        select(func.coalesce(func.sum(StepRow.cost), 0.0)).where(StepRow.run_id == run_id)
    ).one())


class Store:
    def __init__(self, url: str | None = None) -> None:
        self.url = url or settings.db_url()
        try:
            parsed = make_url(self.url)
        except ArgumentError as e:
            raise StoreError(self._cannot_open(f"invalid URL ({e})")) from e
        # For messages: the URL without its password.
        self.safe_url = parsed.render_as_string(hide_password=True)
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise StoreError(
                self._cannot_open("only sqlite and postgresql are supported")
            )
        try:
            self.engine = make_engine(parsed, self.dialect)
            # The same connection pool, with its transactions marked read-only.
            self._reader = self.engine.execution_options(**{READ_ONLY: True})
            create_tables(self.engine, self.dialect)
        except (OSError, DBAPIError, NoSuchModuleError) as e:
            reason = getattr(e, "orig", None) or e
            raise StoreError(self._cannot_open(str(reason).strip())) from e

    def _cannot_open(self, reason: str) -> str:
        url = getattr(self, "safe_url", self.url)
        return (
            f"cannot open results store at {url}: {reason} "
            "— check PASSHAT_HOME / PASSHAT_DB_URL"
        )

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _session(self, *, read_only: bool = False) -> Iterator[Session]:
        """A transaction; read_only ones must not write (on SQLite they hold no lock)."""
        engine = self._reader if read_only else self.engine
        # expire_on_commit=False: rows handed back stay readable after the session closes.
        try:
            with Session(engine, expire_on_commit=False) as session, session.begin():
                yield session
        except DBAPIError as e:
            # One short line: the driver's text carries the statement and its parameters
            # (kilobytes of conversation), too big for a Temporal failure or a terminal.
            reason = " ".join(str(getattr(e, "orig", None) or e).split())[:300]
            raise StoreError(f"results store at {self.safe_url} failed: {reason}") from None

    def _insert(self, model: type[SQLModel]) -> Any:
        """The dialect's INSERT, which has ON CONFLICT. Its rowcount tells an insert from
        a conflict; SQLAlchemy only keeps an INSERT's rowcount when asked (psycopg)."""
        table = model.__table__
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        return insert(table).execution_options(preserve_rowcount=True)

    # ---- runs ---------------------------------------------------------------------

    def create_run(self, config: RunConfig, total_trials: int) -> RunRow:
        """Record a run with its fingerprint (passhat.run_identity), or find the one
        recorded under its id before: the row that is there, whoever wrote it. Whether
        `config` may attach to it is run_identity's to decide."""
        now = utc_now()
        with self._session() as s:
            s.exec(
                self._insert(RunRow)
                .values(
                    run_id=config.run_id,
                    config_json=config.model_dump_json(),
                    fingerprint=run_identity.fingerprint(config),
                    status=RUN_RUNNING,
                    total_trials=total_trials,
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing()
            )
            row = s.get(RunRow, config.run_id)
        assert row is not None
        return row

    def set_run_budget(self, run_id: str, max_cost: float | None) -> None:
        """Record a new budget in the run's stored configuration (it is not part of the
        run's identity: resume may change it)."""
        with self._session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFoundError(f"no run {run_id!r} in the results store")
            body = json.loads(row.config_json)
            body["max_cost"] = max_cost
            row.config_json = json.dumps(body)
            row.updated_at = utc_now()
            s.add(row)

    def run_cost(self, run_id: str) -> float:
        """What the run has recorded spending, in USD: the cost of every model call
        recorded in its steps, those of conversations still in flight included (a
        finished trial's cost is the sum of its steps')."""
        with self._session(read_only=True) as s:
            return _run_cost(s, run_id)

    def get_run(self, run_id: str) -> RunRow | None:
        with self._session(read_only=True) as s:
            return s.get(RunRow, run_id)

    def list_runs(self) -> list[RunRow]:
        with self._session(read_only=True) as s:
            return list(s.exec(select(RunRow).order_by(RunRow.created_at.desc())))

    def set_run_status(self, run_id: str, status: RunStatus, total_trials: int | None = None) -> None:
        """The run's status; with total_trials, also the trials it was to run (a curtailed
        round's, once it knows how many it ran)."""
        if status not in RUN_STATUSES:
            raise ValueError(
                f"run status must be one of {RUN_STATUSES}, not {status!r}"
            )
        values = {"status": status, "updated_at": utc_now()}
        if total_trials is not None:
            values["total_trials"] = total_trials
        with self._session() as s:
            result = s.exec(update(RunRow).where(RunRow.run_id == run_id).values(**values))
            if result.rowcount == 0:
                raise NotFoundError(f"no run {run_id!r} in the results store")

    def delete_run(self, run_id: str) -> None:
        """Remove a run and everything recorded under it (a run that failed to start)."""
        with self._session() as s:
            for model in (StepRow, TrialRow, TaskResultRow, RunTasksRow, RunRow):
                s.exec(delete(model).where(model.run_id == run_id))

    def keep_run_tasks(self, run_id: str, domain: str, digest: str, tasks: list[Any]) -> None:
        """Keep the tasks a run read from a task file. The first copy stays: it is what
        the run was recorded with."""
        with self._session() as s:
            s.exec(
                self._insert(RunTasksRow)
                .values(run_id=run_id, domain=domain, digest=digest, tasks_json=json.dumps(tasks))
                .on_conflict_do_nothing()
            )

    def run_tasks(self, run_id: str) -> dict[str, RunTasksRow]:
        """The task-file tasks kept for a run, by domain name (none for a run recorded by
        a passhat that kept no copy)."""
        with self._session(read_only=True) as s:
            rows = s.exec(select(RunTasksRow).where(RunTasksRow.run_id == run_id))
            return {row.domain: row for row in rows}

    # ---- trials -------------------------------------------------------------------

    def begin_trial(self, spec: TrialSpec) -> TrialRow:
        """Start (or restart) a trial. A scored trial is final and is left untouched;
        a restarted one keeps the steps it already has, so it resumes from them."""
        trial_id = spec.trial_id
        with self._session() as s:
            inserted = s.exec(
                self._insert(TrialRow)
                .values(
                    trial_id=trial_id,
                    run_id=spec.run_id,
                    agent_model=spec.agent_model,
                    user_model=spec.user_model,
                    user_persona=spec.user_persona,
                    domain=spec.domain,
                    task_id=spec.task_id,
                    trial_index=spec.trial_index,
                    seed=spec.seed,
                    status=TRIAL_RUNNING,
                    reward_info_json="{}",
                    n_steps=0,
                    input_tokens=0,
                    output_tokens=0,
                    cost=0.0,
                    started_at=utc_now(),
                    attempts=1,
                )
                .on_conflict_do_nothing()
            ).rowcount
            if not inserted:
                s.exec(
                    update(TrialRow)
                    .where(
                        TrialRow.trial_id == trial_id, TrialRow.status != TRIAL_SCORED
                    )
                    .values(
                        status=TRIAL_RUNNING,
                        error=None,
                        error_class=None,
                        error_side=None,
                        error_at=None,
                        finished_at=None,
                        attempts=TrialRow.attempts + 1,
                        **_NO_RETRY,
                    )
                )
            row = s.get(TrialRow, trial_id)
        assert row is not None
        return row

    def _step_totals(self, s: Session, trial_id: str) -> dict[str, Any]:
        tokens_in, tokens_out, cost = s.exec(
            select(
                func.coalesce(func.sum(StepRow.input_tokens), 0),
                func.coalesce(func.sum(StepRow.output_tokens), 0),
                func.coalesce(func.sum(StepRow.cost), 0.0),
            ).where(
                # steps kept beside the conversation (attempts set aside by
                # discard_attempt, the judge's) were paid for too
                (StepRow.trial_id == trial_id)
                | StepRow.trial_id.startswith(f"{trial_id}~")  # type: ignore[attr-defined]
            )
        ).one()
        return {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost": float(cost),
        }

    def _finish(self, trial_id: str, values: dict[str, Any]) -> TrialRow:
        # A scored trial is final: a retried activity must not rewrite it.
        with self._session() as s:
            totals = self._step_totals(s, trial_id)
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id, TrialRow.status != TRIAL_SCORED)
                .values(**values, **totals, **_NO_RETRY, finished_at=utc_now())
            )
            row = s.get(TrialRow, trial_id)
        if row is None:
            raise NotFoundError(f"no trial {trial_id!r} in the results store")
        return row

    def finish_trial(
        self,
        trial_id: str,
        reward: float,
        success: bool,
        reward_info: dict[str, Any],
        termination_reason: str,
        n_steps: int,
        *,
        model_failure: tuple[str, str, str] | None = None,
        error_at: str | None = None,
        diagnosis: dict[str, Any] | None = None,
    ) -> TrialRow:
        """Score a trial. `model_failure` is (class, side, message) when the model's
        output, or the agent's own code, ended the conversation, and `error_at` where in
        the agent's code; `diagnosis`, a failed trial's diagnosis."""
        error_class, error_side, error = model_failure or (None, None, None)
        return self._finish(
            trial_id,
            {
                "status": TRIAL_SCORED,
                "reward": reward,
                "success": success,
                "reward_info_json": json.dumps(reward_info, default=str),
                "termination_reason": termination_reason,
                "n_steps": n_steps,
                "error": error,
                "error_class": error_class,
                "error_side": error_side,
                "error_at": error_at,
                "diagnosis_json": None if diagnosis is None else json.dumps(diagnosis, default=str),
            },
        )

    def set_trial_diagnosis(self, trial_id: str, diagnosis: dict[str, Any] | None) -> None:
        """Replace a scored trial's diagnosis (`passhat diagnose`: one made by an older
        diagnosis version, or none)."""
        with self._session() as s:
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id)
                .values(diagnosis_json=None if diagnosis is None else json.dumps(diagnosis, default=str))
            )

    def trial_diagnosis(self, run_id: str, trial_id: str) -> dict[str, Any] | None:
        """The stored diagnosis of a failed scored trial (None if it has none)."""
        row = self.get_trial(trial_id)
        return row.diagnosis() if row is not None and row.run_id == run_id else None

    def mark_not_evaluable(
        self, trial_id: str, error: str, error_class: str, termination_reason: str | None = None
    ) -> TrialRow:
        """The trial could not be scored (e.g. a model kept failing); resume retries it.
        Tokens spent so far are still summed: they were paid for. `termination_reason`
        is the reason tau2 would record (1.0.x: infrastructure_error), if any."""
        with self._session() as s:
            n_steps = s.exec(
                select(func.count())
                .select_from(StepRow)
                .where(StepRow.trial_id == trial_id)
            ).one()
        return self._finish(
            trial_id,
            {
                "status": TRIAL_NOT_EVALUABLE,
                "error": error,
                "error_class": error_class,
                "error_side": None,
                "error_at": None,
                "n_steps": n_steps,
                "termination_reason": termination_reason,
            },
        )

    def discard_attempt(self, trial_id: str, keep_at_most: int | None = None) -> int | None:
        """Set the trial's current attempt aside so that it starts again from the
        beginning (tau2 1.0.x re-runs a simulation that raised). Its steps, and the steps
        kept beside them (the judge's, `<trial>~judge`), stay recorded under
        `discarded_trial_id(trial_id, n)` (the judge's as `<that>~judge`): they were paid
        for, and the run's cost counts them. Returns how many attempts are now set aside,
        or None when `keep_at_most` are already and the current one must stand (None: no
        limit). Safe to repeat: with no current steps nothing is moved and the count is
        returned again."""
        prefix = f"{trial_id}{DISCARDED}"
        with self._session() as s:
            done = _set_aside_count(s, prefix)
            rows = list(s.exec(select(StepRow).where(
                (StepRow.trial_id == trial_id)
                | (StepRow.trial_id.startswith(f"{trial_id}~")  # type: ignore[attr-defined]
                   & ~StepRow.trial_id.startswith(prefix))  # type: ignore[attr-defined]
            )))
            if not any(row.trial_id == trial_id for row in rows):
                return done
            if keep_at_most is not None and done >= keep_at_most:
                return None
            _move_steps(s, rows, trial_id, discarded_trial_id(trial_id, done + 1))
            return done + 1

    def attempts_set_aside(self, trial_id: str) -> int:
        """How many attempts of the trial are set aside (discard_attempt): the current
        attempt's number, counting from 0."""
        with self._session() as s:
            return _set_aside_count(s, f"{trial_id}{DISCARDED}")

    def discard_judge(self, trial_id: str) -> int:
        """Set the judge's step of the trial aside (`<trial>~judge` becomes
        `<trial>~judge~discarded-n`), so that the judge is asked again while the
        conversation stays; the run's cost still counts it. Returns how many judge steps
        are now set aside."""
        judge = f"{trial_id}{JUDGE_SUFFIX}"
        with self._session() as s:
            done = _set_aside_count(s, f"{judge}{DISCARDED}")
            rows = list(s.exec(select(StepRow).where(StepRow.trial_id == judge)))
            if not rows:
                return done
            _move_steps(s, rows, judge, discarded_trial_id(judge, done + 1))
            return done + 1

    def set_aside_ending(self, run_id: str, failure_class: str, trial_id: str | None = None) -> dict[str, int]:
        """How many attempts of each trial of the run (or of `trial_id` alone) were set
        aside after a step that failed with `failure_class` (an A2A turn whose outcome
        was not known restarts its trial so): {trial id: count}, trials with none left out."""
        query = select(StepRow.trial_id).distinct().where(
            StepRow.run_id == run_id, StepRow.failure_class == failure_class,
            col(StepRow.trial_id).contains(DISCARDED))
        if trial_id is not None:
            query = query.where(col(StepRow.trial_id).startswith(f"{trial_id}{DISCARDED}"))
        counts: dict[str, int] = {}
        with self._session() as s:
            for aside in s.exec(query).all():
                trial = aside.split(DISCARDED, 1)[0]
                counts[trial] = counts.get(trial, 0) + 1
        return counts

    def mark_cancelled(self, trial_id: str) -> None:
        """The run was cancelled while this trial ran: it keeps its steps, and resume
        continues it. A trial already scored or not evaluable keeps that outcome."""
        with self._session() as s:
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id, TrialRow.status == TRIAL_RUNNING)
                .values(status=TRIAL_CANCELLED, finished_at=utc_now(), **_NO_RETRY)
            )

    def note_retry(self, trial_id: str, attempt: int, error: str) -> None:
        """A running trial's model call failed transiently and will be retried."""
        with self._session() as s:
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id, TrialRow.status == TRIAL_RUNNING)
                .values(retry_error=error, retry_attempt=attempt, retried_at=utc_now())
            )

    def clear_retry(self, trial_id: str) -> None:
        """The trial's model call went through after retries."""
        with self._session() as s:
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id, col(TrialRow.retry_error).is_not(None))
                .values(**_NO_RETRY)
            )

    def set_trace_id(self, trial_id: str, trace_id: str | None) -> None:
        with self._session() as s:
            s.exec(
                update(TrialRow)
                .where(TrialRow.trial_id == trial_id)
                .values(trace_id=trace_id)
            )

    def get_trial(self, trial_id: str) -> TrialRow | None:
        with self._session(read_only=True) as s:
            return s.get(TrialRow, trial_id)

    def trials(
        self,
        run_id: str,
        *,
        status: str | None = None,
        domain: str | None = None,
        agent_model: str | None = None,
        failed_only: bool = False,
    ) -> list[TrialRow]:
        """Trials of a run; failed means scored unsuccessfully, or not evaluable."""
        query = select(TrialRow).where(TrialRow.run_id == run_id)
        if status is not None:
            query = query.where(TrialRow.status == status)
        if domain is not None:
            query = query.where(TrialRow.domain == domain)
        if agent_model is not None:
            query = query.where(TrialRow.agent_model == agent_model)
        if failed_only:
            query = query.where(
                ((TrialRow.status == TRIAL_SCORED) & col(TrialRow.success).is_(False))
                | (TrialRow.status == TRIAL_NOT_EVALUABLE)
            )
        query = query.order_by(
            TrialRow.agent_model,
            TrialRow.domain,
            TrialRow.task_id,
            TrialRow.trial_index,
        )
        with self._session(read_only=True) as s:
            return list(s.exec(query))

    # ---- steps --------------------------------------------------------------------

    def record_step(
        self,
        trial_id: str,
        run_id: str,
        step: int,
        role: str,
        messages: list[Message],
        *,
        model: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        latency_s: float = 0.0,
        finish_reason: str | None = None,
        failure_class: str | None = None,
        failure: str | None = None,
        failure_at: str | None = None,
        agent_state_json: str | None = None,
    ) -> bool:
        """Write a step once. Returns False when (trial, step) was already recorded: the
        first write wins, so a retried activity cannot replace what the trial saw.
        ON CONFLICT DO NOTHING makes this atomic even with concurrent writers."""
        messages_json = json.dumps([m.model_dump(mode="json") for m in messages])
        with self._session() as s:
            result = s.exec(
                self._insert(StepRow)
                .values(
                    id=step_id(trial_id, step),
                    trial_id=trial_id,
                    run_id=run_id,
                    step=step,
                    role=role,
                    messages_json=messages_json,
                    model=model,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cost=cost,
                    latency_s=latency_s,
                    finish_reason=finish_reason,
                    failure_class=failure_class,
                    failure=failure,
                    failure_at=failure_at,
                    agent_state_json=agent_state_json,
                    created_at=utc_now(),
                )
                .on_conflict_do_nothing()
            )
            return result.rowcount == 1

    def get_step(self, trial_id: str, step: int) -> StepRow | None:
        with self._session(read_only=True) as s:
            return s.get(StepRow, step_id(trial_id, step))

    def steps(self, trial_id: str) -> list[StepRow]:
        with self._session(read_only=True) as s:
            return list(
                s.exec(
                    select(StepRow)
                    .where(StepRow.trial_id == trial_id)
                    .order_by(StepRow.step)
                )
            )

    def step_or_history(self, trial_id: str, step: int) -> tuple[StepRow | None, list[Message]]:
        """What a step's activity needs, in one read: (the step's row, []) when it is
        recorded already (a retried attempt), else (None, the conversation so far: every
        step's messages, in step order)."""
        rows = self.steps(trial_id)
        for row in rows:
            if row.step == step:
                return row, []
        return None, conversation(rows)

    # ---- task results -------------------------------------------------------------

    def record_task(self, outcome: TaskOutcome) -> None:
        values = task_result_values(outcome)
        with self._session() as s:
            s.exec(
                self._insert(TaskResultRow)
                .values(**values)
                .on_conflict_do_update(index_elements=["id"], set_=values)
            )

    def task_results(self, run_id: str) -> list[TaskOutcome]:
        query = (
            select(TaskResultRow)
            .where(TaskResultRow.run_id == run_id)
            .order_by(
                TaskResultRow.agent_model, TaskResultRow.domain, TaskResultRow.task_id
            )
        )
        with self._session(read_only=True) as s:
            return [row.outcome() for row in s.exec(query)]

    # ---- progress -----------------------------------------------------------------

    def run_progress(self, run_id: str) -> RunProgress:
        """Where a run stands: finished and total trials, pass^1 over the scored ones,
        trials not evaluable, what every model call recorded so far cost, and the model
        calls being retried."""
        with self._session(read_only=True) as s:
            run = s.get(RunRow, run_id)
            if run is None:
                raise NotFoundError(f"no run {run_id!r} in the results store")
            by_status = s.exec(
                select(TrialRow.status, func.count(), func.sum(TrialRow.attempts))
                .where(TrialRow.run_id == run_id)
                .group_by(TrialRow.status)
            ).all()
            counts = {status: n for status, n, _ in by_status}
            attempts = {status: int(a or 0) for status, _, a in by_status}
            successes = s.exec(
                select(func.count())
                .select_from(TrialRow)
                .where(
                    TrialRow.run_id == run_id,
                    TrialRow.status == TRIAL_SCORED,
                    col(TrialRow.success).is_(True),
                )
            ).one()
            cost = _run_cost(s, run_id)
            retrying = s.exec(
                select(TrialRow.retry_error)
                .where(TrialRow.run_id == run_id, TrialRow.status == TRIAL_RUNNING,
                       col(TrialRow.retry_error).is_not(None))
                .order_by(col(TrialRow.retried_at).desc())
            ).all()
        scored = counts.get(TRIAL_SCORED, 0)
        not_evaluable = counts.get(TRIAL_NOT_EVALUABLE, 0)
        return RunProgress(
            done=scored + not_evaluable,
            total=run.total_trials,
            pass1=successes / scored if scored else None,
            not_evaluable=not_evaluable,
            cost=cost,
            not_evaluable_attempts=attempts.get(TRIAL_NOT_EVALUABLE, 0),
            retrying=len(retrying),
            retry_error=retrying[0] if retrying else None,
        )

    # ---- export and import ------------------------------------------------------------

    def run_steps(self, run_id: str) -> dict[str, list[StepRow]]:
        """Every recorded step of a run, by trial id, in step order (one query)."""
        query = (
            select(StepRow)
            .where(StepRow.run_id == run_id)
            .order_by(StepRow.trial_id, StepRow.step)
        )
        out: dict[str, list[StepRow]] = {}
        with self._session(read_only=True) as s:
            for row in s.exec(query):
                out.setdefault(row.trial_id, []).append(row)
        return out

    def run_messages(self, run_id: str) -> dict[str, list[tuple[int, str]]]:
        """Every recorded step of a run as (step number, messages JSON), by trial id, in
        step order: what a report reads of thousands of conversations, without building a
        row object per step."""
        query = (
            select(StepRow.trial_id, StepRow.step, StepRow.messages_json)
            .where(StepRow.run_id == run_id)
            .order_by(StepRow.trial_id, StepRow.step)
        )
        out: dict[str, list[tuple[int, str]]] = {}
        with self._session(read_only=True) as s:
            for trial_id, step, messages in s.exec(query):
                out.setdefault(trial_id, []).append((step, messages))
        return out

    def runs_with_fingerprint(self, fingerprint: str) -> list[RunRow]:
        with self._session(read_only=True) as s:
            return list(s.exec(select(RunRow).where(RunRow.fingerprint == fingerprint)))

    def import_source(self, run_id: str) -> dict[str, Any] | None:
        """What an imported run was loaded from (files, formats, digests), or None for
        a run passhat ran."""
        row = self.get_run(run_id)
        if row is None or row.status != RUN_IMPORTED:
            return None
        return json.loads(row.config_json).get(IMPORT_SOURCE_KEY) or {}

    def import_run(
        self,
        config: RunConfig,
        fingerprint: str,
        source: dict[str, Any],
        trials: list[dict[str, Any]],
        steps: list[dict[str, Any]],
        outcomes: list[TaskOutcome],
    ) -> bool:
        """Record a run loaded from results files, with status "imported", in one
        transaction: all of it or, on any error, nothing. `trials` and `steps` hold
        TrialRow / StepRow column values (steps' "messages" as passhat Messages).
        Returns False, writing nothing, when the run id is taken."""
        now = utc_now()
        body = json.loads(config.model_dump_json())
        body[IMPORT_SOURCE_KEY] = source
        with self._session() as s:
            inserted = s.exec(
                self._insert(RunRow)
                .values(
                    run_id=config.run_id,
                    config_json=json.dumps(body),
                    fingerprint=fingerprint,
                    status=RUN_IMPORTED,
                    total_trials=config.total_trials(),
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing()
            ).rowcount
            if not inserted:
                return False
            for values in trials:
                values = dict(values)
                values["reward_info_json"] = json.dumps(values.pop("reward_info", {}), default=str)
                values.setdefault("started_at", now)
                values["started_at"] = values["started_at"] or now
                s.add(TrialRow(run_id=config.run_id, **values))
            for values in steps:
                values = dict(values)
                messages = values.pop("messages")
                values["messages_json"] = json.dumps([m.model_dump(mode="json") for m in messages])
                values["created_at"] = values.get("created_at") or now
                s.add(StepRow(
                    id=step_id(values["trial_id"], values["step"]), run_id=config.run_id, **values
                ))
            for outcome in outcomes:
                s.add(TaskResultRow(**task_result_values(outcome)))
        return True


def _set_aside_count(s: Session, prefix: str) -> int:
    """How many attempts are set aside under `prefix` (`<id>~discarded-`): the largest n
    of `<id>~discarded-n` (the steps kept beside one, `...-n~judge`, are not another)."""
    ids = s.exec(select(StepRow.trial_id).distinct().where(
        StepRow.trial_id.startswith(prefix)  # type: ignore[attr-defined]
    )).all()
    numbers = [i[len(prefix):].split("~", 1)[0] for i in ids]
    return max((int(n) for n in numbers if n.isdigit()), default=0)


def _move_steps(s: Session, rows: list[StepRow], from_id: str, to_id: str) -> None:
    """Re-key steps of `from_id` (and of ids beginning with it) under `to_id`."""
    for row in rows:
        moved = to_id + row.trial_id[len(from_id):]
        s.exec(update(StepRow).where(StepRow.id == row.id).values(trial_id=moved, id=step_id(moved, row.step)))
