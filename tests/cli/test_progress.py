"""The progress bar's figures: ETA from the pace since following began, cost so far and
the not-evaluable count from the store; and the log file's redaction."""

from __future__ import annotations

import logging

import pytest

from passhat.workflows.client import Eta
from passhat.cli.render import progress_fields
from passhat.contracts import Message
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
