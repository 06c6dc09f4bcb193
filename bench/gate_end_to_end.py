"""`passhat gate` as real processes beside the same cases simulated: N gates per case on the
embedded Temporal server (a temporary home, free ports, default workers), scripted models
on airline tasks (scripted/oracle solves every one of the first 20), and their verdicts and
conversations next to passhat.results.gate_simulation's for the same per-task p and
criterion.

    python bench/gate_end_to_end.py [--gates 1] [--simulated 300] [--cases perfect,missing,noisy]

perfect: scripted/oracle at the bars a perfect agent must PASS, on 20 and on 19 tasks.
missing: scripted/noisy-P whose failing trials end not evaluable (`failures =
not_evaluable`): the gate must not PASS a bar its true pass^k misses.
noisy: scripted/noisy-0.7 around its bars (pass^4 with its blocks curtailed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from passhat.results import gate
from passhat.results.gate_simulation import FAIL, INCONCLUSIVE, PASS, fixed_baseline, simulate

P = 0.7  # scripted/noisy-0.7


def cases(groups: list[str]) -> list[tuple]:
    """(name, tasks, agent flags, per-task p, missing, criterion, gate flags, max trials)."""
    oracle, out = ["--agent-model", "scripted/oracle"], []
    if "perfect" in groups:
        for n in (20, 19):
            for k, bar, cap in ((1, 0.95, 8), (4, 0.95, 16), (4, 0.9, 8)):
                out.append((f"oracle, {n} tasks, pass^{k} >= {bar:g}, max {cap}", n, oracle, 1.0, (0.0, 0.0),
                            gate.absolute(k, bar), ["--require", f"pass^{k} >= {bar:g}", "--max-trials", str(cap)],
                            cap))
    if "missing" in groups:
        lost = ["--agent-args", '{"failures": "not_evaluable"}']
        out += [
            ("noisy-0.9, failures lost, pass^1 >= 0.95, max 16", 20, ["--agent-model", "scripted/noisy-0.9", *lost],
             0.9, (0.0, 1.0), gate.absolute(1, 0.95), ["--require", "pass^1 >= 0.95", "--max-trials", "16"], 16),
            ("noisy-0.93 (pass^4 0.75), failures lost, pass^4 >= 0.8, max 16", 20,
             ["--agent-model", "scripted/noisy-0.9306", *lost], 0.9306, (0.0, 1.0), gate.absolute(4, 0.8),
             ["--require", "pass^4 >= 0.8", "--max-trials", "16"], 16),
        ]
    if "noisy" in groups:
        noisy = ["--agent-model", f"scripted/noisy-{P:g}"]
        out += [
            ("noisy-0.7, pass^1 holds by 0.2", 20, noisy, P, (0.0, 0.0), gate.absolute(1, P - 0.2),
             ["--require", f"pass^1 >= {P - 0.2:g}"], 8),
            ("noisy-0.7, pass^1 violated by 0.2", 20, noisy, P, (0.0, 0.0), gate.absolute(1, P + 0.2),
             ["--require", f"pass^1 >= {P + 0.2:g}"], 8),
            ("noisy-0.7, A/A regression, max-drop 0.1", 20, noisy, P, (0.0, 0.0), gate.regression(1, 0.1),
             ["--max-drop", "0.1"], 8),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1, help="`passhat gate` processes per case")
    parser.add_argument("--simulated", type=int, default=300, help="simulated gates per case")
    parser.add_argument("--cases", default="perfect,missing,noisy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from passhat.testing.harness import PASSHAT, free_ports

    home = tempfile.mkdtemp(prefix="passhat-gate-bench-")
    port, ui_port = free_ports(2)
    env = dict(os.environ, PASSHAT_HOME=home, PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    for name in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    rng = np.random.default_rng(args.seed)
    print(f"End to end: {args.gates} `passhat gate` process(es) per case (default workers); simulated: "
          f"{args.simulated} gates of the same case")
    print("| case | end to end: verdicts | conversations | not evaluable | simulated: PASS | FAIL | INC | "
          "conversations |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for c, (name, n, agent, p, missing, criterion, flags, cap) in enumerate(cases(args.cases.split(","))):
            suite = ["--domain", "airline", *[a for t in range(n) for a in ("--task", str(t))],
                     "--user-model", "scripted/oracle", "--yes", *agent]
            verdicts, spent, lost = [], [], []
            for g in range(args.gates):
                seed = 1000 * (c * args.gates + g) + 1  # new draws for every gate; its rounds add 0, 1, ...
                extra = list(flags)
                if criterion.kind == "regression":  # a fixed run of 8 trials as each gate's own baseline
                    base_id = f"e2e-base-{c}-{g}"
                    _passhat(env, PASSHAT, "run", *suite, "--trials", "8", "--seed", str(seed + 500),
                             "--run-id", base_id, "-o", "json")
                    extra += ["--baseline", base_id]
                record = json.loads(_passhat(env, PASSHAT, "gate", *suite, *extra, "--seed", str(seed),
                                             "--run-id", f"e2e-{c}-{g}", "-o", "json"))
                verdicts.append(record["verdict"])
                spent.append(record["conversations"])
                lost.append(max(cr["not_evaluable"] or 0.0 for cr in record["criteria"]))
            ps = np.full(n, p)
            baseline = fixed_baseline(rng, args.simulated, ps, 1, 8) if criterion.kind == "regression" else None
            sim = simulate(rng, ps, [criterion], args.simulated, cap, baseline=baseline, missing=missing)
            said = ", ".join(f"{v} {verdicts.count(v)}" for v in ("PASS", "FAIL", "INCONCLUSIVE") if v in verdicts)
            print(f"| {name} | {said} | {np.mean(spent):.0f} | {np.mean(lost):.3f} | "
                  + " | ".join(f"{np.mean(sim.verdict == v):.3f}" for v in (PASS, FAIL, INCONCLUSIVE))
                  + f" | {sim.conversations.mean():.0f} |", flush=True)
    finally:
        subprocess.run([str(PASSHAT), "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def _passhat(env: dict[str, str], passhat, *args: str) -> str:  # noqa: ANN001
    """`passhat ARGS` as a process; its stdout (the one JSON object of -o json)."""
    done = subprocess.run([str(passhat), *args], env=env, capture_output=True, text=True, timeout=7200,
                          stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1, 3):
        sys.exit(f"passhat {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


if __name__ == "__main__":
    main()
