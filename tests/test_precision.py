"""The adaptive measurement (passhat.results.precision): its interval, when it stops, and
which tasks it keeps running."""

from __future__ import annotations

import random

import pytest

from passhat.results import gate, precision


def _measure_in_rounds(want, ps, max_trials, seed=0):  # noqa: ANN001, ANN201
    rng = random.Random(seed)
    rounds = [{f"t{i}": [] for i in range(len(ps))}]
    while True:
        measured = precision.measure(want, rounds)
        chosen = precision.open_tasks(want, max_trials, measured)
        if measured.reached or not chosen:
            return measured
        rounds.append({t: [rng.random() < ps[int(t[1:])]] for t in chosen})


def test_targets_are_checked_in_one_line():
    assert precision.target(1, 0.05).describe() == "pass^1 to +-0.05 at 95%"
    for bad in ((0, 0.05, 0.95), (1, 0.0, 0.95), (1, 0.6, 0.95), (1, 0.05, 1.0)):
        with pytest.raises(gate.GateError):
            precision.target(*bad)


def test_stops_early_where_the_tasks_agree_and_covers_the_truth():
    """Twenty tasks that always or never succeed: pass^1 = 0.6 is known to +-0.1 well
    before 16 trials a task, and the interval holds it."""
    ps = [1.0] * 12 + [0.0] * 8
    measured = _measure_in_rounds(precision.target(1, 0.1), ps, 16)
    assert measured.reached and measured.high - measured.low <= 0.2
    assert measured.low <= 0.6 <= measured.high and measured.estimate == pytest.approx(0.6)
    assert measured.trials < 16 * 20 / 2


def test_short_of_its_precision_it_spends_every_trial():
    """Coin flips cannot be known to +-0.02 in 8 trials a task: every task gets all 8,
    even those the plug-in finds idle."""
    measured = _measure_in_rounds(precision.target(1, 0.02), [0.5] * 10, 8)
    assert not measured.reached and set(measured.tasks.values()) == {8}
    assert measured.low <= measured.estimate <= measured.high
