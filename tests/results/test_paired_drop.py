"""The bound on a persona's drop against tau2's own user (passhat.results.paired_drop): a test
on pairs of the same task's blocks under both users, valid whatever their dependence."""

from __future__ import annotations

import numpy as np
import pytest

from passhat.results import gate, paired_drop
from passhat.results.gate_budget import Budget, check, preview
from passhat.results.gate_outputs import gate_record, junit, markdown
from passhat.results.gate_personas import per_persona

TASKS = [f"airline/{i}" for i in range(10)]


def drop_criterion(bound: float, k: int = 1, personas=("impatient:3",)):  # noqa: ANN001, ANN201
    return per_persona([paired_drop.criterion(k, bound, gate.DEFAULT_CONFIDENCE)], list(personas))


def rounds_of(user, persona, persona_name="impatient:3"):  # noqa: ANN001, ANN201
    """Rounds from per-round {task: outcomes} of tau2's user and of the persona."""
    return [{**u, **{f"{t}@{persona_name}": o for t, o in p.items()}} for u, p in zip(user, persona)]


def correlated_rounds(rng, q, rounds: int, flip: float = 0.05, broken=()):  # noqa: ANN001, ANN201
    """Each task's trials under both users share their draw (the same seeds), the persona's
    flipped with chance `flip` either way; under the persona a `broken` task always fails."""
    user, persona = [], []
    for _ in range(rounds):
        u = {t: [bool(rng.random() < q)] for t in TASKS}
        user.append(u)
        persona.append({t: [False] if t in broken else [o[0] != (rng.random() < flip)] for t, o in u.items()})
    return rounds_of(user, persona)


def test_no_drop_passes_and_a_large_drop_fails_with_strongly_correlated_pairs():
    rng = np.random.default_rng(1)
    [criterion] = drop_criterion(0.2)
    same = gate.evaluate(criterion, correlated_rounds(rng, 0.6, 8), max_trials=8)
    assert same.verdict == gate.PASS
    assert same.high > -0.2 and same.low <= 0.0 <= same.high + 1e-9
    broken = gate.evaluate(criterion, correlated_rounds(rng, 0.9, 8, broken=TASKS[:6]), max_trials=8)
    assert broken.verdict == gate.FAIL
    assert broken.high < -0.2  # the persona's pass^1 less the user's: at least 0.2 below, surely
    assert broken.estimate == pytest.approx(np.mean([t.estimate - t.baseline for t in broken.tasks]))
    assert broken.tasks[0].baseline is not None and broken.tasks[0].passed is False


def test_a_round_that_left_out_a_task_does_not_count():
    [criterion] = drop_criterion(0.3)
    whole = {t: [True] for t in TASKS}
    partial = {t: [True] for t in TASKS[1:]}
    assert gate.evaluate(criterion, rounds_of([whole] * 3, [whole] * 3)).verdict == gate.PASS
    # The suite is the first round's tasks (every task); later rounds without airline/0 add nothing.
    assert gate.evaluate(criterion, rounds_of([whole] + [partial] * 5, [whole] + [partial] * 5)).verdict \
        == gate.evaluate(criterion, rounds_of([whole], [whole])).verdict == gate.INCONCLUSIVE
    _, pairs = paired_drop.round_pairs(rounds_of([whole, partial], [whole, partial]), "impatient:3", 1)
    assert pairs[0] is not None and pairs[1] is None


def test_not_evaluable_trials_are_read_against_each_test():
    [criterion] = drop_criterion(0.3)
    whole = {t: [True] for t in TASKS}
    lost = {t: [None] for t in TASKS}
    # The persona's trials all lost: the PASS test reads them as failures, so nothing PASSes,
    # and the FAIL test as successes, so nothing FAILs either.
    assert gate.evaluate(criterion, rounds_of([whole] * 8, [lost] * 8)).verdict == gate.INCONCLUSIVE
    assert gate.evaluate(criterion, rounds_of([lost] * 8, [{t: [False] for t in TASKS}] * 8)).verdict \
        == gate.INCONCLUSIVE


def test_wrong_verdicts_stay_within_alpha_in_seeded_simulations():
    rng = np.random.default_rng(7)
    n, gates = 20, 400
    [criterion] = drop_criterion(0.1)
    # A drop of exactly the bound (0.1), pairs as correlated as they can be: a PASS is wrong.
    q_user, q_persona = np.full(n, 0.8), np.full(n, 0.7)
    verdicts, _ = paired_drop.simulate(rng, q_user, q_persona, q_persona, criterion, gates, 32)
    assert np.mean(verdicts == "PASS") <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / gates)
    # A/A (the persona is tau2's user), correlated, max drop 0: neither verdict may be
    # reached often; a FAIL is wrong.
    [aa] = drop_criterion(0.0)
    q = rng.uniform(0.2, 0.9, n)
    verdicts, _ = paired_drop.simulate(rng, q, q, q - 0.05, aa, gates, 32)
    assert np.mean(verdicts == "FAIL") <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / gates)
    assert np.mean(verdicts == "PASS") <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / gates)
    # No drop against a bound of 0.1: PASSed nearly always within 16 rounds.
    verdicts, _ = paired_drop.simulate(rng, q, q, q - 0.02, criterion, 100, 16)
    assert np.mean(verdicts == "PASS") >= 0.8


def test_the_budget_check_and_preview_know_the_drop_criterion():
    [criterion] = drop_criterion(0.1)
    tight = Budget((criterion,), TASKS[:3], 8)
    problem = check(tight)
    assert problem and "could not PASS pass^1 not worse than under tau2's user by more than 0.1" in problem
    assert not paired_drop.perfect_passes(criterion, 3, 8, 1)
    roomy = Budget((criterion,), TASKS, 8)
    assert check(roomy) is None
    [line] = preview(roomy)
    assert "smallest drop of pass^1 it can detect (FAIL) at this budget: 0." in line
    drop = paired_drop.smallest_detectable_drop(criterion, len(TASKS), 8, 1)
    assert drop is not None and 0.1 < drop <= 1.0


def test_the_record_says_the_split_and_the_pairing():
    criteria = drop_criterion(0.2, personas=("impatient:3", "skeptical:2"))
    rounds = [{**{t: [True] for t in TASKS}, **{f"{t}@impatient:3": [True] for t in TASKS},
               **{f"{t}@skeptical:2": [False] for t in TASKS}}] * 6
    results = [gate.evaluate(c, rounds, max_trials=8) for c in criteria]
    assert [r.verdict for r in results] == [gate.PASS, gate.FAIL]
    record = gate_record("g", results, rounds=["g-r0"], conversations=180, tasks=30, cost_usd=0.0)
    assert [(c["kind"], c["persona"], c["split"]) for c in record["criteria"]] == [
        ("persona_drop", "impatient:3", 2), ("persona_drop", "skeptical:2", 2)]
    assert "at alpha / 2 = 0.025 (Bonferroni)" in markdown(record)
    assert "Persona drop: the persona's pass^k less tau2's user's" in markdown(record)
    assert "persona skeptical:2, alpha 0.05 split over 2 personas (Bonferroni)" in junit(record)


def test_pass_k_blocks_pair_up_in_curtailed_rounds():
    """pass^2 in rounds curtailed to blocks of 2: a persona block that stopped at its first
    failure still pairs with tau2's user's block of the same round."""
    [criterion] = drop_criterion(0.2, k=2)
    rounds = rounds_of([{t: [True, True] for t in TASKS}] * 6, [{t: [False] for t in TASKS}] * 6)
    result = gate.evaluate(criterion, rounds, max_trials=12, curtail=[2])
    assert result.verdict == gate.FAIL
    assert [(t.estimate, t.baseline) for t in result.tasks] == [(0.0, 1.0)] * len(TASKS)
    _, pairs = paired_drop.round_pairs(rounds, "impatient:3", 2, curtail_size=2)
    assert all(list(p[0]) == [1] * len(TASKS) for p in pairs)
    same = rounds_of([{t: [True, False] for t in TASKS}] * 6, [{t: [True, False] for t in TASKS}] * 6)
    assert gate.evaluate(criterion, same, max_trials=12, curtail=[2]).verdict == gate.PASS
