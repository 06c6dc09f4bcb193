"""A judge reply tau2 1.0.x cannot read, through `passhat run` and `passhat resume` as a
user runs them: the conversation is the in-process scripted oracle's, the judge a model
over real HTTP (a loopback server) that answers text that is not JSON until told to
answer properly.

- tau2 re-runs the whole simulation after such a reply (run_with_retry): a judge that
  fails once is answered on the second attempt, which is scored; the first attempt's
  conversation and judge step are set aside and kept in the cost.
- A judge that fails on all 4 attempts leaves the trial not evaluable
  (infrastructure_error); `passhat resume` runs it again from the start, as tau2's own
  resume drops such a simulation, and once the judge answers it is scored.
- With --rejudge (opt-in departure), the judge alone is asked again: the conversation
  is kept, and the run's reports say it departs from tau2.

Needs tau2 1.0.x (26.3 grades no NL assertions): skipped on 26.3.
"""

from __future__ import annotations

import json

import pytest

from passhat.domains.tau2_version import installed_rules

pytestmark = pytest.mark.skipif(not installed_rules().grades_nl_assertions,
                                reason="needs tau2 1.0.x (the installed tau2 grades no NL assertions)")

JUDGE_TAG = "expectedOutcome"  # in tau2 1.0.x's judge prompt


class FlakyJudge:
    """scripted/judge over HTTP, whose first `failures` answers are not JSON."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests = 0

    def __call__(self, body: dict) -> dict:
        from passhat.infra import scripted_provider

        messages = body["messages"]
        assert JUDGE_TAG in str(messages[0].get("content")), "only the judge calls this server"
        self.requests += 1
        if self.requests <= self.failures:
            return {"role": "assistant", "content": "All expectations are met."}
        return scripted_provider.judge_turn(messages)


def _judged_task() -> str:
    from passhat.domains.tau2_data import default_tasks

    return next(t.id for t in default_tasks("retail")
                if t.evaluation_criteria and t.evaluation_criteria.nl_assertions
                and "NL_ASSERTION" in {str(getattr(b, "value", b)) for b in t.evaluation_criteria.reward_basis})


def _run(env: dict, srv, run_id: str, *extra: str):  # noqa: ANN001, ANN202
    from passhat.testing.harness import passhat
    from passhat.testing.scripted_http import TEST_KEY_ENV, http_args

    args = http_args(srv.url)
    env[TEST_KEY_ENV] = "loopback-test-key"
    return passhat(
        "run", "--domain", "retail", "--task", _judged_task(), "--trials", "1",
        "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
        "--judge-model", "openai/judge", "--judge-args", json.dumps(args),
        "--run-id", run_id, *extra, env=env,
    )


def _trial(env: dict, run_id: str):  # noqa: ANN202
    from passhat.infra.store import Store

    store = Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")
    try:
        [trial] = store.trials(run_id)
        aside = [store.steps(f"{trial.trial_id}~discarded-{n}") for n in range(1, 5)]
        judge_aside = [store.get_step(f"{trial.trial_id}~judge~discarded-{n}", 0) for n in range(1, 5)]
        return trial, store.steps(trial.trial_id), aside, judge_aside
    finally:
        store.close()


def test_a_judge_that_fails_once_is_answered_on_the_re_run(env):
    from passhat.testing.fault_server import FaultServer

    judge = FlakyJudge(failures=1)
    with FaultServer(responder=judge) as srv:
        ran = _run(env, srv, "judge-once")
    assert ran.returncode == 0, ran.stderr
    trial, steps, aside, _ = _trial(env, "judge-once")
    assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 1.0, "user_stop")
    assert judge.requests == 2
    # The first attempt's conversation is set aside, the same length as the second's.
    assert len(aside[0]) == len(steps) > 2 and aside[1] == []


def test_resume_re_runs_a_trial_whose_judge_failed_on_every_attempt(env):
    """tau2's resume drops an infrastructure_error simulation and runs it with its full
    number of tries again: here the judge fails on 3 of them, and answers the 4th."""
    from passhat.testing.fault_server import FaultServer
    from passhat.testing.harness import passhat

    tries = 1 + installed_rules().simulation_retries
    judge = FlakyJudge(failures=2 * tries - 1)
    with FaultServer(responder=judge) as srv:
        ran = _run(env, srv, "judge-resume")
        assert judge.requests == tries
        trial, steps, aside, _ = _trial(env, "judge-resume")
        assert (trial.status, trial.termination_reason, trial.error_class) == (
            "not_evaluable", "infrastructure_error", "JudgeError")
        assert f"on every one of {tries} attempts" in trial.error
        assert [len(a) > 2 for a in aside] == [True] * (tries - 1) + [False]
        assert "passhat resume" in ran.stdout + ran.stderr

        resumed = passhat("resume", "judge-resume", env=env)
        assert resumed.returncode == 0, resumed.stderr
    trial, steps, aside, _ = _trial(env, "judge-resume")
    assert (trial.status, trial.reward, trial.termination_reason) == ("scored", 1.0, "user_stop")
    # Every try asked the judge after a conversation run afresh: the given-up attempt
    # and the resume's 3 failed ones are set aside beside the first run's.
    assert judge.requests == 2 * tries
    trial_id = trial.trial_id
    from passhat.infra.store import Store

    store = Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")
    try:
        assert all(len(store.steps(f"{trial_id}~discarded-{n}")) == len(steps) for n in range(1, 2 * tries))
        assert store.steps(f"{trial_id}~discarded-{2 * tries}") == []
    finally:
        store.close()


def test_rejudge_asks_the_judge_alone_and_says_it_departs(env):
    from passhat.testing.fault_server import FaultServer
    from passhat.testing.harness import passhat

    tries = 1 + installed_rules().simulation_retries
    judge = FlakyJudge(failures=tries + 1)
    with FaultServer(responder=judge) as srv:
        ran = _run(env, srv, "judge-alone", "--rejudge")
        assert judge.requests == tries
        trial, steps, aside, judge_aside = _trial(env, "judge-alone")
        assert (trial.status, trial.termination_reason) == ("not_evaluable", "infrastructure_error")
        assert f"on every one of {tries} judge calls" in trial.error
        assert aside[0] == [] and all(judge_aside[: tries - 1])  # the conversation ran once
        # Resume asks the judge alone again (it fails once more, then answers).
        resumed = passhat("resume", "judge-alone", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert judge.requests == tries + 2
    trial, after, aside, _ = _trial(env, "judge-alone")
    assert (trial.status, trial.reward) == ("scored", 1.0)
    assert aside[0] == [] and len(after) == len(steps)
    report = passhat("report", "judge-alone", env=env)
    assert "DEPARTS FROM tau2: rejudge" in " ".join(report.stdout.split()), report.stdout
    assert "DEPARTS FROM tau2" in " ".join(ran.stdout.split()) + " ".join(ran.stderr.split())
