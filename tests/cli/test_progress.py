"""The progress bar's figures: ETA from the pace since following began, cost so far and
the not-evaluable count from the store; and the log file's redaction."""

from __future__ import annotations

import logging

import pytest

from passhat.workflows.client import Eta
from passhat.cli.render import progress_fields
from passhat.messages import Message
from passhat.infra import logs
from passhat.infra.store import RunProgress
from tests.helpers import make_config, make_spec


def test_eta_from_the_pace_since_following_began():
    now = [100.0]
    eta = Eta(clock=lambda: now[0])
    assert eta(40, 100) is None  # resumed with 40 done: no pace yet
    now[0] = 110.0
    assert eta(40, 100) is None  # nothing finished since
    now[0] = 130.0
    assert eta(50, 100) == pytest.approx(150.0)  # 10 trials in 30 s, 50 to go
    assert eta(100, 100) == 0.0


def test_progress_fields():
    p = RunProgress(done=3, total=10, pass1=2 / 3, not_evaluable=1, cost=0.01234)
    assert progress_fields(p, 3725.4) == {"pass1": "0.667", "not_evaluable": "1", "cost": "0.0123",
                                          "eta": "ETA 1:02:05"}
    assert progress_fields(p, None)["eta"] == "ETA -"


def test_run_progress_counts_cost_and_not_evaluable(sqlite_store):
    store = sqlite_store
    store.create_run(make_config(), total_trials=3)
    a, b = make_spec(index=0), make_spec(index=1)
    for spec in (a, b):
        store.begin_trial(spec)
    store.record_step(a.trial_id, "r1", 1, "assistant", [Message(role="assistant", content="hi")], cost=0.25)
    store.record_step(b.trial_id, "r1", 1, "assistant", [Message(role="assistant", content="hi")], cost=0.5)
    assert store.run_progress("r1") == RunProgress(0, 3, None, 0, 0.75, 0)
    store.mark_not_evaluable(a.trial_id, "boom", "X")
    p = store.run_progress("r1")
    assert (p.done, p.not_evaluable, p.cost, p.not_evaluable_attempts) == (1, 1, 0.75, 1)
    store.begin_trial(a)  # resume reopens it ...
    store.mark_not_evaluable(a.trial_id, "boom", "X")  # ... and it fails again
    assert store.run_progress("r1").not_evaluable_attempts == 2


def test_log_file_is_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("PASSHAT_LOGTEST_API_KEY", "canary-key-value-0123")
    handler = logs.LogFile(tmp_path / "logs" / "passhat.log")
    logger = logging.getLogger("passhat.test-log-file")
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError("provider said: key canary-key-value-0123 and sk-abcdefghijkl0123 refused")
        except RuntimeError:
            logger.exception("call failed with %s", "canary-key-value-0123")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = (tmp_path / "logs" / "passhat.log").read_text()
    assert "call failed with [REDACTED]" in text and "Traceback" in text
    assert "canary-key-value-0123" not in text and "sk-abcdefghijkl0123" not in text


def test_log_file_under_a_file_is_silent(tmp_path):
    (tmp_path / "file").write_text("")
    handler = logs.LogFile(tmp_path / "file" / "logs" / "passhat.log")
    handler.emit(logging.LogRecord("passhat", logging.WARNING, __file__, 1, "x", None, None))
    assert handler._broken  # dropped, no "--- Logging error ---" on stderr


def test_retry_line_under_the_bar():
    from io import StringIO

    from rich.console import Console
    from rich.progress import BarColumn, TextColumn

    from passhat.cli.render import progress_with_note, retry_line

    assert retry_line(RunProgress(0, 1, None, 0, 0.0)) is None
    retrying = RunProgress(0, 2, None, 0, 0.0, retrying=2, retry_error="InternalServerError (HTTP 500)")
    assert retry_line(retrying) == "retrying 2 calls: InternalServerError (HTTP 500)"
    assert retry_line(RunProgress(0, 2, None, 0, 0.0, retrying=1, retry_error="Timeout")) == "retrying 1 call: Timeout"
    out = StringIO()
    progress = progress_with_note(TextColumn("{task.description}"), BarColumn(),
                                  console=Console(file=out, width=80), auto_refresh=False)
    progress.add_task("run r1", total=2)
    progress.note = retry_line(retrying)
    progress.console.print(progress.get_renderable())
    bar, note = [line for line in out.getvalue().splitlines() if line.strip()]
    assert bar.startswith("run r1") and note == "retrying 2 calls: InternalServerError (HTTP 500)"


async def test_a_model_failing_every_call_shows_its_retries_in_status(client, sqlite_store, tmp_path):
    """A model that answers 500 to every call: the run does not move, and `passhat
    status`, from another process, says why: the calls being retried and the error."""
    import asyncio
    import json

    from passhat.testing.fault_server import FaultServer
    from passhat.testing.harness import passhat, until
    from passhat.workflows.client import start_run
    from tests.helpers import cli_env
    from tests.runs import http_config, worker_for

    store = sqlite_store
    with FaultServer(faults=lambda n, body: "500") as srv:
        async with worker_for(client, store) as queue:
            cfg = http_config(srv)  # one task, two trials
            handle = await start_run(client, store, cfg, task_queue=queue)
            try:
                await until(lambda: store.run_progress(cfg.run_id).retrying == 2, "both calls retried", 120)
                env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
                shown = await asyncio.to_thread(passhat, "status", cfg.run_id, env=env)
                as_json = await asyncio.to_thread(passhat, "status", cfg.run_id, "-o", "json", env=env)
            finally:
                await handle.terminate("test over")
        assert srv.received >= 2
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == "retrying 2 calls: InternalServerError (HTTP 500)", shown.stdout
    body = json.loads(as_json.stdout)
    assert (body["done"], body["retrying"], body["retry_error"]) == (0, 2, "InternalServerError (HTTP 500)")
