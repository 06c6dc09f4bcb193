"""Is the release gate right as often as it says? Simulated suites with known per-task
success probabilities; every gate is decided by the code `passhat gate` runs
(passhat.results.gate: `decide` after every round, `open_mask` to pick the next round's
tasks, the evidence's `plan` for the next round's bets), thousands of simulated gates at
once on arrays.

    python bench/gate_calibration.py [--gates 1000] [--seed 0] [--k 1] [--end-to-end N]

Prints, per case, how often the gate says PASS / FAIL / INCONCLUSIVE, the mean
conversations it spent against the fixed design (k=8 on every task, decided once by the
same test), and the naive design (k=8, the point estimate compared with the threshold).
Monte Carlo margin: 2 standard errors of a rate at alpha.

--end-to-end N then runs N gates of each of a few cases as `passhat gate` processes on
the embedded Temporal server (a temporary home, free ports), scripted/noisy-P agents on
airline tasks, and prints their verdicts and conversations next to the simulated figures
of the same case (same per-task P, same criterion).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

from passhat.results import gate
from passhat.results.gate_evidence import Evidence

TASKS = 50
FIXED_K = 8


def leaderboard_suite(rng: np.random.Generator) -> np.ndarray:
    """A spread like the leaderboards': many tasks near 0 or 1, some in between."""
    middle = np.round(rng.uniform(0.15, 0.9, 14), 3)
    return np.concatenate([[1.0] * 18, [0.97] * 6, [0.0] * 8, [0.03] * 4, middle])


def theta(ps: np.ndarray, k: int) -> float:
    return float(np.mean(ps ** k))


class Suite:
    """G simulated gates on one suite: each task's trials so far, and their evidence."""

    def __init__(self, gates: int, ps: np.ndarray, criterion: gate.Criterion, baseline: np.ndarray | None = None):
        self.ps, self.k = ps, criterion.k
        base = None if baseline is None else (baseline, np.ones(baseline.shape, bool))
        self.evidence = Evidence(gates, len(ps), gate._bar(criterion), base)
        self.trials = np.zeros((gates, len(ps)), int)
        self.wins = np.zeros((gates, len(ps)), int)

    def run(self, rng: np.random.Generator, live: np.ndarray, ran: np.ndarray, size: int) -> None:
        """`size` more trials (a whole number of blocks) for the tasks where `ran`, in the
        gates `live`; each block bet as the evidence plans from the blocks before it."""
        outcomes = rng.random((*ran.shape, size)) < self.ps[None, :, None]
        outcomes &= ran[..., None]
        self.trials[live] += ran * size
        self.wins[live] += outcomes.sum(axis=2)
        evidence = self.evidence.rows(live)
        for block in outcomes.reshape(*ran.shape, size // self.k, self.k).transpose(2, 0, 1, 3):
            evidence.add(block.all(axis=2), ran, evidence.plan())  # as replay: planned before the block
        self._put(live, evidence)

    def _put(self, live: np.ndarray, part: Evidence) -> None:
        ev = self.evidence
        ev.successes[live], ev.blocks[live] = part.successes, part.blocks
        for whole, w in zip(ev.wealth, part.wealth):
            if w.eta.shape[2] > whole.eta.shape[2]:
                grow = np.zeros((*whole.filled.shape, w.eta.shape[2] - whole.eta.shape[2]))
                whole.eta, whole.y = np.concatenate([whole.eta, grow], 2), np.concatenate([whole.y, grow], 2)
            whole.eta[live, :, :w.eta.shape[2]], whole.y[live, :, :w.eta.shape[2]] = w.eta, w.y
            whole.filled[live] = w.filled


def baseline_blocks(rng: np.random.Generator, gates: int, ps: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A baseline run of the fixed design: its block outcomes (gates, tasks, blocks) and wins."""
    trials = rng.random((gates, len(ps), FIXED_K - FIXED_K % k)) < ps[None, :, None]
    return trials.reshape(gates, len(ps), -1, k).all(axis=3), trials.sum(axis=2)


def naive_estimate(wins: np.ndarray, k: int) -> np.ndarray:
    """Per gate, the mean over tasks of tau2's C(c, k) / C(n, k)."""
    table = np.array([math.comb(c, k) / math.comb(FIXED_K, k) for c in range(FIXED_K + 1)])
    return table[wins].mean(axis=1)


def adaptive(rng, ps, criterion, baseline, gates, max_trials):  # noqa: ANN001, ANN201
    """Each gate's verdict (0 inconclusive, 1 PASS, 2 FAIL) and conversations."""
    suite = Suite(gates, ps, criterion, baseline)
    size = gate.round_trials([criterion])
    verdict = np.zeros(gates, int)
    live = np.arange(gates)
    while len(live):
        passed, failed, idle, futile = gate.decide(criterion, suite.evidence.rows(live), max_trials // criterion.k)
        verdict[live[passed]], verdict[live[failed]] = 1, 2
        chosen = gate.open_mask(suite.trials[live], size, max_trials, idle, passed | failed | futile)
        running = chosen.any(axis=1)
        live, chosen = live[running], chosen[running]
        suite.run(rng, live, chosen, size)
    return verdict, suite.trials.sum(axis=1)


def fixed(rng, ps, criterion, baseline, gates, baseline_wins):  # noqa: ANN001, ANN201
    """The fixed design's verdicts by the same test, and the naive design's."""
    suite = Suite(gates, ps, criterion, baseline)
    everything = np.arange(gates)
    for _ in range(FIXED_K // criterion.k):
        suite.run(rng, everything, np.ones(suite.trials.shape, bool), criterion.k)
    passed, failed, _, _ = gate.decide(criterion, suite.evidence)
    est = naive_estimate(suite.wins, criterion.k)
    if criterion.kind == "regression":
        est = est - naive_estimate(baseline_wins, criterion.k)
    naive = np.where(est >= gate._bar(criterion), 1, 2)
    return np.where(passed, 1, np.where(failed, 2, 0)), naive


E2E_TASKS = 20  # airline tasks 0..19: scripted/oracle solves every airline task
E2E_P = 0.7  # scripted/noisy-0.7: each trial succeeds with this chance, on every task


def end_to_end(gates: int, simulated: int, rng: np.random.Generator, max_trials: int) -> None:
    """`passhat gate` as real processes, N per case, beside the same cases simulated."""
    from passhat.testing.harness import PASSHAT, free_ports

    home = tempfile.mkdtemp(prefix="passhat-gate-bench-")
    port, ui_port = free_ports(2)
    env = dict(os.environ, PASSHAT_HOME=home, PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    for name in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    suite = ["--domain", "airline", *[a for t in range(E2E_TASKS) for a in ("--task", str(t))],
             "--agent-model", f"scripted/noisy-{E2E_P:g}", "--user-model", "scripted/oracle", "--workers", "1",
             "--yes"]
    ps = np.full(E2E_TASKS, E2E_P)
    cases = [
        ("holds by 0.2", gate.absolute(1, E2E_P - 0.2), ["--require", f"pass^1 >= {E2E_P - 0.2:g}"]),
        ("violated by 0.2", gate.absolute(1, E2E_P + 0.2), ["--require", f"pass^1 >= {E2E_P + 0.2:g}"]),
        ("at threshold", gate.absolute(1, E2E_P), ["--require", f"pass^1 >= {E2E_P:g}"]),
        ("A/A regression, max-drop 0.1", gate.regression(1, 0.1), ["--max-drop", "0.1"]),
    ]
    print(f"\nEnd to end: {gates} `passhat gate` process(es) per case, {E2E_TASKS} airline tasks, "
          f"scripted/noisy-{E2E_P:g} (true pass^1 = {E2E_P:g}), at most {max_trials} trials a task; "
          f"simulated: {simulated} gates of the same case")
    print(f"{'case':30} {'end to end: verdicts':>28} {'convs':>6} | {'simulated: PASS':>15} {'FAIL':>6} {'INC':>6} "
          f"{'convs':>6}")
    try:
        for c, (name, criterion, flags) in enumerate(cases):
            verdicts, spent = [], []
            for g in range(gates):
                seed = 1000 * (c * gates + g) + 1  # new draws for every gate; its rounds add 0, 1, ...
                extra = list(flags)
                if criterion.kind == "regression":  # a fixed run of k=8 as each gate's own baseline
                    base_id = f"e2e-base-{c}-{g}"
                    _passhat(env, "run", *suite, "--trials", str(FIXED_K), "--seed", str(seed + 500),
                             "--run-id", base_id, "-o", "json")
                    extra += ["--baseline", base_id]
                record = json.loads(_passhat(env, "gate", *suite, *extra, "--seed", str(seed),
                                             "--run-id", f"e2e-{c}-{g}", "-o", "json"))
                verdicts.append(record["verdict"])
                spent.append(record["conversations"])
            baseline = baseline_blocks(rng, simulated, ps, 1)[0] if criterion.kind == "regression" else None
            sim, sim_spent = adaptive(rng, ps, criterion, baseline, simulated, max_trials)
            said = ", ".join(f"{v} {verdicts.count(v)}" for v in ("PASS", "FAIL", "INCONCLUSIVE") if v in verdicts)
            print(f"{name:30} {said:>28} {np.mean(spent):>6.0f} | "
                  + " ".join(f"{np.mean(sim == code):>{w}.3f}" for code, w in ((1, 15), (2, 6), (0, 6)))
                  + f" {sim_spent.mean():>6.0f}", flush=True)
    finally:
        subprocess.run([str(PASSHAT), "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def _passhat(env: dict[str, str], *args: str) -> str:
    """`passhat ARGS` as a process; its stdout (the one JSON object of -o json)."""
    from passhat.testing.harness import PASSHAT

    done = subprocess.run([str(PASSHAT), *args], env=env, capture_output=True, text=True, timeout=3600,
                          stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"passhat {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1000, help="gates per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--k", type=int, default=1, help="the k of the criteria")
    parser.add_argument("--max-trials", type=int, default=None, help="per task; default passhat gate's")
    parser.add_argument("--end-to-end", type=int, default=0, metavar="N",
                        help="also run N `passhat gate` processes per end-to-end case")
    args = parser.parse_args()
    from passhat.cli.gate_commands import DEFAULT_MAX_TRIALS

    max_trials = args.max_trials or DEFAULT_MAX_TRIALS
    rng = np.random.default_rng(args.seed)
    ps = leaderboard_suite(rng)
    k, margin, alpha = args.k, args.margin, 1 - gate.DEFAULT_CONFIDENCE
    t = theta(ps, k)
    mc = 2 * math.sqrt(alpha * (1 - alpha) / args.gates)
    fixed_convs = FIXED_K * TASKS
    print(f"{TASKS} tasks, true pass^{k} = {t:.3f}; {args.gates} gates per case; alpha = {alpha:.2f}; "
          f"Monte Carlo margin +-{mc:.3f}; adaptive rounds of {gate.round_trials([gate.absolute(k, 0.5)])} "
          f"trials, at most {max_trials} per task; fixed design k={FIXED_K} ({fixed_convs} conversations)")
    cases = [
        ("holds, at threshold", gate.absolute(k, t), 2),
        (f"holds by {margin}", gate.absolute(k, max(t - margin, 0)), 2),
        (f"violated by {margin}", gate.absolute(k, min(t + margin, 1)), 1),
        (f"holds by {margin / 2:g}", gate.absolute(k, max(t - margin / 2, 0)), 2),
        ("A/A regression, max-drop 0", gate.regression(k, 0.0), 2),
        (f"A/A regression, max-drop {margin}", gate.regression(k, margin), 2),
        (f"regression, drop {2 * margin:g} > max-drop {margin}", gate.regression(k, margin), 1),
    ]
    names = {0: "INC", 1: "PASS", 2: "FAIL"}
    print(f"{'case':34} {'wrong verdict':>18} {'PASS':>6} {'FAIL':>6} {'INC':>6} {'convs':>6} {'fewer':>6}"
          f" | {'fixed k=8: wrong':>16} {'PASS':>6} {'FAIL':>6} | {'naive: wrong':>12} {'PASS':>6}")
    for name, criterion, wrong in cases:
        started = time.monotonic()
        baseline = baseline_wins = None
        candidate = ps
        if criterion.kind == "regression":
            baseline, baseline_wins = baseline_blocks(rng, args.gates, ps, k)
            if wrong == 1:  # the candidate breaks tasks that always succeeded: pass^k drops 2 margins
                candidate = ps.copy()
                candidate[:round(2 * margin * TASKS)] = 0.0
        verdict, spent = adaptive(rng, candidate, criterion, baseline, args.gates, max_trials)
        fixed_verdict, naive = fixed(rng, candidate, criterion, baseline, args.gates, baseline_wins)

        def rate(v, code):  # noqa: ANN001, ANN202
            return float(np.mean(v == code))

        print(f"{name:34} {'false ' + names[wrong]:>11} {rate(verdict, wrong):.3f} {rate(verdict, 1):>6.3f} "
              f"{rate(verdict, 2):>6.3f} {rate(verdict, 0):>6.3f} {spent.mean():>6.0f} "
              f"{1 - spent.mean() / fixed_convs:>6.0%}"
              f" | {rate(fixed_verdict, wrong):>16.3f} {rate(fixed_verdict, 1):>6.3f} {rate(fixed_verdict, 2):>6.3f}"
              f" | {rate(naive, wrong):>12.3f} {rate(naive, 1):>6.3f}   ({time.monotonic() - started:.0f}s)",
              flush=True)
    print("wrong verdict: the rate of the error the case allows (false FAIL where the criterion holds, "
          f"false PASS where it is violated); it must be at most {alpha:.2f} + {mc:.3f}. "
          "PASS/FAIL/INC: the adaptive gate's verdicts (power: PASS where it holds by a margin, FAIL where "
          f"violated); convs: mean conversations; fewer: than the fixed design's {fixed_convs}.")
    if args.end_to_end:
        end_to_end(args.end_to_end, args.gates, rng, max_trials)


if __name__ == "__main__":
    main()
