#!/usr/bin/env python
"""tau2-bench's own agentify white agent, unchanged, measured by passhat over A2A
(`--agent a2a:URL --agent-protocol agentify`), its model the scripted one over loopback
HTTP (passhat.testing.agentify_white says how it is run and pointed there).

Two runs through the real `passhat` command, each on every airline task (or --tasks N):
the white agent's model plays the oracle, which must score as the oracle does (every
task reward 1); then `noisy-P`, whose trials must score as its seeded draw says (the
white agent sends no seed: the draw is per task) and whose failures `report --by task`
and `show` must name. Figures are printed; the exit status is 1 when a reward differs
from the expected one.

    python bench/agentify_white.py --setup        # once: the white agent's virtualenv
    python bench/agentify_white.py                # airline, every task, oracle and noisy-0.7
    python bench/agentify_white.py --tasks 5 --noisy 0.5

The mirror (PASSHAT_TAU2_MIRROR, a git directory of sierra-research/tau2-bench) and the
virtualenv (PASSHAT_AGENTIFY_VENV, made by --setup from the versions the experiment's
uv.lock pins, with Python 3.13 as its .python-version asks) are outside the repository;
nothing of them is committed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from passhat.testing import agentify_white as white  # noqa: E402

PASSHAT = Path(sys.executable).with_name("passhat")


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(PASSHAT), *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def measure(model: str, experiment: Path, tasks: list[str], args: argparse.Namespace, home: Path,
            env: dict[str, str]) -> bool:
    from passhat.testing.fault_server import FaultServer
    from passhat.testing.scripted_http import ScriptedResponder, expected_reward

    run_id = f"white-{model}"
    with FaultServer(responder=ScriptedResponder(["airline"], play=model)) as srv:
        with white.WhiteAgent(experiment, white.venv_python(args.venv), srv.url, home / f"{run_id}.log") as agent:
            with urllib.request.urlopen(f"{agent.url}/.well-known/agent-card.json", timeout=30) as answer:
                card = json.load(answer)
            started = time.monotonic()
            ran = cli("run", "--domain", "airline", *[a for t in tasks for a in ("--task", t)],
                      "--agent", f"a2a:{agent.url}", "--agent-protocol", "agentify", "--user-model", "scripted/oracle",
                      "--trials", "1", "--concurrency", str(args.concurrency), "--run-id", run_id, "--yes",
                      "-o", "json", env=env)
            wall = time.monotonic() - started
            model_calls = srv.served
    if ran.returncode not in (0, 1):
        print(f"{run_id}: passhat run exited {ran.returncode}: {ran.stderr.strip()[-2000:]}")
        return False
    report = json.loads(cli("report", run_id, "-o", "json", env=env).stdout)
    rewards = {row["task_id"]: row["reward"] for row in _trials(run_id, env)}
    expected = {t: expected_reward(model, None, "airline", t) for t in tasks}
    matches = sum(rewards.get(t) == expected[t] for t in tasks)
    print(f"\n{run_id}: the white agent ({card.get('name')} {card.get('version')}, a2a-sdk "
          f"{card.get('protocolVersion')}) with its model playing {model}: "
          f"{sum(r == 1.0 for r in rewards.values())}/{len(tasks)} tasks reward 1; "
          f"{matches}/{len(tasks)} as the scripted {model} scores; {model_calls} model calls; {wall:.0f} s")
    print(f"  pass^1 {report['runs'][0]['groups'][0]['pass_hat_k']['1']['value']:.3f}")
    for t in tasks:
        if rewards.get(t) != expected[t]:
            print(f"  task {t}: reward {rewards.get(t)}, expected {expected[t]}")
    if any(r != 1.0 for r in rewards.values()):
        failed = cli("trials", run_id, "--failed", env=env).stdout.splitlines()
        print("  trials --failed (their diagnosis):\n    " + "\n    ".join(failed[:8]))
        by_task = [line for line in cli("report", run_id, "--by", "task", env=env).stdout.splitlines()
                   if line.strip()]
        print("  report --by task (last lines):\n    " + "\n    ".join(by_task[-8:]))
    return matches == len(tasks)


def _trials(run_id: str, env: dict[str, str]) -> list[dict]:
    from passhat.infra.store import Store

    store = Store(env["PASSHAT_DB_URL"])
    try:
        return [{"task_id": t.task_id, "reward": t.reward, "trial_id": t.trial_id} for t in store.trials(run_id)]
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=white.MIRROR)
    parser.add_argument("--venv", type=Path, default=white.VENV)
    parser.add_argument("--setup", action="store_true", help="make the white agent's virtualenv first")
    parser.add_argument("--python", default=str(Path.home() / ".pyenv/versions/3.13.0/bin/python"),
                        help="the Python --setup makes the virtualenv with")
    parser.add_argument("--tasks", type=int, default=0, help="airline tasks 0..N-1 (default: every task)")
    parser.add_argument("--noisy", type=float, default=0.7, help="P of the second run's noisy-P model")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    from passhat.domains.registry import get_domain
    from passhat.testing.harness import free_ports

    with tempfile.TemporaryDirectory(prefix="passhat-agentify-white-") as tmp:
        tmp = Path(tmp)
        if not (args.mirror / "HEAD").exists():
            print(f"no tau2-bench mirror at {args.mirror}")
            return 2
        experiment = white.extract(args.mirror, tmp / "mirror")
        if args.setup:
            white.make_venv(experiment, args.venv, args.python)
        why = white.unavailable(args.mirror, args.venv)
        if why:
            print(why)
            return 2
        ids = get_domain("airline").task_ids()
        tasks = ids[:args.tasks] if args.tasks else ids
        port, ui_port = free_ports(2)
        env = {**os.environ, "PASSHAT_HOME": str(tmp / "home"), "PASSHAT_DB_URL": f"sqlite:///{tmp}/results.db",
               "PASSHAT_TEMPORAL_PORT": str(port), "PASSHAT_UI_PORT": str(ui_port), "PASSHAT_WARM_START": "0"}
        print(f"tau2-bench mirror at {white.mirror_commit(args.mirror)[:12]}, {white.EXPERIMENT}/white_agent, "
              f"unchanged; airline, {len(tasks)} tasks, 1 trial each, concurrency {args.concurrency}")
        try:
            ok = [measure(model, experiment, tasks, args, tmp, env) for model in ("oracle", f"noisy-{args.noisy:g}")]
        finally:
            cli("server", "stop", env=env)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
