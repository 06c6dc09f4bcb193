"""The gate's evidence about pass^k with k > 1 from every trial, not from blocks of k.

Cut into blocks of k, a task's trials give one bit a block ("all k succeeded", mean
q_t = p_t^k), and k - 1 of every k trials are spent on nothing but that bit. Here each
trial is bet on by itself, on p_t: for a hypothesised vector p of success rates the wealth
    M(p) = prod over t, i of exp(eta_ti * Y_ti) / (1 - p_t + p_t * e^eta_ti)
has mean 1 under p given everything before the trial (Waudby-Smith & Ramdas, JRSS B 2024,
as for blocks), whichever tasks run and however the tilts are chosen from the past. The
nulls are about theta = mean p_t^k: "sum_j sign_j p_j^k <= bound" (Evidence.null; the
PASS test's "mean p^k <= X", the FAIL test's "mean p^k >= X", a regression's difference).

The least log wealth over such a null. log M is convex in p; the constraint is convex
where sign_j > 0 (p^k is convex on [0, 1]) and not where sign_j < 0 (the FAIL test's
"mean p^k >= X", a regression's baseline). Either way the Lagrangian dual
    g(nu) = gain + sum_j min_p [ -sum_i log(1 + p u_ji) + nu sign_j p^k ] - nu bound
is at most that least log wealth for every nu >= 0 (weak duality; Boyd & Vandenberghe,
Convex Optimization, 2004, section 5.2.2), and equal to it at its best nu where the
problem is convex (every sign_j > 0: Slater's condition, section 5.2.3). The nonconvex
side keeps only the inequality: its bound is that of the problem with each column
convexified (Aubin & Ekeland, "Estimates of the duality gap in nonconvex optimization",
1976, bound the gap by the columns' nonconvexity, which tilts of a few nats make large),
so it can cost evidence, never add it: the FAIL test rarely decides (docs/gate.md). Each column's inner minimum is a one-dimensional problem, convex plus concave
(-nu p^k): on each interval of a grid the convex part lies above its two tangents and the
concave part above its chord, so the least of those lines over the interval is a
certified lower bound of the column's minimum there; the best intervals are refined. The
value is a lower bound whatever the grid, and the tests compare it with a brute-force
minimum over the null.
"""

from __future__ import annotations

import numpy as np

from passhat.results.gate_evidence import Evidence, prior_counts

# A trial gains at most -log(p0) against a null at p0 (0.0128 nats at 0.95^(1/4)); at a
# tilt of 4 it gains 0.0124 of it, at 3 only 0.0118: pass^4 >= 0.95 on 20 tasks within 16
# trials a task needs nearly all of it. A failure then costs up to 4 nats, but only where
# every trial so far succeeded.
ETA_MAX = 4.0
# The coarse grid's intervals on [0, 1], and the fine grid's across the three coarse
# intervals around each column's best one.
GRID = 48
FINE = 36
# Bisection steps: on the dual's multiplier (in log scale), and per column in the plug-in's fit.
DUAL_STEPS = 30
FIT_STEPS = 30
# Taken off every certified bound: the rounding of the sums of logs, many times over.
ROUNDING = 1e-9


def _column_sums(u: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-sum_i log(1 + p u_i) and its derivative in p, per column, at the points p
    ((G,) or (B, J, G)), for the trials' u = e^eta - 1 (B, J, R); a trial not run has u = 0."""
    shape = (*u.shape[:2], p.shape[-1])
    value, slope = np.zeros(shape), np.zeros(shape)
    for i in range(u.shape[2]):  # one trial slot at a time: (B, J, G) arrays, never (B, J, G, R)
        ui = u[:, :, i, None]
        if not ui.any():
            continue
        value -= np.log1p(p * ui)
        slope -= ui / (1 + p * ui)
    return value, slope


def _interval_bounds(p: np.ndarray, c: np.ndarray, dc: np.ndarray, a: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """psi(p) = c(p) + a p^k on the grid points p, and a lower bound of psi on each interval
    between neighbouring points (c convex, with derivative dc; a per column, any sign).
    The convex part C (c, and a p^k when a > 0) lies above its tangents at both ends, the
    concave part D (a p^k when a < 0) above its chord: psi >= max of two lines there, whose
    least over the interval is at least the convex combination where they cross (or an
    end, when they do not cross inside)."""
    a = a[..., None]
    below = p ** (k - 1)
    power = below * p
    convex_a, concave_a = np.maximum(a, 0.0), np.minimum(a, 0.0)
    big_c = c + convex_a * power
    d_big_c = dc + (convex_a * k) * below
    d = concave_a * power
    psi = big_c + d
    width = p[..., 1:] - p[..., :-1]
    chord = (d[..., 1:] - d[..., :-1]) / width
    left, right = psi[..., :-1], psi[..., 1:]
    sl, sr = d_big_c[..., :-1] + chord, d_big_c[..., 1:] + chord  # the two lines' slopes
    alpha = left  # the left tangent line (plus chord) at the left end
    beta = big_c[..., 1:] - d_big_c[..., 1:] * width + d[..., :-1]  # the right one, at the left end
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (alpha * sr - beta * sl) / (sr - sl)
    low = np.where(sl >= 0, left, np.where(sr <= 0, right, crossing))
    return psi, np.minimum(low, np.minimum(left, right)) - ROUNDING


def least_log_wealth_trials(eta: np.ndarray, y: np.ndarray, sign: np.ndarray, bound: np.ndarray, k: int
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Per gate, a lower bound of log min M(p) over every p (each within 0..1) with
    sum_j sign_j * p_j^k <= bound_gate, and the p where it is (about) reached.
    eta, y: (B, J, R) each trial's tilt and outcome (a trial not run has tilt 0);
    sign: (J,) or (B, J); bound: (B,). inf when no p satisfies the constraint.

    The multiplier is chosen by bisection on the dual's slope from the coarse grid's
    points; the value is the dual at that multiplier with every column's certified
    minimum (coarse intervals, the best three refined), and is a lower bound at any
    multiplier."""
    gates, columns, _ = eta.shape
    sign = np.broadcast_to(np.asarray(sign, float), (gates, columns))
    bound = np.asarray(bound, float).reshape(-1)
    u = np.expm1(eta)
    gain = (eta * y).sum(axis=(1, 2))
    grid = np.linspace(0.0, 1.0, GRID + 1)
    c, dc = _column_sums(u, grid)
    power = grid ** k

    def slope(nu: np.ndarray) -> np.ndarray:
        """The dual's slope at nu: sum sign p^k - bound at each column's minimiser, from
        the grid's best point and a parabola through it and its neighbours."""
        psi = c + (nu[:, None] * sign)[..., None] * power
        best = np.clip(np.argmin(psi, axis=2), 1, GRID - 1)[..., None]
        left, mid, right = (np.take_along_axis(psi, best + d, axis=2)[..., 0] for d in (-1, 0, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            shift = np.clip(np.nan_to_num((left - right) / (2 * (left - 2 * mid + right))), -1, 1)
        p = np.clip(grid[best[..., 0]] + shift / GRID, 0, 1)
        return (sign * p ** k).sum(axis=1) - bound

    low, high = np.zeros(gates), np.ones(gates)
    at_zero = slope(low) <= 0
    for _ in range(30):  # grow the bracket until the constraint is met
        over = slope(high) > 0
        if not over.any():
            break
        high = np.where(over, high * 16, high)
    for _ in range(DUAL_STEPS):
        mid = np.sqrt(np.maximum(low, high * 1e-12) * high)
        over = slope(mid) > 0
        low, high = np.where(over, mid, low), np.where(over, high, mid)
    nu = np.where(at_zero, 0.0, np.sqrt(np.maximum(low, high * 1e-12) * high))

    a = nu[:, None] * sign
    psi, coarse = _interval_bounds(grid, c, dc, a, k)
    best = np.argmin(coarse, axis=2)
    first = np.clip(best - 1, 0, GRID - 3)  # the window: coarse intervals first .. first + 2
    step = 3.0 / GRID / FINE
    fine_p = np.clip(grid[first][..., None] + step * np.arange(FINE + 1), 0.0, 1.0)
    fine_c, fine_dc = _column_sums(u, fine_p)
    fine_psi, fine = _interval_bounds(fine_p, fine_c, fine_dc, a, k)
    index = np.arange(GRID)
    outside = (index < first[..., None]) | (index > first[..., None] + 2)
    column_low = np.minimum(fine.min(axis=2), np.where(outside, coarse, np.inf).min(axis=2))
    value = gain + column_low.sum(axis=1) - nu * bound
    where = np.take_along_axis(fine_p, np.argmin(fine_psi, axis=2)[..., None], axis=2)[..., 0]
    infeasible = np.minimum(sign, 0).sum(axis=1) > bound + 1e-12
    return np.where(infeasible, np.inf, value), where


def trial_null_fit(successes: np.ndarray, trials: np.ndarray, sign: np.ndarray, bound: np.ndarray, k: int,
                   prior_mean: "np.ndarray | float" = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The null's most likely p (maximum likelihood of the trials, with prior_counts,
    subject to sum_j sign_j p_j^k <= bound), and the columns' unconstrained estimates.
    Per column the constrained optimum solves S/p - F/(1-p) = nu sign k p^(k-1), found
    by bisection in logit p (on the nonconvex side, a root: the plug-in need only be
    predictable, not optimal)."""
    a, b = prior_counts(successes, trials, sign, prior_mean)
    s = np.asarray(successes, float) + a
    f = np.asarray(trials, float) - successes + b
    sign = np.broadcast_to(np.asarray(sign, float), s.shape)
    bound = np.asarray(bound, float).reshape(-1)
    free = s / (s + f)

    def p_of(nu: np.ndarray) -> np.ndarray:
        lo, hi = np.full(s.shape, -15.0), np.full(s.shape, 15.0)
        pull = nu[:, None] * sign * k
        for _ in range(FIT_STEPS):
            z = (lo + hi) / 2
            p = 1 / (1 + np.exp(-z))
            rising = s * (1 - p) - f * p - pull * p ** k * (1 - p) > 0  # the derivative times p(1-p)
            lo, hi = np.where(rising, z, lo), np.where(rising, hi, z)
        return 1 / (1 + np.exp(-(lo + hi) / 2))

    met = (sign * free ** k).sum(axis=1) <= bound
    if met.all():
        return free, free
    low, high = np.zeros(len(s)), np.ones(len(s))
    for _ in range(60):
        over = ~met & ((sign * p_of(high) ** k).sum(axis=1) > bound)
        if not over.any():
            break
        high = np.where(over, high * 4, high)
    for _ in range(FIT_STEPS):
        mid = np.sqrt(np.maximum(low, high * 1e-12) * high)
        over = (sign * p_of(mid) ** k).sum(axis=1) > bound
        low, high = np.where(over, mid, low), np.where(over, high, mid)
    return np.where(met[:, None], free, p_of(high)), free


def plug_in_trial_tilts(successes: np.ndarray, trials: np.ndarray, sign: np.ndarray, bound: np.ndarray, k: int,
                        prior_mean: "np.ndarray | float" = 0.5) -> np.ndarray:
    """The tilts of each column's next trials: logit(estimate) - logit(the null's most
    likely p), as gate_evidence.plug_in_tilts does for blocks, clipped to ETA_MAX, and
    never against the test's direction. Unlike the blocks', they have no floor: p^k is
    flat near 0, so a null can raise a task that always fails to p = 0.75 for a third of
    its budget, and a floor of 0.25 there lost 1.5 nats a task in 8 trials (a leaderboard
    suite's pass^4 PASS test went to -18 nats; bench/gate_calibration.py)."""
    p0, p = trial_null_fit(successes, trials, sign, bound, k, prior_mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        eta = np.clip(np.log(p / (1 - p)) - np.log(p0 / (1 - p0)), -ETA_MAX, ETA_MAX)
    eta = np.nan_to_num(eta, nan=0.0)
    sign = np.broadcast_to(np.asarray(sign, float), eta.shape)
    return np.where(sign > 0, np.maximum(eta, 0.0), np.minimum(eta, 0.0))


class TrialEvidence(Evidence):
    """Evidence (the same criterion, tests, rounds and baseline feeding) whose units are
    single trials bet on p_t, for a criterion on pass^k: successes and blocks count trials."""

    # Trials every task gets before the plug-in may leave it idle (Evidence.always_run
    # counts blocks): as many as one round of pass^4. Not tuned: per-trial bets are not
    # the gate's default (docs/gate.md, Per trial).
    always_run = 4

    def __init__(self, gates: int, tasks: int, bar: float, k: int,
                 baseline: tuple[np.ndarray, np.ndarray] | None = None, aimed: bool = True,
                 aims: tuple[float, float] = (0.0, 0.0)):
        self.k = k
        super().__init__(gates, tasks, bar, baseline, aimed, aims)

    def prior_mean(self, test: int, theta: "float | np.ndarray | None" = None) -> np.ndarray:
        """The pooled prior's mean on the trial scale: the k-th root of the blocks'."""
        return super().prior_mean(test, theta) ** (1 / self.k)

    def _tilts(self, successes: np.ndarray, units: np.ndarray, sign: np.ndarray, bound: np.ndarray,
               prior_mean: np.ndarray) -> np.ndarray:
        return plug_in_trial_tilts(successes, units, sign, bound, self.k, prior_mean)

    def _least(self, eta: np.ndarray, y: np.ndarray, sign: np.ndarray, bound: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        return least_log_wealth_trials(eta, y, sign, bound, self.k)

    def rates(self, test: int | None = None) -> np.ndarray:
        if test is None:
            return (self.rates(self.PASS) + self.rates(self.FAIL)) / 2
        m = self.blocks[test]
        return np.where(m > 0, (self.successes[test] / np.maximum(m, 1)) ** self.k, 0.5)

    def unit_variance(self, p: np.ndarray) -> np.ndarray:
        """A trial's share of the variance of p^k's estimate (the delta method)."""
        return (self.k * p ** (self.k - 1)) ** 2 * p * (1 - p)
