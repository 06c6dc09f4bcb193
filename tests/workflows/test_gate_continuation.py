"""A gate's round continues the trials it left not evaluable (workflows/rounds.py): the
same trial from its recorded steps, only the failed call made again, never a new draw in
its place. Real workflows (RoundsWorkflow, its rounds' runs, their trials), the agent
served over real HTTP by the loopback fault server playing scripted models."""

from __future__ import annotations

from dataclasses import asdict

from passhat.results import gate
from passhat.results.gate_rounds import CONTINUATIONS
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder
from passhat.workflows.client import start_rounds
from passhat.workflows.round_choice import Measure
from passhat.workflows.rounds import RoundsRequest

from tests.runs import config, worker_for


class LoseOneCallMidway:
    """Fault plan: the first agent call past the conversation's opening gets a 401, which
    is not retried: its trial ends not evaluable with the steps it recorded so far."""

    def __init__(self) -> None:
        self.lost: list[dict] = []

    def __call__(self, n: int, body: dict):  # noqa: ANN204
        if not self.lost and body.get("tools") and len(body.get("messages", [])) > 4:
            self.lost.append(body)
            return "401"
        return None


def http_args(srv) -> str:  # noqa: ANN001
    return f'{{"api_base": "{srv.url}/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}}'


async def run_gate(client, store, cfg, criterion, max_trials: int) -> dict:  # noqa: ANN001
    req = RoundsRequest(config=cfg, fixed_trials=max_trials, measure=Measure(
        kind="gate", max_trials=max_trials, criteria=[asdict(criterion)]))
    async with worker_for(client, store) as queue:
        handle = await start_rounds(client, store, req, task_queue=queue)
        return await handle.result()


async def test_a_trial_left_not_evaluable_is_continued_from_its_recorded_steps(client, sqlite_store):
    store = sqlite_store
    faults = LoseOneCallMidway()
    with FaultServer(responder=ScriptedResponder(["airline"]).answer, faults=faults) as srv:
        cfg = config(task_ids=["0", "1"], trials=1, concurrency=4, agent_models=["openai/oracle"],
                     agent_args=http_args(srv))
        record = await run_gate(client, store, cfg, gate.absolute(1, 0.5), max_trials=4)
        received = srv.received
    assert faults.lost, "the fault plan never fired"
    trials = [t for r in record["rounds"] for t in store.trials(r)]
    [continued] = [t for t in trials if t.attempts > 1]
    # Continued once, and it counts: scored, in the verdict, nothing left not evaluable.
    assert (continued.status, continued.reward, continued.attempts) == ("scored", 1.0, 2)
    assert record["verdict"] == "PASS" and record["criteria"][0]["not_evaluable"] == 0.0
    assert record["conversations"] == len(trials) and all(t.attempts == 1 for t in trials if t is not continued)
    steps = store.steps(continued.trial_id)
    assert [s.step for s in steps] == list(range(len(steps)))
    # Every agent call the server answered is a recorded step, and the one it refused was
    # made once more: the continued trial's earlier steps were not run again.
    agent_steps = sum(s.role == "assistant" and s.step > 0 for t in trials for s in store.steps(t.trial_id))
    assert received == agent_steps + 1


async def test_failures_lost_again_on_every_continuation_do_not_pass(client, sqlite_store):
    """Informative missingness: scripted/noisy-0.9 whose would-be failures end not
    evaluable, and whose continuations are lost as well (the same call fails every time).
    Its pass^1 is 0.9, below the bar: read against each test, it does not PASS."""
    cfg = config(task_ids=["0", "1", "2", "3"], trials=1, concurrency=8, agent_models=["scripted/noisy-0.9"],
                 agent_args='{"failures": "not_evaluable"}')
    record = await run_gate(client, sqlite_store, cfg, gate.absolute(1, 0.95), max_trials=24)
    assert record["verdict"] != "PASS"
    trials = [t for r in record["rounds"] for t in sqlite_store.trials(r)]
    lost = [t for t in trials if t.status == "not_evaluable"]
    assert lost and record["criteria"][0]["estimate"] == 1.0 and record["criteria"][0]["estimate_if_failed"] < 0.95
    # Each was continued CONTINUATIONS times, from its opening: one step recorded, never more.
    assert {t.attempts for t in lost} == {1 + CONTINUATIONS}
    assert all(len(sqlite_store.steps(t.trial_id)) == 2 for t in lost)


def test_what_a_round_continues_and_what_stands(sqlite_store):
    """round_continuation: a not-evaluable trial is continued until it has been
    CONTINUATIONS times; a scored one, and one its tau2 version gave up on (whose resume
    would run it afresh: a new draw), stand."""
    from passhat.activities.results import ContinuationRequest, ResultActivities
    from passhat.testing.harness import trial_specs

    store = sqlite_store
    cfg = config(task_ids=["0", "1", "2"], trials=2)
    store.create_run(cfg, cfg.total_trials())
    scored, lost, given_up, lost_again, *_ = specs = trial_specs(cfg)
    for spec in specs[:4]:
        store.begin_trial(spec)
    store.finish_trial(scored.trial_id, reward=1.0, success=True, reward_info={}, termination_reason="user_stop",
                       n_steps=3)
    for spec in (lost, given_up, lost_again):
        reason = "infrastructure_error" if spec is given_up else None
        store.mark_not_evaluable(spec.trial_id, "503", "ServiceUnavailableError", reason)
    for _ in range(CONTINUATIONS):  # lost_again has been continued as often as it may be
        store.begin_trial(lost_again)
        store.mark_not_evaluable(lost_again.trial_id, "503", "ServiceUnavailableError")
    answer = ResultActivities(store).round_continuation(ContinuationRequest(run_id=cfg.run_id,
                                                                            continuations=CONTINUATIONS))
    assert answer.continued == 1
    assert {o.trial_id: o.evaluable for o in answer.ended} == {
        scored.trial_id: True, given_up.trial_id: False, lost_again.trial_id: False}
