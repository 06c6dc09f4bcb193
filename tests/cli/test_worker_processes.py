"""More than one worker process: `passhat worker --processes N` and `passhat run
--workers N` start N workers on the run's task queue, Temporal hands the work to all of
them, and the extra processes end with the process that started them, however it ends.

Which process ran an activity is on record in Temporal: each ActivityTaskStarted event
carries the identity (pid@host) of the worker that took the task.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from passhat.contracts import TASK_QUEUE
from passhat.infra.temporal_client import connect
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import PASSHAT, Passhat, stopping_workers, until
from passhat.testing.scripted_http import ScriptedResponder, http_args

# Airline tasks with several tool steps each, and a model slow enough that the
# conversations overlap: every worker process gets some of the work.
RUN = ("--domain", "airline", "--task", "1", "--task", "2", "--task", "8", "--task", "17",
       "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
       "--agent-args", '{"latency": 0.3}', "--trials", "2", "--concurrency", "8")


def children_of(pid: int) -> set[int]:
    """The live child processes of process `pid` (its forked workers)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (not gone, not zombies)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


async def activity_workers(address: str, run_id: str) -> set[str]:
    """Identities of the workers that ran the run's trials' activities."""
    client = await connect(address)
    identities = set()
    async for wf in client.list_workflows(f"PasshatRun = '{run_id}'"):
        history = await client.get_workflow_handle(wf.id).fetch_history()
        identities |= {
            e.activity_task_started_event_attributes.identity
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        }
    return identities


async def activity_pollers(address: str) -> set[str]:
    """Identities of the worker processes polling the passhat queue for activities."""
    client = await connect(address)
    resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=TASK_QUEUE),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    ))
    return {p.identity for p in resp.pollers}


def pids(identities: set[str]) -> set[int]:
    return {int(i.split("@")[0]) for i in identities}


def async_equal(get, expected):  # noqa: ANN001, ANN201
    async def check() -> bool:
        return await get() == expected
    return check


async def pids_polling(address: str) -> set[int]:
    return pids(await activity_pollers(address))


async def all_polling(address: str, worker, processes: int) -> set[int]:  # noqa: ANN001 - a WorkerProcess
    """Once `passhat worker --processes N` and its N-1 children all poll: the children."""
    # The parent imports passhat and its plugins before it forks, and several processes
    # import tau2 at once: on a busy CI machine that took more than a minute. Wait for the
    # children, or for the worker to have ended, which fails at once with its output.
    await until(lambda: len(children_of(worker.pid)) == processes - 1 or worker.proc.poll() is not None,
                "the worker children", 240)
    assert worker.proc.poll() is None, worker.output()
    children = children_of(worker.pid)
    await until(async_equal(lambda: pids_polling(address), {worker.pid, *children}),
                "the parent and its children polling", 240)
    return children


async def test_worker_processes_share_the_work_and_end_with_their_parent(fresh_temporal_server, tmp_path):
    address = fresh_temporal_server.address
    for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=address)):
        worker = ph.start_worker("--processes", "3")
        children = await all_polling(address, worker, 3)

        started = ph.cli("run", *RUN, "--run-id", "spread", "--detach")
        assert started.returncode == 0, started.stderr
        client = await connect(address)
        await client.get_workflow_handle("spread").result()
        identities = await activity_workers(address, "spread")
        assert pids(identities) <= {worker.pid, *children}
        assert len(identities) >= 2, identities  # the work went to more than one process

        worker.kill()  # SIGKILL: the parent gets no chance to stop its children
        try:
            await until(lambda: not alive(children), "the children to exit with their parent", 60)
        finally:
            for pid in alive(children):  # never leave one behind, even when red
                os.kill(pid, signal.SIGKILL)


async def test_run_with_workers_runs_them_and_leaves_none_behind(fresh_temporal_server, tmp_path):
    """The model holds every answer until all three processes of `passhat run
    --workers 3` poll the run's queue, so they are seen working on the run, however
    slowly the extra processes start."""
    address = fresh_temporal_server.address
    responder = ScriptedResponder(["airline"])
    responder.freeze()
    with FaultServer(responder=responder) as srv:
        model = json.dumps(http_args(srv.url))
        ph = Passhat(home=tmp_path / "home", temporal_address=address)
        proc = subprocess.Popen(
            [str(PASSHAT), "run", "--domain", "airline", "--task", "1", "--task", "2",
             "--agent-model", "openai/oracle", "--user-model", "openai/oracle",
             "--agent-args", model, "--user-args", model, "--trials", "2",
             "--run-id", "spread2", "--workers", "3", "--output", "json"],
            env=ph.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            await until(lambda: len(children_of(proc.pid)) == 2 or proc.poll() is not None,
                        "two worker children of passhat run", 120)
            assert proc.poll() is None, proc.communicate()[1]
            children = children_of(proc.pid)
            await until(async_equal(lambda: pids_polling(address), {proc.pid, *children}),
                        "passhat run and both children polling", 240)
            responder.thaw()
            out, err = proc.communicate(timeout=300)
        finally:
            responder.thaw()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert json.loads(out)["results"][0]["evaluable"] == 4
    assert not alive(children)  # the extra workers stopped when the run finished


async def test_ctrl_c_stops_a_worker_quietly_and_leaves_no_empty_logs(fresh_temporal_server, tmp_path):
    """Ctrl-C is the documented way to stop `passhat worker`: no "error:" line, the
    shell's exit code for SIGINT, and the children's logs, which nothing was written
    to, are not left behind."""
    address = fresh_temporal_server.address
    for ph in stopping_workers(Passhat(home=tmp_path / "home", temporal_address=address)):
        worker = ph.start_worker("--processes", "2")
        children = await all_polling(address, worker, 2)
        logs = ph.home / "logs"
        [child_log] = logs.glob("worker-*.log")  # the child writes there while it runs
        os.kill(worker.pid, signal.SIGINT)
        worker.proc.wait(60)
        assert worker.proc.returncode == 130, worker.output()
        assert "error" not in worker.output() and "passhat worker stopped" in worker.output(), worker.output()
        assert not alive(children)
        assert not child_log.exists(), child_log.read_text()
