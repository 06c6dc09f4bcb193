"""`passhat review` as users run it: the judge over real loopback HTTP (the scripted
review judges served by the fault server), on the session's Temporal server.

- a user simulator that gives up at once on some trials (an injected user error): the
  review blames exactly those failed trials on the user, and the sensitivity pass^k
  leaves exactly them out, beside the official figure;
- a judge's answer quoting what the transcript does not hold is sent back once and the
  second answer kept; one that is never JSON is "not reviewable", never guessed; another
  judge's review of the same trial is kept beside the first;
- --max-cost stops the review at the budget;
- a run still in progress has only its finished trials reviewed, and says so;
- bad input: one line each."""

from __future__ import annotations

import json
import random
from math import comb

import pytest

from passhat.messages import STOP_TOKEN
from passhat.domains.tau2_version import installed_rules
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import Passhat, passhat, stopping_workers, until
from passhat.testing.scripted_http import SCENARIO_TAG, ScriptedResponder, http_args
from tests.helpers import needs_agent_errors


# A scripted agent whose failures are scored failures (the trials a review reads): 26.3
# ends noisy-0.0's empty reply as agent_error; 1.0.x re-runs it and gives the trial up as
# not evaluable, so there the agent that always makes one mistake plays it.
FAILING_AGENT = "scripted/noisy-0.0" if installed_rules().on_model_failure == "agent_error" else "scripted/faulty-1.0"
TAU2_REVIEWER = installed_rules().reviewer == "tau2"
# tau2 1.0.x's full mode classifies authentication with one more judge call per trial.
AUTH_CALLS = 1 if TAU2_REVIEWER else 0


class QuittingUser(ScriptedResponder):
    """The scripted models over HTTP, with one more user: `quitter` says its request and
    gives up in the same breath on about half the trials (drawn from the seed and the
    task), before the agent can do anything."""

    def answer(self, body: dict) -> dict:
        reply = super().answer(body)
        messages = body.get("messages") or []
        system = str(messages[0].get("content")) if messages else ""
        opening = not any(m.get("role") == "assistant" for m in messages[1:])
        if (str(body.get("model")).endswith("quitter") and SCENARIO_TAG in system and opening
                and random.Random(f"{body.get('seed')}/{system}").random() < 0.5):
            reply = {**reply, "content": f"{reply['content']} {STOP_TOKEN}"}
        return reply


def _tasks_with_agent_writes(n: int) -> list[str]:
    from passhat.domains.registry import get_domain

    domain = get_domain("airline")
    return [t for t in domain.task_ids()
            if any(a.requestor == "assistant" for a in domain.task(t).gold_actions)][:n]


def _task_args(tasks: list[str]) -> list[str]:
    return [a for t in tasks for a in ("--task", t)]


def _pass_hat(outcomes: dict[str, list[bool]]) -> dict[str, float]:
    """pass^k by its definition: per task C(c, k) / C(n, k), averaged over the tasks with
    at least k trials."""
    out = {}
    for k in range(1, max(len(v) for v in outcomes.values()) + 1):
        values = [comb(sum(v), k) / comb(len(v), k) for v in outcomes.values() if len(v) >= k]
        out[str(k)] = sum(values) / len(values)
    return out


@needs_agent_errors
def test_user_errors_are_blamed_on_the_user_and_left_out_only_in_the_sensitivity_line(env, tmp_path):
    from passhat.infra.store import Store

    tasks = _tasks_with_agent_writes(8)
    with FaultServer(responder=QuittingUser(["airline"])) as srv:
        args = json.dumps(http_args(srv.url))
        ran = passhat("run", "--domain", "airline", *_task_args(tasks), "--trials", "3",
                      "--agent-model", "openai/noisy-0.7", "--agent-args", args,
                      "--user-model", "openai/quitter", "--user-args", args, "--run-id", "quits", "--yes", env=env)
        assert ran.returncode in (0, 1), ran.stderr
        reviewed = passhat("review", "quits", "--judge-model", "openai/reviewer", "--judge-args", args, env=env)
        assert reviewed.returncode == 0, reviewed.stderr
        as_json = passhat("report", "quits", "-o", "json", env=env)
    store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
    trials = store.trials("quits")
    def opening(trial_id: str) -> str:  # the user's first message (after the agent's greeting)
        messages = [m for row in store.steps(trial_id) for m in row.message_list()]
        return next(m.content or "" for m in messages if m.role == "user")

    quit_ = {t.trial_id for t in trials if STOP_TOKEN in opening(t.trial_id)}
    failed = {t.trial_id for t in trials if not t.success}
    blamed = quit_ & failed
    assert blamed and failed - quit_, "the draw gave both kinds of failure"  # both sides fail somewhere
    official = {}
    without = {}
    for t in trials:
        official.setdefault(t.task_id, []).append(bool(t.success))
        if t.trial_id not in blamed:
            without.setdefault(t.task_id, []).append(bool(t.success))
    expected_line = f"failed trials the review blames on the user simulator: {len(blamed)}"
    assert expected_line in reviewed.stdout, reviewed.stdout
    summary = json.loads(as_json.stdout)["reviews"]["quits"]["models"]["openai/noisy-0.7"]
    assert summary["blamed_on_user"] == len(blamed)
    assert summary["pass_hat_k"] == pytest.approx(_pass_hat(official))
    assert summary["pass_hat_k_without_user_blamed"] == pytest.approx(_pass_hat(without))
    assert summary["pass_hat_k"] != summary["pass_hat_k_without_user_blamed"]
    # The official figure is the report's own, untouched by the review.
    report = json.loads(as_json.stdout)
    assert report["runs"][0]["groups"][0]["pass_hat_k"]["1"]["value"] == pytest.approx(_pass_hat(official)["1"])
    assert summary["categories"] == {"agent/premature_end": len(failed - quit_), "user/premature_end": len(blamed)}
    # Each blamed trial's review quotes the user's stop at its step.
    one = next(iter(blamed))
    shown = json.loads(passhat("show", one, "-o", "json", env=env).stdout)
    [review] = shown["reviews"]
    assert review["blame"] == "user"
    assert review["errors"] == [{**review["errors"][0], "side": "user", "category": "premature_end",
                                 "quote": STOP_TOKEN, "step": 1}]
    store.close()


def test_a_wrong_quote_is_sent_back_once_garbage_is_not_reviewable_and_judges_keep_their_own(env, tmp_path):
    from passhat.infra import review_store
    from passhat.infra.store import Store

    tasks = _tasks_with_agent_writes(3)
    ran = passhat("run", "--domain", "airline", *_task_args(tasks), "--trials", "1", "--agent-model",
                  FAILING_AGENT, "--user-model", "scripted/oracle", "--run-id", "judged", "--yes", env=env)
    assert ran.returncode in (0, 1), ran.stderr
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        args = json.dumps(http_args(srv.url))
        outcomes = {}
        for judge in ("reviewer", "reviewer-misquote", "reviewer-garbled"):
            before = srv.received
            done = passhat("review", "judged", "--judge-model", f"openai/{judge}", "--judge-args", args,
                           "-o", "json", env=env)
            assert done.returncode == 0, done.stderr
            outcomes[judge] = (json.loads(done.stdout)["review"], srv.received - before)
    assert outcomes["reviewer"][0]["reviewed"] == 3 and outcomes["reviewer"][1] == 3 * (1 + AUTH_CALLS)
    # The misquote was rejected, sent back once, and the corrected answer kept.
    assert outcomes["reviewer-misquote"][0]["reviewed"] == 3 and outcomes["reviewer-misquote"][1] == 3 * (2 + AUTH_CALLS)
    assert outcomes["reviewer-garbled"][0]["not_reviewable"] == 3 and outcomes["reviewer-garbled"][1] \
        == 3 * (2 + AUTH_CALLS)
    store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
    for trial in store.trials("judged"):
        rows = {r.judge_model: r for r in review_store.trial_reviews(store, trial.trial_id)}
        assert set(rows) == {"openai/reviewer", "openai/reviewer-misquote", "openai/reviewer-garbled"}
        assert rows["openai/reviewer-misquote"].errors() == rows["openai/reviewer"].errors()
        if TAU2_REVIEWER:  # tau2's tags, for the one mistake of the faulty agent
            assert [e["side"] for e in rows["openai/reviewer"].errors()] == ["agent"]
        else:
            assert [e["category"] for e in rows["openai/reviewer"].errors()] == ["premature_end"]
        garbled = rows["openai/reviewer-garbled"]
        assert (garbled.status, garbled.errors(), garbled.calls) == ("not_reviewable", [], 2 + AUTH_CALLS)
        assert garbled.reason.startswith("malformed")
        if TAU2_REVIEWER:  # a reply tau2's classifier reads only by its fallback: not guessed
            assert json.loads(garbled.auth_classification_json) == {
                "status": "not_classifiable", "reason": "tau2's classifier cannot read the answer (no JSON object)"}
            assert json.loads(rows["openai/reviewer"].auth_classification_json)["status"] in (
                "succeeded", "failed", "not_needed")
    store.close()


def test_the_judge_is_shown_the_persona_a_trial_ran_under_and_only_that_trial(env):
    """A user playing its persona is not off its scenario: the judge of a persona trial
    sees the persona among the user's instructions (once), tau2's own user's trial none."""
    from passhat.personas import SECTION_OPEN, builtin_text

    [task] = _tasks_with_agent_writes(1)
    ran = passhat("run", "--domain", "airline", "--task", task, "--trials", "1", "--agent-model", FAILING_AGENT,
                  "--user-model", "scripted/oracle", "--user-persona", "confused:2", "--run-id", "persona-judged",
                  "--yes", env=env)
    assert ran.returncode in (0, 1), ran.stderr
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        done = passhat("review", "persona-judged", "--judge-model", "openai/reviewer", "--judge-args",
                       json.dumps(http_args(srv.url)), "-o", "json", env=env)
        assert done.returncode == 0, done.stderr
        shown = [json.dumps(r["messages"]) for r in srv.requests if "messages" in r]
    persona = json.dumps(builtin_text("confused", 2))[1:-1]  # as it appears inside the JSON text
    assert json.loads(done.stdout)["review"]["reviewed"] == 2
    # Two trials, each one review request (and, on 1.0.x, one authentication request):
    # the persona trial's review holds the persona once, nothing else holds any persona.
    assert len(shown) == 2 * (1 + AUTH_CALLS)
    assert sorted(s.count(persona) for s in shown) == [0] * (1 + 2 * AUTH_CALLS) + [1]
    assert sum(SECTION_OPEN in s for s in shown) == 1


def test_max_cost_stops_the_review_at_the_budget(env, tmp_path):
    from passhat.infra import review_store
    from passhat.infra.store import Store

    tasks = _tasks_with_agent_writes(4)
    ran = passhat("run", "--domain", "airline", *_task_args(tasks), "--trials", "1", "--agent-model",
                  FAILING_AGENT, "--user-model", "scripted/oracle", "--run-id", "priced", "--yes", env=env)
    assert ran.returncode in (0, 1), ran.stderr
    with FaultServer(responder=ScriptedResponder(["airline"])) as srv:
        args = json.dumps(http_args(srv.url, input_cost_per_token=1e-6, output_cost_per_token=2e-6))
        review = ("review", "priced", "--judge-model", "openai/reviewer", "--judge-args", args,
                  "--concurrency", "1", "--max-cost", "0.0000001")
        first = passhat(*review, env=env)
        again = passhat(*review, env=env)
    assert first.returncode == 1, first.stderr
    assert "stopped: the budget of 1e-07 USD is spent; 3 review(s) not started" in first.stdout, first.stdout
    assert again.returncode == 1 and "reviewed 0" in again.stdout and "4 review(s)" not in again.stdout
    store = Store(f"sqlite:///{tmp_path / 'home' / 'results.db'}")
    rows = review_store.reviews(store, "priced")
    assert len(rows) == 1 and rows[0].cost > 1e-7
    assert srv.received == 1 + AUTH_CALLS
    store.close()


@needs_agent_errors
async def test_a_run_in_progress_has_only_its_finished_trials_reviewed(temporal_server, tmp_path):
    from passhat.infra import review_store
    from passhat.infra.store import Store

    for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=temporal_server.address)):
        models = ScriptedResponder(["airline"])
        with FaultServer(responder=models) as agents, FaultServer(responder=ScriptedResponder(["airline"])) as judge:
            args = json.dumps(http_args(agents.url))
            started = ph.cli("run", "--domain", "airline", "--trials", "2", "--agent-model", "openai/noisy-0.0",
                             "--agent-args", args, "--user-model", "openai/oracle", "--user-args", args,
                             "--run-id", "going", "--detach", "--yes")
            assert started.returncode == 0, started.stderr
            store = Store(ph.db_url)
            worker = ph.start_worker()
            await worker.ready()
            await until(lambda: sum(t.finished_at is not None for t in store.trials("going")) >= 3,
                        "three trials finished", 180)
            # From now on the run's conversations wait at the gate: the run stays in progress
            # (whoever serves it) while it is reviewed.
            models.freeze()

            def held() -> bool:
                # Every trial begun and not finished waits on a model call: none is still
                # between its last answer and its score, which would change what finished.
                going = sum(t.finished_at is None for t in store.trials("going"))
                return going > 0 and models.held >= going

            await until(held, "every trial in flight held at the gate", 60)
            finished = {t.trial_id for t in store.trials("going") if t.status == "scored"}
            try:
                done = ph.cli("review", "going", "--judge-model", "openai/reviewer", "--judge-args",
                              json.dumps(http_args(judge.url)))
                assert done.returncode == 0, done.stderr
                assert "run going is not finished: only its finished trials are reviewed" in done.stderr
                assert "trial(s) of the run not finished were not reviewed" in done.stdout
                assert {t.trial_id for t in store.trials("going") if t.status == "scored"} == finished
                assert {r.trial_id for r in review_store.reviews(store, "going")} == finished
            finally:
                models.thaw()
            cancelled = ph.cli("cancel", "going")
            assert cancelled.returncode == 0, cancelled.stderr
        store.close()


def test_bad_input_gets_one_line_each(env):
    ran = passhat("run", "--domain", "airline", "--task", "0", "--task", "1", "--trials", "1", "--agent-model",
                  "scripted/oracle", "--user-model", "scripted/oracle", "--run-id", "clean", "--yes", env=env)
    assert ran.returncode == 0, ran.stderr
    no_key = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    cases = [
        (("review", "nothing-here", "--judge-model", "scripted/reviewer"), env, "no run 'nothing-here'"),
        (("review", "clean", "--judge-model", "openai/gpt-4.1"), no_key,
         "OPENAI_API_KEY (for the judge model openai/gpt-4.1) is not set"),
        (("review", "clean", "--judge-model", "scripted/reviewer", "--judge-args", "{nope"), env,
         "--judge-args is not valid JSON"),
        (("review", "clean", "--judge-model", "scripted/reviewer", "--judge-args", '{"api_key": "sk-123"}'), env,
         "--judge-args: api_key would store a secret"),
        (("review", "clean", "--judge-model", "scripted/reviewer"), env,
         "nothing to review: run clean has no failed scored trial"),
    ]
    for args, e, said in cases:
        out = passhat(*args, env=e)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], (args, out.stderr)
        assert "sk-123" not in out.stderr + out.stdout


async def test_cancel_stops_a_review_within_seconds(temporal_server, tmp_path):
    import subprocess
    import time

    from passhat.infra import review_store
    from passhat.infra.store import Store
    from passhat.testing.harness import PASSHAT

    tasks = _tasks_with_agent_writes(4)
    for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=temporal_server.address)):
        ran = ph.cli("run", "--domain", "airline", *_task_args(tasks), "--trials", "1", "--agent-model",
                     FAILING_AGENT, "--user-model", "scripted/oracle", "--run-id", "stopme", "--yes")
        assert ran.returncode in (0, 1), ran.stderr
        judge = ScriptedResponder(["airline"])
        judge.freeze()  # every judge call waits: the review is in flight when cancelled
        with FaultServer(responder=judge) as srv:
            proc = subprocess.Popen([str(PASSHAT), "review", "stopme", "--judge-model", "openai/reviewer",
                                     "--judge-args", json.dumps(http_args(srv.url))], env=ph.env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    stdin=subprocess.DEVNULL)
            try:
                await until(lambda: judge.held == 4, "four judge calls in flight", 120)
                started = time.monotonic()
                cancelled = ph.cli("cancel", "stopme~review")
                took = time.monotonic() - started
                assert cancelled.returncode == 0, cancelled.stderr
                assert "stopme~review: cancelled" in cancelled.stdout, cancelled.stdout
                assert took < 30, took
                out, err = proc.communicate(timeout=60)
                assert proc.returncode == 3, (out, err)
                assert "the same command continues it" in err
            finally:
                proc.kill()
                judge.thaw()
        store = Store(ph.db_url)
        assert review_store.reviews(store, "stopme") == []
        store.close()
