import pytest

from workflows import metrics


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


def test_success_threshold():
    assert metrics.is_success(1.0)
    assert not metrics.is_success(0.99)
