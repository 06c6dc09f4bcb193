"""The release gate's decision (passhat.results.gate): criteria, verdicts, coverage, rounds."""

from __future__ import annotations

import random

import numpy as np
import pytest

from passhat.results import gate, gate_rounds
from passhat.results.gate_evidence import Evidence


def suite(ps, n, seed=0):  # noqa: ANN001, ANN201
    rng = random.Random(seed)
    return {f"t{i}": [rng.random() < p for _ in range(n)] for i, p in enumerate(ps)}


def test_requirements_are_read_or_refused_in_one_line():
    c = gate.parse_requirement("pass^4 >= 0.8")
    assert (c.kind, c.k, c.threshold, c.confidence) == ("absolute", 4, 0.8, 0.95)
    assert gate.parse_metric("pass^2") == 2
    for bad in ("pass^4 > 0.8", "pass^0 >= 0.5", "pass^4 >= 1.5", "pass4>=0.8"):
        with pytest.raises(gate.GateError):
            gate.parse_requirement(bad)
    with pytest.raises(gate.GateError, match="--confidence"):
        gate.absolute(1, 0.5, confidence=1.0)
    with pytest.raises(gate.GateError, match="--max-drop"):
        gate.regression(1, 1.5)


def test_each_test_reads_a_not_evaluable_trial_against_itself():
    """The PASS test reads a not-evaluable trial as a failure, the FAIL test as a success (a
    baseline's the other way round); a block not yet full is left out."""
    trials = [True, True, None, True, False, True, True]
    assert gate.round_units(trials, 2) == ([1, 0, 0], [1, 1, 0])
    assert gate.round_units(trials, 2, gate.BASELINE_READS) == ([1, 1, 0], [1, 0, 0])
    assert gate.round_units([True, None, True], 1) == ([1, 0, 1], [1, 1, 1])
    assert gate.blocks(trials, 2) == [1, 0, 0]


def test_clear_cases_pass_and_fail_and_too_few_trials_stay_open():
    strong = suite([1.0] * 30 + [0.9] * 20, 8)
    assert gate.evaluate(gate.absolute(1, 0.7), strong).verdict == gate.PASS
    weak = suite([0.0] * 20 + [0.5] * 30, 8)
    assert gate.evaluate(gate.absolute(1, 0.7), weak).verdict == gate.FAIL
    assert gate.evaluate(gate.absolute(1, 0.9), suite([0.9] * 5, 1)).verdict == gate.INCONCLUSIVE


def test_interval_holds_the_estimate_and_the_estimate_is_tau2s():
    data = {"a": [True, True, False, True], "b": [True] * 4}
    r = gate.evaluate(gate.absolute(2, 0.5), data)
    # C(3,2)/C(4,2) = 0.5 and 1.0
    assert r.estimate == pytest.approx(0.75)
    assert 0 <= r.low <= r.estimate <= r.high <= 1


def test_not_evaluable_trials_never_decide():
    # Every trial not evaluable: nothing to decide on, whatever the threshold.
    blank = {f"t{i}": [None] * 8 for i in range(50)}
    assert gate.evaluate(gate.absolute(1, 0.0), blank).verdict == gate.INCONCLUSIVE
    assert gate.evaluate(gate.absolute(1, 1.0), blank).verdict == gate.INCONCLUSIVE
    # Every evaluable trial succeeded, but counted as failures the not-evaluable half
    # leaves the suite at its bar: no PASS; counted as successes, above it: no FAIL.
    half = {f"t{i}": [True, None] * 8 for i in range(50)}
    r = gate.evaluate(gate.absolute(1, 0.5), half)
    assert r.coverage == 0.5 and r.verdict == gate.INCONCLUSIVE
    assert r.estimate == 1.0 and r.estimate_if_failed == 0.5
    # A few not-evaluable trials among many successes: PASS, whatever made them so.
    rng = random.Random(4)
    mostly = {f"t{i}": [None if rng.random() < 0.05 else True for _ in range(20)] for i in range(50)}
    assert gate.evaluate(gate.absolute(1, 0.9), mostly).verdict == gate.PASS


def test_failures_that_go_missing_do_not_pass_the_gate():
    """A suite whose true pass^1 is 0.8, below its bar of 0.9, but whose every failure ends
    not evaluable: its evaluable trials all succeed, so a gate that left them out (as
    missing at random) would PASS; read against each test, the verdict is FAIL, and the
    summary shows the estimate both ways."""
    rng = random.Random(2)
    hidden = [{f"t{i:02}": [True if rng.random() < 0.8 else None for _ in range(8)] for i in range(20)}]
    r = gate.evaluate(gate.absolute(1, 0.9), hidden)
    assert r.estimate == 1.0 and r.estimate_if_failed < 0.85
    assert r.verdict != gate.PASS
    # The same trials with the failures shown: the gate FAILs them too.
    shown = [{t: [o is True for o in v] for t, v in hidden[0].items()}]
    assert gate.evaluate(gate.absolute(1, 0.9), shown).verdict == gate.FAIL


def test_regression_is_paired_by_task():
    base = suite([1.0] * 25 + [0.0] * 25, 8, seed=1)
    same = suite([1.0] * 25 + [0.0] * 25, 8, seed=2)
    worse = suite([0.5] * 25 + [0.0] * 25, 8, seed=3)
    assert gate.evaluate(gate.regression(1, 0.1), same, base).verdict == gate.PASS
    assert gate.evaluate(gate.regression(1, 0.1), worse, base).verdict == gate.FAIL
    with pytest.raises(gate.GateError, match="baseline"):
        gate.evaluate(gate.regression(1, 0.1), same)


def test_overall_verdict():
    P, F, I = gate.PASS, gate.FAIL, gate.INCONCLUSIVE  # noqa: N806, E741

    def r(v):  # noqa: ANN001, ANN202
        return gate.CriterionResult(gate.absolute(1, 0.5), v, None, 0, 1, 1, 0, 0)

    assert gate.overall([r(P), r(P)]) == P
    assert gate.overall([r(P), r(I)]) == I
    assert gate.overall([r(I), r(F)]) == F


def test_rounds_respect_the_cap():
    criteria = [gate.absolute(1, 0.5)]
    assert gate_rounds.round_trials(criteria) == 1 and gate_rounds.round_trials([gate.absolute(4, 0.5)]) == 4
    data = {"done": [True] * 8, "open": [True, False, True, True], "new": [], "capped": [True, False] * 5}
    assert gate_rounds.open_tasks(criteria, data, max_trials=10) == ["done", "new", "open"]


def test_tasks_not_expected_to_move_the_evidence_are_idle():
    """Leaning to PASS, a task that failed every time cannot show the suite does better:
    idle; a task with fewer than ALWAYS_RUN blocks runs whatever it did. Leaning to FAIL,
    the mirror image."""
    leaning_pass = {**{f"w{i}": [True] * 8 for i in range(8)}, "lost": [False] * 8, "new": [False]}
    r = gate.evaluate(gate.absolute(1, 0.75), leaning_pass, interval=False)
    assert r.verdict == gate.INCONCLUSIVE and "lost" in r.idle and "new" not in r.idle
    assert "lost" not in gate_rounds.open_tasks([r.criterion], leaning_pass, 16, [r])
    leaning_fail = {**{f"l{i}": [False] * 8 for i in range(8)}, "won": [True] * 8, "new": [True]}
    r = gate.evaluate(gate.absolute(1, 0.25), leaning_fail, interval=False)
    assert r.verdict == gate.INCONCLUSIVE and "won" in r.idle and "new" not in r.idle
    # Idle for one open criterion but not for another (that one leans to PASS): it runs.
    other = gate.evaluate(gate.absolute(1, 0.08), leaning_fail, interval=False)
    assert other.verdict == gate.INCONCLUSIVE and "won" not in other.idle
    assert "won" not in gate_rounds.open_tasks([r.criterion], leaning_fail, 16, [r])
    assert "won" in gate_rounds.open_tasks([r.criterion, other.criterion], leaning_fail, 16, [r, other])


def test_a_criterion_at_its_bar_is_futile_once_the_budget_cannot_decide_it():
    """Six rounds of 50 tasks whose success rate sits on the bar: with 8 trials a task
    the rest of the budget is very unlikely to decide, so the criterion asks for no more
    trials; without a budget it cannot be futile; far from the bar it is decided."""
    rng = random.Random(1)
    ps = [rng.random() for _ in range(50)]
    rounds = [{f"t{i}": [rng.random() < p] for i, p in enumerate(ps)} for _ in range(6)]
    rate = sum(o for r in rounds for outcomes in r.values() for o in outcomes) / 300
    r = gate.evaluate(gate.absolute(1, rate), rounds, max_trials=8, interval=False)
    assert r.verdict == gate.INCONCLUSIVE and r.futile and len(r.idle) == 50
    assert gate_rounds.open_tasks([r.criterion], rounds, 8, [r]) == []
    assert not gate.evaluate(gate.absolute(1, rate), rounds, interval=False).futile
    far = gate.evaluate(gate.absolute(1, rate - 0.3), rounds, max_trials=8, interval=False)
    assert far.verdict == gate.PASS and not far.futile


@pytest.mark.parametrize("per_trial", [False, True])
def test_replay_bets_as_the_rounds_were_run(per_trial):
    """evaluate rebuilds the evidence from the rounds: each unit (a block of pass^2, or a
    trial when bet per trial) bet with the tilt planned from the units before it in
    (round, index) order, exactly as a gate feeding the rounds live."""
    rng = np.random.default_rng(3)
    ps = rng.uniform(0, 1, 12)
    criterion = gate.absolute(2, 0.3)
    live = gate.new_evidence(2, 1, 12, 0.3, per_trial=per_trial)
    rounds = []
    for _ in range(3):  # rounds of 2 trials: one block of pass^2 each
        trials = rng.random((12, 2)) < ps[:, None]
        units = [trials[:, 0], trials[:, 1]] if per_trial else [trials.all(axis=1)]
        for unit in units:
            live.add(unit[None], np.ones((1, 12), bool), live.plan())
        rounds.append({f"t{i:02}": list(map(bool, trials[i])) for i in range(12)})
    replayed = gate.replay(criterion.k, criterion.threshold, rounds, sorted(rounds[0]), per_trial=per_trial)
    for test in (Evidence.PASS, Evidence.FAIL):
        assert replayed.evidence(test)[0] == pytest.approx(live.evidence(test)[0])


def test_blocks_never_span_rounds():
    """A block of pass^2 is cut within one round: task a's trial in round 0 and its first
    in round 1 make no block, so whether a block completes never depends on its own first
    trials (through the next round's choice of tasks); a round's trials past its last
    whole block are not used by that k. Bet per trial, every trial counts."""
    rounds = [{"a": [True], "b": [True, True, False]}, {"a": [True, True], "b": []}]
    assert [gate.cut_round(r["a"], 2, bool) for r in rounds] == [[], [1]]
    assert [gate.cut_round(r["b"], 2, bool) for r in rounds] == [[1], []]
    for test in (Evidence.PASS, Evidence.FAIL):
        assert gate.replay(2, 0.5, rounds, ["a", "b"]).blocks[test, 0].tolist() == [1, 1]
        assert gate.replay(2, 0.5, rounds, ["a", "b"], per_trial=True).blocks[test, 0].tolist() == [3, 3]


def test_least_wealth_is_a_lower_bound_and_a_tight_one():
    """The dual's value never exceeds the least log wealth over the null (a grid search
    over q finds it, a little above the true least), and comes within 0.03 nats of it."""
    from passhat.results.gate_evidence import least_log_wealth

    rng = np.random.default_rng(11)
    grid = np.linspace(0, 1, 101)
    q = np.stack(np.meshgrid(grid, grid, grid, indexing="ij"), axis=-1).reshape(-1, 3)
    for _ in range(12):
        eta = rng.uniform(-2, 2, (1, 3, 5)) * (rng.random((1, 3, 5)) < 0.8)
        y = (rng.random((1, 3, 5)) < 0.6).astype(float)
        sign, bound = np.array([1.0, 1.0, -1.0]), rng.uniform(-0.5, 1.5, 1)
        value, _ = least_log_wealth(eta, y, sign, bound)
        log_wealth = (eta * y).sum() - np.log1p(q[:, :, None] * np.expm1(eta[0])).sum(axis=(1, 2))
        least = log_wealth[q @ sign <= bound[0]].min()
        assert least - 0.03 <= value[0] <= least + 1e-9


@pytest.mark.parametrize("signs", [(1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)])
def test_per_trial_least_wealth_is_a_lower_bound(signs):
    """Bet per trial, the least log wealth over "sum sign_j p_j^k <= bound" is never above
    a brute-force minimum over a fine grid of p (itself a little above the true least);
    where the null is convex (every sign +1, the PASS test of an absolute criterion) it
    comes within 0.05 nats of it. The other sides are nonconvex: only the bound holds."""
    from passhat.results.gate_trials import least_log_wealth_trials

    rng = np.random.default_rng(7)
    grid = np.linspace(0, 1, 401)
    p = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2)
    sign = np.array(signs)
    for case in range(16):
        k = 2 + case % 3
        eta = rng.uniform(-3, 3, (1, 2, 6)) * (rng.random((1, 2, 6)) < 0.8)
        y = (rng.random((1, 2, 6)) < rng.uniform(0.2, 0.9)).astype(float)
        bound = rng.uniform(-2, 2, 1)
        value, where = least_log_wealth_trials(eta, y, sign, bound, k)
        feasible = (p ** k) @ sign <= bound[0]
        if not feasible.any():
            assert value[0] == np.inf
            continue
        log_wealth = (eta * y).sum() - np.log1p(p[:, :, None] * np.expm1(eta[0])).sum(axis=(1, 2))
        least = log_wealth[feasible].min()
        assert value[0] <= least + 1e-9
        if signs == (1.0, 1.0):
            assert value[0] >= least - 0.05


def _gate_in_rounds(criteria, ps, max_trials, seed=0):  # noqa: ANN001, ANN201
    """A gate driven as the workflow drives it: next_round picks, each chosen task runs
    round_trials trials; the rounds and the final results."""
    rng = random.Random(seed)
    rounds = [{f"t{i:02}": [] for i in range(len(ps))}]
    while True:
        chosen, stopped = gate_rounds.next_round(criteria, rounds, None, max_trials)
        if not chosen:
            return rounds, [gate.evaluate(c, rounds, max_trials=max_trials) for c in criteria], stopped
        size = gate_rounds.round_trials(criteria)
        rounds.append({t: [rng.random() < ps[int(t[1:])] for _ in range(size)] for t in chosen})


@pytest.mark.parametrize("tasks", [20, 19])
@pytest.mark.parametrize("k, bar, max_trials, bets", [(1, 0.95, 8, "blocks"), (4, 0.95, 16, "blocks"),
                                                      (4, 0.95, 16, "trials"), (4, 0.9, 8, "blocks")])
def test_an_agent_that_never_fails_passes_a_high_bar_within_the_budget(k, bar, max_trials, bets, tasks):
    """20 or 19 tasks that always succeed: pass^1 >= 0.95 within 8 trials a task, pass^4 >=
    0.95 within 16 (bet on blocks or per trial), pass^4 >= 0.9 within 8 (two rounds: the
    first must be bet high, gate.aims). With a fixed cap and no aim, 19 tasks missed 0.95
    within 16 by 0.01 nats, and pass^4 >= 0.9 within 8 was never PASSed."""
    rounds, (result,), _ = _gate_in_rounds([gate.absolute(k, bar, bets=bets)], [1.0] * tasks, max_trials)
    assert result.verdict == gate.PASS
    assert max(len(v) for v in gate.merged(rounds).values()) <= max_trials


def test_a_gate_whose_every_task_is_idle_runs_them_all_unless_it_is_stopped():
    """The plug-in finding no task worth a trial is no reason to leave budget unspent on
    an open criterion: every task below its cap runs; a decided or futile gate runs none."""
    trials = np.array([[2, 2, 8], [2, 2, 8]])
    idle = np.ones((2, 3), bool)
    mask = gate_rounds.open_mask(trials, 1, 8, idle, stopped=np.array([False, True]))
    assert mask.tolist() == [[True, True, False], [False, False, False]]
    assert not gate_rounds.open_mask(trials, 1, 8, idle).any()


def test_an_earlier_gate_as_baseline_is_bet_in_the_order_its_rounds_ran():
    """A baseline given as rounds feeds its blocks round by round: a block chosen in a late
    round is bet after the blocks of the rounds before it, not with the blocks of its
    index; a fixed run (one round) gives one virtual round per block index."""
    gate_rounds = [{"a": [True], "b": [False]}, {"a": [True]}, {"b": [True]}]
    outcomes, present = gate.baseline_blocks(gate_rounds, ["a", "b"], 1)
    assert present[0, 0].tolist() == [[True, True, False], [True, False, True]]
    assert outcomes[0, 0].tolist() == [[1, 1, 0], [0, 0, 1]]
    outcomes, present = gate.baseline_blocks(gate.merged(gate_rounds), ["a", "b"], 1)
    assert present[0, 0].tolist() == [[True, True], [True, True]]
    # The bet on b's second block is planned after a's second block, in its own round.
    evidence = gate.replay(1, 0.0, [{"a": [True], "b": [True]}], ["a", "b"], gate_rounds)
    by_round = evidence.wealth[Evidence.PASS].eta[0, 3]
    in_order = gate.replay(1, 0.0, [{"a": [True], "b": [True]}], ["a", "b"], gate.merged(gate_rounds))
    assert by_round[1] != in_order.wealth[Evidence.PASS].eta[0, 3][1]


def test_the_summary_says_what_was_computed():
    """The interval is labelled with its real two-sided coverage (each bound one-sided at
    the confidence: 90% at 95%), the estimate is called a plug-in, and the report says how
    not-evaluable trials are read, their share, and the estimate with them as failures."""
    from passhat.results.gate_outputs import gate_record, junit, markdown

    data = {t: [None if i == 0 else o for i, o in enumerate(v)] for t, v in suite([0.8] * 20, 8).items()}
    result = gate.evaluate(gate.absolute(1, 0.8), data)  # INCONCLUSIVE: junit says why
    record = gate_record("g", [result], rounds=["g-r0"], conversations=160, tasks=20, cost_usd=0.0, max_trials=16)
    [criterion] = record["criteria"]
    assert criterion["interval_coverage"] == 0.9 and criterion["not_evaluable"] == 0.125
    assert criterion["estimate_if_failed"] < criterion["estimate"]
    text = markdown(record)
    assert "(90% two-sided)" in text and "plug-in estimate" in text and "20/160 (12%)" in text
    assert "counts as a failure for PASS and as a success for FAIL" in text
    assert "against 320 for the fixed design of 16 trials" in text
    assert "unbiased C" not in text and "90% interval" in junit(record)


def test_pass4_with_two_blocks_a_task_stops_at_its_bar_after_the_first():
    """pass^4 with --max-trials 8 gives a task two blocks; futility is judged after the
    first (gate.futility_from), so a leaderboard-like suite whose pass^4 sits on the bar
    stops "too close to call" after 200 of its 400 conversations in most gates, driven
    by next_round as the workflow drives it. Judged only after the last block, every gate
    spent all 400."""
    ps = [1.0] * 18 + [0.97] * 6 + [0.0] * 8 + [0.03] * 4 + [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8] * 2
    bar = sum(p ** 4 for p in ps) / len(ps)
    criteria = [gate.absolute(4, bar)]
    spent, reasons = [], set()
    for seed in range(10):
        rng = random.Random(seed)
        rounds = [{f"t{i:02}": [] for i in range(len(ps))}]
        while True:
            chosen, stopped = gate_rounds.next_round(criteria, rounds, None, 8)
            if not chosen:
                break
            rounds.append({t: [rng.random() < ps[int(t[1:])] for _ in range(4)] for t in chosen})
        verdict = gate.evaluate(criteria[0], rounds, max_trials=8, interval=False).verdict
        assert verdict == gate.INCONCLUSIVE
        spent.append(sum(map(len, gate.merged(rounds).values())))
        reasons.add(stopped)
    assert sum(s == 200 for s in spent) >= 7 and max(spent) <= 400  # seeds 0-9: 9 of 10 stop at 200
    assert any(r and "too close to call" in r for r in reasons)
    assert gate.futility_from(8) == 6 and gate.futility_from(4) == 3  # larger budgets: as before


def test_a_simulated_continuation_completes_the_same_trial_never_a_new_draw():
    """gate_simulation.draw: a not-evaluable trial's continuation shows the outcome the
    trial had all along; with failures' continuations always lost, only failures stay
    missing."""
    from passhat.results.gate_simulation import draw

    ps, half = np.full(5, 0.7), np.full(5, 0.5)
    before = draw(np.random.default_rng(3), (40, 5, 4), ps, half, half, (1.0, 0.0), continuations=0)
    after = draw(np.random.default_rng(3), (40, 5, 4), ps, half, half, (1.0, 0.0))
    assert (before[0] == after[0]).all() and before[1].any()
    assert (after[1] == (before[1] & ~before[0])).all()
