"""The betting test behind the gate's verdicts, on arrays: B gates of J task columns at
once. `passhat gate` runs it with B = 1; bench/gate_calibration.py with B = thousands of
simulated gates, so the benchmark measures the very code that decides.

A task's trials are cut into blocks of k; a block is 1 when all k succeeded, so its mean
is q_t = p_t^k. Each block is bet on with a tilt eta, up (that it succeeds more often than
q says) or down, and for a hypothesised vector q the wealth
    M(q) = prod_{t,b} exp(+-eta * Y_tb) / (1 - q_t + q_t * exp(+-eta))
has mean 1 under q whatever the rounds and whichever tasks each round runs, as long as
those choices look only at the past (Waudby-Smith & Ramdas, JRSS B 2024). A null such as
"mean q <= x" is rejected once M(q) >= 1/alpha for every q in it (Ville's inequality);
`evidence` computes that least log wealth exactly, through the Lagrangian dual.
"""

from __future__ import annotations

import math

import numpy as np

# The tilts the test bets with, each with its share of the wealth: a mixture of test
# martingales is one, and a tilt's evidence costs log(1/share) nats. Most of the shares go
# where the verdict is close (a gap of about 0.1 in pass^k over a few blocks a task:
# tilts 0.5 to 1 win there in bench/gate_calibration.py); wide gaps decide early at
# any tilt. Fixed before any data, so the mixture stays a test martingale.
TILTS = np.array((0.25, 0.5, 0.75, 1.0, 1.5, 2.5))
SHARES = np.array((0.1, 0.2, 0.25, 0.25, 0.1, 0.1))
# Steps on the dual's multiplier; any multiplier gives a valid lower bound (weak
# duality), so stopping early only costs a little evidence.
DUAL_STEPS = 10

UP, DOWN = 0, 1  # a column's lean: the direction a null that moves its q would be bet


class Blocks:
    """The evidence of J task columns in B gates, block by block. Each column is tallied
    twice, once per lean: leaning up, a block is bet up unless every earlier block failed
    (a task that has only failed is bet down, where the null gains nothing from raising
    it); leaning down, the mirror image. The direction looks only at earlier blocks, so
    the wealth stays a martingale. `counts[lean]` holds, per column, blocks bet up, their
    successes, blocks bet down, their successes."""

    def __init__(self, gates: int, columns: int):
        shape = (gates, columns)
        self.failed = np.zeros(shape, bool)  # some block failed
        self.won = np.zeros(shape, bool)  # some block succeeded
        self.counts = np.zeros((2, 4, *shape))

    def add(self, success: np.ndarray, ran: np.ndarray) -> None:
        """One more block for the columns where `ran`: 1 where it succeeded."""
        success, ran = success.astype(bool) & ran, ran.astype(bool)
        bet_up = (~(self.failed & ~self.won), self.won & ~self.failed)
        for lean, up in enumerate(bet_up):
            c = self.counts[lean]
            c[0] += ran & up
            c[1] += success & up
            c[2] += ran & ~up
            c[3] += success & ~up
        self.failed |= ran & ~success
        self.won |= success

    def rows(self, index: np.ndarray) -> "Blocks":
        """The same evidence for some of the gates."""
        out = Blocks(0, self.failed.shape[1])
        out.failed, out.won, out.counts = self.failed[index], self.won[index], self.counts[:, :, index]
        return out

    @property
    def blocks(self) -> np.ndarray:
        return self.counts[UP, 0] + self.counts[UP, 2]


def evidence(counts: np.ndarray, sign: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Per gate, log of the least wealth over every q (each within 0..1) with
    sum_j sign_j * q_j <= bound_gate, of the mixture over TILTS of the test martingales.
    counts: (4, B, J) as in Blocks.counts[lean]; sign: (J,) or (B, J); bound: (B,).
    log wealth is convex in q, so its minimum is its Lagrangian dual's maximum; per tilt,
    the dual is maximised by safeguarded Newton steps, and the best tilt taken with its share
    (log SHARES), a lower bound of the mixture's minimum. Rejecting the null at alpha
    takes evidence >= log(1/alpha); inf when no q satisfies the constraint."""
    n_up, s_up, n_dn, s_dn = (np.asarray(c, float)[:, None, :] for c in counts)  # (B, 1, J)
    sign = np.broadcast_to(np.asarray(sign, float), counts.shape[1:])[:, None, :]
    bound = np.asarray(bound, float).reshape(-1)
    eta = TILTS[None, :, None]
    u, v = np.expm1(eta), np.expm1(-eta)  # per block: log(1 + u q) up, log(1 + v q) down
    a, b = n_up * u, n_dn * v  # (B, T, J)
    gain = (eta * (s_up - s_dn)).sum(axis=2)  # (B, T)
    uv, av_bu, a_b = u * v, a * v + b * u, a + b

    def best_q(slope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per column, the q in [0, 1] minimising its log wealth plus slope * q, and how fast
        it moves with the slope. That term is convex: its derivative
        -a/(1+uq) - b/(1+vq) + slope has the sign of the quadratic qa q^2 + qb q + qc on
        [0, 1], which crosses zero upward at most once; inside, dq/dslope = -1/curvature."""
        qa, qb, qc = slope * uv, slope * (u + v) - av_bu, slope - a_b
        with np.errstate(divide="ignore", invalid="ignore"):
            root = 2 * qc / (-qb - np.sqrt(np.maximum(qb * qb - 4 * qa * qc, 0.0)))
        inside = (qc < 0) & (qa + qb + qc > 0)
        q = np.where(inside, np.clip(np.nan_to_num(root, nan=0.0), 0.0, 1.0), (qc < 0).astype(float))
        curvature = a * u / (1 + u * q) ** 2 + b * v / (1 + v * q) ** 2
        with np.errstate(divide="ignore"):
            moves = np.where(inside & (curvature > 0), -1 / curvature, 0.0)
        return q, moves

    def dual(nu: np.ndarray) -> np.ndarray:
        slope = nu[..., None] * sign
        q, _ = best_q(slope)
        return gain - (n_up * np.log1p(u * q) + n_dn * np.log1p(v * q) - slope * q).sum(axis=2) \
            - nu * bound[:, None]

    def slope_of_dual(nu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The dual's first and second derivatives at nu: how far the best q breaks the
        constraint, and how fast that changes."""
        q, moves = best_q(nu[..., None] * sign)
        return (sign * q).sum(axis=2) - bound[:, None], moves.sum(axis=2)

    # The dual is concave in nu >= 0; its maximum is where its slope crosses zero, found by
    # Newton steps kept inside a bracket that halves whenever a step would leave it. Past
    # `high` every column's best q is at the end the constraint favours.
    low = np.zeros(gain.shape)
    high = np.max(np.abs(a) + np.abs(b) / (1 + v), axis=2, initial=0.0) + 1.0
    nu = low
    d1, d2 = slope_of_dual(nu)
    for _ in range(DUAL_STEPS):
        low, high = np.where(d1 > 0, nu, low), np.where(d1 > 0, high, nu)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = nu - d1 / d2
        nu = np.where((step > low) & (step < high), step, (low + high) / 2)
        d1, d2 = slope_of_dual(nu)
    best = np.maximum.reduce([dual(nu), dual(low), dual(high)])
    out = (best + np.log(SHARES)).max(axis=1)
    infeasible = np.minimum(sign[:, 0, :], 0).sum(axis=1) > bound + 1e-12
    return np.where(infeasible, np.inf, out)


def tests(candidate: Blocks, baseline: Blocks | None, bar: np.ndarray, tasks: int
          ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The two nulls of a criterion "theta >= bar" (theta: the mean over `tasks` of q, or
    of the candidate's q minus the baseline's), as (counts, sign, bound) for `evidence`:
    first "theta <= bar" (rejected: PASS), then "theta >= bar" (rejected: FAIL). Testing
    "theta <= bar" pulls the candidate's q down, so its columns lean up; a baseline's the
    other way."""
    bar = np.asarray(bar, float) * tasks
    columns = candidate.counts.shape[-1]
    if baseline is None:
        ones = np.ones(columns)
        return (candidate.counts[UP], ones, bar), (candidate.counts[DOWN], -ones, -bar)
    sign = np.concatenate([np.ones(columns), -np.ones(baseline.counts.shape[-1])])
    passing = np.concatenate([candidate.counts[UP], baseline.counts[DOWN]], axis=-1)
    failing = np.concatenate([candidate.counts[DOWN], baseline.counts[UP]], axis=-1)
    return (passing, sign, bar), (failing, -sign, -bar)
