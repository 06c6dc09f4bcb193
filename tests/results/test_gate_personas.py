"""The gate under user personas (passhat.results.gate_personas): a criterion is decided per
persona on that persona's trials alone, at alpha / m (Bonferroni), and the budget check
runs at that share."""

from __future__ import annotations

import pytest

from passhat.results import gate
from passhat.results.gate_budget import Budget, check
from passhat.results.gate_outputs import gate_record, junit, markdown
from passhat.results.gate_personas import criterion_fields, named, of_user, per_persona, unpersonaed

PERSONAS = ["skeptical:2", "incoherent:1", "impatient:3"]
TASKS = ["airline/2", "airline/7", "airline/9"]


def test_each_persona_is_decided_on_its_own_trials_at_its_share_of_alpha():
    [criterion] = per_persona([gate.parse_requirement("pass^2 >= 0.5")], ["impatient:3"])
    assert (criterion.persona, criterion.split, criterion.confidence) == ("impatient:3", 1, pytest.approx(0.95))
    criteria = per_persona([gate.parse_requirement("pass^2 >= 0.5")], named("all", PERSONAS))
    assert [c.persona for c in criteria] == PERSONAS
    assert all(c.split == 3 and c.alpha == pytest.approx(0.05 / 3) for c in criteria)
    # tau2's user succeeds everywhere, skeptical:2 nowhere: its criterion never sees the others' successes.
    rounds = [{**{t: [True] * 2 for t in TASKS}, **{f"{t}@skeptical:2": [False] * 2 for t in TASKS},
               **{f"{t}@incoherent:1": [True] * 2 for t in TASKS}, **{f"{t}@impatient:3": [True] * 2 for t in TASKS}}] * 3
    assert of_user(rounds, "skeptical:2") == [{t: [False] * 2 for t in TASKS}] * 3
    assert of_user(rounds, None) == [{t: [True] * 2 for t in TASKS}] * 3
    results = [gate.evaluate(c, rounds, max_trials=8) for c in criteria]
    assert [(r.estimate, [t.task_id for t in r.tasks], r.trials) for r in results] == [
        (0.0, TASKS, 18), (1.0, TASKS, 18), (1.0, TASKS, 18)]
    assert results[0].verdict == gate.FAIL
    record = gate_record("g", results, rounds=["g-r0"], conversations=48, tasks=12, cost_usd=0.0)
    assert [(c["persona"], c["split"], c["family_alpha"]) for c in record["criteria"]] == [
        (p, 3, 0.05) for p in PERSONAS]
    assert "at alpha / 3 = 0.01667 (Bonferroni)" in markdown(record)
    xml = junit(record)
    assert xml.count('name="verdict" persona=') == 3
    assert "persona skeptical:2, alpha 0.05 split over 3 personas (Bonferroni)" in xml


def test_the_budget_check_accounts_for_the_split():
    """pass^2 >= 0.5 on 3 tasks with 4 trials a task: a never-failing agent PASSes at alpha
    0.05, not at 0.05 / 3, so the gate must refuse it under three personas."""
    plain = [gate.parse_requirement("pass^2 >= 0.5")]
    assert check(Budget(tuple(plain), TASKS, 4)) is None
    split = unpersonaed(per_persona(plain, PERSONAS))
    assert len(split) == 1  # each persona's suite is alike to a never-failing agent: checked once
    problem = check(Budget(tuple(split), TASKS, 4))
    assert problem and problem.startswith("an agent that never fails could not PASS pass^2 >= 0.5 within "
                                          "--max-trials 4 on 3 tasks"), problem


def test_without_personas_a_criterion_is_recorded_as_before():
    """The rounds' fingerprint of a gate recorded before personas existed stays the same."""
    criterion = gate.parse_requirement("pass^1 >= 0.5")
    assert criterion_fields(criterion) == {"kind": "absolute", "k": 1, "threshold": 0.5, "max_drop": 0.0,
                                           "confidence": 0.95, "bets": "blocks"}
    assert criterion.describe() == "pass^1 >= 0.5"


def test_personas_names_them_or_refuses_in_one_line():
    assert named(None, []) == [] and named("impatient:3, skeptical", ["impatient:3", "skeptical:1"]) == [
        "impatient:3", "skeptical:1"]
    with pytest.raises(gate.GateError, match=r"^with --user-persona, say which personas the criteria are "
                                              r"checked under: --personas all"):
        named(None, PERSONAS)
    with pytest.raises(gate.GateError, match=r"^--personas confused: confused is not one of this gate's personas"):
        named("confused", PERSONAS)
    with pytest.raises(gate.GateError, match=r"^--personas names the personas"):
        named("all", [])
