"""`passhat cancel` from another shell, as a user runs it: it stops the spending.

The model is a real loopback HTTP server that counts the calls it receives. Its
conversations never end by themselves (the agent always looks a user up, the user always
says "please go on"), so only --max-steps or a cancel ends them, and every call answers in
less than a heartbeat interval: the case where the cancel request never reaches the
activity and only the workflow can stop the conversation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

from passhat.infra.store import Store
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import PASSHAT, passhat, until
from passhat.testing.scripted_http import SCENARIO_TAG, TEST_KEY_ENV, http_args

TRIALS = 2
MAX_STEPS = 40  # about 20 model calls per conversation


class EndlessModel:
    """Agent and user of a conversation that only --max-steps ends, each answer after
    `latency` seconds; counts the calls being answered."""

    def __init__(self, latency: float):
        self.latency = latency
        self.in_flight = 0

    async def __call__(self, body: dict) -> dict:
        self.in_flight += 1
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
        if SCENARIO_TAG in (body["messages"][0].get("content") or ""):
            return {"content": "please go on"}
        return {"tool_calls": [{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}]}


def _run_args(srv: FaultServer, run_id: str) -> list[str]:
    args = json.dumps(http_args(srv.url))
    return ["run", "--domain", "airline", "--task", "0", "--trials", str(TRIALS),
            "--max-steps", str(MAX_STEPS), "--agent-model", "openai/endless", "--user-model",
            "openai/endless", "--agent-args", args, "--user-args", args, "--run-id", run_id]


def _store(env: dict) -> Store:
    return Store(f"sqlite:///{env['PASSHAT_HOME']}/results.db")


async def test_cancel_stops_running_conversations_and_resume_continues_them(env):
    env = {**env, TEST_KEY_ENV: "loopback-test-key"}
    run_id = f"cancel-{uuid.uuid4().hex[:8]}"
    model = EndlessModel(latency=1.5)
    with FaultServer(responder=model) as srv:
        run = subprocess.Popen([str(PASSHAT), *_run_args(srv, run_id)], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cancel = None
        try:
            # Both conversations are well under way, far from their --max-steps.
            await until(lambda: srv.received >= 6, "six model calls", timeout=300)
            cancel = subprocess.Popen([str(PASSHAT), "cancel", run_id], env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Its first line comes just before it sends the request.
            first = await asyncio.to_thread(cancel.stdout.readline)
            at_request, in_flight = srv.received, model.in_flight
            assert first.startswith(f"run {run_id}: stopping its conversations"), first
            rest, err = await asyncio.to_thread(cancel.communicate, timeout=300)
            after = srv.received
            assert cancel.returncode == 0, (rest, err)
            assert rest.strip() == f"run {run_id}: cancelled", rest
            # Once cancel has returned no call starts; each conversation may have had one
            # call in flight, or being sent, as the request arrived.
            assert after - at_request <= TRIALS, (at_request, in_flight, after)
            # The run command that followed the run says it ended: not a usage error.
            _, run_err = await asyncio.to_thread(run.communicate, timeout=120)
            assert run.returncode == 3, run_err
            assert f"passhat resume {run_id}" in run_err and "Traceback" not in run_err
        finally:
            for proc in (run, cancel):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(30)
        assert srv.received == after  # nothing ran on after the run command exited

        store = _store(env)
        assert store.get_run(run_id).status == "cancelled"
        trials = store.trials(run_id)
        assert [t.status for t in trials] == ["cancelled"] * TRIALS
        kept = {t.trial_id: [s.step for s in store.steps(t.trial_id)] for t in trials}
        assert all(0 < len(steps) < MAX_STEPS for steps in kept.values()), kept

        model.latency = 0.0
        resumed = passhat("resume", run_id, env=env, timeout=600)
        assert resumed.returncode == 0, resumed.stderr
        for trial in store.trials(run_id):
            assert (trial.status, trial.termination_reason) == ("scored", "max_steps")
            steps = store.steps(trial.trial_id)
            assert [s.step for s in steps] == list(range(len(steps)))
            assert len(steps) > len(kept[trial.trial_id])  # continued, from where it stopped
        # Every model call made was recorded once, bar those in flight at the cancel.
        model_steps = sum(1 for t in store.trials(run_id) for s in store.steps(t.trial_id)
                          if s.role in ("assistant", "user") and s.step > 0)
        assert model_steps <= srv.received <= model_steps + TRIALS


async def test_cancel_without_a_worker_says_so_and_marks_trials_cancelled(fresh_temporal_server, tmp_path):
    """The worker that ran the conversations was killed (it is still listed among the
    queue's pollers): cancel says at once what it does, terminates the workflows once no
    worker takes the request up, and the trials the worker left running are recorded as
    cancelled, their steps kept."""
    from temporalio.client import Client, WorkflowExecutionStatus

    from passhat.testing.harness import Passhat, stopping_workers

    run_id = f"orphan-{uuid.uuid4().hex[:8]}"
    model = EndlessModel(latency=0.5)
    with FaultServer(responder=model) as srv:
        for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=fresh_temporal_server.address)):
            env = {**ph.env(), TEST_KEY_ENV: "loopback-test-key"}
            worker = ph.start_worker()
            await worker.ready()
            started = passhat(*_run_args(srv, run_id), "--detach", env=env, timeout=120)
            assert started.returncode == 0, started.stderr
            await until(lambda: srv.received >= 4, "four model calls", timeout=300)
            worker.kill()
            cancel = subprocess.Popen([str(PASSHAT), "cancel", run_id], env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                first = await asyncio.to_thread(cancel.stdout.readline)
                assert first.startswith(f"run {run_id}: "), first
                assert cancel.poll() is None  # said before it waits
                rest, err = await asyncio.to_thread(cancel.communicate, timeout=300)
            finally:
                if cancel.poll() is None:
                    cancel.kill()
                    cancel.wait(30)
            assert cancel.returncode == 0, err
            assert rest.startswith(f"run {run_id}: terminated (no worker"), rest

            store = Store(ph.db_url)
            assert store.get_run(run_id).status == "cancelled"
            trials = store.trials(run_id)
            assert [t.status for t in trials] == ["cancelled"] * TRIALS
            assert all(store.steps(t.trial_id) for t in trials)
            client = await Client.connect(fresh_temporal_server.address)

            async def all_closed() -> bool:
                for wf in [run_id, *(t.trial_id for t in trials)]:
                    if (await client.get_workflow_handle(wf).describe()).status == WorkflowExecutionStatus.RUNNING:
                        return False
                return True

            await until(all_closed, "the run's workflows terminated", timeout=60)
