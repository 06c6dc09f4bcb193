"""Curtailed blocks (passhat.curtailment) and the gate's reading of curtailed rounds."""

from __future__ import annotations

import random

from passhat import curtailment
from passhat.results import gate, gate_rounds


def test_a_block_ends_at_its_first_failure_and_passes_over_not_evaluable_trials():
    assert curtailment.cut([False], 4, 1) == [(0, 0, 0)]
    assert curtailment.cut([True, True, True, True], 4, 1) == [(0, 3, 1)]
    assert curtailment.cut([True, None, True, True, True], 4, 1) == [(0, 4, 1)]
    assert curtailment.cut([None, True, False], 4, 1) == [(1, 2, 0)]
    assert curtailment.cut([True, True], 4, 1) == []  # not decided yet
    # Two blocks of pass^2 in a round of 4: the second starts after the first's failure.
    assert curtailment.cut([False, True, True], 2, 2) == [(0, 0, 0), (1, 2, 1)]
    assert curtailment.cut([False, False, True], 2, 1) == [(0, 0, 0)]  # a round's blocks only

    assert curtailment.wanted([], [4], 4) and curtailment.wanted([True, None], [4], 4)
    assert not curtailment.wanted([True, False], [4], 4)
    # pass^3 beside pass^4: a failure among the first three decides both; after three
    # successes pass^4 still wants its fourth.
    assert not curtailment.wanted([True, False], [3, 4], 4)
    assert curtailment.wanted([True, True, True], [3, 4], 4)
    assert curtailment.wanted([False], [2, 4], 4)  # pass^2's second block


def test_curtailed_blocks_are_draws_of_k_successes_in_a_row_in_each_reading():
    """With a fifth of the trials not evaluable, a curtailed round still decides every
    block it opens within its size, in both tests' readings (no replacement, so no block
    is dropped for running out), and each reading's blocks succeed (its trial rate)^k of
    the time: p(1 - r) where not evaluable counts as a failure, p + (1 - p)r where it
    counts as a success."""
    rng = random.Random(7)
    p, r, k, n = 0.8, 0.2, 4, 20000

    def trial() -> "bool | None":
        return None if rng.random() < r else rng.random() < p

    won: tuple[list, list] = ([], [])
    for _ in range(n):
        outcomes: list = []
        while curtailment.wanted(outcomes, [k], k):
            outcomes.append(trial())
        assert len(outcomes) <= k
        for view, read in zip(won, curtailment.READINGS):
            [(_, _, success)] = curtailment.cut([read(o) for o in outcomes], k, 1)
            view.append(success)
    for view, rate in zip(won, (p * (1 - r), p + (1 - p) * r)):
        target = rate ** k
        assert abs(sum(view) / n - target) < 4 * (target * (1 - target) / n) ** 0.5, (sum(view) / n, target)


def test_a_curtailed_gate_decides_as_the_full_rounds_would_with_fewer_conversations():
    """Curtailing a pass^4 gate's rounds changes the conversations it runs and nothing
    else: the same trials drawn (a tenth of them not evaluable), cut at their first
    failure, choose the same rounds and reach the same verdict as the rounds run whole, on
    a suite with tasks that fail."""
    ps = [1.0] * 6 + [0.0] * 4 + [0.5, 0.7, 0.9, 0.95]
    criteria = [gate.absolute(4, 0.4)]
    assert gate_rounds.curtailed(criteria) == [4]
    assert gate_rounds.curtailed([gate.absolute(4, 0.4), gate.absolute(1, 0.9)]) == []  # pass^1 wants every trial
    saved = 0
    for seed in range(6):
        rng = random.Random(seed)
        whole = [{f"t{i:02}": [] for i in range(len(ps))}]
        cut = [dict(whole[0])]
        while True:
            chosen, _ = gate_rounds.next_round(criteria, whole, None, 16)
            assert gate_rounds.next_round(criteria, cut, None, 16)[0] == chosen
            if not chosen:
                break
            drawn = {t: [None if rng.random() < 0.1 else rng.random() < ps[int(t[1:])] for _ in range(4)]
                     for t in chosen}
            whole.append(drawn)
            cut.append({t: v[:v.index(False) + 1] if False in v else v for t, v in drawn.items()})
        full = gate.evaluate(criteria[0], whole, max_trials=16, interval=False)
        short = gate.evaluate(criteria[0], cut, max_trials=16, interval=False, curtail=[4])
        assert short.verdict == full.verdict
        saved += sum(map(len, gate.merged(whole).values())) - sum(map(len, gate.merged(cut).values()))
    assert saved > 0


def test_a_curtailed_task_estimate_is_its_share_of_blocks_won():
    """C(c, k) / C(n, k) would read a block stopped at its first failure as one trial (no
    estimate at all); a curtailed gate shows the share of the task's blocks that succeeded."""
    rounds = [{"a": [False], "b": [True] * 4, "c": [True, None, True, True, True]}, {"a": [True] * 4}]
    result = gate.evaluate(gate.absolute(4, 0.5), rounds, curtail=[4], interval=False)
    assert {line.task_id: line.estimate for line in result.tasks} == {"a": 0.5, "b": 1.0, "c": 1.0}
    plain = gate.evaluate(gate.absolute(4, 0.5), rounds, interval=False)
    assert plain.tasks[0].estimate == 0.2  # a's 4 successes of 5 trials: C(4, 4) / C(5, 4)
