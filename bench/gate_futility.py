"""What futility costs where a task has two blocks (pass^4, --max-trials 8): on the same
draws, how often the gate stops "too close to call" after every task's first block, and
how often that takes away a verdict the fixed design (both blocks, one look by the same
test) gives. Futility can only turn a verdict into INCONCLUSIVE, so this paired count is
the whole of its cost in power, free of the Monte Carlo noise of comparing two runs.

    python bench/gate_futility.py [--gates 4000] [--seed 5] [--suite-seed 0] [--uniform P --tasks N]

--suite-seed 0 is the leaderboard-like suite of bench/gate_calibration.py (its --seed 0);
--uniform P runs N tasks that all succeed with P instead.
"""

from __future__ import annotations

import argparse

import numpy as np
from gate_calibration import leaderboard_suite, theta
from passhat.results import gate
from passhat.results.gate_simulation import Simulated, readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=5, help="the trials' draws")
    parser.add_argument("--suite-seed", type=int, default=0, help="the suite's middle tasks")
    parser.add_argument("--uniform", type=float, default=None, help="every task at this p instead")
    parser.add_argument("--tasks", type=int, default=50, help="with --uniform: how many tasks")
    args = parser.parse_args()
    if args.uniform is None:
        ps, what = leaderboard_suite(np.random.default_rng(args.suite_seed)), f"suite seed {args.suite_seed}"
    else:
        ps, what = np.full(args.tasks, args.uniform), f"every task at p = {args.uniform:g}"
    rng, g, t4 = np.random.default_rng(args.seed), args.gates, theta(ps, 4)
    print(f"{g} gates a case, pass^4 with two blocks a task, {len(ps)} tasks ({what})")
    print("| case | futile after block 1 | decided after block 1 | fixed design decides | verdicts lost to futility |")
    print("|---|---|---|---|---|")
    none = np.zeros((g, len(ps), 4), bool)
    for name, bar in (("at threshold", t4), ("holds by 0.1", t4 - 0.1), ("violated by 0.1", t4 + 0.1)):
        criterion = gate.absolute(4, max(min(bar, 1.0), 0.0))
        suite = Simulated(g, len(ps), criterion, max_trials=8, size=4)
        every, ran = np.arange(g), np.ones((g, len(ps)), bool)
        suite.run(every, ran, readings(rng.random((g, len(ps), 4)) < ps[None, :, None], none), 4)
        first = gate.decide(criterion, suite.evidence, 2)
        suite.run(every, ran, readings(rng.random((g, len(ps), 4)) < ps[None, :, None], none), 4)
        last = gate.decide(criterion, suite.evidence)
        early, final = first.passed | first.failed, last.passed | last.failed
        lost = first.futile & ~early & final
        print(f"| {name} | {first.futile.mean():.3f} | {early.mean():.3f} | {final.mean():.3f} | {lost.mean():.4f} |")


if __name__ == "__main__":
    main()
