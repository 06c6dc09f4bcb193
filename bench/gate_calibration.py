"""Is the release gate right as often as it says? Simulated suites with known per-task
success probabilities; every gate is decided by the code `passhat gate` runs
(passhat.results.gate: `decide` after every round, `open_mask` to pick the next round's
tasks), thousands of simulated gates at once on arrays.

    python bench/gate_calibration.py [--gates 1000] [--seed 0] [--k 1] [--end-to-end N]

Prints, per case, how often the gate says PASS / FAIL / INCONCLUSIVE, the mean
conversations it spent against the fixed design (k=8 on every task, decided once by the
same test), and the naive design (k=8, the point estimate compared with the threshold).
Monte Carlo margin: 2 standard errors of a rate at alpha.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from passhat.results import gate
from passhat.results.gate_evidence import Blocks

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

    def __init__(self, gates: int, ps: np.ndarray, k: int):
        self.ps, self.k = ps, k
        self.evidence = Blocks(gates, len(ps))
        self.trials = np.zeros((gates, len(ps)), int)
        self.wins = np.zeros((gates, len(ps)), int)

    def run(self, rng: np.random.Generator, ran: np.ndarray, size: int) -> None:
        """`size` more trials (a whole number of blocks) for the tasks where `ran`."""
        outcomes = rng.random((*ran.shape, size)) < self.ps[None, :, None]
        outcomes &= ran[..., None]
        self.trials += ran * size
        self.wins += outcomes.sum(axis=2)
        for block in outcomes.reshape(*ran.shape, size // self.k, self.k).transpose(2, 0, 1, 3):
            self.evidence.add(block.all(axis=2), ran)

    @property
    def agree(self) -> np.ndarray:
        return (self.wins == 0) | (self.wins == self.trials)


def naive_estimate(suite: Suite, k: int) -> np.ndarray:
    """Per gate, the mean over tasks of tau2's C(c, k) / C(n, k)."""
    table = np.array([math.comb(c, k) / math.comb(FIXED_K, k) for c in range(FIXED_K + 1)])
    return table[suite.wins].mean(axis=1)


def adaptive(rng, ps, criterion, baseline, max_trials):  # noqa: ANN001, ANN201
    """Each gate's verdict (0 inconclusive, 1 PASS, 2 FAIL) and conversations."""
    gates = len(baseline.trials) if baseline is not None else GATES
    suite = Suite(gates, ps, criterion.k)
    size = gate.round_trials([criterion])
    verdict = np.zeros(gates, int)
    live = np.arange(gates)
    while len(live):
        base = baseline.evidence.rows(live) if baseline is not None else None
        passed, failed, idle = gate.decide(criterion, suite.evidence.rows(live), base, len(ps))
        verdict[live[passed]], verdict[live[failed]] = 1, 2
        undecided = ~passed & ~failed
        live = live[undecided]
        chosen = gate.open_mask(suite.trials[live], suite.trials[live], suite.agree[live], size, max_trials,
                                idle[undecided])
        live = live[chosen.any(axis=1)]
        ran = np.zeros(suite.trials.shape, bool)
        ran[live] = chosen[chosen.any(axis=1)]
        suite.run(rng, ran, size)
    return verdict, suite.trials.sum(axis=1)


def fixed(rng, ps, criterion, baseline):  # noqa: ANN001, ANN201
    """The fixed design's verdicts by the same test, and the naive design's."""
    gates = len(baseline.trials) if baseline is not None else GATES
    suite = Suite(gates, ps, criterion.k)
    suite.run(rng, np.ones(suite.trials.shape, bool), FIXED_K - FIXED_K % criterion.k)
    passed, failed, _ = gate.decide(criterion, suite.evidence, baseline.evidence if baseline else None, len(ps))
    est = naive_estimate(suite, criterion.k)
    if criterion.kind == "regression":
        est = est - naive_estimate(baseline, criterion.k)
    naive = np.where(est >= gate._bar(criterion), 1, 2)
    return np.where(passed, 1, np.where(failed, 2, 0)), naive


GATES = 1000


def main() -> None:
    global GATES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1000, help="gates per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--k", type=int, default=1, help="the k of the criteria")
    parser.add_argument("--max-trials", type=int, default=None, help="per task; default passhat gate's")
    args = parser.parse_args()
    from passhat.cli.gate_commands import DEFAULT_MAX_TRIALS

    GATES = args.gates
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
        ("A/A regression, max-drop 0", gate.regression(k, 0.0), 2),
        (f"A/A regression, max-drop {margin}", gate.regression(k, margin), 2),
    ]
    names = {0: "INC", 1: "PASS", 2: "FAIL"}
    print(f"{'case':34} {'wrong verdict':>18} {'PASS':>6} {'FAIL':>6} {'INC':>6} {'convs':>6} {'fewer':>6}"
          f" | {'fixed k=8: wrong':>16} {'PASS':>6} {'FAIL':>6} | {'naive: wrong':>12} {'PASS':>6}")
    for name, criterion, wrong in cases:
        started = time.monotonic()
        baseline = None
        if criterion.kind == "regression":
            baseline = Suite(args.gates, ps, k)
            baseline.run(rng, np.ones(baseline.trials.shape, bool), FIXED_K - FIXED_K % k)
        verdict, spent = adaptive(rng, ps, criterion, baseline, max_trials)
        fixed_verdict, naive = fixed(rng, ps, criterion, baseline)

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
          "PASS/FAIL/INC: the adaptive gate's verdicts (power: PASS where it holds by the margin, FAIL where "
          f"violated); convs: mean conversations; fewer: than the fixed design's {fixed_convs}.")


if __name__ == "__main__":
    main()
