"""The betting test behind the gate's verdicts, on arrays: B gates of J task columns at
once. `passhat gate` runs it with B = 1; the simulations (passhat.results.gate_simulation:
the budget check, the power preview, bench/gate_calibration.py) with B = thousands, so what
is simulated is the very code that decides.

A task's trials are cut into blocks of k; a block is 1 when all k succeeded, so its mean
is q_t = p_t^k. Each block b of column t is bet on with a tilt eta_tb fixed before the
block ran, and for a hypothesised vector q the wealth
    M(q) = prod_{t,b} exp(eta_tb * Y_tb) / (1 - q_t + q_t * exp(eta_tb))
has mean 1 under q whatever the rounds and whichever tasks each round runs, as long as
those choices and the tilts look only at the past (Waudby-Smith & Ramdas, JRSS B 2024).
A null such as "sum_t q_t <= c" is rejected once M(q) >= 1/alpha for every q in it
(Ville's inequality); `least_log_wealth` computes a certified lower bound of that least
log wealth through the Lagrangian dual.

Each test reads the outcomes its own way (its view): a not-evaluable trial counts as the
outcome least favourable to the test, a failure where the test bets up and a success where
it bets down. Then Y_tb is at most a block's true outcome where the tilt is positive and at
least it where the tilt is negative, so each factor has mean at most 1 whatever made the
trial not evaluable: M(q) is a test supermartingale, and Ville's inequality still holds.
The test's successes are kept per view (`Evidence.successes[test]`).

The tilts are a predictable plug-in (the same paper): before each block, the column's
predictive rate p and the null's most likely q (its maximum-likelihood point under the
null's constraint, from the blocks so far) give the log-optimal bet logit(p) - logit(q).
p is a Bayes predictive with two levels: the suite's pooled rate under a Beta prior of
POOL_PRIOR pseudo-blocks aimed past the bar (AIM), and each column's own blocks shrunk
toward it by an empirical-Bayes strength (`pooling_strength`: tasks that look alike
are pooled hard, tasks that differ keep their own rates). For one coin the pooled
predictive is Robbins' method of mixtures: betting it is the Beta mixture of
likelihood ratios, so the bet learns how hard to bet from the outcomes so far instead
of a fixed cap deciding it.
"""

from __future__ import annotations

import numpy as np

# Tilts are clipped to this size. A block that succeeds gains at most -log(q0) against a
# null at q0 (0.051 nats at 0.95); at eta = 3 it gains 0.049 of it. Larger tilts add little
# there and cost dearly when failures come in a burst after a run of successes (a round of
# not-evaluable trials, read as failures by the PASS test): each costs about eta nats.
ETA_MAX = 3.0
# Every block is bet at least this much in the test's own direction (up in a test that
# the suite does better than its bar, down in the other): a column the plug-in would skip
# still makes the null pay a little for moving it.
ETA_MIN = 0.25
# A regression's baseline is bet on before the candidate runs: its tilts aim at a
# candidate this far to the test's side of the bar (a drop of 0.1 in pass^k is the scale
# a release gate cares about).
BASELINE_GAP = 0.1
# The pooled rate's Beta prior: this many pseudo-blocks at 1/2, or, for an absolute
# criterion whose budget needs it, aimed past the bar (Evidence.prior_mean: gate.aims).
POOL_PRIOR = 1.0
# A column's pseudo-blocks at the pooled rate (its shrinkage): estimated from the spread of
# the columns' rates (pooling_strength), within these limits; SHRINK while every column
# has one block, where the spread cannot tell tasks apart from noise (0.5: pass^4 with
# --max-trials 8 on the bench's leaderboard-like suite had power 0.58 and 0.59 at margins
# of 0.1; at 1, 0.38 and 0.47, bench/gate_calibration.py, 300 gates).
SHRINK = 0.5
SHRINK_MIN, SHRINK_MAX = 0.5, 200.0
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
    gain = (eta * y).sum(axis=(1, 2))
    at_zero, at_one = -u.sum(axis=2), -(u / (1 + u)).sum(axis=2)  # d/dq of -sum log(1 + q u)

    def column_min(slope: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each column's minimiser of -sum_b log(1 + q u_b) + slope * q, a lower bound of
        that minimum, and how fast the minimiser moves with the slope (-1 / curvature)."""
        low, high = np.zeros_like(start), np.ones_like(start)
        pinned_low, pinned_high = at_zero + slope >= 0, at_one + slope <= 0
        free = ~pinned_low & ~pinned_high
        q = start
        for _ in range(COLUMN_STEPS):
            ratio = u / (1 + q[..., None] * u)
            d1 = -ratio.sum(axis=2) + slope
            d2 = (ratio * ratio).sum(axis=2)
            low, high = np.where(d1 < 0, q, low), np.where(d1 < 0, high, q)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = q - d1 / d2
            moved, q = q, np.where((step > low) & (step < high), step, (low + high) / 2)
            if np.max(np.abs(q - moved) * free, initial=0.0) < 1e-11:  # converged (the slack below covers the rest)
                break
        q = np.where(pinned_low, 0.0, np.where(pinned_high, 1.0, q))
        ratio = u / (1 + q[..., None] * u)
        d1 = -ratio.sum(axis=2) + slope
        d2 = (ratio * ratio).sum(axis=2)
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
        moved, nu = nu, np.where((step > low) & (step < high), step, (low + high) / 2)
        if np.max(np.abs(nu - moved) / (1 + nu), initial=0.0) < 1e-10:  # the multiplier has settled
            break
        value, q, moves = dual(nu, q)
        better = value > best
        best, best_q = np.where(better, value, best), np.where(better[:, None], q, best_q)
    infeasible = np.minimum(sign, 0).sum(axis=1) > bound + 1e-12
    return np.where(infeasible, np.inf, best), best_q


def null_fit(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray, bound: np.ndarray,
             prior_mean: "np.ndarray | float" = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The null's most likely q (maximum likelihood of the blocks, with prior_counts,
    subject to sum_j sign_j q_j <= bound), and the columns' unconstrained estimates.
    Per column the constrained optimum solves S/q - F/(1-q) = nu * sign: a quadratic."""
    a, b = prior_counts(successes, blocks, sign, prior_mean)
    s = np.asarray(successes, float) + a
    f = np.asarray(blocks, float) - successes + b
    sign = np.broadcast_to(np.asarray(sign, float), s.shape)
    bound = np.asarray(bound, float).reshape(-1)

    def q_of(nu: np.ndarray) -> np.ndarray:
        x = nu[:, None] * sign
        with np.errstate(divide="ignore", invalid="ignore"):  # a multiplier that pins q at 1 leaves 0 below
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


def pooling_strength(successes: np.ndarray, blocks: np.ndarray, side: np.ndarray) -> np.ndarray:
    """(B, 1): how many pseudo-blocks at the pooled rate each column of a side gets, from how
    much the columns' rates spread beyond what their blocks' noise explains: the
    beta-binomial's intra-class correlation rho by the method of moments (Kleinman,
    "Proportions with extraneous variance", JASA 68, 1973), strength 1/rho - 1. Columns as
    alike as noise allows are pooled hard (SHRINK_MAX); a suite of tasks that always
    succeed and tasks that always fail is hardly pooled. While every column has one block
    the spread says nothing (SHRINK)."""
    n = np.asarray(blocks, float) * side
    s = np.asarray(successes, float) * side
    total = n.sum(axis=1, keepdims=True)
    columns = (n > 0).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = s.sum(axis=1, keepdims=True) / total
        rate = np.where(n > 0, s / np.maximum(n, 1), pooled)
        spread = (n * (rate - pooled) ** 2).sum(axis=1, keepdims=True)
        room = total - (n * n).sum(axis=1, keepdims=True) / total - (columns - 1)
        rho = (spread / (pooled * (1 - pooled)) - (columns - 1)) / room
        strength = np.clip(1 / rho - 1, SHRINK_MIN, SHRINK_MAX)
    alike = (pooled <= 0) | (pooled >= 1) | (rho <= 0)  # no spread beyond noise
    strength = np.where(alike, SHRINK_MAX, strength)
    return np.where((room > 0) & (total > 0), np.nan_to_num(strength, nan=SHRINK), SHRINK)


def prior_counts(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray,
                 prior_mean: "np.ndarray | float" = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-successes and pseudo-failures of each column: pooling_strength pseudo-blocks
    at the predictive pooled rate of the columns on its side (candidate or baseline), the
    pool itself with POOL_PRIOR pseudo-blocks at prior_mean ((B, 1) or a number). A task
    with two blocks is not yet known to be near 1, but a suite whose forty blocks all
    succeeded is: alone, the Jeffreys estimate 0.83 of two successes held every bet at a
    high bar at its floor."""
    s, m = np.asarray(successes, float), np.asarray(blocks, float)
    sign = np.broadcast_to(np.asarray(sign, float), s.shape)
    mean = np.broadcast_to(np.asarray(prior_mean, float).reshape(-1, 1), (len(s), 1))
    a, b = np.zeros_like(s), np.zeros_like(s)
    for side in (sign > 0, sign < 0):
        if not side.any():
            continue
        pool = (((s * side).sum(axis=1, keepdims=True) + POOL_PRIOR * mean)
                / ((m * side).sum(axis=1, keepdims=True) + POOL_PRIOR))
        strength = pooling_strength(s, m, side)
        a, b = np.where(side, strength * pool, a), np.where(side, strength * (1 - pool), b)
    return a, b


def shrunk_rates(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray,
                 prior_mean: "np.ndarray | float" = 0.5) -> np.ndarray:
    """Each column's predictable estimate of its block success rate: its own blocks and
    its prior_counts."""
    a, b = prior_counts(successes, blocks, sign, prior_mean)
    return (np.asarray(successes, float) + a) / (np.asarray(blocks, float) + a + b)


def plug_in_tilts(successes: np.ndarray, blocks: np.ndarray, sign: np.ndarray, bound: np.ndarray,
                  prior_mean: "np.ndarray | float" = 0.5) -> np.ndarray:
    """The tilts of each column's next blocks in the test of the null sum sign*q <= bound:
    logit(predictive rate) - logit(the null's most likely q), both from the blocks with the
    same prior_counts (so a column the null explains is not bet on), clipped to ETA_MAX, at
    least ETA_MIN in the test's direction (sign): a tilt against it would lose the
    validity a not-evaluable trial read against the test keeps."""
    q0, p = null_fit(successes, blocks, sign, bound, prior_mean)
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

    def put(self, index: np.ndarray, part: "Wealth") -> None:
        """Write back the rows `index` from `part` (a Wealth of those rows, advanced)."""
        if part.eta.shape[2] > self.eta.shape[2]:
            grow = np.zeros((*self.filled.shape, part.eta.shape[2] - self.eta.shape[2]))
            self.eta, self.y = np.concatenate([self.eta, grow], 2), np.concatenate([self.y, grow], 2)
        self.eta[index, :, :part.eta.shape[2]], self.y[index, :, :part.eta.shape[2]] = part.eta, part.y
        self.filled[index] = part.filled

    def rows(self, index: np.ndarray) -> "Wealth":
        out = Wealth(0, 0)
        out.eta, out.y, out.filled = self.eta[index], self.y[index], self.filled[index]
        return out


class Evidence:
    """A criterion "theta >= bar" on B gates, theta the mean over `tasks` candidate columns
    of q (absolute), or of the candidate's q minus the baseline's (regression: the baseline's
    columns follow the candidate's). Two tests, each with its own view of the outcomes
    (a not-evaluable trial counted against it), its own wealth and its own tilts: PASS
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
                 baseline: tuple[np.ndarray, np.ndarray] | None = None, aimed: bool = True,
                 aims: tuple[float, float] = (0.0, 0.0)):
        self.tasks, self.bar = tasks, bar
        columns = tasks * (1 if baseline is None else 2)
        self.sign = np.concatenate([np.ones(tasks), -np.ones(columns - tasks)])
        # Per test (its view of the outcomes): successes and units of each column.
        self.successes = np.zeros((2, gates, columns))
        self.blocks = np.zeros((2, gates, columns))
        self.wealth = (Wealth(gates, columns), Wealth(gates, columns))
        # The pooled prior may aim past the bar for an absolute criterion (aims: how far, per
        # test); a regression's bar is a difference, an adaptive measurement has none.
        self.aimed = aimed and baseline is None
        self.aims = aims
        if baseline is not None:
            self._feed_baseline(*baseline)

    @property
    def gates(self) -> int:
        return self.blocks.shape[1]

    def units(self) -> np.ndarray:
        """(B, columns): the units each column has run (the fuller of the two views)."""
        return self.blocks.max(axis=0)

    def null(self, test: int, theta: "float | np.ndarray | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """(sign, bound) of the test's null at theta (default: the bar; one value, or one per
        gate), for every gate."""
        x = np.broadcast_to(self.bar if theta is None else theta, (self.gates,)) * self.tasks
        return (self.sign, x) if test == self.PASS else (-self.sign, -x)

    def prior_mean(self, test: int, theta: "float | np.ndarray | None" = None) -> np.ndarray:
        """(B, 1): the mean of the pooled rate's prior in the test at theta (default: the
        bar), on the scale of a unit's success: 1/2, or where the test's aim a puts it, a
        of the way from the bar to the test's end (1 for PASS, 0 for FAIL), whichever is
        further that way."""
        if not self.aimed:
            return np.full((self.gates, 1), 0.5)
        x = np.broadcast_to(self.bar if theta is None else theta, (self.gates,))[:, None]
        a = self.aims[test]
        return np.maximum(0.5, x + a * (1 - x)) if test == self.PASS else np.minimum(0.5, x * (1 - a))

    def plan(self, aim: "tuple[np.ndarray, np.ndarray] | None" = None) -> np.ndarray:
        """(2, B, tasks): the tilts of the candidate's next blocks, per test, each aimed at its
        null at the bar, or at aim's theta per test (PASS's, FAIL's; one per gate)."""
        aim = aim or (None, None)
        return np.stack([self._tilts(self.successes[t], self.blocks[t], *self.null(t, aim[t]),
                                     self.prior_mean(t, aim[t]))[:, :self.tasks]
                         for t in (self.PASS, self.FAIL)])

    def _tilts(self, successes: np.ndarray, units: np.ndarray, sign: np.ndarray, bound: np.ndarray,
               prior_mean: np.ndarray) -> np.ndarray:
        return plug_in_tilts(successes, units, sign, bound, prior_mean)

    def _least(self, eta: np.ndarray, y: np.ndarray, sign: np.ndarray, bound: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        return least_log_wealth(eta, y, sign, bound)

    def rates(self, test: int | None = None) -> np.ndarray:
        """(B, columns): each column's plain estimate of its q in the test's view (1/2 before
        its first unit); without a test, the mean of the two views."""
        if test is None:
            return (self.rates(self.PASS) + self.rates(self.FAIL)) / 2
        m = self.blocks[test]
        return np.where(m > 0, self.successes[test] / np.maximum(m, 1), 0.5)

    def shrunk(self, test: int) -> np.ndarray:
        """(B, columns): each column's predictive rate in the test's view (shrunk_rates)."""
        return shrunk_rates(self.successes[test], self.blocks[test], self.null(test)[0],
                            self.prior_mean(test))

    def unit_variance(self, p: np.ndarray) -> np.ndarray:
        """The variance one unit adds to a column's estimate of q, at unit success rate p."""
        return p * (1 - p)

    def add(self, success: np.ndarray, ran: np.ndarray, plan: np.ndarray) -> None:
        """One more block of the candidate's columns where `ran`, bet as planned. success and
        ran are (B, tasks), or (2, B, tasks): per test, each in its own view."""
        self._add(slice(0, self.tasks), success, ran, plan)

    def _add(self, columns: slice, success: np.ndarray, ran: np.ndarray, plan: np.ndarray) -> None:
        success = np.broadcast_to(success, (2, *np.shape(success)[-2:]))
        ran = np.broadcast_to(ran, (2, *np.shape(ran)[-2:]))
        for test, wealth in enumerate(self.wealth):
            full = np.zeros(self.blocks.shape[1:], bool)
            hit = full.copy()
            full[:, columns], hit[:, columns] = ran[test], success[test] & ran[test]
            tilt = np.zeros(full.shape)
            tilt[:, columns] = plan[test]
            wealth.add(hit, full, tilt)
            self.successes[test] += hit
            self.blocks[test] += full

    def _feed_baseline(self, outcomes: np.ndarray, present: np.ndarray) -> None:
        """The baseline's blocks (2, B, tasks, R) per test's view, all known before the
        candidate's first round, fed as R virtual rounds, each bet with tilts from the
        baseline's earlier blocks only. The candidate is not seen yet, so the plug-in
        guesses one BASELINE_GAP to the test's side of the bar: the PASS test's null is
        fitted as if the candidate matched the baseline and the bar sat BASELINE_GAP below,
        the FAIL test's as if it sat above."""
        base = slice(self.tasks, 2 * self.tasks)
        for b in range(outcomes.shape[-1]):
            plan = []
            for t, gap in ((self.PASS, -BASELINE_GAP), (self.FAIL, BASELINE_GAP)):
                mirrored_s = np.concatenate([self.successes[t][:, base]] * 2, axis=1)
                mirrored_n = np.concatenate([self.blocks[t][:, base]] * 2, axis=1)
                plan.append(self._tilts(mirrored_s, mirrored_n, *self.null(t, gap), self.prior_mean(t, gap))[:, base])
            self._add(base, outcomes[..., b].astype(bool), present[..., b].astype(bool), np.stack(plan))

    def evidence(self, test: int, theta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The test's least log wealth over its null at theta (default: the bar), and where."""
        w = self.wealth[test]
        used = w.filled.max(initial=0)  # the slots past every column's last unit hold nothing
        return self._least(w.eta[:, :, :used], w.y[:, :, :used], *self.null(test, theta))

    def rows(self, index: np.ndarray) -> "Evidence":
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.successes, out.blocks = self.successes[:, index], self.blocks[:, index]
        out.wealth = tuple(w.rows(index) for w in self.wealth)
        return out

    def put(self, index: np.ndarray, part: "Evidence") -> None:
        """Write back the rows `index` from `part` (an Evidence of those rows, advanced)."""
        self.successes[:, index], self.blocks[:, index] = part.successes, part.blocks
        for whole, w in zip(self.wealth, part.wealth):
            whole.put(index, w)
