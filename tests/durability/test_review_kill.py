"""`passhat review` of 100 trials survives its command (and the workers it forked) being
SIGKILLed twice mid-review: every review's judge call is requested once, except those
in flight at a kill, and the judge's cost is counted once.

The run is the in-process scripted models'; the judge is scripted `reviewer` over real
loopback HTTP (the fault server with the scripted responder), priced per token. At each
kill the judge's answers are held at the gate until every review slot is waiting there
(no answer is on its way to being recorded), so the calls in flight are exactly the held
ones; they are released only after the command is dead, and their answers are lost."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from passhat.testing.harness import PASSHAT, until
from tests.helpers import needs_agent_errors

RUN_ID = "durability-review-kill"
CONCURRENCY = 4
PRICES = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}


@pytest.fixture
def responder():
    from passhat.testing.scripted_http import ScriptedResponder

    return ScriptedResponder(["airline"], latency=0.05)


@needs_agent_errors  # (and its verdicts are passhat's reviewer's; 1.0.x reviews with tau2's)
async def test_review_killed_twice_requests_each_review_once(passhat_procs, model_server, responder):
    from passhat.infra import review_store
    from passhat.infra.store import Store
    from passhat.testing.scripted_http import http_args

    ph = passhat_procs
    ran = ph.cli("run", "--domain", "airline", "--trials", "2", "--agent-model", "scripted/noisy-0.5",
                 "--user-model", "scripted/oracle", "--run-id", RUN_ID, "--yes", timeout=600)
    assert ran.returncode in (0, 1), ran.stderr
    store = Store(ph.db_url)
    trials = store.trials(RUN_ID)
    assert len(trials) == 100 and all(t.status == "scored" for t in trials)
    args = json.dumps(http_args(model_server.url, **PRICES))
    review = [str(PASSHAT), "review", RUN_ID, "--all", "--judge-model", "openai/reviewer", "--judge-args", args,
              "--concurrency", str(CONCURRENCY)]

    def reviews() -> int:
        return len(review_store.reviews(store, RUN_ID))

    lost = 0
    try:
        for kill in range(2):
            proc = subprocess.Popen(review, env=ph.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, stdin=subprocess.DEVNULL)
            try:
                before = reviews()
                await until(lambda: reviews() >= before + 20, f"20 more reviews before kill {kill + 1}", 300)
                responder.freeze()
                await until(lambda: responder.held == CONCURRENCY, "every review slot held at the judge", 120)
                lost += responder.held
                proc.send_signal(signal.SIGKILL)
                proc.communicate(timeout=60)
            finally:
                proc.kill()
            # The killed command's calls were never answered: none of them is recorded.
            kept = review_store.call_count(store, RUN_ID, _key(store))
            responder.thaw()
            assert review_store.call_count(store, RUN_ID, _key(store)) == kept
        done = subprocess.run(review + ["-o", "json"], env=ph.env(), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["review"]
    finally:
        responder.thaw()
    rows = review_store.reviews(store, RUN_ID)
    assert len(rows) == 100 and {r.trial_id for r in rows} == {t.trial_id for t in trials}
    assert all(r.status == "reviewed" and r.calls == 1 for r in rows)
    # Each review requested once, plus the calls in flight at the two kills.
    assert model_server.received == 100 + lost, (model_server.received, lost)
    assert result["reviewed"] + result["already"] == 100
    # Cost counted once: each kept answer once, and the reviews' totals are their calls'.
    per_call = [c for c in _calls(store)]
    assert len(per_call) == 100 and all(c.cost > 0 for c in per_call)
    total = sum(c.cost for c in per_call)
    assert sum(r.cost for r in rows) == pytest.approx(total)
    assert review_store.review_cost(store, RUN_ID, rows[0].review_key) == pytest.approx(total)
    assert result["cost_usd"] == pytest.approx(total)
    # The same command once more: everything is recorded, nothing is asked again.
    again = subprocess.run(review + ["-o", "json"], env=ph.env(), capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=600)
    assert again.returncode == 0, again.stderr
    repeat = json.loads(again.stdout)["review"]
    assert (repeat["already"], repeat["reviewed"]) == (100, 0)
    assert model_server.received == 100 + lost
    # The verdicts are the ground truth's: each failed trial is the noisy agent's stop.
    failed = {t.trial_id for t in trials if not t.success}
    for r in rows:
        cats = [(e["side"], e["category"]) for e in r.errors()]
        assert cats == ([("agent", "premature_end")] if r.trial_id in failed else []), (r.trial_id, cats)
    store.close()


def _key(store) -> str:  # noqa: ANN001
    from passhat.infra import review_store

    rows = review_store.reviews(store, RUN_ID)
    return rows[0].review_key


def _calls(store):  # noqa: ANN001, ANN202
    from sqlmodel import Session, select

    from passhat.infra.store_tables import ReviewCallRow

    with Session(store.engine) as s:
        return list(s.exec(select(ReviewCallRow).where(ReviewCallRow.run_id == RUN_ID)))
