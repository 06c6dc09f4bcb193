"""pass^k and pass@k, the unbiased estimators tau-bench uses. Pure functions: the workflows
call them, so they must stay deterministic."""

from __future__ import annotations

from math import comb

SUCCESS_THRESHOLD = 1.0 - 1e-6  # tau2 counts a trial as a success when reward == 1


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_THRESHOLD


def pass_hat(successes: int, trials: int, k: int) -> float:
    """Chance that k trials drawn without replacement from `trials` all succeed:
    C(c, k) / C(n, k). Refuses k outside 1..n."""
    _check(successes, trials, k)
    return comb(successes, k) / comb(trials, k)


def pass_at(successes: int, trials: int, k: int) -> float:
    """Chance that at least one of k drawn trials succeeds: 1 - C(n-c, k) / C(n, k)."""
    _check(successes, trials, k)
    return 1.0 - comb(trials - successes, k) / comb(trials, k)


def pass_hat_curve(successes: int, trials: int) -> dict[str, float]:
    """pass^j for every j from 1 to the number of trials, keyed by str(j) for JSON."""
    return {str(j): pass_hat(successes, trials, j) for j in range(1, trials + 1)}


def mean_over_tasks(per_task: list[dict[str, float]]) -> dict[str, float]:
    """Average each pass^j over the tasks that have at least j evaluable trials."""
    keys = sorted({k for curve in per_task for k in curve}, key=int)
    out: dict[str, float] = {}
    for k in keys:
        values = [curve[k] for curve in per_task if k in curve]
        out[k] = sum(values) / len(values)
    return out


def _check(successes: int, trials: int, k: int) -> None:
    if trials < 1:
        raise ValueError("need at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within 0..{trials}, got {successes}")
    if not 1 <= k <= trials:
        raise ValueError(f"k must be within 1..{trials} (the number of trials), got {k}")
