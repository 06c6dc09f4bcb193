"""Helpers for the durability tests and bench/durability.py: passhat as real processes
(the `passhat` CLI and `passhat worker`), a scripted model over HTTP, and the checks that
a run survived its crashes (each trial and step recorded once, the rewards an
uninterrupted run gets, and no completed model call executed twice).

Every wait here polls a condition against a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

from sqlalchemy import text
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.testing.scripted_http import expected_reward, noisy_succeeds, request_key
from passhat.contracts import EMPTY_REPLY_RETRIES, RunConfig, TrialSpec

PASSHAT = Path(sys.executable).parent / "passhat"
MODEL_CALLS = ("agent_turn", "user_turn")
# Airline tasks the scripted oracle solves (reward 1.0), whose gold actions are all the
# agent's, with 2 to 4 of them: conversations of 5 to 7 model calls.
TASKS = ["1", "2", "8", "17"]


def agent_that_succeeds(p: str) -> str:
    """A scripted agent whose trials succeed with probability `p` (as written, "0.6") and
    otherwise fail with reward 0, on either tau2: scripted/noisy-P on 26.3, whose empty
    reply is an agent_error; on 1.0.x that reply re-runs the trial and then leaves it not
    evaluable, so there the failure is scripted/faulty's planned mistake."""
    from passhat.domains.tau2_version import installed_rules

    if installed_rules().on_model_failure == "agent_error":
        return f"scripted/noisy-{p}"
    return f"scripted/faulty-{1 - float(p):g}"
POLL_S = 0.05


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """n distinct ports nothing listens on right now, all bound at once so none is handed
    out twice. Drawn below the kernel's ephemeral range: a port the OS picks (bind to 0)
    comes from that range, where every outgoing connection and the Temporal dev server's
    own internal listeners also take theirs, so it can be gone again before a server binds
    it (CI saw "bind: address already in use" that way)."""
    low, high = _PORTS_BELOW_EPHEMERAL
    socks: list[socket.socket] = []
    try:
        while len(socks) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randint(low, high)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_PORTS_BELOW_EPHEMERAL = (20000, max(_ephemeral_start() - 1, 20999))


class Timeout(AssertionError):
    pass


async def until(
    predicate: Callable[[], Any | Awaitable[Any]],
    what: str,
    timeout: float,
    poll: float = POLL_S,
) -> Any:
    """Poll `predicate` (sync or async) until it returns something truthy, and return
    that; fail with `what` after `timeout` seconds. Bounded in time and in count."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / poll) + 2):
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(poll)
    raise Timeout(f"timed out after {timeout:.0f}s waiting for {what}")


# ---------------------------------------------------------------------------------------
# passhat as processes


def passhat(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | str | None = None
) -> subprocess.CompletedProcess:
    """`passhat ARGS` as a user runs it: the installed command, its output captured. stdin
    is empty, so a command never waits on a question."""
    return subprocess.run(
        [str(PASSHAT), *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )


def killed_once_running(args: list[str], env: dict[str, str], store_path: Path, run_id: str,
                        timeout: float = 300) -> Store:
    """Start `passhat ARGS`, SIGKILL it as soon as run `run_id` has trials in the SQLite
    results store at store_path, and return that store (open). Fails if the command ends
    first or the run never starts within `timeout` seconds."""
    proc = subprocess.Popen([str(PASSHAT), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    store = None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if store is None and store_path.exists():
                store = Store(f"sqlite:///{store_path}")
            if store is not None and store.trials(run_id):
                break
            time.sleep(0.2)
        assert proc.poll() is None, f"the command ended before run {run_id} started"
        assert store is not None and store.trials(run_id), f"run {run_id} did not start in {timeout:.0f}s"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    return store


@dataclass
class Passhat:
    """The environment of passhat processes for one test: their own home, results
    database and Temporal server."""

    home: Path
    temporal_address: str
    logs: list[Path] = field(default_factory=list)
    # The results store: a SQLite file in home unless a URL is given (e.g. PostgreSQL).
    store_url: str | None = None

    @property
    def db_url(self) -> str:
        return self.store_url or f"sqlite:///{self.home / 'results.db'}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PASSHAT_HOME=str(self.home),
            PASSHAT_DB_URL=self.db_url,
            TEMPORAL_ADDRESS=self.temporal_address,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            PYTHONUNBUFFERED="1",
        )
        env.pop("PASSHAT_TEMPORAL_UI", None)
        return env

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return passhat(*args, env=self.env(), timeout=timeout)

    def start_worker(self, *extra: str) -> "WorkerProcess":
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / f"worker-{len(self.logs)}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(PASSHAT), "worker", *extra], env=self.env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        return WorkerProcess(proc, log)


@dataclass
class WorkerProcess:
    proc: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    async def ready(self, timeout: float = 60) -> None:
        """Until the worker says it polls (it has connected to Temporal)."""

        def check() -> bool:
            if not self.alive():
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.output()[-3000:]}")
            return "polling task queue" in self.output()

        await until(check, "the worker to start polling", timeout)

    def kill(self) -> None:
        """SIGKILL, and reap it: nothing of this worker runs after this returns."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """Teardown: SIGTERM, then SIGKILL."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def stopping_workers(env: Passhat) -> Iterator[Passhat]:
    """Yield `env`; at teardown stop every worker it started, whatever state the test
    left them in."""
    started: list[WorkerProcess] = []
    original = env.start_worker

    def start_worker(*extra: str) -> WorkerProcess:
        w = original(*extra)
        started.append(w)
        return w

    env.start_worker = start_worker  # type: ignore[method-assign]
    yield env
    for w in started:
        w.stop()


# ---------------------------------------------------------------------------------------
# What a run is made of


def activity_types(history: Any) -> list[str]:
    """The activities a workflow history ran, in order: each scheduled activity's type
    and each local activity's (recorded as a marker, whose data names the type)."""
    names = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
        elif (local := local_activity(event)) is not None:
            names.append(local["activity_type"])
    return names


def local_activity(event: Any) -> dict | None:
    """What the marker of a local activity records (activity_type, attempt, ...); None
    for any other event."""
    if not event.HasField("marker_recorded_event_attributes"):
        return None
    marker = event.marker_recorded_event_attributes
    if marker.marker_name != "core_local_activity":
        return None
    return json.loads(marker.details["data"].payloads[0].data)


def trial_specs(config: RunConfig) -> list[TrialSpec]:
    return [unit.trial(i) for unit in config.units() for i in range(unit.trials)]


def workflow_ids(config: RunConfig) -> list[tuple[str, str]]:
    """(kind, workflow id) of every workflow the run will start (the run starts its
    trials itself: task workflows are of runs recorded before the sliding window)."""
    ids = [("run", config.run_id)]
    for unit in config.units():
        ids += [("trial", unit.trial(i).trial_id) for i in range(unit.trials)]
    return ids


def model_calls_of(spec: TrialSpec) -> int:
    """Model calls a scripted trial makes, on tasks whose gold actions are all the
    agent's: the user's request, one agent call per gold action, the agent's closing
    information and the user's stop; a failing noisy agent's empty first answer is asked
    for again EMPTY_REPLY_RETRIES times (as tau2 does), then ends the trial."""
    task = get_domain(spec.domain).task(spec.task_id)
    assert all(a.requestor == "assistant" for a in task.gold_actions), spec.task_id
    if not noisy_succeeds(spec.agent_model, spec.seed, spec.domain, spec.task_id):
        return 2 + EMPTY_REPLY_RETRIES
    return len(task.gold_actions) + 3


def sends_of(responder: Any) -> Callable[[dict], int]:
    """How many times passhat sends one model call by design: once, or 1 +
    EMPTY_REPLY_RETRIES times when the (deterministic) answer is empty."""

    def sends(body: dict) -> int:
        reply = responder.answer(body)
        empty = not (reply.get("content") or "").strip() and not reply.get("tool_calls")
        return 1 + EMPTY_REPLY_RETRIES if empty else 1

    return sends


def expected_rewards(config: RunConfig) -> dict[str, float]:
    """Per trial id, the reward an uninterrupted run of this config gets (on tasks the
    oracle solves): computed from the scripted models' seeded draw, not from a run."""
    return {
        s.trial_id: expected_reward(s.agent_model, s.seed, s.domain, s.task_id)
        for s in trial_specs(config)
    }


def model_steps(store: Store, run_id: str) -> int:
    """Recorded steps that came from a model call (step 0 is the scripted opening)."""
    with store.engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM steps WHERE run_id = :r AND step > 0 AND role IN ('assistant', 'user')"),
            {"r": run_id},
        ).scalar_one()


def store_integrity(store: Store, config: RunConfig) -> list[str]:
    """Problems with how the run is recorded: every trial exactly once, scored; no
    duplicate step rows; each trial's steps numbered 0..n-1 and n_steps equal to n."""
    problems: list[str] = []
    expected = {s.trial_id for s in trial_specs(config)}
    with store.engine.connect() as conn:
        trial_ids = [r[0] for r in conn.execute(
            text("SELECT trial_id FROM trials WHERE run_id = :r"), {"r": config.run_id})]
        dup_steps = conn.execute(text(
            "SELECT trial_id, step, count(*) FROM steps WHERE run_id = :r "
            "GROUP BY trial_id, step HAVING count(*) > 1"), {"r": config.run_id}).all()
    counts = Counter(trial_ids)
    problems += [f"trial {t} recorded {n} times" for t, n in counts.items() if n > 1]
    if set(counts) != expected:
        problems.append(f"trials recorded {sorted(set(counts) ^ expected)} differ from the run's")
    problems += [f"step {t}#{s} recorded {n} times" for t, s, n in dup_steps]
    for row in store.trials(config.run_id):
        steps = [s.step for s in store.steps(row.trial_id)]
        if steps != list(range(len(steps))):
            problems.append(f"{row.trial_id}: step indices {steps} are not 0..n-1")
        if row.status != "scored":
            problems.append(f"{row.trial_id}: {row.status} ({row.error_class}: {row.error})")
        elif row.n_steps != len(steps):
            problems.append(f"{row.trial_id}: n_steps {row.n_steps} but {len(steps)} steps recorded")
    if len(store.task_results(config.run_id)) != len(config.units()):
        problems.append("not every task has its result row")
    return problems


def rewards(store: Store, run_id: str) -> dict[str, float | None]:
    return {t.trial_id: t.reward for t in store.trials(run_id)}


# ---------------------------------------------------------------------------------------
# Accounting of model calls


@dataclass
class CallLedger:
    """Which model calls were in flight at each crash, to check afterwards that only
    those ran twice (the durability contract)."""

    in_flight: list[set[str]] = field(default_factory=list)

    def crash(self, keys: set[str]) -> None:
        self.in_flight.append(set(keys))

    @property
    def in_flight_total(self) -> int:
        return sum(len(k) for k in self.in_flight)

    def check(
        self,
        requests: list[dict],
        served: int,
        recorded: int,
        sends: Callable[[dict], int] = lambda body: 1,
    ) -> dict[str, Any]:
        """Figures, and the problems found, for the requests a fault server received.
        `sends(body)` is how many times one call is sent by design (see sends_of)."""
        bodies = {request_key(b): b for b in requests if isinstance(b, dict)}
        keys = Counter(request_key(b) for b in requests if isinstance(b, dict))
        designed = {key: sends(body) for key, body in bodies.items()}
        exposed = Counter(k for crash in self.in_flight for k in crash)
        problems = []
        for key, n in keys.items():
            # A call in flight at c crashes may run at most c + 1 times; others once.
            if n > designed[key] * (exposed[key] + 1):
                problems.append(f"model call ran {n} times, in flight at {exposed[key]} crash(es): {key[:160]}")
        re_executed = served - sum(designed.values())
        # What the crashes may cost: each call in flight at one is sent again, as many
        # times as it is sent by design.
        allowed = sum(designed.get(k, 1) for crash in self.in_flight for k in crash)
        if re_executed > allowed:
            problems.append(
                f"{re_executed} model calls re-executed (served {served}, by design "
                f"{sum(designed.values())}) but the {self.in_flight_total} calls in flight "
                f"at the crashes allow {allowed}"
            )
        if len(keys) != recorded:
            problems.append(f"{len(keys)} distinct model calls but {recorded} model steps recorded")
        return {
            "distinct_calls": len(keys),
            "sends_by_design": sum(designed.values()),
            "re_executed": re_executed,
            "in_flight_at_crashes": self.in_flight_total,
            "problems": problems,
        }


# ---------------------------------------------------------------------------------------
# Holding a run still, so a crash lands while every conversation waits on its model


async def describe_raw(client: Client, wf_id: str):  # noqa: ANN202
    try:
        return (await client.get_workflow_handle(wf_id).describe()).raw_description
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def still_state(client: Client, config: RunConfig, held: int) -> tuple[bool, str]:
    """Whether the run stands still with every open conversation waiting on a held
    model call: no workflow task pending anywhere, no child being started, no activity
    but one started model call per open trial, and that many calls held at the server.
    Then nothing on the worker can progress, so a crash now loses only those calls."""
    from temporalio.api.enums.v1 import WorkflowExecutionStatus

    open_trials = 0
    running = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
    for kind, wf_id in workflow_ids(config):
        d = await describe_raw(client, wf_id)
        if d is None or d.workflow_execution_info.status != running:
            continue
        if d.HasField("pending_workflow_task"):
            return False, f"{wf_id} has a workflow task pending"
        if any(not c.run_id for c in d.pending_children):
            return False, f"{wf_id} is starting a child"
        acts = list(d.pending_activities)
        if kind != "trial":
            if acts:
                return False, f"{wf_id} runs {acts[0].activity_type.name}"
            continue
        open_trials += 1
        if len(acts) != 1 or acts[0].activity_type.name not in MODEL_CALLS or (
            acts[0].state != PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        ):
            names = [(a.activity_type.name, PendingActivityState.Name(a.state)) for a in acts]
            return False, f"{wf_id} pending {names}"
    if held != open_trials:
        return False, f"{held} calls held for {open_trials} open trials"
    return True, f"{open_trials} trials each waiting on a held model call"


async def hold_still(client: Client, config: RunConfig, responder, timeout: float = 120) -> int:  # noqa: ANN001
    """Freeze the scripted model and wait until the run stands still (still_state, twice
    in a row with the same calls held). Returns how many calls are held; 0 means the run
    has nothing left in flight. The caller thaws the responder."""
    responder.freeze()
    last: list[str] = []

    async def check() -> bool:
        ok, why = await still_state(client, config, responder.held)
        last[:] = [why]
        if not ok:
            return False
        before = responder.held_keys()
        ok2, _ = await still_state(client, config, responder.held)
        return ok2 and responder.held_keys() == before

    try:
        await until(check, "the run to stand still on held model calls", timeout, poll=0.1)
    except Timeout as err:
        raise Timeout(f"{err}; last state: {last[0] if last else '?'}") from None
    return responder.held


async def run_result(client: Client, run_id: str, timeout: float):  # noqa: ANN201
    """The run workflow's result (following continue-as-new), within `timeout`."""
    return await asyncio.wait_for(client.get_workflow_handle(run_id).result(), timeout)
