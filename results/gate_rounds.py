"""The release gate's rounds: which tasks the next round runs, from the rounds so far
(`passhat gate` and its workflow, through next_round; `run --adaptive` shares open_mask),
and how a round runs them (round_trials, curtailed). The verdicts themselves are
passhat.results.gate's."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from passhat.results.gate import (
    FAIL,
    FUTILITY,
    Criterion,
    CriterionResult,
    Rounds,
    as_rounds,
    evaluate,
    merged,
    unit_trials,
)
from passhat.results.gate_personas import of_user


# How many times a round continues a trial it left not evaluable, from its recorded steps,
# before its evidence is read (workflows/rounds.py; modelled by gate_simulation).
CONTINUATIONS = 2


def curtailed(criteria: Sequence[Criterion]) -> list[int]:
    """The block sizes a gate's rounds are curtailed to (passhat.curtailment), or none:
    only when every criterion bets on blocks of more than one trial. A trial bet on by
    itself (pass^1, or per-trial bets) is needed whatever the others show, so curtailing
    would save nothing."""
    sizes = [unit_trials(c.k, c.per_trial) for c in criteria]
    return sizes if sizes and min(sizes) > 1 else []


def round_trials(criteria: Sequence[Criterion]) -> int:
    """Trials each task gets per round: one block of the largest k. Small rounds let the
    gate stop soon after the verdict is known."""
    return max(c.k for c in criteria)


def open_mask(trials: np.ndarray, size: int, max_trials: int, idle: np.ndarray,
              stopped: np.ndarray | None = None) -> np.ndarray:
    """Which tasks the next round runs, on arrays (trials run so far, and the tasks
    `decide` found idle): those below max_trials that are not idle. With `stopped` (per
    gate: decided, or futile), a gate that is not stopped but whose every task below
    max_trials is idle runs all of those: the plug-in's guess that no trial helps is not
    a reason to leave budget unspent on a criterion still open (as `run --adaptive`
    does). Without that fallback a perfect agent at a bar of 0.95 stopped INCONCLUSIVE
    after two trials a task."""
    room = trials + size <= max_trials
    mask = room & ~idle
    if stopped is not None:
        stuck = ~mask.any(axis=1) & ~np.asarray(stopped, bool)
        mask |= room & stuck[:, None]
    return mask


def open_tasks(criteria: Sequence[Criterion], candidate: Rounds, max_trials: int,
               results: Sequence[CriterionResult] = ()) -> list[str]:
    """The tasks the next round runs (open_mask), by id: idle only when idle for every
    criterion of `results` (the evaluation of the trials so far of the criteria still open);
    every task below max_trials when all are idle but some open criterion is not futile."""
    data, size = merged(candidate), round_trials(criteria)
    ids = sorted(data)
    idle = np.array([bool(results) and all(t in r.idle for r in results) for t in ids], bool)
    stopped = np.array([not results or all(r.futile for r in results)])
    if curtailed(criteria):  # a curtailed round counts as its size, however early it stopped
        spent = [size * sum(bool(r.get(t)) for r in as_rounds(candidate)) for t in ids]
    else:
        spent = [len(data[t]) for t in ids]
    mask = open_mask(np.array(spent, int)[None], size, max_trials, idle[None], stopped)[0]
    return [t for t, chosen in zip(ids, mask) if chosen]


def next_round(criteria: Sequence[Criterion], candidate: Rounds, baseline: Rounds | None,
               max_trials: int, baseline_curtail: Sequence[int] = ()) -> tuple[list[str], str | None]:
    """The tasks the gate's next round runs, from the rounds so far, and, when it runs
    none while a criterion is still open, why it stopped (for the summary). baseline_curtail:
    the block sizes the baseline's rounds were curtailed to, when it is such a gate."""
    size = round_trials(criteria)
    results = [evaluate(c, candidate, baseline, max_trials=max_trials, interval=False, round_size=size,
                        curtail=curtailed(criteria), baseline_curtail=baseline_curtail) for c in criteria]
    open_ = [r for r in results if not r.decided]
    if any(r.verdict == FAIL for r in results):  # the gate's verdict is FAIL whatever the rest says
        return [], None
    if any(c.persona is not None for c in criteria):  # a round runs a task under every user alike
        candidate = of_user(candidate, None)
    chosen = open_tasks(criteria, candidate, max_trials, open_) if open_ else []
    if chosen or not open_:
        return chosen, None
    if all(r.futile for r in open_):
        return [], (f"too close to call: at the estimates so far, the rest of the budget ({max_trials} trials "
                    f"a task, --max-trials) would decide with less than {FUTILITY:.0%} chance")
    return [], f"every task has its {max_trials} trials (--max-trials) or is not expected to move the evidence"
