"""The release gate's decision: does a run meet its criteria on pass^k, at a stated
confidence, looking again after every round of trials?

The estimand. A suite's tasks are fixed, so the only uncertainty is each task's trial
noise: a criterion is about theta = mean over the tasks of p_t^k, where p_t is task t's
true success probability. (The bootstrap over tasks in passhat.metrics answers another
question: what a suite of other tasks drawn alike would score.)

The method: an anytime-valid test by betting (Waudby-Smith & Ramdas, "Estimating means
of bounded random variables by betting", JRSS B 2024; Ramdas et al., "Game-theoretic
statistics and safe anytime-valid inference", Statistical Science 2023). A task's
trials are cut, in the order they ran, into blocks of k; a block is 1 when all k
succeeded, so its mean is q_t = p_t^k (when every criterion has k > 1 the rounds stop a
block at its first failure: passhat.curtailment). Each block is bet on with a tilt fixed before it
ran (the predictable plug-in: see passhat.results.gate_evidence), and for a hypothesised
vector q the wealth
    M(q) = prod_{t,b} exp(eta_tb * Y_tb) / (1 - q_t + q_t * e^eta_tb)
has mean 1 under q whatever the rounds and whichever tasks each round runs, as long as
those choices look only at the past: it is a test martingale, and by Ville's
inequality P(M(q_true) ever reaches 1/alpha) <= alpha. A criterion's null (say
"mean q <= X") is rejected once M(q) >= 1/alpha for every q in it. log M is convex in q,
so that minimum is bounded from below through the Lagrangian dual
(passhat.results.gate_evidence, on arrays, so the benchmark simulates thousands of gates
through this same code). A criterion may instead bet on every trial, on p_t
(Criterion.bets "trials": passhat.results.gate_trials). The confidence interval is the set of X whose nulls are not
rejected: a confidence sequence, valid at every look at once.

A criterion PASSes when its "violated" null is rejected at alpha = 1 - confidence, FAILs
when its "holds" null is rejected at alpha, and is otherwise undecided; the interval's
bounds are each one-sided at alpha, so together they cover theta with 1 - 2 alpha.

A not-evaluable trial is read by each test as the outcome least favourable to it: a
failure by the PASS test, a success by the FAIL test (a baseline's the other way round).
These are the worst-case bounds of partial identification (Manski, "Partial
Identification of Probability Distributions", 2003, ch. 1): they hold whatever made the
trial not evaluable, so no verdict rests on trials going missing at random. The printed
estimate of p_t^k is tau2's C(c, k) / C(n, k) (passhat.metrics.pass_hat) over the
evaluable trials, a plug-in: unbiased for a fixed number of trials, not once the trials a
task gets depend on its outcomes; beside it, the same with the not-evaluable trials
counted as failures.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal, NamedTuple, Sequence

import numpy as np

from passhat.results.gate_evidence import Evidence
from passhat.results.gate_personas import of_user
from passhat.results.gate_units import (  # noqa: F401 - the gate's API: callers read them as gate.X
    BASELINE_READS,
    CANDIDATE_READS,
    GateError,
    Outcomes,
    Rounds,
    as_rounds,
    baseline_blocks,
    baseline_units,
    blocks,
    curtailed_baseline_refusal,
    cut_round,
    estimates,
    merged,
    new_evidence,
    replay,
    round_units,
    task_estimate,
    task_estimate_if_failed,
    unit_trials,
)

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 3}
DEFAULT_CONFIDENCE = 0.95

# Futility is judged only once every task has this many blocks, and this share of its
# budget: the normal approximation behind it is too eager early on (judged from 2 blocks
# a task, it cost a 0.05 margin power 0.79 against the fixed design's 0.86; from 3/4 of
# the budget, 0.85 against 0.85; bench/gate_calibration.py, 300 gates). But never only
# after the last block, where it saves nothing: see futility_from (pass^4 at 8 trials).
MIN_BLOCKS = 2
FUTILITY_AFTER = 0.75
# A task's next block runs when its expected gain of evidence is at least this share of
# the most promising task's: the rest would mostly pay for noise (0.25 kept power and
# saved most in bench/gate_calibration.py; 0.5 began to cost power).
WORTH = 0.25
# A criterion stops asking for trials (futility) when, were the truth what its data say
# now, the rest of the budget would decide it with less than this chance.
FUTILITY = 0.05
# How far past the bar a test's pooled prior may aim (gate.aims): the least of these with
# which a suite whose every trial succeeds (fails, for the FAIL test) is decided within
# the budget.
AIMS = (0.0, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)

@dataclass(frozen=True)
class Criterion:
    """`pass^k >= threshold` (absolute), `pass^k not worse than the baseline by more than
    max_drop` (regression, task by task over the tasks both have), or pass^k under the
    persona not worse than under tau2's own user by more than max_drop (persona_drop:
    passhat.results.paired_drop)."""

    kind: Literal["absolute", "regression", "persona_drop"]
    k: int
    threshold: float = 0.0  # absolute
    max_drop: float = 0.0  # regression
    confidence: float = DEFAULT_CONFIDENCE
    # "blocks": a unit of evidence is a block of k trials, bet on p^k; "trials" (absolute
    # criteria): every trial, bet on p (passhat.results.gate_trials; docs/gate.md, Per trial).
    bets: Literal["blocks", "trials"] = "blocks"
    # Under user personas (passhat.results.gate_personas): the one persona whose trials this
    # criterion reads, and how many personas its confidence was split over (Bonferroni).
    persona: str | None = None
    split: int = 1

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def per_trial(self) -> bool:
        return self.bets == "trials" and self.k > 1

    def describe(self) -> str:
        user = "" if self.persona is None else f" [persona {self.persona}]"
        if self.kind == "absolute":
            return f"pass^{self.k} >= {self.threshold:g}{user}"
        if self.kind == "persona_drop":
            return f"pass^{self.k} not worse than under tau2's user by more than {self.max_drop:g}{user}"
        return f"pass^{self.k} not worse than baseline by more than {self.max_drop:g}{user}"


def parse_requirement(text: str, confidence: float = DEFAULT_CONFIDENCE) -> Criterion:
    """`pass^4 >= 0.8` as a Criterion."""
    match = re.fullmatch(r"\s*pass\^(\d+)\s*>=\s*(\d*\.?\d+)\s*", text)
    if not match:
        raise GateError(f"--require must read 'pass^K >= X' with X within 0..1, e.g. 'pass^4 >= 0.8'; got '{text}'")
    return absolute(int(match.group(1)), float(match.group(2)), confidence)


def parse_metric(text: str) -> int:
    """The k of `pass^K`."""
    match = re.fullmatch(r"\s*pass\^(\d+)\s*", text)
    if not match or int(match.group(1)) < 1:
        raise GateError(f"--regression-metric must read 'pass^K' with K >= 1, e.g. 'pass^1'; got '{text}'")
    return int(match.group(1))


def absolute(k: int, threshold: float, confidence: float = DEFAULT_CONFIDENCE,
             bets: Literal["blocks", "trials"] = "blocks") -> Criterion:
    _check(k, confidence)
    if not 0 <= threshold <= 1:
        raise GateError(f"a pass^k threshold must be within 0..1, got {threshold:g}")
    return Criterion("absolute", k, threshold=threshold, confidence=confidence, bets=bets)


def regression(k: int, max_drop: float, confidence: float = DEFAULT_CONFIDENCE) -> Criterion:
    _check(k, confidence)
    if not 0 <= max_drop < 1:
        raise GateError(f"--max-drop must be within 0..1 (a difference of pass^k), got {max_drop:g}")
    return Criterion("regression", k, max_drop=max_drop, confidence=confidence)


def _check(k: int, confidence: float) -> None:
    if k < 1:
        raise GateError(f"k of pass^k must be at least 1, got {k}")
    if not 0.5 <= confidence < 1:
        raise GateError(f"--confidence must be within 0.5..1 (e.g. 0.95), got {confidence:g}")


# ---- verdicts -----------------------------------------------------------------------------


@dataclass
class TaskLine:
    """One task's part in one criterion: its trials and estimates (regression: the
    candidate's and the baseline's)."""

    task_id: str
    evaluable: int
    trials: int
    estimate: float | None  # over its evaluable trials
    baseline: float | None = None
    passed: bool | None = None  # the task on its own meets the criterion's bar (None: no estimate)
    estimate_if_failed: float | None = None  # its not-evaluable trials counted as failures
    baseline_if_failed: float | None = None  # the baseline's, its not-evaluable trials counted as successes


@dataclass
class CriterionResult:
    criterion: Criterion
    verdict: str
    estimate: float | None  # over the evaluable trials (a plug-in)
    low: float
    high: float
    coverage: float
    evaluable: int
    trials: int
    tasks: list[TaskLine] = field(default_factory=list)
    idle: set[str] = field(default_factory=set)  # more trials of these are not expected to help (see decide)
    futile: bool = False  # the budget left is unlikely to decide it (see decide)
    # The plug-in estimate with every not-evaluable trial counted as a failure (the PASS
    # test's reading of them; regression: the baseline's as successes).
    estimate_if_failed: float | None = None

    @property
    def decided(self) -> bool:
        return self.verdict != INCONCLUSIVE


def _bar(criterion: Criterion) -> float:
    return -criterion.max_drop if criterion.kind == "regression" else criterion.threshold


class Decision(NamedTuple):
    """Per gate of the arrays: whether the criterion PASSes (its "violated" null rejected
    at alpha), whether it FAILs (its "holds" null rejected, and it does not pass), which
    tasks (gate x task) need no more trials for now, and whether the criterion is futile
    (the budget left is unlikely to decide it)."""

    passed: np.ndarray
    failed: np.ndarray
    idle: np.ndarray
    futile: np.ndarray


def decide(criterion: Criterion, evidence: Evidence, max_blocks: int | None = None) -> Decision:
    """The criterion on the arrays. A task is idle when its next block is not expected to
    raise the evidence of the test the verdict leans to (the estimate's side of the bar)
    by at least WORTH of the best task's: at the least-wealth q of that test's null, a
    block bet with the planned tilt eta gains p*eta - log(1 + q(e^eta - 1)) in
    expectation when the task succeeds with probability p (its smoothed estimate); a task
    the null already explains, or one it can move for free, gains little. The first
    evidence.always_run units of a task always run. With max_blocks (the budget per task),
    the criterion is also checked for futility (see _futile). All of this looks only at
    the past, so the error control holds; a wrong guess costs trials or power, not errors."""
    threshold = math.log(1 / criterion.alpha)
    toward_pass, q_pass = evidence.evidence(Evidence.PASS)
    toward_fail, q_fail = evidence.evidence(Evidence.FAIL)
    passed = toward_pass >= threshold
    failed = ~passed & (toward_fail >= threshold)
    n = evidence.tasks
    lean_pass = (estimate_of(evidence) >= _bar(criterion))[:, None]
    plan = evidence.plan()
    useful = np.where(lean_pass, worth_running(evidence, plan[Evidence.PASS], q_pass[:, :n], Evidence.PASS),
                      worth_running(evidence, plan[Evidence.FAIL], q_fail[:, :n], Evidence.FAIL))
    decided = passed | failed
    futile = ~decided & _futile(criterion, evidence, max_blocks) if max_blocks else np.zeros(len(passed), bool)
    return Decision(passed, failed, ~useful | (decided | futile)[:, None], futile)


def worth_running(evidence: Evidence, eta: np.ndarray, q: np.ndarray, test: int) -> np.ndarray:
    """(B, tasks): whether each task's next block, bet with tilt eta, is expected to raise
    the test's least wealth, whose minimum sits at q, by at least WORTH of the best task's
    (KL(p, q) where p, the task's predictive rate in the test's view, is on eta's side of q;
    otherwise p*eta - log(1 + q(e^eta - 1)), at most 0); a task with fewer
    than evidence.always_run units always runs."""
    n = evidence.tasks
    blocks_run = evidence.units()[:, :n]
    p = evidence.shrunk(test)[:, :n]
    gain = p * eta - np.log1p(np.expm1(eta) * q)
    # Where the estimate sits on the tilt's side of q, what a block can give is the best
    # bet's gain, KL(p, q): the aGRAPA tilt overbets near a high bar and its gain at p
    # alone would leave the tasks that carry the evidence idle.
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    gain = np.where((p - q) * eta > 0, np.nan_to_num(kl, nan=0.0, posinf=0.0), gain)
    best = gain.max(axis=1, keepdims=True, initial=-np.inf)
    return ((gain > 0) & (gain >= WORTH * best)) | (blocks_run < evidence.always_run)


def _futile(criterion: Criterion, evidence: Evidence, max_blocks: int) -> np.ndarray:
    """Per gate: were the truth what the data say now, would the rest of the budget
    (every task run to max_blocks) decide the criterion with less than FUTILITY chance?
    The usual conditional power of group-sequential designs, on a normal approximation:
    the estimate theta^ has variance V = sum_t v_t / (n^2 m_t) (v_t the variance a unit adds,
    evidence.unit_variance: p_t(1 - p_t) per block, p_t the shrunk estimate; m_t units; a
    baseline's part stays as it is), the budget would bring it to
    V_end, and an efficient test then decides once |theta^ - bar| > h = sqrt(2 log(1/alpha)
    V_end). Given the data, the final estimate is normal around theta^ now with variance
    V_end (1 - V_end / V). Only once every task has futility_from(max_blocks) blocks. With
    not-evaluable trials the two tests read the data apart: the distance that counts is
    the larger of the PASS view's estimate above the bar and the FAIL view's below it."""
    n = evidence.tasks
    m = evidence.units()
    p = (evidence.shrunk(Evidence.PASS) + evidence.shrunk(Evidence.FAIL)) / 2
    v = evidence.unit_variance(p)
    seen = np.maximum(m, 1)
    later = np.concatenate([np.maximum(m[:, :n], max_blocks), seen[:, n:]], axis=1)
    var_now, var_end = (v / seen).sum(axis=1) / n ** 2, (v / later).sum(axis=1) / n ** 2
    bar = _bar(criterion)
    distance = np.maximum(estimate_of(evidence, Evidence.PASS) - bar, bar - estimate_of(evidence, Evidence.FAIL))
    reach = np.sqrt(2 * math.log(1 / criterion.alpha) * var_end)
    spread = np.sqrt(np.maximum(var_end * (1 - var_end / np.maximum(var_now, 1e-300)), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(spread > 0, (distance - reach) / spread, np.where(distance > reach, np.inf, -np.inf))
    return (z < NormalDist().inv_cdf(FUTILITY)) & (m[:, :n] >= futility_from(max_blocks)).all(axis=1)


def futility_from(max_blocks: int) -> int:
    """The blocks every task has before futility is judged: MIN_BLOCKS and FUTILITY_AFTER
    of the budget, but always before the last block, since judged after it futility
    saves nothing. It matters only at budgets of at most 3 blocks: pass^4 with
    --max-trials 8 (2 blocks a task) is judged after the first. Judged only after the
    second, the gate spent all 400 conversations in every k4 max-8 case; judged after
    the first, at threshold 221 (45% fewer) and 392 and 390 (2%) at margins of 0.1, with
    power 0.559 and 0.592 against the fixed design's 0.545 and 0.574
    (bench/gate_calibration.py --cases k4, 2,000 gates). A looser FUTILITY there does
    not reach 30% fewer either: 0.2 saved 7-8% with power 0.548 and 0.579 (fixed 0.542
    and 0.584), 0.4 saved 17-18% with power 0.447 and 0.493 (fixed 0.537 and 0.603, 300
    gates)."""
    return max(1, min(max(MIN_BLOCKS, math.ceil(FUTILITY_AFTER * max_blocks)), max_blocks - 1))


def estimate_of(evidence: Evidence, test: int | None = None) -> np.ndarray:
    """Per gate, theta's plain estimate from the blocks in the test's view (without one,
    the mean of the two): the candidate's mean success rate (less the baseline's); a task
    with no block yet counts at 1/2."""
    n, rate = evidence.tasks, evidence.rates(test)
    return rate[:, :n].mean(axis=1) - rate[:, n:].sum(axis=1) / n


@functools.lru_cache(maxsize=512)
def aims(criterion: Criterion, tasks: int, max_trials: int | None, size: int) -> tuple[float, float]:
    """How far past the bar each test's pooled prior aims (Evidence.prior_mean), PASS's and
    FAIL's: the least of AIMS with which a suite of `tasks` tasks whose every trial succeeds
    PASSes within the budget (max_trials a task, rounds of `size`), and with which one whose
    every trial fails FAILs; the largest when none does. Most budgets need none: their first
    rounds are bet at the floor, and the tilts grow with the evidence. A budget that leaves
    few rounds (pass^4 >= 0.9 with 8 trials a task: two) needs the first bet high, since
    nothing can be learned before it. A function of the criterion and the budget only, so
    every replay bets alike. Without a budget, or for a regression: none."""
    if criterion.kind != "absolute" or not max_trials or not tasks:
        return (0.0, 0.0)
    return tuple(next((a for a in AIMS if decided_alike(criterion, tasks, max_trials, size, test, a)), AIMS[-1])
                 for test in (Evidence.PASS, Evidence.FAIL))  # type: ignore[return-value]


def decided_alike(criterion: Criterion, tasks: int, max_trials: int, size: int, test: int, aim: float) -> bool:
    """Would a suite of `tasks` tasks whose every trial succeeds (test PASS; fails: FAIL)
    be decided that way within max_trials a task, in rounds of `size`, were the test's
    prior aimed by `aim`? Such a suite's evidence is the same in every gate: one replay."""
    k, unit = criterion.k, unit_trials(criterion.k, criterion.per_trial)
    evidence = new_evidence(k, 1, tasks, _bar(criterion), None, criterion.per_trial,
                            aims=(aim, 0.0) if test == Evidence.PASS else (0.0, aim))
    every = np.ones((1, tasks), bool)
    outcome = every if test == Evidence.PASS else ~every
    for _ in range(max_trials // size):
        for _ in range(size // unit):
            evidence.add(outcome, every, evidence.plan())
        if evidence.evidence(test)[0][0] >= math.log(1 / criterion.alpha):
            return True
    return False


def evaluate(criterion: Criterion, candidate: Rounds, baseline: "Rounds | None" = None, *,
             max_trials: int | None = None, interval: bool = True, round_size: int | None = None,
             curtail: Sequence[int] = (), baseline_curtail: Sequence[int] = ()) -> CriterionResult:
    """The criterion's verdict on the trials so far (task id -> outcomes in the order
    they ran, per round), with its plug-in estimates and its confidence interval (one-sided
    bounds at 1 - confidence each, so 2 * confidence - 1 two-sided; interval=False skips
    the bisection). A regression's baseline is a run's outcomes or a gate's rounds
    (baseline_curtail: that gate's block sizes, when its rounds were curtailed). With
    max_trials (the budget per task) it also says whether the criterion is futile. With
    curtail (the gate's curtailed, when its rounds were) the candidate's rounds are cut as
    they ran, and a task's estimate is the share of its blocks that succeeded: C(c, k) /
    C(n, k) would count a block that stopped at its first failure as one trial. The verdict
    holds whatever share of the trials is not evaluable (each test reads them against
    itself); the result says that share and the estimate with them as failures."""
    if criterion.kind == "persona_drop":  # paired with tau2's user's trials: its own test
        from passhat.results.paired_drop import evaluate_drop
        return evaluate_drop(criterion, candidate, interval=interval, curtail=curtail)
    k, alpha = criterion.k, criterion.alpha
    threshold = math.log(1 / alpha)
    if criterion.persona is not None:  # that persona's trials only, never another user's
        candidate = of_user(candidate, criterion.persona)
    data = merged(candidate)
    if criterion.kind == "regression":
        if baseline is None:
            raise GateError("a regression criterion needs a baseline run (--baseline RUN)")
        base_data = merged(baseline)
        tasks = sorted(set(data) & set(base_data))
    else:
        tasks, baseline, base_data = sorted(data), None, None
    curtail_size = max(curtail) if curtail else None
    size = curtail_size or round_size or k  # units are cut within rounds of `size` trials
    evidence = replay(k, _bar(criterion), candidate, tasks, baseline, per_trial=criterion.per_trial,
                      curtail_size=curtail_size, baseline_curtail=baseline_curtail,
                      aims=aims(criterion, len(tasks), max_trials, size))

    def rejected(test: int, x: float) -> bool:
        return bool(evidence.evidence(test, x)[0][0] >= threshold)

    trials = sum(len(data.get(t, [])) for t in tasks)
    evaluable = sum(o is not None for t in tasks for o in data.get(t, []))
    coverage = evaluable / trials if trials else 0.0
    verdict, idle_tasks, futile = INCONCLUSIVE, set(), False
    if tasks:
        max_blocks = (max_trials // size) * (size // unit_trials(k, criterion.per_trial)) if max_trials else None
        passed, failed, idle, futile_ = decide(criterion, evidence, max_blocks)
        verdict = PASS if passed[0] else FAIL if failed[0] else INCONCLUSIVE
        idle_tasks, futile = {t for t, i in zip(tasks, idle[0]) if i}, bool(futile_[0])
    regression = criterion.kind == "regression"
    rounds, base_rounds = as_rounds(candidate), as_rounds(baseline) if baseline is not None else []
    lines = [_task_line(criterion, t, [r.get(t, []) for r in rounds], curtail,
                        [r.get(t, []) for r in base_rounds] if baseline is not None else None, baseline_curtail)
             for t in tasks]
    low, high = math.nan, math.nan
    if interval and tasks:  # "theta <= x" rejected: theta > x; "theta >= x" rejected: theta < x
        low = bound(lambda x: rejected(Evidence.PASS, x), -1.0, 1.0, up=True)
        high = bound(lambda x: rejected(Evidence.FAIL, x), -1.0, 1.0, up=False)
        if criterion.kind == "absolute":
            low, high = max(low, 0.0), min(high, 1.0)
    return CriterionResult(
        criterion=criterion, verdict=verdict, estimate=_mean_of(lines, "estimate", "baseline", regression),
        low=low, high=high, coverage=coverage, evaluable=evaluable, trials=trials, tasks=lines,
        idle=idle_tasks, futile=futile, estimate_if_failed=_mean_of(lines, "estimate_if_failed", "baseline_if_failed", regression),
    )


def _mean_of(lines: Sequence[TaskLine], field_: str, base_field: str, regression: bool) -> float | None:
    """The mean over the tasks that have it of a task's estimate (less its baseline's)."""
    values = [getattr(line, field_) - (getattr(line, base_field) or 0.0) for line in lines
              if getattr(line, field_) is not None and (not regression or getattr(line, base_field) is not None)]
    return sum(values) / len(values) if values else None


def _task_line(criterion: Criterion, task_id: str, rounds: Sequence[Outcomes], curtail: Sequence[int],
               base_rounds: Sequence[Outcomes] | None, baseline_curtail: Sequence[int]) -> TaskLine:
    outcomes = [o for r in rounds for o in r]
    est, est_failed = estimates(rounds, criterion.k, curtail, failed=True)
    base = base_failed = None
    if base_rounds is not None:  # a baseline's not-evaluable trials count as successes in the PASS test
        base, base_failed = estimates(base_rounds, criterion.k, baseline_curtail, failed=False)
    if criterion.kind == "absolute":
        passed = None if est is None else est >= criterion.threshold
    else:
        passed = None if est is None or base is None else est - base >= -criterion.max_drop
    return TaskLine(task_id, sum(o is not None for o in outcomes), len(outcomes), est, base, passed,
                    est_failed, base_failed)


def bound(rejected, low: float, high: float, *, up: bool) -> float:  # noqa: ANN001
    """The confidence bound: for the lower one (up=True), the largest x with
    "theta <= x" rejected; for the upper one, the smallest x with "theta >= x" rejected."""
    if up and not rejected(low):
        return low
    if not up and not rejected(high):
        return high
    for _ in range(20):
        mid = (low + high) / 2
        if rejected(mid) == up:
            low = mid
        else:
            high = mid
    return low if up else high


def overall(results: Sequence[CriterionResult]) -> str:
    """FAIL if any criterion fails, PASS if all pass, otherwise INCONCLUSIVE."""
    verdicts = {r.verdict for r in results}
    if FAIL in verdicts:
        return FAIL
    return PASS if verdicts == {PASS} else INCONCLUSIVE
