#!/usr/bin/env python
"""Chaos bench: what a sweep's figures are worth when everything around it misbehaves.

Runs the same sweep twice under one run id (so every trial has the same seed in both),
each on a Temporal dev server and a PostgreSQL results store of its own, executed by
`passhat worker` processes, with scripted models behind a loopback OpenAI-compatible
server (passhat.testing.scripted_http), so every model call is an HTTP request:

  1. clean: no faults, nothing disturbed;
  2. chaos: a share of the model calls (--fault-rate) fail with transient faults (429
     with Retry-After, 500, 503 with Retry-After, a dropped connection, a delayed answer)
     and, one after another at evenly spaced numbers of model calls served:
     the worker SIGKILLed (--kills times, a new worker started each time), the Temporal
     server SIGKILLed and started again on its database (--restarts), the results store
     stopped for --outage-s seconds, and the CPUs saturated by busy processes for --cpu-s
     seconds beside the worker.

Printed, with what is expected: trials recorded out of those expected, duplicate steps,
reward mismatches against the clean run, infrastructure failures scored as agent
failures (and trials not scored at all), and model calls re-executed against the calls
in flight at the kills; then what each disruption cost. Exits 0 only if every
expectation holds.

    python bench/chaos.py                          # 30 airline + 30 retail tasks, k=6: 360 trials
    python bench/chaos.py --tasks-per-domain 200   # every task, k=6: 984 trials
    python bench/chaos.py --quick                  # 5 tasks of each, k=2, short outage and load

The default is what runs in about 40 minutes on a 2-core machine, where a sweep gets
through about 180 model calls a minute: every task (984 trials, 6613 model calls) takes
about an hour and a half there.

Every task of airline and retail has only agent-side gold actions, which the scripted
oracle solves; noisy-0.7 fails by a seeded draw, so rewards vary and are reproducible.
Loopback only; every wait is bounded by --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


from passhat.workflows.client import start_run
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions
from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.infra.temporal_server import EmbeddedServer
from passhat.testing.fault_server import Fault, FaultServer, RandomFaults
from passhat.testing.cpu_load import CpuHogs, machine_ticks
from passhat.testing.harness import (
    Passhat,
    WorkerProcess,
    describe_raw,
    expected_rewards,
    free_ports,
    model_calls_of,
    model_steps,
    run_result,
    sends_of,
    store_integrity,
    trial_specs,
    until,
)
from passhat.testing.postgres import ThrowawayPostgres
from passhat.testing.scripted_http import ScriptedResponder, http_args, request_key
from temporalio.api.enums.v1 import WorkflowExecutionStatus

from passhat.contracts import RunConfig

TRANSIENT = [Fault("429", retry_after=1), "500", Fault("503", retry_after=1), "drop", Fault("delay", seconds=1)]
WORKER_START_S = 300
POLL_S = 0.5  # waits here are for minutes-long phases; polling Temporal faster only loads it
PROGRESS_EVERY_S = 60


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domains", nargs="+", default=["airline", "retail"])
    ap.add_argument("--tasks-per-domain", type=int, default=30, help="the first N tasks of each")
    ap.add_argument("--k", type=int, default=6, help="trials per task")
    ap.add_argument("--agent-model", default="noisy-0.7", help="scripted agent: oracle or noisy-P")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    ap.add_argument("--concurrency", type=int, default=16, help="conversations in flight")
    ap.add_argument("--fault-rate", type=float, default=0.2, help="share of model calls given a transient fault")
    ap.add_argument("--kills", type=int, default=3, help="worker SIGKILLs")
    ap.add_argument("--restarts", type=int, default=1, help="Temporal server SIGKILLs and restarts")
    ap.add_argument("--outage-s", type=float, default=30, help="results-store outage, seconds (0: none)")
    ap.add_argument("--cpu-s", type=float, default=30, help="CPU saturation, seconds (0: none)")
    ap.add_argument("--hogs-per-cpu", type=int, default=2, help="busy processes per CPU while saturated")
    ap.add_argument("--seed", type=int, default=1, help="seed of the fault draws")
    ap.add_argument("--timeout", type=float, default=3600, help="bound on each sweep (s)")
    ap.add_argument("--run-id", default="bench-chaos")
    ap.add_argument("--quick", action="store_true", help="5 tasks per domain, k=2, 10 s outage and load")
    args = ap.parse_args(argv)
    if args.quick:
        args.tasks_per_domain, args.k, args.outage_s, args.cpu_s = 5, 2, 10, 10
    return args


def run_config(args: argparse.Namespace, model_url: str) -> RunConfig:
    model_args = json.dumps(http_args(model_url))
    task_ids = []
    for name in args.domains:
        domain = get_domain(name)
        # model_calls_of (the schedule) needs every gold action to be the agent's.
        ids = [t for t in domain.task_ids()
               if all(a.requestor == "assistant" for a in domain.task(t).gold_actions)]
        task_ids += ids[: args.tasks_per_domain]
    return build_config(RunOptions(
        run_id=args.run_id, domains=args.domains, task_ids=task_ids,
        agent_models=[f"openai/{args.agent_model}"], user_model="openai/oracle",
        trials=args.k, concurrency=args.concurrency, agent_args=model_args, user_args=model_args,
    ))


def progress(line: str) -> None:
    """Where a long sweep is, on stderr (the report goes to stdout at the end)."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


class AnswerLog:
    """The scripted responder, noting when it answered which model call. FaultServer
    counts answers only in total; per call and in time they say which disruption made
    a call run again."""

    def __init__(self, responder: ScriptedResponder):
        self.responder = responder
        self.answers: list[tuple[float, str]] = []  # appended on the server's thread

    async def __call__(self, body: dict) -> dict:
        reply = await self.responder(body)
        self.answers.append((time.monotonic(), request_key(body)))
        return reply


def transient_faults(rate: float, seed: int, responder: ScriptedResponder):
    """Seeded faults on `rate` of the requests, sparing those a failing noisy agent
    answers empty: passhat asks for those again within one activity (tau2's resends), so
    a fault on a resend sends the earlier copies again. That is by design, and counting
    it would blur the re-executions that crashes cost."""
    faults = RandomFaults(rate=rate, kinds=TRANSIENT, seed=seed)

    def plan(n: int, body: dict):
        reply = responder.answer(body)
        if not (reply.get("content") or "").strip() and not reply.get("tool_calls"):
            return None
        return faults(n, body)

    return plan


class Sweep:
    """One sweep: its own Temporal server, PostgreSQL store, model server and workers."""

    def __init__(self, args: argparse.Namespace, label: str, home: Path, chaos: bool):
        self.args, self.label, self.home, self.chaos = args, label, home, chaos
        self.responder = ScriptedResponder(args.domains, latency=args.latency)
        self.log = AnswerLog(self.responder)
        faults = transient_faults(args.fault_rate, args.seed, self.responder) if chaos else None
        self.srv = FaultServer(responder=self.log, faults=faults)
        self.events: list[dict] = []

    async def run(self) -> dict:
        with ThrowawayPostgres() as pg, self.srv:
            self.pg = pg
            port, ui_port = free_ports(2)
            self.server = EmbeddedServer(self.home / "temporal", port=port, ui_port=ui_port)
            await self.server.start()
            self.ph = Passhat(home=self.home, temporal_address=self.server.address, store_url=pg.url)
            self.store = Store(pg.url)
            self.worker: WorkerProcess | None = None
            try:
                return await self._run()
            finally:
                if self.worker is not None:
                    self.worker.stop()
                self.store.close()
                self.server.stop()

    def received_calls(self) -> set[str]:
        return {request_key(b) for b in self.srv.requests if isinstance(b, dict)}

    async def _run(self) -> dict:
        args = self.args
        cfg = run_config(args, self.srv.url)
        self.cfg = cfg
        self.client = await connect(self.server.address)
        expected_calls = sum(model_calls_of(s) for s in trial_specs(cfg))
        plan = self.plan()
        self.start = time.monotonic()
        self.deadline = self.start + args.timeout
        await self.start_worker()
        await start_run(self.client, self.store, cfg)
        progress(f"{self.label}: {len(trial_specs(cfg))} trials started, {plan or 'undisturbed'}")
        ticker = asyncio.ensure_future(self.tick(expected_calls))
        try:
            await self.disrupt(plan, expected_calls)
        finally:
            ticker.cancel()
        wall = time.monotonic() - self.start
        progress(f"{self.label}: run finished after {wall:.0f}s")
        summary = await run_result(self.client, cfg.run_id, 60)
        return self.figures(wall, summary, expected_calls)

    async def tick(self, expected_calls: int) -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            progress(f"{self.label}: {self.srv.served} of {expected_calls} model calls served")

    async def disrupt(self, plan: list[str], expected_calls: int) -> None:
        """Each disruption once the model server has answered its share of the calls,
        one after another; then until the run has finished."""
        for i, event in enumerate(plan, 1):
            target = expected_calls * i // (len(plan) + 1)
            await until(lambda target=target: self.srv.served >= target or self.closed(),
                        f"{target} model calls served", self.remaining(), poll=POLL_S)
            if await self.closed():
                break
            now = time.monotonic()
            record = {"event": event, "at_s": round(now - self.start, 1), "served": self.srv.served, "t": now}
            record.update(await getattr(self, event)())
            self.events.append(record)
            progress(f"{self.label}: {event} at {record['at_s']}s, {record['served']} calls served: "
                     f"{ {k: v for k, v in record.items() if k not in ('event', 'at_s', 'served', 't', 'exposed')} }")
        await until(self.closed, "the run to finish", self.remaining(), poll=POLL_S)

    async def start_worker(self) -> None:
        self.worker = self.ph.start_worker()
        # A worker imports tau2 before it polls: on a loaded 2-core machine, a minute or more.
        await self.worker.ready(timeout=WORKER_START_S)

    def plan(self) -> list[str]:
        """The disruptions in order: kills alternating with the others, which spreads the
        kills over the run."""
        if not self.chaos:
            return []
        a = self.args
        others = ["cpu"] * (a.cpu_s > 0) + ["restart"] * a.restarts + ["outage"] * (a.outage_s > 0)
        kills = ["kill"] * a.kills
        return [e for i in range(max(len(kills), len(others))) for e in (kills[i:i + 1] + others[i:i + 1])]

    def remaining(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    async def closed(self) -> bool:
        """Whether the run's workflow has closed (following continue-as-new)."""
        desc = await describe_raw(self.client, self.cfg.run_id)
        return desc is not None and (
            desc.workflow_execution_info.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
        )

    # ---- the disruptions. Each returns what it cost: "in_flight", the model calls it
    # caught on their way (received by the model server, not recorded), and "exposed",
    # the calls received until then: only those can run again because of it.

    async def kill(self) -> dict:
        self.worker.kill()
        # Requests the worker sent just before it died reach the server's thread a moment
        # later: until a second passes with nothing new (no worker runs now).
        seen = [-1]

        def quiet() -> bool:
            unchanged, seen[0] = self.srv.received == seen[0], self.srv.received
            return unchanged

        await until(quiet, "the dead worker's last requests to arrive", 60, poll=1.0)
        exposed = self.received_calls()
        # Nothing of the dead worker records anything any more: exact.
        in_flight = len(exposed) - model_steps(self.store, self.cfg.run_id)
        await self.start_worker()
        return {"in_flight": in_flight, "exposed": exposed}

    async def restart(self) -> dict:
        recorded = model_steps(self.store, self.cfg.run_id)
        os.kill(self.server.status().pid, signal.SIGKILL)
        down = time.monotonic()
        await until(lambda: self.server.status().pid is None, "the Temporal server to die", 30)
        # While the server is down the worker finishes (and records) what it runs, but
        # starts nothing new: what it received until the restart is what was exposed.
        exposed = self.received_calls()
        await self.server.start()  # same home, database file and ports
        detail = {"in_flight": len(exposed) - recorded, "exposed": exposed,
                  "down_s": round(time.monotonic() - down, 1)}
        if not self.worker.alive():  # it is expected to reconnect by itself
            detail["worker_died"] = True
            await self.start_worker()
        return detail

    async def outage(self) -> dict:
        recorded = model_steps(self.store, self.cfg.run_id)
        self.store.close()  # our own connections must not outlive the server
        self.pg.stop()
        down = time.monotonic()
        await asyncio.sleep(self.args.outage_s)
        # A model call reads the store before it calls the model, so none starts during
        # the outage: what was received until now is what the outage exposed.
        exposed = self.received_calls()
        worker_alive = self.worker.alive()
        self.pg.start()
        self.store = Store(self.pg.url)
        detail = {"in_flight": len(exposed) - recorded, "exposed": exposed,
                  "down_s": round(time.monotonic() - down, 1)}
        if not worker_alive:
            detail["worker_died"] = True
            await self.start_worker()
        return detail

    async def cpu(self) -> dict:
        n = self.args.hogs_per_cpu * len(os.sched_getaffinity(0))
        served, (had0, idle0), t0 = self.srv.served, machine_ticks(), time.monotonic()
        hogs = CpuHogs.start(n)
        try:
            await until(lambda: time.monotonic() - t0 >= self.args.cpu_s or self.closed(),
                        "the end of the CPU saturation", self.args.cpu_s + 60, poll=POLL_S)
        finally:
            hogs.stop()
        had, idle = (b - a for a, b in zip((had0, idle0), machine_ticks()))
        # A busy machine loses nothing: no call may run again because of it.
        return {"in_flight": 0, "exposed": set(), "busy_processes": n, "lasted_s": round(time.monotonic() - t0, 1),
                "idle_share": round(idle / max(had, 1), 2), "served_meanwhile": self.srv.served - served}

    # ---- figures

    def figures(self, wall: float, summary, expected_calls: int) -> dict:
        cfg = self.cfg
        requests = [b for b in self.srv.requests if isinstance(b, dict)]
        bodies = {request_key(b): b for b in requests}
        sends = sends_of(self.responder)
        designed = {key: sends(body) for key, body in bodies.items()}
        answered: dict[str, list[float]] = {}
        for t, key in self.log.answers:
            answered.setdefault(key, []).append(t)
        # A call's execution is its designed sends (a failing noisy agent's empty answer
        # is asked for 1 + EMPTY_REPLY_RETRIES times in one activity), so a call answered
        # n times ran ceil(n / designed) times: partly sent copies lost in a crash count
        # with the execution they belonged to. Each execution beyond the first is put
        # down to the last disruption before its first answer that exposed the call
        # (a worker started after a kill may take a minute to run it again, when the
        # next disruption has begun); it is unexplained if there is none, and a repeat if
        # that disruption already made the call run again: a crash costs a call one more
        # run at most.
        again: Counter = Counter()
        unexplained = repeats = 0
        for key, times in answered.items():
            d = designed[key]
            after: Counter = Counter()
            for j in range(1, -(-len(times) // d)):
                t = times[min(j * d, len(times) - 1)]
                i = next((i for i in reversed(range(len(self.events)))
                          if self.events[i]["t"] <= t and key in self.events[i]["exposed"]), -1)
                again[i] += 1
                unexplained += i < 0
                repeats += i >= 0 and after[i] > 0
                after[i] += 1
        for i, e in enumerate(self.events):
            e["re_executed"] = again[i]
        integrity = store_integrity(self.store, cfg)
        return {
            "label": self.label,
            "wall_s": wall,
            "config": cfg,
            "expected_calls": expected_calls,
            "trials": {t.trial_id: t for t in self.store.trials(cfg.run_id)},
            "duplicates": [p for p in integrity if "recorded" in p and "times" in p],
            "other_problems": [p for p in integrity if not ("recorded" in p and "times" in p)],
            "received": self.srv.received,
            "served": self.srv.served,
            "faults": {k: n for k, n in self.srv.counts.items() if k != "ok"},
            "responder_errors": len(self.srv.errors),
            "distinct_calls": len(bodies),
            "recorded_model_steps": model_steps(self.store, cfg.run_id),
            "answered_beyond_design": self.srv.served - sum(designed.values()),
            "re_executed": sum(again.values()),
            "unexplained": unexplained,
            "repeats": repeats,
            "events": self.events,
            "summary": summary,
        }


def outcome(t) -> tuple:
    return (t.status, t.reward, t.termination_reason, t.error_class)


def compare(clean: dict, chaos: dict) -> dict:
    """The issue's figures, from the two sweeps."""
    ct, xt = clean["trials"], chaos["trials"]
    scored = {i: t for i, t in xt.items() if t.status == "scored"}
    kills = [e for e in chaos["events"] if e["event"] == "kill"]
    return {
        "expected": len(trial_specs(chaos["config"])),
        "recorded": len(scored),
        "duplicates": len(chaos["duplicates"]),
        "mismatches": sum(ct[i].reward != (xt[i].reward if i in xt else None) for i in ct),
        "lower": sum(i in ct and t.reward < ct[i].reward for i, t in scored.items()),
        # Scored, same reward, but ended otherwise than in the clean run: e.g. by a
        # provider error where the clean run's agent failed by itself.
        "other_ending": sum(i in ct and t.reward == ct[i].reward and outcome(t) != outcome(ct[i])
                            for i, t in scored.items()),
        "not_scored": len(xt) - len(scored),
        "re_executed": chaos["re_executed"],
        "in_flight_at_kills": sum(e["in_flight"] for e in kills),
        "unexplained": chaos["unexplained"],
        "repeats": chaos["repeats"],
        "clean_re_executed": clean["re_executed"],
        "clean_as_seeded": {i: t.reward for i, t in ct.items()} == expected_rewards(clean["config"]),
    }


def report(args: argparse.Namespace, clean: dict, chaos: dict, f: dict) -> bool:
    cfg = chaos["config"]
    per_domain = " + ".join(f"{len(cfg.task_ids[d])} {d}" for d in cfg.domains)
    print(f"sweep: {per_domain} tasks x k={cfg.trials} = {f['expected']} trials, agent {cfg.agent_models[0]}, "
          f"user {cfg.user_model}, latency {args.latency:g}s, concurrency {cfg.concurrency}, "
          f"{chaos['expected_calls']} model calls by design")
    for r in (clean, chaos):
        print(f"\n[{r['label']}]")
        print(f"  wall time                        {r['wall_s']:8.1f} s")
        print(f"  requests received / answered     {r['received']:8d} / {r['served']}")
        if r["faults"]:
            share = sum(r["faults"].values()) / max(r["received"], 1)
            print(f"  faults injected                  {sum(r['faults'].values()):8d} ({share:.0%} of requests: "
                  f"{', '.join(f'{k} {n}' for k, n in sorted(r['faults'].items()))})")
        print(f"  distinct model calls / recorded  {r['distinct_calls']:8d} / {r['recorded_model_steps']}")
        print(f"  answered beyond design           {r['answered_beyond_design']:8d}")
        print(f"  model calls re-executed          {r['re_executed']:8d} ({r['unexplained']} exposed by no "
              f"disruption, {r['repeats']} twice after one)")
        if r["responder_errors"] or r["other_problems"]:
            print(f"  responder errors                 {r['responder_errors']:8d}")
            print(f"  other integrity problems         {len(r['other_problems']):8d}")
            for p in r["other_problems"][:10]:
                print(f"    {p}")
        for e in r["events"]:
            extra = {k: v for k, v in e.items() if k not in ("event", "at_s", "served", "t", "in_flight",
                                                              "exposed", "re_executed")}
            print(f"  {e['event']:8} t={e['at_s']:7.1f}s served={e['served']:6d} in flight={e['in_flight']:3d} "
                  f"re-executed after it={e['re_executed']:3d} {extra or ''}")
        for res in r["summary"]["results"]:
            curve = " ".join(f"pass^{j}={v:.3f}" for j, v in sorted(res["pass_hat_k"].items(), key=lambda kv: int(kv[0])))
            print(f"  {res['domain']:8} {curve}")
    checks = [
        ("trials recorded (scored)", f"{f['recorded']}/{f['expected']}", f"{f['expected']}/{f['expected']}",
         f["recorded"] == f["expected"]),
        ("duplicate steps", f["duplicates"], 0, f["duplicates"] == 0),
        ("reward mismatches vs clean", f["mismatches"], 0, f["mismatches"] == 0),
        ("infra failures scored as agent's", f["lower"] + f["other_ending"], 0,
         f["lower"] + f["other_ending"] == 0),
        ("  lower reward than clean", f["lower"], 0, f["lower"] == 0),
        ("  same reward, other ending", f["other_ending"], 0, f["other_ending"] == 0),
        ("trials not scored", f["not_scored"], 0, f["not_scored"] == 0),
        ("re-executed / in flight at kills", f"{f['re_executed']}/{f['in_flight_at_kills']}", "<=",
         f["re_executed"] <= f["in_flight_at_kills"]),
        ("  exposed by no disruption", f["unexplained"], 0, f["unexplained"] == 0),
        ("  run twice after one disruption", f["repeats"], 0, f["repeats"] == 0),
        # Nothing crashes in the clean run: no call may run twice there.
        ("re-executed in the clean run", f["clean_re_executed"], 0, f["clean_re_executed"] == 0),
        ("clean run = seeded rewards", "yes" if f["clean_as_seeded"] else "NO", "yes", f["clean_as_seeded"]),
    ]
    print(f"\n[figures]{'':27} {'measured':>10} {'expected':>10}")
    for name, got, want, ok in checks:
        print(f"  {name:34} {got!s:>10} {want!s:>10}  {'ok' if ok else 'FAIL'}")
    print(f"  wall time, chaos / clean {chaos['wall_s'] / clean['wall_s']:19.2f}x")
    return all(ok for *_, ok in checks)


async def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM as Ctrl-C: the servers and workers of the sweep are stopped on the way out.
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    with tempfile.TemporaryDirectory(prefix="passhat-chaos-") as tmp:
        clean = await Sweep(args, "clean", Path(tmp) / "clean", chaos=False).run()
        chaos = await Sweep(args, "chaos", Path(tmp) / "chaos", chaos=True).run()
    return 0 if report(args, clean, chaos, compare(clean, chaos)) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
