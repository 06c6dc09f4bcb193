#!/usr/bin/env python
"""Throughput bench: tau2's own runner and `passhat run` on the same loopback model.

One invocation runs, one after the other, against the same OpenAI-compatible loopback
server that answers every model call after --latency seconds. By default it plays the
scripted oracle agent and user of passhat.testing.scripted_http, so every conversation
should end with reward 1.0; its conversations are as long as their tasks' gold actions
make them (airline: 2 to 23 model calls). `--calls N` plays the responder's `fixed-N`
script instead: every conversation exactly N model calls, the shape of the setup issue 10
measured (8 calls each); the rewards are then whatever tau2's evaluator gives, and both
runners must give the same ones:

  * tau2: `tau2.run.run_tasks` (as tests/parity calls it: no results file unless
    --tau2-save, which adds the checkpoint file `tau2 run` writes after every
    conversation), in a process of its own;
  * passhat: the `passhat run` command as it stands in this tree (its in-process worker,
    and any worker processes it starts), on the embedded default: an embedded Temporal
    server and the warm process beside it (docs/architecture.md, "Warm start"), both
    started before timing begins; with --cold-start, no warm process, so `passhat run`
    imports litellm and tau2 itself. The warm process's own CPU and memory are not
    counted; the command's process it forks, and that process's workers, are.

For each it prints wall time, conversations per hour, CPU seconds (in all), CPU seconds
per conversation and peak RSS (of all its processes together: the process tree is
sampled; RSS counts a page shared by forked processes in each, so the peak PSS, which
splits it, is printed too); when, from its start, the first model call reached the model
server and the last was answered (start-up before the one, finishing after the other);
then the ratio of the two, and the latency bound of the work:
ceil(conversations / concurrency) waves x model calls per conversation x latency (calls
counted by the loopback server). The model server and the Temporal server run in
processes of their own and are not counted in either runner's figures; their CPU is
printed separately (Temporal's is part of passhat's cost in practice).

    python bench/throughput.py                      # airline, 50 conversations, c=30, 0.5 s
    python bench/throughput.py --large              # 1000 conversations at c=100 (+ history)
    python bench/throughput.py --conversations 10 --concurrency 5 --latency 0.2   # quick
    python bench/throughput.py --large --runners passhat                          # skip tau2
    python bench/throughput.py --calls 8            # every conversation 8 model calls
    python bench/throughput.py --calls 8 --repeat 3 # 3 rounds; the median one in full

More conversations than the domain has tasks run every task with k trials (the count
must then be a multiple of the number of tasks). Also printed: the Temporal history
(events, bytes) of a sample of trial workflows, and the targets, which are printed and
never asserted. With --repeat, each round runs every runner once, a line per round gives
its wall times and ratio, and the round with the median ratio is reported in full (its
targets too). The machine's load average is printed too: on a shared machine other
processes take CPU from both runners, so compare figures from one invocation only.
Loopback only; every runner is bounded by --timeout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PASSHAT = Path(sys.executable).parent / "passhat"
ORACLE = "openai/oracle"  # the scripted oracle, for agent and user alike
SAMPLE_S = 0.2  # process-tree RSS sampling period
PSS_EVERY = 5  # samples between two PSS readings

# Targets (printed, not asserted).
TARGET_RATIO = 5.0  # passhat conversations/hour over tau2's, on the setup issue 10 measured (--calls 8)
TARGET_CPU_PER_CONV = 0.4  # passhat CPU seconds per conversation
TARGET_RSS = 1.5e9  # bytes, all passhat processes together
TARGET_BOUND_FACTOR = 1.3  # large mode: wall <= 1.3 x max(latency bound, CPU / cores)
TARGET_IN_FLIGHT = 0.95  # conversations in flight / --concurrency, on a latency-bound run
TARGET_WORK_CONSERVING = 1.15  # wall <= 1.15 x the work-conserving bound, on a latency-bound run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domain", default="airline")
    ap.add_argument("--conversations", "-n", type=int, default=None,
                    help="conversations per runner (default 50; 1000 with --large)")
    ap.add_argument("--concurrency", "-c", type=int, default=None,
                    help="conversations in flight (default 30; 100 with --large)")
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per model call")
    ap.add_argument("--calls", type=int, default=None,
                    help="every conversation exactly this many model calls (the `fixed-N` script; "
                         "default: the oracle, whose conversations are as long as their tasks)")
    ap.add_argument("--large", action="store_true",
                    help="1000 conversations at concurrency 100 (unless given)")
    ap.add_argument("--runners", default="tau2,passhat", help="comma-separated: tau2, passhat")
    ap.add_argument("--tau2-save", action="store_true",
                    help="tau2 writes its results file after every conversation, as `tau2 run` does")
    ap.add_argument("--passhat-args", default="",
                    help="extra options for `passhat run`, e.g. '--workers 1'")
    ap.add_argument("--history-sample", type=int, default=10,
                    help="trial workflows whose Temporal history is fetched (0: none)")
    ap.add_argument("--timeout", type=float, default=3600, help="bound on each runner (s)")
    ap.add_argument("--cold-start", action="store_true",
                    help="run passhat without its warm process (PASSHAT_WARM_START=0): every "
                         "`passhat run` imports litellm and tau2 itself")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of all the runners, one after the other; the round with the "
                         "median ratio is reported in full (a noisy machine's figures vary "
                         "from one run to the next)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    args.conversations = args.conversations or (1000 if args.large else 50)
    args.concurrency = args.concurrency or (100 if args.large else 30)
    args.runners = [r.strip() for r in args.runners.split(",") if r.strip()]
    if not set(args.runners) <= {"tau2", "passhat"} or not args.runners:
        ap.error("--runners takes tau2 and/or passhat")
    return args


def model_name(args) -> str:  # noqa: ANN001
    """The loopback model both sides play: the oracle, or `fixed-N` with --calls N."""
    return ORACLE if args.calls is None else f"openai/fixed-{args.calls}"


def workload(domain: str, conversations: int) -> tuple[list[str], int]:
    """(task ids, trials): the first N tasks at k=1, or every task at k=N/tasks."""
    from passhat.domains.registry import get_domain

    ids = get_domain(domain).task_ids()
    if conversations <= len(ids):
        return ids[:conversations], 1
    if conversations % len(ids):
        raise SystemExit(f"{domain} has {len(ids)} tasks: give at most that many conversations "
                         "or a multiple of it")
    return ids, conversations // len(ids)


# --------------------------------------------------------------------------- child processes
# Hidden modes of this same file, so that the model server and tau2 each run in a
# process of their own (their CPU and memory must not be counted as anyone else's).


def serve_model(domain: str, latency: float) -> None:
    """`_model-server`: the scripted oracle over loopback HTTP until SIGTERM."""
    import hashlib
    import threading

    from passhat.testing.fault_server import FaultServer
    from passhat.testing.scripted_http import ScriptedResponder, request_key

    class Keys(list):
        """Stands in for FaultServer's list of request bodies (10^4 long prompts would be
        hundreds of MB): keeps only a digest of each request's identity, to count the
        distinct ones. A request received twice is one model call executed twice."""

        def __init__(self) -> None:
            super().__init__()
            self.seen: set[bytes] = set()
            self.first_at: float | None = None  # wall-clock times of the first and last
            self.last_at: float | None = None  # request: where a runner's time went

        def append(self, body) -> None:  # noqa: ANN001
            self.last_at = time.time()
            self.first_at = self.first_at or self.last_at
            if isinstance(body, dict):
                self.seen.add(hashlib.blake2b(request_key(body).encode(), digest_size=16).digest())

        def clear(self) -> None:
            self.seen.clear()
            self.first_at = self.last_at = None

    class OpenCalls:
        """The responder, counting the calls open at once: the integral of that count
        over time (exact: it changes only as a call comes in or is answered), from the
        first call in to the last answered. Over that time it is the mean number of
        conversations in flight (each waits on at most one call)."""

        def __init__(self, inner) -> None:  # noqa: ANN001
            self.inner = inner
            self.lock = threading.Lock()
            self.clear()

        def clear(self) -> None:
            self.open, self.area, self.since, self.first, self.last = 0, 0.0, None, None, None

        def _change(self, by: int) -> None:
            with self.lock:
                now = time.time()
                if self.since is not None:
                    self.area += self.open * (now - self.since)
                self.since, self.open = now, self.open + by
                self.first = self.first or now
                if by < 0:
                    self.last = now

        async def __call__(self, body: dict) -> dict:
            self._change(+1)
            try:
                return await self.inner(body)
            finally:
                self._change(-1)

        def mean(self) -> float | None:
            with self.lock:
                if self.first is None or self.last is None or self.last <= self.first:
                    return None
                return self.area / (self.last - self.first)

    class Server(FaultServer):
        def stats(self) -> dict:  # what GET /stats answers
            # (not under self._lock: super().stats() takes it, and it is not reentrant)
            return {**super().stats(), "distinct": len(self._requests.seen),
                    "first_at": self._requests.first_at, "last_at": self._requests.last_at,
                    "mean_in_flight": self.responder.mean()}

        def reset(self) -> None:
            super().reset()
            self.responder.clear()

    srv = Server(responder=OpenCalls(ScriptedResponder([domain], latency=latency)))
    srv._requests = Keys()
    srv.start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(f"READY {srv.url}", flush=True)
    while not done.wait(0.5):
        pass
    srv.stop()


def run_tau2_child(spec_path: str) -> None:
    """`_tau2`: tau2's run_tasks on the spec's tasks; writes one line per conversation
    (task, trial, reward, termination) to the spec's output file. Imports tau2 only."""
    spec = json.loads(Path(spec_path).read_text())
    from tau2.run import get_tasks, run_tasks

    res = run_tasks(
        domain=spec["domain"],
        tasks=get_tasks(spec["domain"], task_split_name="base", task_ids=spec["task_ids"]),
        agent="llm_agent",
        user="user_simulator",
        llm_agent=spec["model"],
        llm_args_agent=dict(spec["llm_args"]),
        llm_user=spec["model"],
        llm_args_user=dict(spec["llm_args"]),
        num_trials=spec["trials"],
        max_steps=100,  # tau2 run's defaults
        max_errors=10,
        save_to=spec["save_to"],
        console_display=False,
        max_concurrency=spec["concurrency"],
        skip_failed_samples=True,  # an aborted simulation is recorded, not raised
        seed=300,
        log_level="ERROR",
    )
    with open(spec["out"], "w") as out:
        for sim in res.simulations:
            out.write(json.dumps({
                "task_id": sim.task_id, "trial": sim.trial,
                "reward": sim.reward_info.reward if sim.reward_info else None,
                "termination": sim.termination_reason.value,
            }) + "\n")


# --------------------------------------------------------------------------- measuring


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of one live process (0 if it is gone)."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return 0.0


def measure(cmd: list[str], env: dict, timeout: float, stdout: Path, stderr: Path,
            progress=None, warm_pid: int | None = None) -> dict:  # noqa: ANN001
    """Run cmd to its end: wall time, CPU (wait4's rusage: the process and every child it
    waited for), peak RSS of its process tree (sampled every SAMPLE_S, summed over the
    tree), and the largest single process RSS. `progress()`, if given, returns a line
    printed every minute. With `warm_pid`, the warm process that runs the command: its
    descendants (the command's process and its workers) are part of the tree, itself not."""
    import psutil

    start = time.monotonic()
    started_at = time.time()  # wall clock, to place the model server's request times
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)  # its own group: killable as a whole
    root = psutil.Process(proc.pid)
    warm = psutil.Process(warm_pid) if warm_pid else None
    peak_tree, peak_pss, peak_single, timed_out = 0, 0, 0, False
    samples = 0
    cmdlines: dict[int, str] = {}
    cpu_seen: dict[int, float] = {}  # pid -> its own CPU when last sampled
    next_report = start + 60
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            try:
                tree = [root, *root.children(recursive=True), *(warm.children(recursive=True) if warm else [])]
            except psutil.Error:
                tree = []
            total = 0
            for p in tree:
                try:
                    rss = p.memory_info().rss
                    total += rss
                    peak_single = max(peak_single, rss)
                    t = p.cpu_times()
                    cpu_seen[p.pid] = t.user + t.system
                    # Read again each time: a child sampled between fork and exec shows
                    # its parent's command line.
                    cmdlines[p.pid] = " ".join(p.cmdline()[1:4])
                except psutil.Error:
                    pass
            peak_tree = max(peak_tree, total)
            # PSS splits pages shared between processes (forked workers share what their
            # parent loaded) among them; reading it is slower, so once a second.
            if samples % PSS_EVERY == 0:
                pss = 0
                for p in tree:
                    try:
                        pss += p.memory_full_info().pss
                    except psutil.Error:
                        pass
                peak_pss = max(peak_pss, pss)
            samples += 1
            if progress is not None and time.monotonic() >= next_report:
                next_report += 60
                print(f"  [{time.monotonic() - start:6.0f} s] {progress()}", flush=True)
            if time.monotonic() - start > timeout and not timed_out:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(SAMPLE_S)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): leave no runner behind
        os.killpg(proc.pid, signal.SIGKILL)
        os.waitpid(proc.pid, 0)
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return {
        "wall_s": time.monotonic() - start,
        "started_at": started_at,
        # rusage counts only the children the process waited for; the sampled sum
        # catches any it left behind (a little low: it misses the last SAMPLE_S).
        "cpu_s": max(usage.ru_utime + usage.ru_stime, sum(cpu_seen.values())),
        "peak_rss": max(peak_tree, usage.ru_maxrss * 1024),
        "peak_pss": peak_pss,
        "max_single_rss": max(peak_single, usage.ru_maxrss * 1024),
        "processes": len(cmdlines),
        "cmdlines": sorted(set(cmdlines.values())),
        "exit": proc.returncode,
        "timed_out": timed_out,
    }


class ModelServer:
    """The loopback model in a subprocess (this file's `_model-server` mode)."""

    def __init__(self, domain: str, latency: float, log: Path):
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "_model-server", domain, str(latency)],
                stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL,
            )
        # Building the responder loads the domain: seconds on a loaded machine. Bounded.
        ready, _, _ = select.select([self.proc.stdout], [], [], 300)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"model server did not start ({line!r}); see {log}")
        self.url = line.split()[1]

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=30) as r:
            return json.load(r)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", method="POST"), timeout=30).close()

    def cpu(self) -> float:
        return cpu_of(self.proc.pid)

    def stop(self) -> None:
        from passhat.testing.fault_server import stop_process

        stop_process(self.proc)


# --------------------------------------------------------------------------- the runners


def bench_tau2(args, ids: list[str], trials: int, model: ModelServer, tmp: Path) -> dict:  # noqa: ANN001
    spec = {
        "domain": args.domain, "model": model_name(args), "task_ids": ids, "trials": trials, "concurrency": args.concurrency,
        # tau2 takes the key itself (the loopback server accepts any).
        "llm_args": {"api_base": model.url + "/v1", "api_key": "loopback", "temperature": 0.0},
        "save_to": str(tmp / "tau2-results.json") if args.tau2_save else None,
        "out": str(tmp / "tau2-outcomes.jsonl"),
    }
    (tmp / "tau2-spec.json").write_text(json.dumps(spec))
    m = measure([sys.executable, __file__, "_tau2", str(tmp / "tau2-spec.json")], dict(os.environ),
                args.timeout, tmp / "tau2.out", tmp / "tau2.err")
    out = Path(spec["out"])
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    m["ended"] = len(rows)
    m["reward_1"] = sum(r["reward"] == 1.0 for r in rows)
    m["rewards"] = {(r["task_id"], r["trial"]): r["reward"] for r in rows}
    m["not_1"] = [f"{r['task_id']}/{r['trial']}: {r['reward']} {r['termination']}" for r in rows
                  if r["reward"] != 1.0][:5]
    m["log"] = tmp / "tau2.err"
    return m


def embedded_default(args, server) -> dict[str, str]:  # noqa: ANN001 - the EmbeddedServer
    """What makes passhat's commands use the embedded default on the server the bench
    started (its PASSHAT_HOME and ports), with or without the warm process."""
    return {"PASSHAT_HOME": str(server.home), "PASSHAT_TEMPORAL_PORT": str(server.port),
            "PASSHAT_UI_PORT": str(server.ui_port), "PASSHAT_WARM_START": "0" if args.cold_start else "1"}


def passhat_env(embedded: dict[str, str], **more: str) -> dict[str, str]:
    """A passhat command's environment: this one (the model key's variable included)
    with `embedded` and `more`, and no TEMPORAL_ADDRESS."""
    env = {k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"}
    return {**env, **embedded, **more}


def start_warm_process(env: dict[str, str], timeout: float = 300.0) -> None:
    """As `passhat server start` does, and wait until the warm process takes commands:
    the Temporal server and it are both running before timing begins."""
    import socket

    subprocess.run([str(PASSHAT), "server", "start"], env=env, check=True, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    path = str(Path(env["PASSHAT_HOME"]) / "warm.sock")
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the warm process did not start; see {Path(env['PASSHAT_HOME']) / 'logs'}")
        time.sleep(0.2)


def bench_passhat(args, ids: list[str], trials: int, model: ModelServer, tmp: Path,  # noqa: ANN001
                  embedded: dict[str, str], run_id: str) -> dict:
    from passhat.infra.store import Store
    from passhat.testing.scripted_http import http_args

    home = tmp / "passhat"
    home.mkdir()
    db_url = f"sqlite:///{home / 'results.db'}"
    model_args = json.dumps(http_args(model.url))  # also sets the key's variable in os.environ
    startup_log = home / "startup.log"
    env = passhat_env(embedded, PASSHAT_DB_URL=db_url, PASSHAT_STARTUP_LOG=str(startup_log))
    cmd = [str(PASSHAT), "run", "--domain", args.domain, *[a for t in ids for a in ("--task", t)],
           "--agent-model", model_name(args), "--user-model", model_name(args), "--agent-args", model_args,
           "--user-args", model_args, "--trials", str(trials), "--concurrency", str(args.concurrency),
           "--run-id", run_id, "--output", "json", *shlex.split(args.passhat_args)]
    def progress() -> str:
        import sqlite3

        try:  # read-only, so the bench never holds a write lock on passhat's store
            with sqlite3.connect(f"file:{home / 'results.db'}?mode=ro", uri=True) as db:
                counts = dict(db.execute("select status, count(*) from trials group by status"))
        except sqlite3.Error as err:
            return f"store not readable yet ({err})"
        return f"trials by status: {counts}"

    lock = Path(embedded["PASSHAT_HOME"]) / "warm.lock"
    warm_pid = None if args.cold_start else int(lock.read_text().strip() or 0) or None
    m = measure(cmd, env, args.timeout, tmp / "passhat.out", tmp / "passhat.err", progress, warm_pid)
    rows = Store(db_url).trials(run_id) if (home / "results.db").exists() else []
    done = [r for r in rows if r.status != "running"]
    m["ended"] = len(done)
    m["reward_1"] = sum(r.reward == 1.0 for r in done)
    m["rewards"] = {(r.task_id, r.trial_index): r.reward for r in done}
    m["not_1"] = [f"{r.task_id}/{r.trial_index}: {r.status} {r.reward} {r.termination_reason} {r.error_class or ''}"
                  for r in rows if r.reward != 1.0][:5]
    m["log"] = tmp / "passhat.err"
    m["db_url"] = db_url
    m["longest_calls"] = longest_conversation(home / "results.db", run_id)
    # When `passhat run` reached each phase of its start-up (cli.common.startup_mark).
    m["phases"] = ([(line.split()[0:-1], float(line.split()[-1])) for line in startup_log.read_text().splitlines()]
                   if startup_log.exists() else [])
    return m


def longest_conversation(db: Path, run_id: str) -> int:
    """The most model calls one conversation of the run made (its steps with a model).
    They are made one after another: no runner ends before that many latencies."""
    import sqlite3

    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        row = con.execute("select max(n) from (select count(*) as n from steps where run_id = ? "
                          "and model is not null group by trial_id)", (run_id,)).fetchone()
    return row[0] or 0


async def histories(address: str, db_url: str, run_id: str, sample: int) -> dict:
    """Events and bytes of the histories of `sample` trial workflows spread over the run,
    and of the run workflow itself."""
    from passhat.infra.store import Store
    from passhat.infra.temporal_client import connect

    client = await connect(address)
    trials = Store(db_url).trials(run_id)
    picked = [trials[round(i * (len(trials) - 1) / max(1, sample - 1))] for i in range(min(sample, len(trials)))]
    picked = list({t.trial_id: t for t in picked}.values())
    sizes = []
    for t in picked:
        history = await client.get_workflow_handle(t.trial_id).fetch_history()
        sizes.append((len(history.events), sum(e.ByteSize() for e in history.events), t.n_steps))
    run = await client.get_workflow_handle(run_id).fetch_history()
    return {"trials": sizes, "run": (len(run.events), sum(e.ByteSize() for e in run.events))}


# --------------------------------------------------------------------------- report


def fmt_bytes(n: float) -> str:
    return f"{n / 1e6:.0f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def report(args, trials: int, results: dict, bounds: dict, hist: dict | None, load: tuple) -> None:  # noqa: ANN001
    n = args.conversations
    cores = len(os.sched_getaffinity(0))
    names = {"tau2": "tau2 run_tasks", "passhat": "passhat run"}
    cols = [r for r in args.runners if r in results]
    print(f"\nsetup: {args.domain}, {n} conversations ({n // trials} tasks x k={trials}), "
          f"concurrency {args.concurrency}, model latency {args.latency:g} s, {cores} cores; "
          f"model: {model_name(args)} ({'the oracle' if args.calls is None else f'{args.calls} calls per conversation'}); "
          f"tau2 results file: {'yes' if args.tau2_save else 'no'}; "
          f"extra passhat run options: {args.passhat_args or 'none'}")
    print(f"load average (1 min): {load[0]:.1f} at start, {load[1]:.1f} at end "
          "(other processes on the machine take CPU from the runners)")
    print("\n" + f"{'':34}" + "".join(f"{names[c]:>16}" for c in cols))

    def row(label: str, fn) -> None:  # noqa: ANN001
        print(f"{label:34}" + "".join(f"{fn(results[c]):>16}" for c in cols))

    row("wall time (s)", lambda r: f"{r['wall_s']:.1f}")
    row("conversations per hour", lambda r: f"{n / r['wall_s'] * 3600:.0f}")
    row("CPU seconds", lambda r: f"{r['cpu_s']:.1f}")
    row("CPU seconds per conversation", lambda r: f"{r['cpu_s'] / n:.2f}")
    row("peak RSS, all its processes", lambda r: fmt_bytes(r["peak_rss"]))
    row("  largest single process", lambda r: fmt_bytes(r["max_single_rss"]))
    row("peak PSS (shared pages split)", lambda r: fmt_bytes(r["peak_pss"]))
    row("  processes", lambda r: f"{r['processes']}")
    row("conversations ended", lambda r: f"{r['ended']}/{n}")
    row("  with reward 1.0", lambda r: f"{r['reward_1']}")
    row("model calls served", lambda r: f"{r['served']}")
    row("  per conversation", lambda r: f"{r['served'] / n:.2f}")
    row("  failed (responder errors)", lambda r: f"{r['received'] - r['served']} ({r['responder_errors']})")
    row("  re-sent (same request again)", lambda r: f"{r['received'] - r['distinct']}")
    row("first model call, after (s)", lambda r: since_start(r, "first_at"))
    row("last model call answered, after (s)",
        lambda r: since_start(r, "last_at", args.latency))
    row("conversations in flight / concurrency", lambda r: in_flight(r, args.concurrency))
    row("latency bound (s)", lambda r: f"{bounds[r['name']]:.1f}")
    row("wall / latency bound", lambda r: f"{r['wall_s'] / bounds[r['name']]:.2f}x")
    row("model server CPU (not counted)", lambda r: f"{r['model_cpu']:.1f}")
    row("Temporal server CPU (not counted)", lambda r: f"{r['temporal_cpu']:.1f}" if r['name'] == "passhat" else "-")
    row("exit status", lambda r: "timed out" if r["timed_out"] else str(r["exit"]))
    for c in cols:
        print(f"  {names[c]} processes: {results[c]['cmdlines']}")
    for c in cols:
        r = results[c]
        if r["exit"] or r["ended"] < n or (r["not_1"] and args.calls is None):
            print(f"  {names[c]}: not reward 1.0 (first 5): {r['not_1']}; log: {r['log']}")
    differ = reward_differences(results)
    if differ is not None:
        print(f"  rewards differ between the runners on {len(differ)} conversation(s)"
              + (f" (first 5: {differ[:5]})" if differ else ""))

    waves = math.ceil(n / args.concurrency)
    any_r = results[cols[0]]
    print(f"\nlatency bound = ceil({n}/{args.concurrency}) = {waves} waves x model calls per "
          f"conversation ({any_r['served'] / n:.2f}) x {args.latency:g} s = {bounds[any_r['name']]:.1f} s")
    longest = results.get("passhat", {}).get("longest_calls")
    if longest:
        # The formula above spreads calls evenly over conversations; the conversations
        # are the same for both runners (the same scripted model), and the longest one
        # is a chain of calls no concurrency shortens.
        print(f"longest conversation: {longest} model calls one after another x {args.latency:g} s = "
              f"{longest * args.latency:.1f} s, a floor for either runner's wall time (start-up not counted)")
    for c in cols:
        r = results[c]
        if r.get("first_at") is None:
            continue
        startup, work, chain, bound = work_conserving_bound(r, args)
        print(f"{names[c]}: work-conserving bound = max(calls {r['served']} x {args.latency:g} s / "
              f"{args.concurrency} = {work:.1f} s, longest conversation {chain:.1f} s) + start-up "
              f"{startup:.1f} s = {bound:.1f} s; wall {r['wall_s']:.1f} s = {r['wall_s'] / bound:.2f}x; "
              f"in flight {in_flight(r, args.concurrency)} of concurrency")
    if results.get("passhat", {}).get("phases"):
        p = results["passhat"]
        steps, last = [], p["started_at"]
        for words, at in p["phases"]:
            steps.append(f"{' '.join(words)} +{at - last:.2f}")
            last = at
        if p.get("first_at") is not None:
            steps.append(f"first model call +{p['first_at'] - last:.2f}")
        print(f"passhat start-up, from `passhat run` (s): {', '.join(steps)} "
              f"= {(p.get('first_at') or last) - p['started_at']:.2f}")
    ratio = round_ratio(results)
    if ratio is not None:
        print(f"ratio passhat / tau2 conversations per hour: {ratio:.2f}x; "
              f"CPU per conversation: {results['passhat']['cpu_s'] / results['tau2']['cpu_s']:.2f}x; "
              f"peak RSS: {results['passhat']['peak_rss'] / results['tau2']['peak_rss']:.2f}x")

    if hist:
        ev = [e for e, _, _ in hist["trials"]]
        by = [b for _, b, _ in hist["trials"]]
        steps = sum(s for _, _, s in hist["trials"])
        print(f"\nTemporal history per trial ({len(ev)} trial workflows sampled): events mean "
              f"{sum(ev) / len(ev):.0f} (max {max(ev)}), bytes mean {sum(by) / len(by):.0f} "
              f"(max {max(by)}), {sum(by) / max(1, steps):.0f} bytes per recorded step")
        print(f"run workflow history: {hist['run'][0]} events, {hist['run'][1]} bytes")

    if "passhat" in results:
        p = results["passhat"]
        print("\ntargets (printed, not asserted):")
        if ratio is not None:
            if args.calls is not None:
                setup = f"{args.calls} calls per conversation"
            else:
                setup = "the oracle"
                if p.get("first_at") is not None and p.get("longest_calls"):
                    # Its longest conversation is a chain of calls that begins after
                    # start-up: a passhat with no overhead per step would end no sooner.
                    floor = p["first_at"] - p["started_at"] + p["longest_calls"] * args.latency
                    setup += (f"; start-up and the longest conversation alone, {floor:.1f} s, "
                              f"allow at most {results['tau2']['wall_s'] / floor:.2f}x")
            print(f"  passhat >= {TARGET_RATIO:g}x tau2 conversations per hour ({setup}): "
                  f"{ratio:.2f}x  {'met' if ratio >= TARGET_RATIO else 'NOT met'}")
        cpc = p["cpu_s"] / n
        print(f"  passhat <= {TARGET_CPU_PER_CONV} CPU s per conversation: {cpc:.2f}  "
              f"{'met' if cpc <= TARGET_CPU_PER_CONV else 'NOT met'}"
              f"  (with the Temporal server's CPU: {(p['cpu_s'] + p['temporal_cpu']) / n:.2f})")
        print(f"  passhat peak RSS, all processes <= {fmt_bytes(TARGET_RSS)}: {fmt_bytes(p['peak_rss'])}  "
              f"{'met' if p['peak_rss'] <= TARGET_RSS else 'NOT met'}")
        # Everything the work burned on this machine's cores: passhat, its Temporal
        # server, and the model server (it shares the cores too).
        total = p["cpu_s"] + p["temporal_cpu"] + p["model_cpu"]
        bound = max(bounds["passhat"], total / cores)
        label = "(the 1000 x c=100 target)" if args.large else "(target set for --large; shown for reference)"
        print(f"  passhat wall <= {TARGET_BOUND_FACTOR}x max(latency bound {bounds['passhat']:.1f} s, "
              f"CPU {total:.1f} s / {cores} cores = {total / cores:.1f} s) = "
              f"{TARGET_BOUND_FACTOR * bound:.1f} s: wall {p['wall_s']:.1f} s = {p['wall_s'] / bound:.2f}x  "
              f"{'met' if p['wall_s'] <= TARGET_BOUND_FACTOR * bound else 'NOT met'} {label}")
        if p.get("first_at") is not None and p.get("mean_in_flight") is not None:
            work_conserving(p, args, total / cores)


def work_conserving_bound(r: dict, args: argparse.Namespace) -> tuple[float, float, float, float]:
    """(start-up, calls x latency / concurrency, the longest conversation's calls x
    latency, the bound) of a runner's run. However long the conversations, no runner does
    better than keeping `concurrency` of them in flight all along, and none ends before
    its longest."""
    startup = r["first_at"] - r["started_at"]
    work = r["served"] * args.latency / args.concurrency
    chain = (r.get("longest_calls") or 0) * args.latency
    return startup, work, chain, max(work, chain) + startup


def work_conserving(p: dict, args: argparse.Namespace, cpu_wall: float) -> None:
    """The in-flight and work-conserving targets, and whether the run could meet them:
    they are for a latency-bound run, one whose CPU (all of it, over the cores) takes at
    most half the time the calls' latency sets. Past that, steps wait for a core between
    calls whatever the scheduling, and the cores set the pace."""
    _, work, _, bound = work_conserving_bound(p, args)
    share = p["mean_in_flight"] / args.concurrency
    print(f"  passhat in flight >= {TARGET_IN_FLIGHT:g} of concurrency: {share:.2f}  "
          f"{'met' if share >= TARGET_IN_FLIGHT else 'NOT met'}")
    print(f"  passhat wall <= {TARGET_WORK_CONSERVING:g}x the work-conserving bound {bound:.1f} s: "
          f"{p['wall_s'] / bound:.2f}x  {'met' if p['wall_s'] <= TARGET_WORK_CONSERVING * bound else 'NOT met'}")
    regime = ("latency-bound" if cpu_wall <= work / 2
              else "over half, so the cores set the pace: the two targets above need a latency-bound run")
    print(f"    all CPU / cores {cpu_wall:.1f} s is {cpu_wall / work:.0%} of the calls' "
          f"{work:.1f} s of latency: {regime}")


def in_flight(r: dict, concurrency: int) -> str:
    """The time-weighted mean of the model server's open calls, from the first call to
    the last answer, over the concurrency allowed."""
    mean = r.get("mean_in_flight")
    return "-" if mean is None else f"{mean / concurrency:.2f}"


def since_start(r: dict, key: str, plus: float = 0.0) -> str:
    """Seconds from the runner's start to the model server's first or last request
    (plus its answer's latency): start-up before it, the run's end after it."""
    return "-" if r.get(key) is None else f"{r[key] + plus - r['started_at']:.1f}"


def reward_differences(results: dict) -> list[str] | None:
    """Conversations whose reward tau2 and passhat disagree on; None unless both ran."""
    if "tau2" not in results or "passhat" not in results:
        return None
    a, b = results["tau2"]["rewards"], results["passhat"]["rewards"]
    return [f"{t}/{k}: tau2 {a.get((t, k))} passhat {b.get((t, k))}"
            for t, k in sorted(set(a) | set(b)) if a.get((t, k)) != b.get((t, k))]


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    import asyncio

    args = parse_args(argv)
    if args.calls is not None and args.calls < 3:
        raise SystemExit(f"--calls must be at least 3 (the user's opening, the agent's reply, "
                         f"the user's stop), got {args.calls}")
    # SIGTERM unwinds like Ctrl-C, so the runner, the model server and the Temporal
    # server are stopped and the work directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ids, trials = workload(args.domain, args.conversations)
    from passhat.infra.temporal_server import EmbeddedServer
    from passhat.testing.harness import free_ports

    load_start = os.getloadavg()[0]
    rounds: list[tuple[dict[str, dict], dict[str, float], str]] = []  # results, bounds, run id
    hist = None
    with tempfile.TemporaryDirectory(prefix="passhat-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        print(f"starting the model server and the Temporal server (work dir {tmp}) ...", flush=True)
        model = ModelServer(args.domain, args.latency, tmp / "model-server.log")
        port, ui_port = free_ports(2)
        server = EmbeddedServer(tmp / "temporal", port=port, ui_port=ui_port)
        status = None
        try:
            status = asyncio.run(server.start())
            embedded = embedded_default(args, server)
            if "passhat" in args.runners and not args.cold_start:
                from passhat.testing.scripted_http import http_args

                http_args(model.url)  # sets the key's variable, as each run's environment has it
                start_warm_process(passhat_env(embedded))
            for i in range(args.repeat):
                work = tmp / f"round-{i + 1}" if args.repeat > 1 else tmp
                work.mkdir(exist_ok=True)
                run_id = f"throughput-{uuid.uuid4().hex[:6]}"
                results: dict[str, dict] = {}
                bounds: dict[str, float] = {}
                for name in args.runners:
                    print(f"running {name}" + (f" (round {i + 1} of {args.repeat})" if args.repeat > 1 else "")
                          + " ...", flush=True)
                    model.reset()
                    model_cpu, temporal_cpu = model.cpu(), cpu_of(status.pid)
                    if name == "tau2":
                        r = bench_tau2(args, ids, trials, model, work)
                    else:
                        r = bench_passhat(args, ids, trials, model, work, embedded, run_id)
                    r["model_cpu"] = model.cpu() - model_cpu
                    r["temporal_cpu"] = cpu_of(status.pid) - temporal_cpu
                    stats = model.stats()
                    r.update(name=name, served=stats["served"], received=stats["received"],
                             distinct=stats["distinct"], first_at=stats["first_at"], last_at=stats["last_at"],
                             mean_in_flight=stats.get("mean_in_flight"),
                             responder_errors=stats["counts"].get("responder_error", 0))
                    results[name] = r
                    # Waves of conversations, each as long as a conversation's model calls.
                    bounds[name] = (math.ceil(args.conversations / args.concurrency)
                                    * r["served"] / args.conversations * args.latency)
                    print(f"  {name}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
                          f"{r['ended']} ended, {r['reward_1']} with reward 1.0", flush=True)
                rounds.append((results, bounds, run_id))
            results, bounds, run_id = median_round(rounds)
            if "passhat" in results and args.history_sample and results["passhat"]["ended"]:
                hist = asyncio.run(histories(server.address, results["passhat"]["db_url"], run_id,
                                             args.history_sample))
        finally:
            model.stop()
            if status is not None:
                subprocess.run([str(PASSHAT), "server", "stop"], env=passhat_env(embedded), stdout=subprocess.DEVNULL)
                server.stop()
    if args.repeat > 1:
        report_rounds(args, rounds, results)
    report(args, trials, results, bounds, hist, (load_start, os.getloadavg()[0]))
    every = [r for res, _, _ in rounds for r in res.values()]
    ended = all(r["exit"] == 0 and r["ended"] == args.conversations for r in every)
    # The oracle solves every task; a fixed-length script solves what it solves, the
    # same for both runners.
    ok = ended and (all(r["reward_1"] == args.conversations for r in every)
                    if args.calls is None else not any(reward_differences(res) for res, _, _ in rounds))
    return 0 if ok else 1


def round_ratio(results: dict) -> float | None:
    """tau2's wall time over passhat's: passhat's conversations per hour over tau2's."""
    if "tau2" in results and "passhat" in results:
        return results["tau2"]["wall_s"] / results["passhat"]["wall_s"]
    return None


def median_round(rounds: list) -> tuple:
    """The round with the median ratio (the lower of the middle two for an even count);
    without both runners, the one with the median wall time of the first runner."""
    def key(entry: tuple) -> float:
        results = entry[0]
        ratio = round_ratio(results)
        return ratio if ratio is not None else next(iter(results.values()))["wall_s"]

    return sorted(rounds, key=key)[(len(rounds) - 1) // 2]


def report_rounds(args, rounds: list, shown: dict) -> None:  # noqa: ANN001
    n = args.conversations
    print(f"\n{len(rounds)} rounds, each runner one after the other in every round:")
    for i, (results, _, _) in enumerate(rounds, 1):
        walls = ", ".join(f"{name} {r['wall_s']:.1f} s wall ({r['cpu_s'] / n:.2f} CPU s/conv)"
                          for name, r in results.items())
        ratio = round_ratio(results)
        walls += "".join(f"; {name} in flight {in_flight(r, args.concurrency)}" for name, r in results.items())
        print(f"  round {i}: {walls}" + (f"; ratio {ratio:.2f}x" if ratio is not None else "")
              + ("   <- reported below (the median)" if results is shown else ""))


if __name__ == "__main__":
    if sys.argv[1:2] == ["_model-server"]:
        serve_model(sys.argv[2], float(sys.argv[3]))
    elif sys.argv[1:2] == ["_tau2"]:
        run_tau2_child(sys.argv[2])
    else:
        sys.exit(main())
