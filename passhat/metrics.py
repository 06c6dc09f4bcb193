"""pass^k and pass@k, the unbiased estimators tau-bench uses, the per-(model, domain)
summary of a run, and bootstrap confidence intervals over tasks for reports. Pure
functions: the workflows call them, so they must stay deterministic (the bootstrap
draws from a seeded generator of its own)."""

from __future__ import annotations

import random
from math import comb
from typing import NamedTuple

from passhat.outcomes import ModelDomainSummary, RunSummary, TaskOutcome, is_success


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


def pass_at_curve(successes: int, trials: int) -> dict[str, float]:
    """pass@j for every j from 1 to the number of trials, keyed by str(j)."""
    return {str(j): pass_at(successes, trials, j) for j in range(1, trials + 1)}


def mean_over_tasks(per_task: list[dict[str, float]]) -> dict[str, float]:
    """Average each pass^j over the tasks that have at least j evaluable trials."""
    keys = sorted({k for curve in per_task for k in curve}, key=int)
    out: dict[str, float] = {}
    for k in keys:
        values = [curve[k] for curve in per_task if k in curve]
        out[k] = sum(values) / len(values)
    return out


def leaderboard_curves(tasks: list[tuple[int, int]], trials: int) -> list[dict[str, float]]:
    """Per-task pass^k curves as tau2 1.0.1's metrics count them (metrics/agent_metrics.py,
    what `tau2 submit prepare` writes into a submission). `tasks` holds (successes,
    evaluable trials) per task. Trials that were not evaluable (infrastructure_error in a
    tau2 file) are left out, not counted as failures; a task with no evaluable trial
    is left out altogether; and k stops at the fewest evaluable trials any remaining task
    has (and at `trials`, the run's number): one task with a single evaluable trial
    leaves pass^1 alone. The leaderboard's figure is the mean of these curves."""
    counted = [(s, n) for s, n in tasks if n]
    if not counted:
        return []
    top = min(trials, min(n for _, n in counted))
    return [{str(k): pass_hat(s, n, k) for k in range(1, top + 1)} for s, n in counted]


def task_outcome(task, rewards: list[float], trials: int) -> TaskOutcome:  # noqa: ANN001 - a TaskUnit
    """One task's result from the rewards of its evaluable trials (trials that are not
    evaluable, infrastructure failures, are left out of pass^k)."""
    successes = sum(is_success(r) for r in rewards)
    return TaskOutcome(
        run_id=task.run_id,
        agent_model=task.agent_model,
        user_model=task.user_model,
        user_persona=getattr(task, "user_persona", None),  # an imported task has none
        domain=task.domain,
        task_id=task.task_id,
        trials=trials,
        evaluable=len(rewards),
        successes=successes,
        avg_reward=sum(rewards) / len(rewards) if rewards else None,
        pass_hat=pass_hat_curve(successes, len(rewards)) if rewards else {},
    )


def summarize(
    run_id: str, tasks: list[TaskOutcome], departures: list[str] | None = None
) -> RunSummary:
    """Per (agent model, user persona, user model, domain): pass^j and pass@j averaged over tasks, and
    the average reward over evaluable trials. `departures` says how the run departs from
    tau2's rules, for the report's header."""
    groups: dict[tuple[str, str, str, str], list[TaskOutcome]] = {}
    for task in tasks:
        groups.setdefault((task.agent_model, task.user_persona or "", task.user_model, task.domain),
                          []).append(task)
    results = []
    for (agent, persona, user, domain), rows in sorted(groups.items()):
        evaluable = sum(r.evaluable for r in rows)
        reward_sum = sum(r.avg_reward * r.evaluable for r in rows if r.avg_reward is not None)
        scored = [r for r in rows if r.evaluable]
        results.append(
            ModelDomainSummary(
                agent_model=agent,
                user_model=user,
                user_persona=persona or None,
                domain=domain,
                tasks=len(rows),
                trials=sum(r.trials for r in rows),
                evaluable=evaluable,
                avg_reward=reward_sum / evaluable if evaluable else None,
                pass_hat_k=mean_over_tasks([r.pass_hat for r in rows]),
                pass_at_k=mean_over_tasks([pass_at_curve(r.successes, r.evaluable) for r in scored]),
                # What tau2 1.0.1's `submit prepare` computes from these trials, when some
                # trial is left out of it.
                pass_hat_k_leaderboard=(
                    mean_over_tasks(leaderboard_curves([(r.successes, r.evaluable) for r in rows],
                                                       max(r.trials for r in rows)))
                    if evaluable < sum(r.trials for r in rows) else None),
            )
        )
    return RunSummary(run_id=run_id, results=results, departures=list(departures or []))


def _check(successes: int, trials: int, k: int) -> None:
    if trials < 1:
        raise ValueError("need at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within 0..{trials}, got {successes}")
    if not 1 <= k <= trials:
        raise ValueError(f"k must be within 1..{trials} (the number of trials), got {k}")


# ---- uncertainty ------------------------------------------------------------------------
# A run's tasks are a sample of the tasks a benchmark could have had, so the uncertainty
# of a pass^k is the spread of its mean when the tasks are drawn again: a bootstrap over
# tasks (resampled with replacement), with the percentile interval. The draws come from a
# seeded random.Random, so the same numbers always give the same interval.

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


class Interval(NamedTuple):
    """A point estimate (the mean over the tasks) and its bootstrap confidence interval."""

    value: float
    low: float
    high: float

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def bootstrap_curve(
    per_task: list[dict[str, float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> dict[str, Interval]:
    """For every key j of the per-task curves (pass^j, keyed "1", "2", ...), the mean
    over tasks and its bootstrap interval. A task without key j (fewer than j evaluable
    trials) is left out of j's means, as in mean_over_tasks; every j uses the same draws
    of tasks, so the intervals of one curve are consistent with each other."""
    if not per_task:
        return {}
    means = mean_over_tasks(per_task)
    rng = random.Random(seed)
    n = len(per_task)
    draws = [rng.choices(range(n), k=n) for _ in range(resamples)]
    out: dict[str, Interval] = {}
    for key, value in means.items():
        column = [curve.get(key) for curve in per_task]
        samples = []
        for draw in draws:
            picked = [column[i] for i in draw if column[i] is not None]
            if picked:  # a draw holding no task with j trials says nothing about pass^j
                samples.append(sum(picked) / len(picked))
        low, high = _percentile_interval(samples, confidence)
        out[key] = Interval(value, low, high)
    return out


def bootstrap_mean(
    values: list[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> Interval:
    """The mean of per-task values with its bootstrap interval over tasks."""
    if not values:
        raise ValueError("need at least one value")
    # One "curve" with a single point per task (keys are pass^j's, numbers as strings).
    return bootstrap_curve(
        [{"1": v} for v in values], resamples=resamples, seed=seed, confidence=confidence
    )["1"]


class PairedDifference(NamedTuple):
    """a - b over the tasks both have: the mean of the per-task differences, its
    interval, and the number of shared tasks."""

    shared_tasks: int
    difference: Interval


def paired_difference(
    a: dict[str, float],
    b: dict[str, float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> PairedDifference | None:
    """Compare two models task by task (a and b map task id -> a per-task score).
    Pairing removes the spread between easy and hard tasks, which both models share,
    so the interval is far narrower than two separate intervals would suggest.
    None when no task is shared."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return None
    diffs = [a[t] - b[t] for t in shared]
    return PairedDifference(
        len(shared), bootstrap_mean(diffs, resamples=resamples, seed=seed, confidence=confidence)
    )


def _percentile_interval(samples: list[float], confidence: float) -> tuple[float, float]:
    """The central `confidence` share of the samples (linear interpolation between
    order statistics, numpy's default percentile)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    ordered = sorted(samples)
    tail = (1 - confidence) / 2
    return _quantile(ordered, tail), _quantile(ordered, 1 - tail)


def _quantile(ordered: list[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
