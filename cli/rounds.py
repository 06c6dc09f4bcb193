"""Runs in rounds, for a measurement that picks each round's tasks from the rounds before
it (`passhat gate`, `passhat run --adaptive`).

Round r is a run of its own in the results store, `RUN-r0`, `RUN-r1`, ...: it runs the
tasks the caller's `choose` picks from the rounds recorded before it, each a given number
of trials, with the seed shifted by r so its trials are new draws. Which tasks a round runs
follows only from the rounds recorded before it, so the same command started again with
the same --run-id rebuilds the same rounds: a finished round is read back, an interrupted
one is resumed (its scored trials kept), and nothing finished runs twice."""

from __future__ import annotations

from typing import Callable

from passhat.cli.common import err_console

# Task ids are "domain/task"; each round's outcomes map them to True, False, or None
# (not evaluable) in the order the trials ran.
Outcomes = dict[str, list]


def round_id(run_id: str, r: int) -> str:
    return f"{run_id}-r{r}"


def outcomes(store, run_ids: list[str]) -> Outcomes:  # noqa: ANN001 - a Store
    """domain/task -> outcomes in the order they ran: run by run, trial index within a run."""
    from passhat.contracts import TRIAL_SCORED, is_success

    out: Outcomes = {}
    for run_id in run_ids:
        for row in sorted(store.trials(run_id), key=lambda t: (t.domain, t.task_id, t.trial_index)):
            scored = row.status == TRIAL_SCORED and row.reward is not None
            out.setdefault(f"{row.domain}/{row.task_id}", []).append(is_success(row.reward) if scored else None)
    return out


def recorded_rounds(store, run_id: str) -> list[str]:  # noqa: ANN001
    """The round runs recorded for run_id, in order."""
    runs: list[str] = []
    while store.get_run(round_id(run_id, len(runs))) is not None:
        runs.append(round_id(run_id, len(runs)))
    return runs


def run_rounds(store, base, size: int, choose: Callable[[list[Outcomes], float], "tuple[list[str], str | None]"],  # noqa: ANN001
               *, workers: int | None, yes: bool, output: str, what: str) -> tuple[list[str], list[Outcomes], str | None]:
    """Rounds of `size` trials a task until `choose` (given each round's outcomes so far,
    every task listed in the first, and the cost spent) picks no task, or the budget
    (base.max_cost) is spent. The round runs, their outcomes, and why it stopped early
    (choose's reason or the budget's; None when choose ended it without one)."""
    from passhat.cli.execute import execute_here
    from passhat.contracts import RUN_BUDGET_EXHAUSTED, RUN_COMPLETED, TRIAL_NOT_EVALUABLE

    keys = [f"{d}/{t}" for d in base.domains for t in base.task_ids[d]]
    rounds: list[str] = []
    while True:
        data = _round_outcomes(store, rounds, keys)
        spent = sum(store.run_cost(r) for r in rounds)
        chosen, stopped = choose(data, spent)
        if not chosen:
            return rounds, data, stopped
        if base.max_cost is not None and spent >= base.max_cost:
            return rounds, data, f"the budget of {base.max_cost:g} USD is spent"
        run_id = round_id(base.run_id, len(rounds))
        per_domain = {d: [t for t in base.task_ids[d] if f"{d}/{t}" in chosen] for d in base.domains}
        config = base.model_copy(update={
            "run_id": run_id, "trials": size, "seed": base.seed + len(rounds),
            "domains": [d for d in base.domains if per_domain[d]],
            "task_ids": {d: ids for d, ids in per_domain.items() if ids},
            "expected_calls": {d: c for d, c in base.expected_calls.items() if per_domain.get(d)},
            "max_cost": None if base.max_cost is None else base.max_cost - spent,
        })
        row = store.get_run(run_id)
        if row is None or row.status != RUN_COMPLETED:
            err_console.print(f"{what} {base.run_id}: round {len(rounds)} ({run_id}): {len(chosen)} task(s) "
                              f"x {size} trials", highlight=False)
            execute_here(config, detach=False, output="json" if output == "json" else "table",
                         workers=workers, resume=row is not None, preview=row is None, yes=yes)
            if store.trials(run_id, status=TRIAL_NOT_EVALUABLE):  # retried once, then left out
                execute_here(config, detach=False, output="json", workers=workers, resume=True)
        rounds.append(run_id)
        if store.get_run(run_id).status == RUN_BUDGET_EXHAUSTED:
            return rounds, _round_outcomes(store, rounds, keys), "the budget (--max-cost) ran out during the round"


def _round_outcomes(store, rounds: list[str], keys: list[str]) -> list[Outcomes]:  # noqa: ANN001
    """Each round's outcomes, the first round listing every task (none run yet: no trials)."""
    data = [outcomes(store, [run_id]) for run_id in rounds] or [{}]
    data[0] = {key: [] for key in keys} | data[0]
    return data
