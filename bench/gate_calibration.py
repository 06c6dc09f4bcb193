"""Is the release gate right as often as it says? Simulated suites with known per-task
success probabilities, each gate run through the same decision code `passhat gate` uses
(passhat.results.gate: evaluate after every round, open_tasks to pick the next round),
with simulated trial outcomes.

    python bench/gate_calibration.py [--gates 1000] [--seed 0]

Prints, per case, how often the gate says PASS / FAIL / INCONCLUSIVE, the mean
conversations it spent against the fixed design (k=8 on every task, decided once with
the same test), and the naive design (k=8, the point estimate compared with the
threshold). Monte Carlo margin: 2 standard errors of a rate near alpha.
"""

from __future__ import annotations

import argparse
import math
import random
import time

from passhat.results import gate

TASKS = 50
FIXED_K = 8
MAX_TRIALS = 16


def leaderboard_suite(rng: random.Random) -> list[float]:
    """A spread like the leaderboards': many tasks near 0 or 1, some in between."""
    return [1.0] * 18 + [0.97] * 6 + [0.0] * 8 + [0.03] * 4 + [round(rng.uniform(0.15, 0.9), 3) for _ in range(14)]


def theta(ps: list[float], k: int) -> float:
    return sum(p ** k for p in ps) / len(ps)


def draw(rng: random.Random, p: float, n: int) -> list[bool]:
    return [rng.random() < p for _ in range(n)]


def adaptive(rng, ps, criterion, baseline=None):  # noqa: ANN001, ANN201
    data = {str(i): [] for i in range(len(ps))}
    while True:
        result = gate.evaluate(criterion, data, baseline, interval=False)
        if result.decided:
            break
        chosen = gate.open_tasks([criterion], data, MAX_TRIALS)
        if not chosen:
            break
        size = gate.round_trials([criterion])
        for t in chosen:
            data[t] += draw(rng, ps[int(t)], size)
    return result.verdict, sum(map(len, data.values()))


def fixed(rng, ps, criterion, baseline=None):  # noqa: ANN001, ANN201
    data = {str(i): draw(rng, p, FIXED_K) for i, p in enumerate(ps)}
    verdict = gate.evaluate(criterion, data, baseline, interval=False).verdict
    est = sum(gate.pass_hat(sum(v), FIXED_K, criterion.k) for v in data.values()) / len(ps)
    if criterion.kind == "regression":
        est -= sum(gate.pass_hat(sum(v), len(v), criterion.k) for v in baseline.values()) / len(ps)
        naive = gate.PASS if est >= -criterion.max_drop else gate.FAIL
    else:
        naive = gate.PASS if est >= criterion.threshold else gate.FAIL
    return verdict, naive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1000, help="gates per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--k", type=int, default=1, help="the k of the criteria")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ps = leaderboard_suite(rng)
    k, margin, alpha = args.k, args.margin, 1 - gate.DEFAULT_CONFIDENCE
    t = theta(ps, k)
    mc = 2 * math.sqrt(alpha * (1 - alpha) / args.gates)
    print(f"{TASKS} tasks, true pass^{k} = {t:.3f}; {args.gates} gates per case; alpha = {alpha:.2f}; "
          f"Monte Carlo margin +-{mc:.3f}; adaptive rounds of {gate.round_trials([gate.absolute(k, 0.5)])} "
          f"trials, at most {MAX_TRIALS} per task; fixed design k={FIXED_K}")
    cases = [
        ("holds, at threshold", gate.absolute(k, t), "FAIL"),
        (f"holds by {margin}", gate.absolute(k, max(t - margin, 0)), "FAIL"),
        (f"violated by {margin}", gate.absolute(k, min(t + margin, 1)), "PASS"),
        ("A/A regression, max-drop 0", gate.regression(k, 0.0), "FAIL"),
        (f"A/A regression, max-drop {margin}", gate.regression(k, margin), "FAIL"),
    ]
    print(f"{'case':34} {'wrong verdict':>26} {'PASS':>6} {'FAIL':>6} {'INC':>6} {'convs':>7} {'vs k=8':>7}"
          f" | {'fixed: wrong':>12} {'PASS':>6} | {'naive: wrong':>12} {'PASS':>6}")
    for name, criterion, wrong in cases:
        started = time.monotonic()
        counts = {gate.PASS: 0, gate.FAIL: 0, gate.INCONCLUSIVE: 0}
        fixed_counts, naive_counts = dict(counts), dict(counts)
        spent = 0
        for _ in range(args.gates):
            base = {str(i): draw(rng, p, FIXED_K) for i, p in enumerate(ps)} \
                if criterion.kind == "regression" else None
            verdict, conversations = adaptive(rng, ps, criterion, base)
            counts[verdict] += 1
            spent += conversations
            f, n = fixed(rng, ps, criterion, base)
            fixed_counts[f] += 1
            naive_counts[n] += 1
        g = args.gates
        label = f"false {wrong}"
        print(f"{name:34} {label:>14} {counts[wrong] / g:>11.3f} {counts['PASS'] / g:>6.3f} {counts['FAIL'] / g:>6.3f} "
              f"{counts['INCONCLUSIVE'] / g:>6.3f} {spent / g:>7.0f} {1 - spent / g / (FIXED_K * TASKS):>6.0%}"
              f" | {fixed_counts[wrong] / g:>12.3f} {fixed_counts['PASS'] / g:>6.3f}"
              f" | {naive_counts[wrong] / g:>12.3f} {naive_counts['PASS'] / g:>6.3f}"
              f"   ({time.monotonic() - started:.0f}s)", flush=True)
    print("wrong verdict: the rate of the error the case allows (false FAIL where the criterion holds, "
          f"false PASS where it is violated); it must be at most {alpha:.2f} + {mc:.3f}. "
          "PASS/FAIL/INC: the adaptive gate's verdicts (power: PASS where it holds by the margin, FAIL where "
          "violated); convs: mean conversations; vs k=8: fewer than the fixed design's "
          f"{FIXED_K * TASKS}.")


if __name__ == "__main__":
    main()
