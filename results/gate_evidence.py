"""The betting test behind the gate's verdicts, on arrays: B gates of J task columns at
once. `passhat gate` runs it with B = 1; bench/gate_calibration.py with B = thousands of
simulated gates, so the benchmark measures the very code that decides.

A task's trials are cut into blocks of k; a block is 1 when all k succeeded, so its mean
is q_t = p_t^k. Each block b of column t is bet on with a tilt eta_tb fixed before the
block ran, and for a hypothesised vector q the wealth
    M(q) = prod_{t,b} exp(eta_tb * Y_tb) / (1 - q_t + q_t * exp(eta_tb))
has mean 1 under q whatever the rounds and whichever tasks each round runs, as long as
those choices and the tilts look only at the past (Waudby-Smith & Ramdas, JRSS B 2024).
A null such as "sum_t q_t <= c" is rejected once M(q) >= 1/alpha for every q in it
(Ville's inequality); `least_log_wealth` computes a certified lower bound of that least
log wealth through the Lagrangian dual.

The tilts are the predictable plug-in of the same paper, one per column: before each block
the null's most likely q (its maximum-likelihood point under the null's constraint, from
the blocks so far) and the column's estimate p (its own blocks shrunk toward the pooled
rate) give the log-optimal bet logit(p) - logit(q). A column whose data the null already explains is bet on lightly,
one the null must bend is bet on hard; one tilt shared by all columns would instead let
the null treat the suite as one pooled coin, and lose the per-task structure.
"""

from __future__ import annotations

import numpy as np

# Tilts are clipped to this size. A block that succeeds gains at most -log(q0) against a
# null at q0 (0.051 nats at 0.95); at eta = 3 it gains 0.049 of it, where eta = 2 gained
# 0.044: pass^4 >= 0.95 on 20 tasks within 16 trials a task needs that last tenth. A
# failure then costs up to 3 nats, but only where every block so far succeeded.
ETA_MAX = 3.0
# Every block is bet at least this much in the test's own direction (up in a test that
# the suite does better than its bar, down in the other): the first round has no data to
# plug in, and a column the plug-in would skip still makes the null pay a little for
# moving it. A floor of 0.25 won most in bench/gate_calibration.py; 0.5 lost power.
ETA_MIN = 0.25
# A regression's baseline is bet on before the candidate runs: its tilts aim at a
# candidate this far to the test's side of the bar (a drop of 0.1 in pass^k is the scale
# a release gate cares about).
BASELINE_GAP = 0.1
# Pseudo-counts (Jeffreys) on each column's successes and failures when the plug-in is fitted.
PSEUDO = 0.5
# A column's own estimate is shrunk toward its side's pooled rate by this many pseudo-blocks.
SHRINK = 0.5
# Newton steps: on the dual's multiplier, and per column for its best q given the multiplier.
DUAL_STEPS = 12
COLUMN_STEPS = 8


def least_log_wealth(eta: np.ndarray, y: np.ndarray, sign: np.ndarray, bound: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per gate, a lower bound of log min M(q) over every q (each within 0..1) with
    sum_j sign_j * q_j <= bound_gate, and the q where it is reached.
    eta, y: (B, J, R) each block's tilt and outcome (a block not run has tilt 0);
    sign: (J,) or (B, J); bound: (B,). inf when no q satisfies the constraint.

    log M is convex in q, so its minimum is its Lagrangian dual's maximum. For a multiplier
    nu each column's term -sum_b log(1 + q u_b) + nu * sign * q is convex in its q and is
    minimised by bracketed Newton steps; a column whose steps stop short of the minimum is
    counted at its tangent bound over the bracket, so the value stays a lower bound
    whatever the number of steps."""
    gates, columns, _ = eta.shape
    sign = np.broadcast_to(np.asarray(sign, float), (gates, columns))
    bound = np.asarray(bound, float).reshape(-1)
    u = np.expm1(eta)
    u2 = u * u
    gain = (eta * y).sum(axis=(1, 2))
    at_zero, at_one = -u.sum(axis=2), -(u / (1 + u)).sum(axis=2)  # d/dq of -sum log(1 + q u)

    def column_min(slope: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each column's minimiser of -sum_b log(1 + q u_b) + slope * q, a lower bound of
        that minimum, and how fast the minimiser moves with the slope (-1 / curvature)."""
        low, high = np.zeros_like(start), np.ones_like(start)
        q = start
        for _ in range(COLUMN_STEPS):
            den = 1 + q[..., None] * u
            d1 = -(u / den).sum(axis=2) + slope
            d2 = (u2 / den ** 2).sum(axis=2)
            low, high = np.where(d1 < 0, q, low), np.where(d1 < 0, high, q)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = q - d1 / d2
            q = np.where((step > low) & (step < high), step, (low + high) / 2)
        pinned_low, pinned_high = at_zero + slope >= 0, at_one + slope <= 0
        q = np.where(pinned_low, 0.0, np.where(pinned_high, 1.0, q))
        den = 1 + q[..., None] * u
        d1 = -(u / den).sum(axis=2) + slope
        d2 = (u2 / den ** 2).sum(axis=2)
        value = -np.log1p(q[..., None] * u).sum(axis=2) + slope * q
        # Convexity: the minimum is at least value + d1 * (q* - q) for q* in the bracket.
        inside = ~pinned_low & ~pinned_high
        slack = np.where(inside, np.abs(d1) * np.maximum(q - low, high - q), 0.0)
        with np.errstate(divide="ignore"):
            moves = np.where(inside & (d2 > 0), -1 / d2, 0.0)
        return q, value - slack, moves

    def dual(nu: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, low_value, moves = column_min(nu[:, None] * sign, start)
        return gain + low_value.sum(axis=1) - nu * bound, q, moves

    # The dual is concave in nu >= 0; its maximum is where its slope, sum sign*q - bound,
    # crosses zero: Newton steps on nu kept inside a bracket that halves when a step
    # would leave it. Past `high` every column's best q sits at the end the constraint favours.
    low = np.zeros(gates)
    high = (np.abs(u) / (1 + np.minimum(u, 0))).sum(axis=2).max(axis=1, initial=0.0) + 1.0
    nu = low
    value, q, moves = dual(nu, np.full((gates, columns), 0.5))
    best, best_q = value, q
    for _ in range(DUAL_STEPS):
        d1, d2 = (sign * q).sum(axis=1) - bound, moves.sum(axis=1)
        low, high = np.where(d1 > 0, nu, low), np.where(d1 > 0, high, nu)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = nu - d1 / d2
        nu = np.where((step > low) & (step < high), step, (low + high) / 2)
        value, q, moves = dual(nu, q)
        better = value > best
        best, best_q = np.where(better, value, best), np.where(better[:, None], q, best_q)
    infeasible = np.minimum(sign, 0).sum(axis=1) > bound + 1e-12
    return np.where(infeasible, np.inf, best), best_q


def null_fit(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray, bound: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The null's most likely q (maximum likelihood of the blocks, with prior_counts,
    subject to sum_j sign_j q_j <= bound), and the columns' unconstrained estimates.
    Per column the constrained optimum solves S/q - F/(1-q) = nu * sign: a quadratic."""
    a, b = prior_counts(successes, blocks, sign)
    s = np.asarray(successes, float) + a
    f = np.asarray(blocks, float) - successes + b
    sign = np.broadcast_to(np.asarray(sign, float), s.shape)
    bound = np.asarray(bound, float).reshape(-1)

    def q_of(nu: np.ndarray) -> np.ndarray:
        x = nu[:, None] * sign
        with np.errstate(divide="ignore"):  # a multiplier that pins q at 1 leaves 0 below
            q = 2 * s / ((s + f + x) + np.sqrt((s - x - f) ** 2 + 4 * s * f))
        return np.clip(np.nan_to_num(q, nan=1.0, posinf=1.0), 0.0, 1.0)

    free = q_of(np.zeros(len(s)))
    low, high = np.zeros(len(s)), np.ones(len(s))
    for _ in range(60):  # grow the bracket until the constraint is met
        over = (sign * q_of(high)).sum(axis=1) > bound
        if not over.any():
            break
        high = np.where(over, high * 4, high)
    for _ in range(40):
        mid = (low + high) / 2
        over = (sign * q_of(mid)).sum(axis=1) > bound
        low, high = np.where(over, mid, low), np.where(over, high, mid)
    met = (sign * free).sum(axis=1) <= bound
    return np.where(met[:, None], free, q_of(high)), free


def prior_counts(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-successes and pseudo-failures of each column: SHRINK pseudo-blocks at the
    pooled rate of the columns on its side (candidate or baseline), the pool itself with
    PSEUDO counts. A task with two blocks is not yet known to be near 1, but a suite whose
    forty blocks all succeeded is: alone, the Jeffreys estimate 0.83 of two successes held
    every bet at a high bar at its floor."""
    s, m = np.asarray(successes, float), np.asarray(blocks, float)
    sign = np.broadcast_to(np.asarray(sign, float), s.shape)
    pool = np.zeros_like(s)
    for side in (sign > 0, sign < 0):
        rate = ((s * side).sum(axis=1, keepdims=True) + PSEUDO) / ((m * side).sum(axis=1, keepdims=True) + 2 * PSEUDO)
        pool = np.where(side, rate, pool)
    return SHRINK * pool, SHRINK * (1 - pool)


def shrunk_rates(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """Each column's predictable estimate of its block success rate: its own blocks and
    its prior_counts."""
    a, b = prior_counts(successes, blocks, sign)
    return (np.asarray(successes, float) + a) / (np.asarray(blocks, float) + a + b)


def plug_in_tilts(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """The tilts of each column's next blocks in the test of the null sum sign*q <= bound:
    logit(estimate) - logit(the null's most likely q), both from the blocks with the same
    prior_counts (so a column the null explains is not bet on), clipped to ETA_MAX, at
    least ETA_MIN in the test's direction (sign)."""
    q0, p = null_fit(successes, blocks, sign, bound)
    with np.errstate(divide="ignore", invalid="ignore"):  # a null that pins q at 0 or 1: the clip takes it
        eta = np.clip(np.log(p / (1 - p)) - np.log(q0 / (1 - q0)), -ETA_MAX, ETA_MAX)
    sign = np.broadcast_to(np.asarray(sign, float), eta.shape)
    return np.where(sign > 0, np.maximum(eta, ETA_MIN), np.minimum(eta, -ETA_MIN))


class Wealth:
    """One test's record for B gates x J columns: each block's tilt and outcome, in the
    order the blocks came (a column's blocks fill its slots left to right)."""

    def __init__(self, gates: int, columns: int):
        self.eta = np.zeros((gates, columns, 0))
        self.y = np.zeros((gates, columns, 0))
        self.filled = np.zeros((gates, columns), int)

    def add(self, success: np.ndarray, ran: np.ndarray, tilt: np.ndarray) -> None:
        """One more block for the columns where `ran`, bet with `tilt`."""
        if ran.any() and self.filled[ran].max() >= self.eta.shape[2]:
            grow = np.zeros((*self.filled.shape, max(4, self.eta.shape[2])))
            self.eta, self.y = np.concatenate([self.eta, grow], 2), np.concatenate([self.y, grow], 2)
        g, j = np.nonzero(ran)
        slot = self.filled[g, j]
        self.eta[g, j, slot] = tilt[g, j]
        self.y[g, j, slot] = success[g, j]
        self.filled += ran

    def rows(self, index: np.ndarray) -> "Wealth":
        out = Wealth(0, 0)
        out.eta, out.y, out.filled = self.eta[index], self.y[index], self.filled[index]
        return out


class Evidence:
    """A criterion "theta >= bar" on B gates, theta the mean over `tasks` candidate columns
    of q (absolute), or of the candidate's q minus the baseline's (regression: the baseline's
    columns follow the candidate's). Two tests, each with its own wealth and tilts: PASS
    rejects "theta <= bar", FAIL rejects "theta >= bar". Each round: `plan` the tilts from
    the blocks so far, run, `add` the blocks."""

    PASS, FAIL = 0, 1
    # The units (here blocks) every task gets before the plug-in may leave it idle
    # (gate.worth_running): the fixed design's 8 trials on every task, at pass^1. Left
    # idle after 2 blocks, as this gate once did, tasks a verdict needed waited: at a 0.05
    # margin the gate's power was 0.58 where the fixed design's, by the same test, was
    # 0.84; running them until the criterion is decided or futile gave 0.91
    # (bench/gate_calibration.py, 200 gates).
    always_run = 8

    def __init__(self, gates: int, tasks: int, bar: float,
                 baseline: tuple[np.ndarray, np.ndarray] | None = None):
        self.tasks, self.bar = tasks, bar
        columns = tasks * (1 if baseline is None else 2)
        self.sign = np.concatenate([np.ones(tasks), -np.ones(columns - tasks)])
        self.successes = np.zeros((gates, columns))
        self.blocks = np.zeros((gates, columns))
        self.wealth = (Wealth(gates, columns), Wealth(gates, columns))
        if baseline is not None:
            self._feed_baseline(*baseline)

    def null(self, test: int, theta: "float | np.ndarray | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """(sign, bound) of the test's null at theta (default: the bar; one value, or one per
        gate), for every gate."""
        x = np.broadcast_to(self.bar if theta is None else theta, (len(self.blocks),)) * self.tasks
        return (self.sign, x) if test == self.PASS else (-self.sign, -x)

    def plan(self, aim: "tuple[np.ndarray, np.ndarray] | None" = None) -> np.ndarray:
        """(2, B, tasks): the tilts of the candidate's next blocks, per test, each aimed at its
        null at the bar, or at aim's theta per test (PASS's, FAIL's; one per gate)."""
        aim = aim or (None, None)
        return np.stack([self._tilts(self.successes, self.blocks, *self.null(t, aim[t]))[:, :self.tasks]
                         for t in (self.PASS, self.FAIL)])

    def _tilts(self, successes: np.ndarray, units: np.ndarray, sign: np.ndarray, bound: np.ndarray) -> np.ndarray:
        return plug_in_tilts(successes, units, sign, bound)

    def _least(self, eta: np.ndarray, y: np.ndarray, sign: np.ndarray, bound: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        return least_log_wealth(eta, y, sign, bound)

    def rates(self) -> np.ndarray:
        """(B, columns): each column's plain estimate of its q (1/2 before its first unit)."""
        return np.where(self.blocks > 0, self.successes / np.maximum(self.blocks, 1), 0.5)

    def unit_variance(self, p: np.ndarray) -> np.ndarray:
        """The variance one unit adds to a column's estimate of q, at unit success rate p."""
        return p * (1 - p)

    def add(self, success: np.ndarray, ran: np.ndarray, plan: np.ndarray) -> None:
        """One more block of the candidate's columns where `ran` (B, tasks), bet as planned."""
        self._add(slice(0, self.tasks), success, ran, plan)

    def _add(self, columns: slice, success: np.ndarray, ran: np.ndarray, plan: np.ndarray) -> None:
        full = np.zeros(self.blocks.shape, bool)
        hit = full.copy()
        full[:, columns], hit[:, columns] = ran, success & ran
        for test, wealth in enumerate(self.wealth):
            tilt = np.zeros(self.blocks.shape)
            tilt[:, columns] = plan[test]
            wealth.add(hit, full, tilt)
        self.successes += hit
        self.blocks += full

    def _feed_baseline(self, outcomes: np.ndarray, present: np.ndarray) -> None:
        """The baseline's blocks (B, tasks, R), all known before the candidate's first round,
        fed as R virtual rounds, each bet with tilts from the baseline's earlier blocks only.
        The candidate is not seen yet, so the plug-in guesses one BASELINE_GAP to the test's
        side of the bar: the PASS test's null is fitted as if the candidate matched the
        baseline and the bar sat BASELINE_GAP below, the FAIL test's as if it sat above."""
        base = slice(self.tasks, 2 * self.tasks)
        for b in range(outcomes.shape[2]):
            mirrored_s = np.concatenate([self.successes[:, base]] * 2, axis=1)
            mirrored_n = np.concatenate([self.blocks[:, base]] * 2, axis=1)
            plan = np.stack([self._tilts(mirrored_s, mirrored_n, *self.null(t, gap))[:, base]
                             for t, gap in ((self.PASS, -BASELINE_GAP), (self.FAIL, BASELINE_GAP))])
            self._add(base, outcomes[:, :, b].astype(bool), present[:, :, b].astype(bool), plan)

    def evidence(self, test: int, theta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The test's least log wealth over its null at theta (default: the bar), and where."""
        w = self.wealth[test]
        return self._least(w.eta, w.y, *self.null(test, theta))

    def rows(self, index: np.ndarray) -> "Evidence":
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.successes, out.blocks = self.successes[index], self.blocks[index]
        out.wealth = tuple(w.rows(index) for w in self.wealth)
        return out
