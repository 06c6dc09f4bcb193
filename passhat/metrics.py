"""pass^k and pass@k, the unbiased estimators tau-bench uses, and the per-(model, domain)
summary of a run. Pure functions: the workflows call them, so they must stay
deterministic."""

from __future__ import annotations

from math import comb

from passhat.contracts import ModelDomainSummary, RunSummary, TaskOutcome, is_success


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


def task_outcome(task, rewards: list[float], trials: int) -> TaskOutcome:  # noqa: ANN001 - a TaskUnit
    """One task's result from the rewards of its evaluable trials (trials that are not
    evaluable, infrastructure failures, are left out of pass^k)."""
    successes = sum(is_success(r) for r in rewards)
    return TaskOutcome(
        run_id=task.run_id,
        agent_model=task.agent_model,
        user_model=task.user_model,
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
    """Per (agent model, user model, domain): pass^j and pass@j averaged over tasks, and
    the average reward over evaluable trials. `departures` says how the run departs from
    tau2's rules, for the report's header."""
    groups: dict[tuple[str, str, str], list[TaskOutcome]] = {}
    for task in tasks:
        groups.setdefault((task.agent_model, task.user_model, task.domain), []).append(task)
    results = []
    for (agent, user, domain), rows in sorted(groups.items()):
        evaluable = sum(r.evaluable for r in rows)
        reward_sum = sum(r.avg_reward * r.evaluable for r in rows if r.avg_reward is not None)
        scored = [r for r in rows if r.evaluable]
        results.append(
            ModelDomainSummary(
                agent_model=agent,
                user_model=user,
                domain=domain,
                tasks=len(rows),
                trials=sum(r.trials for r in rows),
                evaluable=evaluable,
                avg_reward=reward_sum / evaluable if evaluable else None,
                pass_hat_k=mean_over_tasks([r.pass_hat for r in rows]),
                pass_at_k=mean_over_tasks([pass_at_curve(r.successes, r.evaluable) for r in scored]),
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
