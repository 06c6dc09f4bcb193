import pytest

from passhat import metrics
from passhat.outcomes import TaskOutcome, is_success, outcome_label


def test_pass_hat_exact_values():
    assert metrics.pass_hat(3, 4, 2) == pytest.approx(0.5)  # C(3,2)/C(4,2) = 3/6
    assert metrics.pass_hat(4, 4, 4) == 1.0
    assert metrics.pass_hat(3, 4, 1) == pytest.approx(0.75)
    assert metrics.pass_hat(2, 5, 2) == pytest.approx(1 / 10)


def test_fewer_successes_than_k_gives_zero():
    assert metrics.pass_hat(1, 4, 2) == 0.0
    assert metrics.pass_hat(0, 4, 1) == 0.0


def test_k_larger_than_trials_is_refused():
    with pytest.raises(ValueError, match="k must be within 1..4"):
        metrics.pass_hat(2, 4, 5)
    with pytest.raises(ValueError):
        metrics.pass_hat(2, 4, 0)
    with pytest.raises(ValueError):
        metrics.pass_hat(5, 4, 1)


def test_pass_at_k():
    assert metrics.pass_at(1, 4, 2) == pytest.approx(1 - 3 / 6)
    assert metrics.pass_at(0, 4, 4) == 0.0


def test_curve_and_mean_over_tasks():
    assert metrics.pass_hat_curve(3, 4) == pytest.approx({"1": 0.75, "2": 0.5, "3": 0.25, "4": 0.0})
    mean = metrics.mean_over_tasks([{"1": 1.0, "2": 1.0}, {"1": 0.5}])
    assert mean == pytest.approx({"1": 0.75, "2": 1.0})


def test_success_threshold_and_labels():
    assert is_success(1.0)
    assert not is_success(0.99)
    assert outcome_label("scored", 1.0) == "success"
    assert outcome_label("scored", 0.5) == "failure"
    assert outcome_label("not_evaluable", None) == "not_evaluable"
    assert outcome_label("running", None) == "running"


def task(task_id, successes, evaluable, trials=4, model="m"):  # noqa: ANN001, ANN201
    return TaskOutcome(
        run_id="r", agent_model=model, user_model="u", domain="airline", task_id=task_id,
        trials=trials, evaluable=evaluable, successes=successes,
        avg_reward=successes / evaluable if evaluable else None,
        pass_hat=metrics.pass_hat_curve(successes, evaluable) if evaluable else {},
    )


def test_summary_reports_pass_hat_and_pass_at_over_tasks():
    summary = metrics.summarize("r", [task("1", 4, 4), task("2", 1, 4), task("3", 0, 0)])
    [row] = summary.results
    assert (row.tasks, row.trials, row.evaluable) == (3, 12, 8)
    assert row.avg_reward == pytest.approx(5 / 8)
    assert row.pass_hat_k == pytest.approx({"1": (1 + 0.25) / 2, "2": 0.5, "3": 0.5, "4": 0.5})
    # second task (1 of 4): pass@2 = 1 - C(3,2)/C(4,2) = 0.5, pass@3 = 1 - C(3,3)/C(4,3) = 0.75
    assert row.pass_at_k == pytest.approx({"1": (1 + 0.25) / 2, "2": 0.75, "3": 0.875, "4": 1.0})


def test_summary_leaves_not_evaluable_trials_out_as_the_leaderboard_does():
    # tau2 1.0.1's metrics (what `submit prepare` writes): task 2 had 2 of its 4 trials
    # not evaluable. They are left out, not counted as failures, and k stops at the
    # fewest evaluable trials of a task (2): no pass^3, no pass^4.
    summary = metrics.summarize("r", [task("1", 4, 4), task("2", 1, 2)])
    [row] = summary.results
    assert row.pass_hat_k == pytest.approx({"1": 0.75, "2": 0.5, "3": 1.0, "4": 1.0})
    assert row.pass_hat_k_leaderboard == pytest.approx({"1": 0.75, "2": 0.5})
    # A task with no evaluable trial is left out altogether; one with a single one
    # leaves pass^1 alone.
    row = metrics.summarize("r", [task("1", 0, 0), task("2", 1, 1), task("3", 0, 4)]).results[0]
    assert row.pass_hat_k_leaderboard == pytest.approx({"1": 0.5})
    # Nothing evaluable: no pass^k at all (prepare writes none).
    assert metrics.summarize("r", [task("1", 0, 0)]).results[0].pass_hat_k_leaderboard == {}
    # Every trial evaluable: one way of counting, nothing to add.
    assert metrics.summarize("r", [task("1", 4, 4)]).results[0].pass_hat_k_leaderboard is None


def test_summary_groups_by_model():
    summary = metrics.summarize("r", [task("1", 4, 4, model="b"), task("1", 0, 4, model="a")])
    assert [(r.agent_model, r.pass_hat_k["1"]) for r in summary.results] == [("a", 0.0), ("b", 1.0)]


# ---- bootstrap intervals and paired differences ---------------------------------------------


def test_bootstrap_is_deterministic_and_brackets_the_mean():
    curves = [metrics.pass_hat_curve(c, 4) for c in (4, 3, 0, 2, 4, 1, 0, 4, 4, 2)]
    first = metrics.bootstrap_curve(curves)
    assert first == metrics.bootstrap_curve(curves)  # same seed, same interval
    assert first != metrics.bootstrap_curve(curves, seed=1)
    assert set(first) == {"1", "2", "3", "4"}
    for k, est in first.items():
        assert est.value == pytest.approx(metrics.mean_over_tasks(curves)[k])
        assert 0.0 <= est.low < est.value < est.high <= 1.0
    # pass^k falls with k, and so do the interval's ends here.
    assert first["1"].value > first["4"].value


def test_bootstrap_interval_matches_the_textbook_percentile():
    """Ten tasks, half solved: the mean of ten 0/1 draws is binomial(10, 0.5)/10, whose
    central 95% runs from 0.2 to 0.8; 2000 resamples land there."""
    est = metrics.bootstrap_mean([1.0] * 5 + [0.0] * 5)
    assert est.value == 0.5
    assert est.low == pytest.approx(0.2, abs=0.05) and est.high == pytest.approx(0.8, abs=0.05)
    narrower = metrics.bootstrap_mean([1.0] * 5 + [0.0] * 5, confidence=0.5)
    assert est.low < narrower.low < narrower.high < est.high


def test_bootstrap_of_identical_tasks_has_no_spread():
    assert metrics.bootstrap_mean([0.75] * 6) == (0.75, 0.75, 0.75)
    assert metrics.bootstrap_curve([]) == {}
    with pytest.raises(ValueError):
        metrics.bootstrap_mean([])


def test_bootstrap_leaves_out_tasks_without_k_trials():
    # The second task has only 1 evaluable trial: pass^2 rests on the first alone.
    curves = [metrics.pass_hat_curve(2, 2), metrics.pass_hat_curve(0, 1)]
    est = metrics.bootstrap_curve(curves)
    assert est["2"] == (1.0, 1.0, 1.0)
    assert est["1"].value == 0.5 and (est["1"].low, est["1"].high) == (0.0, 1.0)


def test_paired_difference_over_shared_tasks():
    better = {str(t): 1.0 for t in range(20)}
    worse = {str(t): (0.0 if t % 2 else 1.0) for t in range(20)}
    worse["extra"] = 0.0  # not in `better`: left out
    diff = metrics.paired_difference(better, worse)
    assert diff.shared_tasks == 20
    assert diff.difference.value == pytest.approx(0.5)
    assert diff.difference.low > 0 and diff.difference.excludes_zero()
    same = metrics.paired_difference(better, dict(better))
    assert same.difference == (0.0, 0.0, 0.0) and not same.difference.excludes_zero()
    noisy = metrics.paired_difference({"a": 1.0, "b": 0.0}, {"a": 0.0, "b": 1.0})
    assert noisy.difference.low < 0 < noisy.difference.high and not noisy.difference.excludes_zero()
    assert metrics.paired_difference({"a": 1.0}, {"b": 1.0}) is None
