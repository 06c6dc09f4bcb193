"""Simulated gates: thousands at once, on arrays, decided by the code `passhat gate` runs
(passhat.results.gate: `decide` after every round; gate_rounds.open_mask for the next
round's tasks; the evidence's `plan` for its bets). One simulation serves three callers:
bench/gate_calibration.py (error rates and power), the gate's budget check (can an
agent that never fails PASS within this budget?) and its power preview (how likely is a
PASS for an agent a little better than the bar?), so what the gate says about itself
is what the bench measures.

A simulated trial succeeds with its task's probability p, and is not evaluable with
probability missing_success if it would have succeeded, missing_failure if it would have
failed (informative missingness when they differ). A not-evaluable trial is then
continued, as the gate's rounds continue one (workflows/rounds.py: the same trial from
its recorded steps, up to CONTINUATIONS times): each continuation completes with the
chance `continued` gives for a trial that would succeed, and for one that would fail, and
a completed trial shows the outcome it would have had all along (a continuation carries
on the same trial; it is not a new draw). What is still not evaluable after them each
test reads as the gate's tests do (passhat.results.gate.CANDIDATE_READS: against itself).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from passhat.results import gate, gate_rounds
from passhat.results.gate_evidence import Evidence

INCONCLUSIVE, PASS, FAIL = 0, 1, 2  # a simulated gate's verdict
CONTINUATIONS = gate_rounds.CONTINUATIONS


def draw(rng: np.random.Generator, shape: tuple[int, ...], ps: np.ndarray, missing_success: np.ndarray,
         missing_failure: np.ndarray, continued: tuple[float, float] = (0.0, 0.0),
         continuations: int = CONTINUATIONS) -> tuple[np.ndarray, np.ndarray]:
    """Trials (gates, tasks, n): whether each succeeded, and whether it was still not
    evaluable after its continuations (each completing with chance continued[0] for a
    trial that would succeed, continued[1] for one that would fail)."""
    success = rng.random(shape) < ps[None, :, None]
    missing = rng.random(shape) < np.where(success, missing_success[None, :, None], missing_failure[None, :, None])
    if continuations and any(continued):
        # On a stream of its own (spawn leaves rng's untouched): the trials drawn are those
        # of the same gate without continuations, so the two compare on the same draws.
        [own] = rng.spawn(1)
        stays = (1 - np.asarray(continued, float)) ** continuations  # every continuation failed too
        missing &= own.random(shape) < np.where(success, stays[0], stays[1])
    return success, missing


def readings(success: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """(2, ...): the trials as the PASS test reads them (not evaluable: a failure) and as
    the FAIL test does (not evaluable: a success)."""
    return np.stack([success & ~missing, success | missing])


def curtailed_cut(trials: np.ndarray, k: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """passhat.curtailment.cut on arrays (..., size) of trials as one test reads them: the
    outcomes of the first `blocks` blocks, each ending at its first failure or after k
    successes, (..., blocks), and the trials they used, (...)."""
    pos = np.zeros(trials.shape[:-1], int)
    out = []
    for _ in range(blocks):
        seg = np.take_along_axis(trials, pos[..., None] + np.arange(k), axis=-1)
        failed = ~seg
        out.append(~failed.any(axis=-1))
        pos = pos + np.where(failed.any(axis=-1), failed.argmax(axis=-1) + 1, k)
    return np.stack(out, axis=-1), pos


class Simulated:
    """G simulated gates' evidence about one criterion; the trials are drawn by the caller
    and shared by the criteria."""

    def __init__(self, gates: int, tasks: int, criterion: gate.Criterion,
                 baseline: "tuple[np.ndarray, np.ndarray] | None" = None, max_trials: int | None = None,
                 size: int | None = None):
        self.k = criterion.k
        self.unit = gate.unit_trials(criterion.k, criterion.per_trial)
        aims = gate.aims(criterion, tasks, max_trials, size or criterion.k)
        self.evidence = gate.new_evidence(criterion.k, gates, tasks, gate._bar(criterion), baseline,
                                          criterion.per_trial, aims=aims)

    def run(self, live: np.ndarray, ran: np.ndarray, read: np.ndarray, curtail_size: int | None) -> np.ndarray:
        """A round's trials (2 readings, live gates, tasks, size) for the tasks where `ran`,
        cut into units within the round (blocks of k, or single trials), each bet as the
        evidence plans from the units before it (as gate.replay does); trials past the
        round's last whole unit are not used. Curtailed rounds (curtail_size) are cut as
        passhat.curtailment cuts them, each reading on its own. The trials the cut used per
        (gate, task)."""
        size = read.shape[-1]
        if curtail_size:
            blocks, used = curtailed_cut(read, self.unit, curtail_size // self.unit)
            used = used.max(axis=0)
        else:
            whole = size // self.unit * self.unit
            blocks = read[..., :whole].reshape(*read.shape[:3], size // self.unit, self.unit).all(axis=-1)
            used = np.full(ran.shape, whole)
        evidence = self.evidence.rows(live)
        for j in range(blocks.shape[-1]):
            evidence.add(blocks[..., j], ran, evidence.plan())
        self.evidence.put(live, evidence)
        return used


class Outcome(NamedTuple):
    verdict: np.ndarray  # per gate: INCONCLUSIVE, PASS or FAIL
    conversations: np.ndarray  # per gate
    most: np.ndarray  # per gate: the most conversations one task got
    rounds: np.ndarray  # per gate: the rounds it ran
    estimates: np.ndarray  # (criteria, gates): the plug-in estimate printed, over evaluable trials


def simulate(rng: np.random.Generator, ps: np.ndarray, criteria: Sequence[gate.Criterion], gates: int,
             max_trials: int, *, baseline: "tuple[np.ndarray, np.ndarray] | None" = None,
             missing: tuple[float, float] = (0.0, 0.0), continued: tuple[float, float] = (0.0, 0.0),
             continuations: int = CONTINUATIONS, whole_blocks: bool = False, size: int | None = None,
             history: list | None = None) -> Outcome:
    """G gates on a suite whose task t succeeds with ps[t], the rounds chosen as
    gate_rounds.next_round chooses them: every criterion decided on its own evidence, a
    task idle when idle for every open criterion, the gate stopped once its verdict is
    known or every open criterion is futile. baseline: the regression criteria's (each
    (2 tests, gates, tasks, blocks): fixed_baseline, recorded_baseline). missing: the chance
    a trial is not evaluable if it would succeed, and if it would fail; continued: the chance
    each of its `continuations` completes it, if it would succeed and if it would fail
    (draw). size: the round's
    trials when the gate has other criteria than these (default: theirs). `history` (a
    list) receives each round's (live gates, tasks run, success, missing)."""
    tasks = len(ps)
    size = size or gate_rounds.round_trials(criteria)
    sims = [Simulated(gates, tasks, c, baseline if c.kind == "regression" else None, max_trials, size)
            for c in criteria]
    curtail = [] if whole_blocks else gate_rounds.curtailed(criteria)
    miss_s, miss_f = (np.broadcast_to(np.asarray(m, float), (tasks,)) for m in missing)
    trials = np.zeros((gates, tasks), int)  # what the budget counts: a round's size, curtailed or not
    spent = np.zeros((gates, tasks), int)  # the conversations that ran
    counted = np.zeros((2, gates, tasks))  # evaluable trials and their successes (full rounds' estimate)
    verdict = np.full(gates, INCONCLUSIVE)
    rounds = np.zeros(gates, int)
    live = np.arange(gates)
    while len(live):
        decisions = [gate.decide(c, s.evidence.rows(live), max_trials // size * (size // s.unit))
                     for c, s in zip(criteria, sims)]
        passed = np.all([d.passed for d in decisions], axis=0)
        failed = np.any([d.failed for d in decisions], axis=0)
        settled = np.all([d.passed | d.failed | d.futile for d in decisions], axis=0)
        idle = np.all([d.idle for d in decisions], axis=0)  # a decided criterion's tasks are all idle
        verdict[live[passed]], verdict[live[failed]] = PASS, FAIL
        chosen = gate_rounds.open_mask(trials[live], size, max_trials, idle, passed | failed | settled)
        running = chosen.any(axis=1)
        live, chosen = live[running], chosen[running]
        if not len(live):
            break
        success, lost = draw(rng, (*chosen.shape, size), ps, miss_s, miss_f, continued, continuations)
        success, lost = success & chosen[..., None], lost & chosen[..., None]
        trials[live] += chosen * size
        rounds[live] += 1
        used = np.max([s.run(live, chosen, readings(success, lost), max(curtail) if curtail else None)
                       for s in sims], axis=0)
        spent[live] += chosen * used
        taken = (np.arange(size) < used[..., None]) & chosen[..., None]
        counted[0, live] += (taken & ~lost).sum(axis=2)
        counted[1, live] += (taken & ~lost & success).sum(axis=2)
        if history is not None:
            history.append((live, chosen, success, lost))
    estimates = np.array([_estimate(s, counted, bool(curtail)) for s in sims])
    return Outcome(verdict, spent.sum(axis=1), spent.max(axis=1, initial=0), rounds, estimates)


def _estimate(sim: Simulated, counted: np.ndarray, curtailed: bool) -> np.ndarray:
    """Per gate, the plug-in estimate the gate prints (absolute criteria): the mean over
    tasks of tau2's C(c, k) / C(n, k) over evaluable trials, or for curtailed rounds the
    share of a task's blocks won (read as the FAIL test reads them: exact where every
    trial is evaluable)."""
    ev = sim.evidence
    if curtailed:
        rate = ev.rates(Evidence.FAIL)[:, :ev.tasks]
    else:
        n, c = counted
        rate = np.ones_like(n)
        for i in range(sim.k):
            rate = rate * np.clip(c - i, 0, None) / np.maximum(n - i, 1)
        rate = np.where(n >= sim.k, rate, np.nan)
    with np.errstate(invalid="ignore"):
        return np.nanmean(rate, axis=1) if rate.size else np.zeros(len(rate))


def fixed(rng: np.random.Generator, ps: np.ndarray, criteria: Sequence[gate.Criterion], gates: int, per_task: int,
          baseline: "tuple[np.ndarray, np.ndarray] | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """The fixed design: per_task trials on every task, in rounds as the gate's, decided
    once by the same test. Each gate's verdict, and the conversations the same design
    would run were its blocks curtailed as the gate's are (the full count where they are not)."""
    tasks = len(ps)
    size, curtail = gate_rounds.round_trials(criteria), gate_rounds.curtailed(criteria)
    sims = [Simulated(gates, tasks, c, baseline if c.kind == "regression" else None, per_task, size)
            for c in criteria]
    everything, ran, nothing = np.arange(gates), np.ones((gates, tasks), bool), np.zeros(tasks)
    spent = np.zeros(gates, int)
    for _ in range(per_task // size):
        success, lost = draw(rng, (gates, tasks, size), ps, nothing, nothing)
        read = readings(success, lost)
        spent += np.max([s.run(everything, ran, read, max(curtail) if curtail else None) for s in sims],
                        axis=0).sum(axis=1)
    decisions = [gate.decide(c, s.evidence) for c, s in zip(criteria, sims)]
    passed = np.all([d.passed for d in decisions], axis=0)
    failed = np.any([d.failed for d in decisions], axis=0)
    return np.where(failed, FAIL, np.where(passed, PASS, INCONCLUSIVE)), spent


def fixed_baseline(rng: np.random.Generator, gates: int, ps: np.ndarray, k: int, trials: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A baseline run of `trials` trials a task, every one evaluable: its blocks of k as the
    virtual rounds gate.baseline_blocks makes of them, (outcomes, present), each
    (2 tests, gates, tasks, blocks)."""
    drawn = rng.random((gates, len(ps), trials - trials % k)) < ps[None, :, None]
    blocks = drawn.reshape(gates, len(ps), -1, k).all(axis=3)
    return np.stack([blocks, blocks]), np.ones((2, *blocks.shape), bool)


def recorded_baseline(baseline: gate.Rounds, tasks: Sequence[str], k: int, curtail: Sequence[int], gates: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """A recorded baseline (a run's outcomes or a gate's rounds) as every simulated gate's."""
    outcomes, present = gate.baseline_blocks(baseline, tasks, k, curtail)
    return (np.broadcast_to(outcomes, (2, gates, *outcomes.shape[2:])),
            np.broadcast_to(present, (2, gates, *present.shape[2:])))
