"""What a gate's budget can decide, said before it spends anything: whether an agent that
never fails could PASS every criterion within --max-trials on this suite (and if not, the
smallest --max-trials or number of tasks that could), how likely a PASS is for an agent a
little better than each bar, and the smallest drop the regression criterion can detect.
Every figure comes from passhat.results.gate_simulation, the simulation the bench
measures the gate with, so the gate's decision code is what answers.

An agent that never fails, or one that fails every trial of some tasks and none of the
others, gives the same trials in every gate: one simulated gate answers for it exactly.
The power figures are shares of GATES simulated gates (Monte Carlo error about +-0.035; fewer
on a suite of more than 40 tasks, as the preview says).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from passhat.results import gate, gate_rounds, paired_drop
from passhat.results.gate_simulation import FAIL, PASS, recorded_baseline, simulate

GATES = 200  # simulated gates behind each power figure
TASK_GATES = 8000  # ... fewer on a large suite: at most this many simulated tasks in all (50 gates at least)
POWER = 0.8  # the chance of a PASS the preview names a budget for
HORIZON = 4  # the budget that gives POWER is read from one simulation of this many times the budget
MOST_TRIALS = 4096  # the budget check looks no further
MOST_TASKS = 5000
SEED = 0  # the previews are the same every time for the same gate


@dataclass(frozen=True)
class Budget:
    """A gate's criteria and budget, and its regression's baseline (recorded outcomes)."""

    criteria: tuple[gate.Criterion, ...]
    tasks: Sequence[str]
    max_trials: int
    baseline: gate.Rounds | None = None
    baseline_curtail: tuple[int, ...] = ()
    whole_blocks: bool = False

    @property
    def size(self) -> int:
        return gate_rounds.round_trials(self.criteria)

    def suite(self) -> list[str]:
        """The tasks the check simulates: with a baseline, those both have (a regression
        reads no others; the absolute criteria only gain from more)."""
        if self.baseline is None:
            return list(self.tasks)
        return sorted(set(self.tasks) & set(gate.merged(self.baseline)))

    def _baseline(self, tasks: Sequence[str], criterion: gate.Criterion | None = None):  # noqa: ANN202
        regression = criterion or next((c for c in self.criteria if c.kind == "regression"), None)
        if self.baseline is None or regression is None:
            return None
        return recorded_baseline(self.baseline, tasks, gate.unit_trials(regression.k), self.baseline_curtail, 1)


def perfect_passes(budget: Budget, max_trials: int | None = None, tasks: int | None = None) -> bool:
    """Would an agent that never fails PASS every criterion within max_trials a task (default:
    the budget's) on this suite (or on `tasks` tasks alike, for absolute criteria)? Each
    absolute criterion is the gate's replay of such a suite with its prior aimed as far as
    the gate may aim it (gate.decided_alike: if no aim lets it PASS, the gate cannot); a
    regression is a simulated gate against the recorded baseline."""
    suite = budget.suite()
    n, cap = tasks or len(suite), max_trials or budget.max_trials
    for c in budget.criteria:
        if c.kind == "absolute" and not gate.decided_alike(c, n, cap, budget.size, gate.Evidence.PASS, gate.AIMS[-1]):
            return False
        if c.kind == "persona_drop" and not paired_drop.perfect_passes(c, n, cap, budget.size):
            return False
    regressions = tuple(c for c in budget.criteria if c.kind == "regression")
    if not regressions:
        return True
    done = simulate(np.random.default_rng(SEED), np.ones(n), regressions, 1, cap, baseline=budget._baseline(suite),
                    size=budget.size, whole_blocks=budget.whole_blocks)
    return bool(done.verdict[0] == PASS)


def _least(passes, start: int, step: int, most: int) -> int | None:  # noqa: ANN001
    """The least multiple of step above start (up to most) for which passes(x), were it
    monotone: doubling, then bisection."""
    low, high = start, start + step
    while not passes(high):
        low, high = high, high * 2 // step * step
        if high > most:
            return None
    while high - low > step:
        mid = (low + high) // 2 // step * step
        low, high = (low, mid) if passes(mid) else (mid, high)
    return high


def check(budget: Budget) -> str | None:
    """None when an agent that never fails would PASS within the budget; otherwise what
    could, in words (the smallest --max-trials, or number of tasks, that would)."""
    if not budget.suite() or perfect_passes(budget):
        return None
    n, size = len(budget.suite()), budget.size
    trials = _least(lambda m: perfect_passes(budget, max_trials=m), budget.max_trials // size * size, size,
                    MOST_TRIALS)
    could = [f"--max-trials {trials}" if trials else f"no --max-trials up to {MOST_TRIALS}"]
    if budget.baseline is None:
        more = _least(lambda t: perfect_passes(budget, tasks=t), n, 1, MOST_TASKS)
        if more:
            could.append(f"{more} tasks at --max-trials {budget.max_trials}")
    names = ", ".join(c.describe() for c in budget.criteria)
    return (f"an agent that never fails could not PASS {names} within --max-trials {budget.max_trials} on "
            f"{n} task{'s' if n != 1 else ''}; {' or '.join(could)} could")


def gates_for(tasks: int) -> int:
    """How many gates the preview simulates on a suite of `tasks` tasks."""
    return max(50, min(GATES, TASK_GATES // max(tasks, 1)))


def power(budget: Budget, criterion: gate.Criterion, truth: float, max_trials: int | None = None,
          gates: int | None = None) -> tuple[float, np.ndarray]:
    """The chance the criterion PASSes within the budget when every task's pass^k is
    `truth` (in the gate's rounds), and per round the share of gates PASSed by then."""
    tasks = budget.suite()
    p = np.full(len(tasks), truth ** (1 / criterion.k))
    done = simulate(np.random.default_rng(SEED), p, [criterion], gates or gates_for(len(tasks)),
                    max_trials or budget.max_trials,
                    size=budget.size, whole_blocks=budget.whole_blocks)
    rounds = (max_trials or budget.max_trials) // budget.size
    by_round = np.array([np.mean((done.verdict == PASS) & (done.rounds <= r)) for r in range(1, rounds + 1)])
    return float(np.mean(done.verdict == PASS)), by_round


def smallest_detectable_drop(budget: Budget, criterion: gate.Criterion) -> float | None:
    """The smallest drop of pass^k the regression criterion FAILs within the budget, for a
    candidate that fails every trial of the baseline's best tasks and none of the rest
    (its drop: the baseline's mean less the candidate's); None when even failing every
    task would not FAIL it."""
    tasks = budget.suite()
    base = np.array([gate.estimates([r.get(t, []) for r in gate.as_rounds(budget.baseline)], criterion.k,
                                    budget.baseline_curtail, failed=True)[0] or 0.0 for t in tasks])
    order = np.argsort(-base, kind="stable")
    reference = budget._baseline(tasks, criterion)

    def fails(broken: int) -> bool:
        ps = np.ones(len(tasks))
        ps[order[:broken]] = 0.0
        done = simulate(np.random.default_rng(SEED), ps, [criterion], 1, budget.max_trials, baseline=reference,
                        size=budget.size, whole_blocks=budget.whole_blocks)
        return bool(done.verdict[0] == FAIL)

    if not tasks or not fails(len(tasks)):
        return None
    broken = next(m for m in range(1, len(tasks) + 1) if fails(m)) if len(tasks) <= 64 else \
        _least(fails, 0, 1, len(tasks))
    ps = np.ones(len(tasks))
    ps[order[:broken]] = 0.0
    return float(base.mean() - ps.mean())


def preview(budget: Budget) -> list[str]:
    """The lines said with the first round's preview: per absolute criterion, the chance
    of a PASS at this budget for an agent whose pass^k is the bar plus 0.05 and plus 0.1,
    and the --max-trials that would make it POWER for the first; per regression, the
    smallest drop it can detect."""
    lines: list[str] = []
    if not budget.suite():
        return lines
    for c in budget.criteria:
        if c.kind == "absolute":
            said, curve = [], None
            for gap in (0.05, 0.1):
                if c.threshold + gap > 1:
                    continue
                chance, by_round = power(budget, c, c.threshold + gap)
                curve = by_round if curve is None else curve
                said.append(f"{chance:.2f} if its pass^{c.k} is {c.threshold + gap:.2f}")
            line = (f"{c.describe()}: PASS at this budget (simulated, {gates_for(len(budget.suite()))} gates) "
                    f"{', '.join(said)}")
            if c.threshold + 0.05 <= 1:
                line += "; " + _budget_for_power(budget, c, curve)
            lines.append(line)
        elif c.kind == "persona_drop":
            drop = paired_drop.smallest_detectable_drop(c, len(budget.suite()), budget.max_trials, budget.size)
            lines.append(f"{c.describe()}: the smallest drop of pass^{c.k} it can detect (FAIL) at this budget: "
                         + (f"{drop:.2f}" if drop is not None else "none, even with every trial failing")
                         + " (a persona under which the agent fails every trial of some tasks, and of none "
                           "under tau2's user)")
        else:
            drop = smallest_detectable_drop(budget, c)
            lines.append(f"{c.describe()}: the smallest drop of pass^{c.k} it can detect (FAIL) at this budget: "
                         + (f"{drop:.2f}" if drop is not None else "none, even with every trial failing")
                         + f" (a candidate failing every trial of the baseline's best tasks)")
    return lines


def _budget_for_power(budget: Budget, criterion: gate.Criterion, curve: np.ndarray) -> str:
    """Where the chance of a PASS at bar + 0.05 reaches POWER: read by round from the
    simulation at the budget when it does there, else from one at HORIZON times it."""
    size, truth = budget.size, criterion.threshold + 0.05
    reached = np.nonzero(curve >= POWER)[0]
    if not len(reached):
        longer = math.ceil(budget.max_trials * HORIZON / size) * size
        _, curve = power(budget, criterion, truth, max_trials=longer)
        reached = np.nonzero(curve >= POWER)[0]
        if not len(reached):
            return f"{POWER:g} needs more than --max-trials {longer}"
    return f"{POWER:g} needs about --max-trials {(reached[0] + 1) * size}"
