"""tau2 1.0.x's NL-assertion judge survives its worker being SIGKILLed mid-call, and is
never called again once its reply is recorded.

The conversation is the in-process scripted oracle's; the judge is a model over real
HTTP (the fault server) whose first request is held until the worker that sent it has
been killed. A fresh worker sends the unanswered call once more, records the reply, and
scores the trial with it. Running the judge's step again afterwards (as Temporal would
after a crash between recording and reporting) reads the recorded reply: no request.

Needs tau2 1.0.x (26.3 grades no NL assertions): skipped on 26.3.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from passhat.domains.tau2_version import installed_rules

pytestmark = pytest.mark.skipif(not installed_rules().grades_nl_assertions,
                                reason="needs tau2 1.0.x (the installed tau2 grades no NL assertions)")

RUN_ID = "durability-judge-kill"
JUDGE_TAG = "expectedOutcome"  # in tau2 1.0.x's judge prompt


class HeldJudge:
    """scripted/judge over HTTP (every assertion met), its first request held until
    released. Counts the judge requests it receives."""

    def __init__(self) -> None:
        self.requests = 0
        self.release = threading.Event()

    async def __call__(self, body: dict) -> dict:
        from passhat.infra import scripted_provider

        messages = body["messages"]
        assert JUDGE_TAG in str(messages[0].get("content")), "only the judge calls this server"
        self.requests += 1
        if self.requests == 1:
            while not self.release.is_set():
                await asyncio.sleep(0.05)
        return scripted_provider.judge_turn(messages)


def _judged_task() -> str:
    """A retail task graded by the judge (NL assertions in its reward basis)."""
    from passhat.domains.tau2_data import default_tasks

    return next(t.id for t in default_tasks("retail")
                if t.evaluation_criteria and t.evaluation_criteria.nl_assertions
                and "NL_ASSERTION" in {str(getattr(b, "value", b)) for b in t.evaluation_criteria.reward_basis})


async def test_judge_step_survives_worker_kill_without_a_second_call(passhat_procs):
    from temporalio.testing import ActivityEnvironment

    from passhat.activities.conversation import ConversationActivities
    from passhat.contracts import StepRef
    from passhat.domains.nl_judge import judge_key
    from passhat.infra.store import Store
    from passhat.testing.fault_server import FaultServer
    from passhat.testing.harness import trial_specs, until
    from passhat.testing.scripted_http import http_args

    ph, judge = passhat_procs, HeldJudge()
    with FaultServer(responder=judge) as srv:
        started = ph.cli(
            "run", "--domain", "retail", "--task", _judged_task(), "--trials", "1",
            "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
            "--judge-model", "openai/judge", "--judge-args", json.dumps(http_args(srv.url)),
            "--run-id", RUN_ID, "--detach",
        )
        assert started.returncode == 0, started.stderr
        store = Store(ph.db_url)
        [spec] = trial_specs(store.get_run(RUN_ID).run_config())
        try:
            worker = ph.start_worker()
            await worker.ready()
            await until(lambda: judge.requests == 1, "the judge's call in flight", 180)
            worker.kill()
            # The dead worker's call was never answered: nothing of it is recorded.
            assert store.get_step(judge_key(spec.trial_id), 0) is None
            judge.release.set()

            worker = ph.start_worker()
            await worker.ready()
            await until(lambda: store.get_trial(spec.trial_id).status == "scored", "the trial scored", 300)
            trial = store.get_trial(spec.trial_id)
            # The unanswered call sent once more by the fresh worker, and nothing else.
            assert judge.requests == 2
            assert trial.reward == 1.0, trial.reward_info()
            assert all(c["met"] for c in trial.reward_info()["nl_assertions"])
            recorded = store.get_step(judge_key(spec.trial_id), 0)
            assert recorded.model and recorded.failure_class is None

            # The judge's step run again once recorded (a retry after a crash between
            # recording and reporting): it reads the reply, and calls nobody.
            again = await ActivityEnvironment().run(
                ConversationActivities(store).judge_turn,
                StepRef(trial=spec, step=0, termination_reason=trial.termination_reason))
            assert again is True and judge.requests == 2

            shown = ph.cli("show", spec.trial_id)
            assert shown.returncode == 0, shown.stderr
            assert f"judge {recorded.model}" in shown.stdout
            shown_json = json.loads(ph.cli("show", spec.trial_id, "-o", "json").stdout)
            assert shown_json["judge"]["model"] == recorded.model
            assert json.loads(shown_json["judge"]["reply"])["results"]
        finally:
            judge.release.set()
            store.close()
