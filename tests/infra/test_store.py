"""Results store, on SQLite and PostgreSQL (the db_url fixture runs each test on both)."""

from __future__ import annotations

import threading

import pytest

from passhat.messages import Message, ToolCall
from passhat.outcomes import TaskOutcome
from passhat.infra.store import NotFoundError, Store, StoreError
from passhat.run_identity import fingerprint
from tests.helpers import conversation, make_config, make_spec


@pytest.fixture
def store(db_url):
    s = Store(db_url)
    yield s
    s.close()


def msg(text: str, role="assistant") -> Message:
    return Message(role=role, content=text)


def test_record_step_is_idempotent(store):
    spec = make_spec()
    store.begin_trial(spec)
    assert (
        store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("first")]) is True
    )
    assert (
        store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("second")]) is False
    )
    rows = store.steps(spec.trial_id)
    assert len(rows) == 1
    # The first write wins: a retry cannot change what the trial already saw.
    assert rows[0].message_list()[0].content == "first"
    assert len(store.steps(spec.trial_id)) == 1


def test_step_or_history_reads_a_recorded_step_or_the_conversation_before_it(store):
    spec = make_spec()
    store.record_step(spec.trial_id, "r1", 0, "user", [msg("hi", role="user")])
    store.record_step(spec.trial_id, "r1", 1, "assistant", [msg("hello")])
    store.record_step(make_spec(task_id="t2").trial_id, "r1", 2, "user", [msg("other")])

    row, history = store.step_or_history(spec.trial_id, 1)  # a retried attempt of step 1
    assert (row.step, [m.content for m in row.message_list()], history) == (1, ["hello"], [])

    row, history = store.step_or_history(spec.trial_id, 2)  # the next step
    assert row is None
    assert [(m.role, m.content) for m in history] == [("user", "hi"), ("assistant", "hello")]


def test_concurrent_record_step_same_key_writes_once(store):
    spec = make_spec()
    store.begin_trial(spec)
    barrier = threading.Barrier(8)
    results: list[bool] = []
    errors: list[Exception] = []

    def write(i: int) -> None:
        try:
            barrier.wait()
            results.append(
                store.record_step(spec.trial_id, "r1", 3, "assistant", [msg(f"w{i}")])
            )
        except Exception as e:  # surfaced below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [False] * 7 + [True]
    assert len(store.steps(spec.trial_id)) == 1


def test_concurrent_writes_from_two_stores(db_url):
    # Two Store objects stand in for two worker processes sharing the database.
    a, b = Store(db_url), Store(db_url)
    spec = make_spec()
    a.begin_trial(spec)
    errors: list[Exception] = []

    def write(store: Store, parity: int) -> None:
        try:
            for step in range(parity, 40, 2):
                store.record_step(
                    spec.trial_id, "r1", step, "assistant", [msg(str(step))]
                )
                store.record_step(spec.trial_id, "r1", step, "assistant", [msg("dup")])
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(s, p)) for s, p in ((a, 0), (b, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [m.content for m in conversation(a, spec.trial_id)] == [str(i) for i in range(40)]
    a.close()
    b.close()


def test_messages_round_trip_with_tool_calls(store):
    spec = make_spec()
    store.begin_trial(spec)
    call = ToolCall(
        id="call_1",
        name="book_flight",
        arguments={
            "flight": "HAT001",
            "passengers": [{"name": "Ada", "age": 36}],
            "x": None,
        },
    )
    assistant = Message(role="assistant", content=None, tool_calls=[call])
    tool = Message(
        role="tool",
        content='{"ok": true}',
        tool_call_id="call_1",
        requestor="assistant",
    )
    failed = Message(
        role="tool",
        content="Error: nope",
        tool_call_id="call_2",
        requestor="user",
        error=True,
    )
    store.record_step(spec.trial_id, "r1", 0, "user", [msg("hello", role="user")])
    store.record_step(
        spec.trial_id,
        "r1",
        1,
        "assistant",
        [assistant],
        model="agent-m",
        input_tokens=10,
        output_tokens=5,
        cost=0.01,
        latency_s=1.5,
        finish_reason="tool_calls",
    )
    store.record_step(spec.trial_id, "r1", 2, "tool", [tool, failed])
    messages = conversation(store, spec.trial_id)
    assert messages == [msg("hello", role="user"), assistant, tool, failed]
    assert messages[1].tool_calls[0].arguments["passengers"][0]["age"] == 36
    step = store.get_step(spec.trial_id, 1)
    assert (step.model, step.input_tokens, step.finish_reason) == (
        "agent-m",
        10,
        "tool_calls",
    )
    assert step.id == f"{spec.trial_id}#1"
    assert store.get_step(spec.trial_id, 9) is None
    assert [s.step for s in store.steps(spec.trial_id)] == [0, 1, 2]


def test_begin_trial_semantics(store):
    spec = make_spec()
    row = store.begin_trial(spec)
    assert (row.status, row.attempts, row.seed) == ("running", 1, spec.seed)

    # A crashed worker's trial is started again: attempts count up, steps are kept.
    store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("a")])
    row = store.begin_trial(spec)
    assert (row.status, row.attempts) == ("running", 2)
    assert len(store.steps(spec.trial_id)) == 1

    # A not-evaluable trial is retried on resume, and its error cleared.
    store.mark_not_evaluable(spec.trial_id, "rate limited 8 times", "RateLimitError")
    row = store.get_trial(spec.trial_id)
    assert (row.status, row.error, row.error_class) == (
        "not_evaluable",
        "rate limited 8 times",
        "RateLimitError",
    )
    assert row.finished_at is not None
    row = store.begin_trial(spec)
    assert (row.status, row.error, row.error_class, row.attempts) == (
        "running",
        None,
        None,
        3,
    )
    assert row.finished_at is None
    assert len(store.steps(spec.trial_id)) == 1

    # A scored trial is final.
    store.finish_trial(spec.trial_id, 1.0, True, {"db": 1.0}, "user_stop", 1)
    row = store.begin_trial(spec)
    assert (row.status, row.attempts, row.reward) == ("scored", 3, 1.0)
    # ... and marking it not evaluable afterwards (a late retry) changes nothing.
    store.mark_not_evaluable(spec.trial_id, "late", "X")
    assert store.get_trial(spec.trial_id).status == "scored"


def test_finish_trial_twice_leaves_one_unchanged_row(store):
    spec = make_spec()
    store.begin_trial(spec)
    store.record_step(
        spec.trial_id,
        "r1",
        0,
        "assistant",
        [msg("a")],
        input_tokens=100,
        output_tokens=7,
        cost=0.5,
    )
    store.record_step(
        spec.trial_id,
        "r1",
        1,
        "assistant",
        [msg("b")],
        input_tokens=50,
        output_tokens=3,
        cost=0.25,
    )
    first = store.finish_trial(
        spec.trial_id, 0.0, False, {"action": 0.0}, "max_steps", 2
    )
    assert (first.status, first.reward, first.success) == ("scored", 0.0, False)
    assert (first.input_tokens, first.output_tokens, first.cost) == (150, 10, 0.75)
    assert first.reward_info() == {"action": 0.0}
    assert first.termination_reason == "max_steps"

    second = store.finish_trial(
        spec.trial_id, 0.0, False, {"action": 0.0}, "max_steps", 2
    )
    assert second.model_dump() == first.model_dump()


def test_finish_unknown_trial_raises(store):
    with pytest.raises(NotFoundError):
        store.finish_trial("nope", 1.0, True, {}, "user_stop", 0)


def test_trial_filters_and_trace_id(store):
    store.create_run(make_config(), total_trials=3)
    ok, bad, broken = make_spec(index=0), make_spec(index=1), make_spec(task_id="t2")
    for spec in (ok, bad, broken):
        store.begin_trial(spec)
    store.finish_trial(ok.trial_id, 1.0, True, {}, "user_stop", 4)
    store.finish_trial(bad.trial_id, 0.0, False, {}, "user_stop", 4)
    store.mark_not_evaluable(broken.trial_id, "boom", "ValueError")
    store.set_trace_id(ok.trial_id, "abc123")

    assert store.get_trial(ok.trial_id).trace_id == "abc123"
    assert store.get_trial("missing") is None
    assert [t.trial_id for t in store.trials("r1")] == [
        ok.trial_id,
        bad.trial_id,
        broken.trial_id,
    ]
    assert {t.trial_id for t in store.trials("r1", failed_only=True)} == {
        bad.trial_id,
        broken.trial_id,
    }
    assert [
        t.trial_id for t in store.trials("r1", status="scored", agent_model="agent-m")
    ] == [ok.trial_id, bad.trial_id]
    assert store.trials("r1", domain="other") == []
    assert store.trials("other-run") == []


def test_create_run_records_a_run_once(store):
    """The first record of a run id stays: a second create_run finds it, whatever its
    configuration (whether that may attach is passhat.run_identity's to say)."""
    config = make_config()
    row = store.create_run(config, total_trials=3)
    assert (row.status, row.total_trials) == ("running", 3)
    assert row.run_config() == config
    assert row.fingerprint == fingerprint(config)

    again = store.create_run(make_config(user_model="other-user"), total_trials=3)
    assert (again.fingerprint, again.created_at) == (row.fingerprint, row.created_at)
    assert store.get_run("r1").run_config().user_model == "user-m"


def test_run_listing_and_status(store):
    store.create_run(make_config("a"), total_trials=1)
    store.create_run(make_config("b"), total_trials=1)
    assert {r.run_id for r in store.list_runs()} == {"a", "b"}
    store.set_run_status("a", "completed")
    assert store.get_run("a").status == "completed"
    assert store.get_run("missing") is None
    with pytest.raises(ValueError):
        store.set_run_status("a", "done")
    with pytest.raises(NotFoundError):
        store.set_run_status("missing", "failed")


def test_delete_run_removes_everything(store):
    for run_id in ("gone", "kept"):
        store.create_run(make_config(run_id), total_trials=1)
        spec = make_spec(run_id=run_id)
        store.begin_trial(spec)
        store.record_step(spec.trial_id, run_id, 0, "assistant", [msg("x")])
        store.record_task(outcome(run_id))
    store.delete_run("gone")
    gone = make_spec(run_id="gone")
    assert store.get_run("gone") is None
    assert store.trials("gone") == []
    assert store.steps(gone.trial_id) == []
    assert store.task_results("gone") == []
    kept = make_spec(run_id="kept")
    assert store.get_run("kept") is not None
    assert len(store.steps(kept.trial_id)) == 1
    assert len(store.task_results("kept")) == 1


def outcome(run_id="r1", task_id="t1", successes=2) -> TaskOutcome:
    return TaskOutcome(
        run_id=run_id,
        agent_model="agent-m",
        user_model="user-m",
        domain="mock",
        task_id=task_id,
        trials=3,
        evaluable=3,
        successes=successes,
        avg_reward=successes / 3,
        pass_hat={"1": successes / 3, "2": 1 / 3 if successes == 2 else 1.0},
    )


def test_record_task_upserts(store):
    store.record_task(outcome(successes=2))
    store.record_task(outcome(successes=3))
    store.record_task(outcome(task_id="t0", successes=2))
    rows = store.task_results("r1")
    assert [r.task_id for r in rows] == ["t0", "t1"]
    assert rows[1] == outcome(successes=3)


def progress(store: Store, run_id: str) -> tuple[int, int, float | None]:
    p = store.run_progress(run_id)
    return p.done, p.total, p.pass1


def test_progress(store):
    store.create_run(make_config(), total_trials=5)
    assert progress(store, "r1") == (0, 5, None)
    specs = [make_spec(index=i) for i in range(3)] + [make_spec(task_id="t2")]
    for spec in specs:
        store.begin_trial(spec)
    assert progress(store, "r1") == (0, 5, None)
    store.mark_not_evaluable(specs[0].trial_id, "boom", "X")
    assert progress(store, "r1") == (1, 5, None)
    store.finish_trial(specs[1].trial_id, 1.0, True, {}, "user_stop", 2)
    store.finish_trial(specs[2].trial_id, 0.0, False, {}, "user_stop", 2)
    store.finish_trial(specs[3].trial_id, 1.0, True, {}, "user_stop", 2)
    done, total, pass1 = progress(store, "r1")
    assert (done, total) == (4, 5)
    assert pass1 == pytest.approx(2 / 3)
    with pytest.raises(NotFoundError):
        store.run_progress("missing")


def test_large_seed_round_trips(store):
    spec = make_spec().model_copy(update={"seed": 2**60 - 1})
    store.begin_trial(spec)
    assert store.get_trial(spec.trial_id).seed == 2**60 - 1
    spec2 = make_spec(index=1).model_copy(update={"seed": 2**59 + 12345})
    assert store.begin_trial(spec2).seed == 2**59 + 12345


def test_reopening_is_idempotent(db_url):
    Store(db_url).close()
    s = Store(db_url)
    s.create_run(make_config(), total_trials=1)
    s.close()
    s = Store(db_url)
    assert s.get_run("r1") is not None
    s.close()


# ---- errors opening the store (not parametrised: each targets one back end) -----------


def test_default_url_creates_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("PASSHAT_DB_URL", raising=False)
    monkeypatch.setenv("PASSHAT_HOME", str(tmp_path / "nested" / "home"))
    s = Store()
    assert (tmp_path / "nested" / "home" / "results.db").exists()
    s.close()


def test_unwritable_directory_gives_store_error(tmp_path):
    # A path under a regular file: unwritable even for root, who ignores chmod.
    (tmp_path / "afile").write_text("not a directory")
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{tmp_path / 'afile' / 'x.db'}")
    message = str(info.value)
    assert "cannot open results store" in message
    assert "PASSHAT_HOME" in message and "PASSHAT_DB_URL" in message


def test_unreachable_postgres_gives_store_error():
    with pytest.raises(StoreError) as info:
        Store("postgresql+psycopg://postgres:secret@127.0.0.1:1/test")
    message = str(info.value)
    assert "cannot open results store" in message and "PASSHAT_DB_URL" in message
    assert "secret" not in message  # the password is never echoed


def test_unsupported_url_gives_store_error():
    with pytest.raises(StoreError):
        Store("mysql://localhost/x")
    with pytest.raises(StoreError):
        Store("not a url")


def test_sqlite_readers_do_not_wait_for_a_writer(tmp_path):
    """Another process holding SQLite's write lock (a worker mid-transaction) does not
    hold up reads: progress displays and step lookups read a snapshot, they never queue
    for the lock (a reader that asked for it would wait out busy_timeout, then fail)."""
    import sqlite3

    path = tmp_path / "results.db"
    store = Store(f"sqlite:///{path}")
    store.create_run(make_config(), total_trials=1)
    spec = make_spec()
    store.begin_trial(spec)
    store.record_step(spec.trial_id, "r1", 0, "user", [msg("hello", role="user")])

    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("DELETE FROM steps")  # uncommitted: readers must not see it
    try:
        assert progress(store, "r1") == (0, 1, None)
        assert [t.trial_id for t in store.trials("r1")] == [spec.trial_id]
        assert [m.content for m in conversation(store, spec.trial_id)] == ["hello"]
        assert len(store.steps(spec.trial_id)) == 1
        assert store.get_run("r1").status == "running"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()


def test_retries_are_noted_per_running_trial_and_cleared(store):
    store.create_run(make_config(), total_trials=3)
    a, b, c = (make_spec(index=i) for i in range(3))
    for spec in (a, b, c):
        store.begin_trial(spec)
    store.note_retry(a.trial_id, 2, "RateLimitError (HTTP 429)")
    store.note_retry(b.trial_id, 3, "InternalServerError (HTTP 500)")  # the latest
    p = store.run_progress("r1")
    assert (p.retrying, p.retry_error) == (2, "InternalServerError (HTTP 500)")
    store.clear_retry(b.trial_id)  # b's call went through
    assert (store.run_progress("r1").retrying, store.run_progress("r1").retry_error) == (1, "RateLimitError (HTTP 429)")
    store.mark_not_evaluable(a.trial_id, "gave up", "RateLimitError")  # a ran out of retries
    store.note_retry(a.trial_id, 9, "late")  # a finished trial is not retrying
    assert store.get_trial(a.trial_id).retry_error is None
    assert (store.run_progress("r1").retrying, store.run_progress("r1").retry_error) == (0, None)


def test_a_store_of_an_earlier_passhat_gets_the_new_columns(db_url):
    """Columns added since (the retry note's) are added to an existing database, whose
    rows stay as they were."""
    from sqlalchemy import inspect, text

    s = Store(db_url)
    s.create_run(make_config(), total_trials=1)
    spec = make_spec()
    s.begin_trial(spec)
    with s.engine.begin() as conn:
        for column in ("retry_error", "retry_attempt", "retried_at"):
            conn.execute(text(f'ALTER TABLE trials DROP COLUMN {column}'))
    s.close()
    s = Store(db_url)
    try:
        with s.engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("trials")}
        assert {"retry_error", "retry_attempt", "retried_at"} <= columns
        assert s.get_trial(spec.trial_id).status == "running"
        s.note_retry(spec.trial_id, 2, "Timeout")
        assert s.run_progress("r1").retrying == 1
    finally:
        s.close()


def test_discard_attempt_sets_the_conversation_aside_and_keeps_its_cost(store):
    """tau2 1.0.x re-runs a failed simulation: the attempt's steps leave the trial's
    conversation but stay counted in its cost, at most `keep_at_most` times."""
    spec = make_spec()
    store.create_run(make_config(), total_trials=3)
    store.begin_trial(spec)
    for attempt in (1, 2):
        store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("hi")])
        store.record_step(spec.trial_id, "r1", 1, "user", [msg("", role="user")], cost=0.5)
        assert store.discard_attempt(spec.trial_id, keep_at_most=2) == attempt
        assert store.steps(spec.trial_id) == []
        # Repeating it (a retried activity) moves nothing more.
        assert store.discard_attempt(spec.trial_id, keep_at_most=2) == attempt
    store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("hi")])
    store.record_step(spec.trial_id, "r1", 1, "user", [msg("", role="user")], cost=0.5)
    assert store.discard_attempt(spec.trial_id, keep_at_most=2) is None  # the last one stands
    assert len(store.steps(spec.trial_id)) == 2
    row = store.mark_not_evaluable(spec.trial_id, "EmptyReply x3", "EmptyReply", "infrastructure_error")
    assert row.termination_reason == "infrastructure_error"
    assert row.cost == pytest.approx(1.5)
    assert store.run_cost("r1") == pytest.approx(1.5)


def test_an_attempt_set_aside_takes_its_judge_step_with_it(store):
    """A judge reply tau2 1.0.x cannot read re-runs the whole simulation: the judge's step
    leaves with the attempt's conversation (so the next attempt asks the judge afresh),
    attempts are numbered by the conversations set aside, not by their judge steps, and
    every step set aside stays in the cost. Re-asking the judge alone (--rejudge) sets
    only its step aside."""
    from passhat.domains.nl_judge import judge_key

    spec = make_spec()
    store.create_run(make_config(), total_trials=3)
    store.begin_trial(spec)
    for attempt in (1, 2):
        store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("hi")])
        store.record_step(judge_key(spec.trial_id), "r1", 0, "assistant", [msg("{")], cost=0.25)
        assert store.discard_attempt(spec.trial_id) == attempt
        assert store.steps(spec.trial_id) == [] and store.get_step(judge_key(spec.trial_id), 0) is None
    assert store.discard_attempt(spec.trial_id, keep_at_most=2) == 2  # nothing current: the count
    store.record_step(spec.trial_id, "r1", 0, "assistant", [msg("hi")])
    store.record_step(judge_key(spec.trial_id), "r1", 0, "assistant", [msg("{")], cost=0.25)
    assert store.discard_judge(spec.trial_id) == 1
    assert store.get_step(judge_key(spec.trial_id), 0) is None and len(store.steps(spec.trial_id)) == 1
    assert store.discard_judge(spec.trial_id) == 1  # repeated: nothing more moves
    row = store.mark_not_evaluable(spec.trial_id, "judge", "JudgeError", "infrastructure_error")
    assert row.cost == pytest.approx(0.75)


def test_a_database_without_the_run_tasks_table_opens_and_gets_it(db_url):
    """A store written by a passhat that kept no task copies: it opens, its runs are
    kept as they were, and the new table is there for the next run."""
    from sqlalchemy import text

    old = Store(db_url)
    old.create_run(make_config("before"), total_trials=3)
    with old.engine.begin() as conn:
        conn.execute(text("DROP TABLE run_tasks"))
    old.close()

    store = Store(db_url)
    try:
        assert store.get_run("before").total_trials == 3
        assert store.run_tasks("before") == {}
        tasks = [{"id": "t1", "user_scenario": "x"}]
        store.keep_run_tasks("before", "airline@/t.json", "d1", tasks)
        store.keep_run_tasks("before", "airline@/t.json", "d2", [])  # the first copy stays
        [(domain, row)] = store.run_tasks("before").items()
        assert (domain, row.digest, row.tasks()) == ("airline@/t.json", "d1", tasks)
        store.delete_run("before")
        assert store.run_tasks("before") == {}
    finally:
        store.close()
