"""The release gate's bound on a persona's drop (`passhat gate --user-persona P --personas all
--max-persona-drop D`): is pass^k under the persona at most D below pass^k under tau2's own
user, on the same tasks with the same seeds?

The estimand: drop = mean over the suite's tasks t of q_t - r_t, with q_t tau2's user's pass^k
of task t and r_t the persona's. The two users run each task in the same rounds with the same
seeds, so their trials are not independent, and the regression test of passhat.results.gate
(which takes the baseline's trials as independent of the candidate's) does not apply. This
test works on pairs instead: within a round, block b of task t under tau2's user and block b of
the same task under the persona (the same seeds) are one observation,
    Z_tb = Y_user_tb - Y_persona_tb  in {-1, 0, 1},  E[Z_tb] = q_t - r_t,
whatever the dependence within the pair. Pairs of different tasks, or of different blocks,
are different conversations: independent given the past.

A round counts for this test only when it ran every task of the suite with the same number
of blocks under both users (while the criterion is open, the gate's rounds do: it never
marks a task idle); whether it did is fixed before its outcomes, so leaving other rounds out
keeps the test valid. For a hypothesised drop d and such a round's m pairs, the PASS test
(its null: drop >= d) multiplies its wealth by
    F = prod_j (1 + lam (d - Z_j)),   0 <= lam <= C / (1 - d),
one lam for the whole round, chosen from the rounds before it. Given the past, the pairs
are independent, so E[F] = prod_j (1 + lam (d - mu_j)) (mu_j = E Z_j), and by the
inequality of arithmetic and geometric means (every factor is positive) that is at most
(1 + lam (d - mean_j mu_j))^m = (1 + lam (d - drop))^m <= 1 under the null, because each
task has the same number of pairs so mean_j mu_j is the drop itself. The wealth is a test
supermartingale for every drop in the null, and by Ville's inequality it ever reaches
1/alpha with chance at most alpha. The FAIL test (null: drop <= d) is the mirror image,
F = prod_j (1 + lam (Z_j - d)), 0 <= lam <= C / (1 + d). These are the betting tests of
Waudby-Smith & Ramdas ("Estimating means of bounded random variables by betting", JRSS B
2024), bet once per round on the product of its pairs so that a task-dependent mean needs
no composite-null minimisation; the bound through the AM-GM inequality is what makes the
null composite over tasks harmless. A test rejects once its wealth has reached 1/alpha at
any round (Ville's inequality bounds the supremum). lam is the Kelly bet on the pairs seen
before the round (with a small prior, PRIOR), capped at C of the largest that keeps every
factor positive.

A not-evaluable trial is read against each test (Manski's worst-case bounds, as the other
criteria read theirs): for the PASS test tau2's user's as a success and the persona's as a
failure (Z read at its largest), for the FAIL test the other way round. Each factor is
then at most (at least) what the true outcomes would give, so the bounds above still hold.

The confidence sequence is the set of d neither test rejects; the result reports it, and
the estimate, as the persona's pass^k less tau2's user's (the sign of the regression
criterion's "candidate less baseline"), so the bar is -D."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from passhat.results.gate_personas import of_user
from passhat.results.gate_units import CANDIDATE_READS, as_rounds, cut_round, estimates

# The share of the largest bet that keeps every factor positive that a round may stake: a
# pair against the bet then leaves at least 1 - C of the wealth.
C = 0.9
# Pseudo-pairs behind the first rounds' bets, at Z = -1, 0, 1: a round of the gate holds
# many pairs, so after the first the observed pairs rule.
PRIOR = (0.5, 1.0, 0.5)
PASS_TEST, FAIL_TEST = 0, 1


def criterion(k: int, max_drop: float, confidence: float):  # noqa: ANN201 - a gate.Criterion
    """The bound as a criterion of the gate (`--max-persona-drop D --persona-metric pass^K`);
    passhat.results.gate_personas makes one per persona."""
    from passhat.results import gate

    if not 0 <= max_drop < 1:
        raise gate.GateError(f"--max-persona-drop must be within 0..1 (a difference of pass^k), got {max_drop:g}")
    return replace(gate.regression(k, max_drop, confidence), kind="persona_drop")


def round_pairs(rounds, persona: str, k: int, curtail_size: int | None = None  # noqa: ANN001 - gate Rounds
                ) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray] | None]]:
    """The suite's tasks (those tau2's user ran in the first round, which runs every task: fixed
    before any outcome, so which later rounds count never depends on outcomes) and, per round, its pairs in each test's
    reading (PASS: Z at its largest, FAIL: at its smallest; one value per pair), or None for a
    round that cannot count (it left out a task, or its users or tasks have different numbers
    of blocks)."""
    users = of_user(rounds, None)
    personas = of_user(rounds, persona)
    tasks = sorted(users[0]) if users else []
    out: list[tuple[np.ndarray, np.ndarray] | None] = []
    high, low = CANDIDATE_READS[1], CANDIDATE_READS[0]  # a not-evaluable trial as a success / a failure
    for user, other in zip(users, personas):
        if not tasks or any(not user.get(t) or not other.get(t) for t in tasks):
            out.append(None)
            continue
        readings = []
        for read_user, read_persona in ((high, low), (low, high)):
            zs = []
            for t in tasks:
                a = cut_round(list(user[t]), k, read_user, curtail_size)
                b = cut_round(list(other[t]), k, read_persona, curtail_size)
                zs.append(np.array(a, int) - np.array(b, int) if len(a) == len(b) else None)
            readings.append(zs)
        sizes = {len(z) for zs in readings for z in zs if z is not None}
        if any(z is None for zs in readings for z in zs) or len(sizes) != 1 or 0 in sizes:
            out.append(None)
            continue
        out.append((np.concatenate(readings[0]), np.concatenate(readings[1])))
    return tasks, out


def _counts(z: np.ndarray) -> np.ndarray:
    return np.array([np.sum(z == -1), np.sum(z == 0), np.sum(z == 1)], float)


def kelly(counts: np.ndarray, d: float, test: int) -> np.ndarray:
    """The bet lam in [0, cap] that maximises the log-wealth pairs in these counts (at Z = -1,
    0, 1; one row per gate, or one row) would have given: sum_z n_z log(1 + lam s_z) with
    s_z = d - z (PASS) or z - d (FAIL); concave in lam, so the root of its derivative, by
    bisection. cap: C of the largest lam that keeps every factor positive."""
    counts = np.atleast_2d(counts)
    s = np.array([d + 1, d, d - 1]) if test == PASS_TEST else np.array([-1 - d, -d, 1 - d])
    worst = -s.min()
    cap = C / worst if worst > 0 else 1e6

    def slope(lam: np.ndarray) -> np.ndarray:
        return np.sum(counts * s / (1 + lam[:, None] * s), axis=1)

    low, high = np.zeros(len(counts)), np.full(len(counts), cap)
    for _ in range(40):
        mid = (low + high) / 2
        up = slope(mid) > 0
        low, high = np.where(up, mid, low), np.where(up, high, mid)
    lam = np.where(slope(np.zeros(len(counts))) <= 0, 0.0, np.where(slope(np.full(len(counts), cap)) >= 0, cap, low))
    return lam if counts.shape[0] > 1 else lam[:1]


def log_wealth(pairs: Sequence[tuple[np.ndarray, np.ndarray] | None], d: float, test: int) -> float:
    """The largest log-wealth the test of `d` reached over the rounds (-inf never happens: every
    factor stays positive); 0 before any round counts."""
    seen, wealth, best = np.array(PRIOR, float), 0.0, 0.0
    for pair in pairs:
        if pair is None:
            continue
        z = pair[test]
        lam = float(kelly(seen, d, test)[0])
        s = (d - z) if test == PASS_TEST else (z - d)
        wealth += float(np.sum(np.log1p(lam * s)))
        best = max(best, wealth)
        seen = seen + _counts(z)
    return best


def rejected(pairs, d: float, test: int, alpha: float) -> bool:  # noqa: ANN001
    """PASS_TEST: "drop >= d" rejected (the drop is below d); FAIL_TEST: "drop <= d" rejected."""
    return log_wealth(pairs, d, test) >= math.log(1 / alpha)


def drop_bounds(pairs, alpha: float) -> tuple[float, float]:  # noqa: ANN001
    """The confidence sequence of the drop: (lower, upper), each one-sided at alpha."""
    from passhat.results.gate import bound

    upper = bound(lambda d: rejected(pairs, d, PASS_TEST, alpha), -1.0, 1.0, up=False)
    lower = bound(lambda d: rejected(pairs, d, FAIL_TEST, alpha), -1.0, 1.0, up=True)
    return max(lower, -1.0), min(upper, 1.0)


def evaluate_drop(criterion, candidate, *, interval: bool = True, curtail: Sequence[int] = ()):  # noqa: ANN001, ANN201
    """The criterion's verdict on the gate's rounds so far (every user's outcomes, keyed as
    passhat.personas.outcome_key): PASS when "drop > D" is rejected, FAIL when "drop <= D"
    is, with the interval and estimates as the persona's pass^k less tau2's user's. No task is
    ever idle for it (its rounds must run every task), and it is never futile."""
    from passhat.results.gate import FAIL, INCONCLUSIVE, PASS, CriterionResult, TaskLine

    k, alpha, bar = criterion.k, criterion.alpha, criterion.max_drop
    curtail_size = max(curtail) if curtail else None
    tasks, pairs = round_pairs(candidate, criterion.persona, k, curtail_size)
    verdict = INCONCLUSIVE
    if rejected(pairs, bar, PASS_TEST, alpha):
        verdict = PASS
    elif rejected(pairs, bar, FAIL_TEST, alpha):
        verdict = FAIL
    low = high = math.nan
    if interval and any(p is not None for p in pairs):
        lower, upper = drop_bounds(pairs, alpha)
        low, high = -upper, -lower
    users, personas = as_rounds(of_user(candidate, None)), as_rounds(of_user(candidate, criterion.persona))
    lines, trials, evaluable = [], 0, 0
    for t in tasks:
        mine = [r.get(t, []) for r in personas]
        theirs = [r.get(t, []) for r in users]
        est, est_failed = estimates(mine, k, curtail, failed=True)
        base, base_failed = estimates(theirs, k, curtail, failed=False)
        outcomes = [o for r in mine for o in r]
        trials += len(outcomes) + sum(len(r) for r in theirs)
        evaluable += sum(o is not None for o in outcomes) + sum(o is not None for r in theirs for o in r)
        passed = None if est is None or base is None else est - base >= -bar
        lines.append(TaskLine(t, sum(o is not None for o in outcomes), len(outcomes), est, base, passed,
                              est_failed, base_failed))

    def mean(field: str, base_field: str) -> float | None:
        values = [getattr(x, field) - getattr(x, base_field) for x in lines
                  if getattr(x, field) is not None and getattr(x, base_field) is not None]
        return sum(values) / len(values) if values else None

    return CriterionResult(criterion=criterion, verdict=verdict, estimate=mean("estimate", "baseline"), low=low,
                           high=high, coverage=evaluable / trials if trials else 0.0, evaluable=evaluable,
                           trials=trials, tasks=lines, idle=set(), futile=False,
                           estimate_if_failed=mean("estimate_if_failed", "baseline_if_failed"))


# ---- what a budget can decide (passhat.results.gate_budget) ---------------------------------


def replay(d: float, test: int, alpha: float, rounds: int, z: np.ndarray) -> bool:
    """Would a gate whose every round gives the pairs z (one value per pair) reject the test
    of d within `rounds` rounds? For agents whose trials are the same in every gate."""
    pairs = [(z, z)] * rounds
    return rejected(pairs, d, test, alpha)


def perfect_passes(criterion, tasks: int, max_trials: int, size: int) -> bool:  # noqa: ANN001
    """Would an agent that never fails under any user PASS the criterion on `tasks` tasks
    within max_trials a task, in rounds of `size` trials (size // k blocks a task)?"""
    blocks = size // criterion.k
    return replay(criterion.max_drop, PASS_TEST, criterion.alpha, max_trials // size, np.zeros(tasks * blocks, int))


def smallest_detectable_drop(criterion, tasks: int, max_trials: int, size: int) -> float | None:  # noqa: ANN001
    """The smallest drop the criterion FAILs within the budget for an agent that never fails
    under tau2's user and, under the persona, fails every trial of some tasks and none of the
    rest: that many tasks over the suite's; None when even every task broken would not FAIL."""
    blocks, rounds = size // criterion.k, max_trials // size

    def fails(broken: int) -> bool:
        z = np.zeros(tasks * blocks, int)
        z[:broken * blocks] = 1
        return replay(criterion.max_drop, FAIL_TEST, criterion.alpha, rounds, z)

    broken = next((m for m in range(1, tasks + 1) if fails(m)), None)
    return None if broken is None else broken / tasks


# ---- simulated gates (bench/gate_calibration.py) ---------------------------------------------


def simulate(rng: np.random.Generator, q_user: np.ndarray, q_persona: np.ndarray, together: np.ndarray,
             criterion, gates: int, max_trials: int, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Simulated gates of the drop criterion alone: every round runs every task, each block a
    pair whose users succeed with chances q_user and q_persona (per task, pass^k), both at
    once with chance `together` (per task: at most the smaller; min(q) makes them as
    correlated as they can be, q_user * q_persona independent). Returns each gate's verdict
    ("PASS" / "FAIL" / "INCONCLUSIVE") and the rounds it ran."""
    size = size or criterion.k
    blocks, rounds = size // criterion.k, max_trials // size
    both, only_user = together, q_user - together
    only_persona = q_persona - together
    if np.any(only_user < -1e-12) or np.any(only_persona < -1e-12) or np.any(both + only_user + only_persona > 1 + 1e-12):
        raise ValueError("together must be within max(0, q_user + q_persona - 1) .. min(q_user, q_persona)")
    n = len(q_user)
    verdicts = np.full(gates, "INCONCLUSIVE", object)
    spent = np.zeros(gates, int)
    threshold = math.log(1 / criterion.alpha)
    d = criterion.max_drop
    seen = [np.tile(np.array(PRIOR, float), (gates, 1)) for _ in (PASS_TEST, FAIL_TEST)]
    wealth = np.zeros((2, gates))
    open_ = np.ones(gates, bool)
    for r in range(rounds):
        u = rng.random((gates, n, blocks))
        z = np.where(u < only_user[None, :, None], 1,
                     np.where(u < (only_user + only_persona)[None, :, None], -1, 0)).reshape(gates, -1)
        counts = np.stack([(z == v).sum(axis=1) for v in (-1, 0, 1)], axis=1)
        for test in (PASS_TEST, FAIL_TEST):
            lam = kelly(seen[test], d, test)
            s = (d - z) if test == PASS_TEST else (z - d)
            wealth[test] += np.where(open_, np.log1p(lam[:, None] * s).sum(axis=1), 0.0)
            seen[test] = seen[test] + counts
        spent[open_] = r + 1
        passed = open_ & (wealth[PASS_TEST] >= threshold)
        failed = open_ & ~passed & (wealth[FAIL_TEST] >= threshold)
        verdicts[passed], verdicts[failed] = "PASS", "FAIL"
        open_ &= ~(passed | failed)
    return verdicts, spent
