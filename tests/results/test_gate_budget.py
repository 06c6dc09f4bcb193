"""What a gate says before spending (passhat.results.gate_budget): its answers are the
gate's own, driven round by round through next_round as the workflow drives it."""

from __future__ import annotations

import pytest

from passhat.results import gate, gate_budget, gate_rounds


def _perfect_gate(criteria, tasks, max_trials, baseline=None, curtail=()):  # noqa: ANN001, ANN201
    """The verdict of a gate whose every trial succeeds, driven by next_round."""
    rounds = [{f"t{i:02}": [] for i in range(tasks)}]
    size = gate_rounds.round_trials(criteria)
    while True:
        chosen, _ = gate_rounds.next_round(criteria, rounds, baseline, max_trials, curtail)
        if not chosen:
            return gate.overall([gate.evaluate(c, rounds, baseline, max_trials=max_trials, interval=False,
                                               round_size=size, curtail=gate_rounds.curtailed(criteria),
                                               baseline_curtail=curtail) for c in criteria])
        rounds.append({t: [True] * size for t in chosen})


@pytest.mark.parametrize("criteria, tasks, max_trials", [
    ([gate.absolute(4, 0.95)], 5, 8),
    ([gate.absolute(1, 0.95)], 4, 8),
    ([gate.absolute(4, 0.8)], 10, 16),
])
def test_the_budget_check_says_what_the_gate_would_do_and_names_a_budget_that_could(criteria, tasks, max_trials):
    ids = [f"t{i:02}" for i in range(tasks)]
    said = gate_budget.check(gate_budget.Budget(tuple(criteria), ids, max_trials))
    assert (said is None) == (_perfect_gate(criteria, tasks, max_trials) == gate.PASS)
    if said is None:
        return
    assert said.startswith(f"an agent that never fails could not PASS {criteria[0].describe()} within --max-trials")
    named = int(said.split("; --max-trials ")[1].split()[0])
    assert _perfect_gate(criteria, tasks, named) == gate.PASS
    assert _perfect_gate(criteria, tasks, named - gate_rounds.round_trials(criteria)) != gate.PASS


def test_the_check_counts_the_regression_against_its_recorded_baseline():
    """pass^4 >= 0.8 and pass^1 at most 0.03 below main's gate (curtailed: its pass^1 is each
    block's first trial), 10 tasks: 16 trials a task cannot show it for an agent that never
    fails, 20 can (and the gate driven round by round agrees)."""
    main = [{f"t{i:02}": [True] * 4 for i in range(10)}] * 3
    criteria = (gate.absolute(4, 0.8), gate.regression(1, 0.03))
    ids = [f"t{i:02}" for i in range(10)]
    said = gate_budget.check(gate_budget.Budget(criteria, ids, 16, main, (4,)))
    assert said is not None and "--max-trials 20 could" in said
    assert _perfect_gate(list(criteria), 10, 16, main, (4,)) != gate.PASS
    assert _perfect_gate(list(criteria), 10, 20, main, (4,)) == gate.PASS
    assert gate_budget.check(gate_budget.Budget(criteria, ids, 20, main, (4,))) is None


def test_a_curtailed_gate_gives_a_regression_its_blocks_or_their_first_trials():
    """A round curtailed to pass^4: its block for pass^4, and for pass^1 the block's first
    trial only (the later ones ran because the first succeeded); each test reads a baseline's
    not-evaluable trial against itself (the PASS test as a success)."""
    first_fails, all_succeed, lost = [False], [True] * 4, [None, True, True, True]
    read_pass, read_fail = gate.BASELINE_READS
    assert gate.baseline_units(first_fails, 1, read_pass, (4,)) == [0]
    assert gate.baseline_units(all_succeed, 1, read_pass, (4,)) == [1]
    assert gate.baseline_units(all_succeed, 4, read_pass, (4,)) == [1]
    assert gate.baseline_units(lost, 1, read_pass, (4,)) == [1]
    assert gate.baseline_units(lost, 1, read_fail, (4,)) == [0]
    with pytest.raises(gate.GateError, match="pass\\^1 or pass\\^4, not pass\\^2"):
        gate.baseline_units(all_succeed, 2, read_pass, (4,))


def test_the_preview_says_the_power_a_little_above_the_bar():
    lines = gate_budget.preview(gate_budget.Budget((gate.absolute(1, 0.8),), [f"t{i}" for i in range(20)], 8))
    [line] = lines
    assert line.startswith("pass^1 >= 0.8: PASS at this budget (simulated, 200 gates)")
    assert "if its pass^1 is 0.85" in line and "if its pass^1 is 0.90" in line and "0.8 needs" in line
