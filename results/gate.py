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
bounds are each one-sided at alpha, so together they cover theta with 1 - 2 alpha. The
printed estimate of p_t^k is tau2's C(c, k) / C(n, k) (passhat.metrics.pass_hat), a
plug-in: unbiased for a fixed number of trials, not once the trials a task gets depend
on its outcomes. Not-evaluable trials are left out (a block holding one is not used),
which assumes they are missing at random.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Callable, Literal, Mapping, NamedTuple, Sequence, Union

import numpy as np

from passhat import curtailment
from passhat.metrics import pass_hat
from passhat.results.gate_evidence import Evidence, shrunk_rates
from passhat.results.gate_trials import TrialEvidence

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 3}
DEFAULT_CONFIDENCE = 0.95
# Below this share of evaluable trials a verdict is not given: INCONCLUSIVE.
MIN_COVERAGE = 0.9

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

Outcomes = Sequence["bool | None"]  # a task's trials in the order they ran; None: not evaluable
# The trials of a gate so far: one mapping task id -> outcomes per round, in round order
# (a single mapping is one round).
Rounds = Union[Mapping[str, Outcomes], Sequence[Mapping[str, Outcomes]]]


class GateError(ValueError):
    """A criterion that cannot be read or checked; the message says how to write it."""


@dataclass(frozen=True)
class Criterion:
    """`pass^k >= threshold` (absolute), or `pass^k not worse than the baseline by more
    than max_drop` (regression, task by task over the tasks both have)."""

    kind: Literal["absolute", "regression"]
    k: int
    threshold: float = 0.0  # absolute
    max_drop: float = 0.0  # regression
    confidence: float = DEFAULT_CONFIDENCE
    # "blocks": a unit of evidence is a block of k trials, bet on p^k; "trials" (absolute
    # criteria): every trial, bet on p (passhat.results.gate_trials; docs/gate.md, Per trial).
    bets: Literal["blocks", "trials"] = "blocks"

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def per_trial(self) -> bool:
        return self.bets == "trials" and self.k > 1

    def describe(self) -> str:
        if self.kind == "absolute":
            return f"pass^{self.k} >= {self.threshold:g}"
        return f"pass^{self.k} not worse than baseline by more than {self.max_drop:g}"


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


# ---- evidence -----------------------------------------------------------------------------


def blocks(outcomes: Outcomes, k: int) -> list[int]:
    """A task's trials cut into consecutive blocks of k, each 1 when all k succeeded;
    a block with a not-evaluable trial, or not yet full, is left out."""
    return [success for _, _, success in _timed_blocks([list(outcomes)], k)]


def _timed_blocks(rounds: Sequence[Outcomes], k: int,
                  curtail_size: int | None = None) -> list[tuple[tuple[int, int], tuple[int, int], int]]:
    """`blocks` of a task's rounds of trials, each as (where its first trial ran, where its
    last ran, success); a trial's place is (round, its index in the round). Blocks are cut
    within each round, never across two: a round's size is fixed before it runs, so
    whether a block completes never depends on its own first trials (a pass^3 block
    spanning two rounds of 4 would complete more often after early successes, through the
    other criteria's choice of tasks). A round's trials past its last whole block are not
    used by this k. Curtailed rounds (curtail_size: their size) are cut as they ran:
    size // k blocks each, a block ending at its first failure (passhat.curtailment)."""
    out = []
    for r, outcomes in enumerate(rounds):
        if curtail_size:
            out += [((r, first), (r, last), won) for first, last, won in curtailment.cut(outcomes, k, curtail_size // k)]
            continue
        for start in range(0, len(outcomes) - k + 1, k):
            block = outcomes[start:start + k]
            if all(o is not None for o in block):
                out.append(((r, start), (r, start + k - 1), int(all(block))))
    return out


def unit_trials(k: int, per_trial: bool = False) -> int:
    """Trials per unit of evidence about pass^k: a block of k, or 1 when every trial is
    bet on (Criterion.bets "trials": passhat.results.gate_trials)."""
    return 1 if per_trial else k


def new_evidence(k: int, gates: int, tasks: int, bar: float,
                 baseline: "tuple[np.ndarray, np.ndarray] | None" = None, per_trial: bool = False) -> Evidence:
    """The evidence about "mean pass^k >= bar" (less the baseline's, its units cut with
    unit_trials): blocks of k, each bet on q = p^k (the default: see docs/gate.md, "Per
    trial", for why), or with per_trial (absolute criteria only) every trial bet on p_t
    (TrialEvidence). At k = 1 the two coincide and the blocks' exact dual is used."""
    if per_trial and k > 1:
        if baseline is not None:
            raise GateError("per-trial bets are for absolute criteria; a regression bets on blocks of k")
        return TrialEvidence(gates, tasks, bar, k)
    return Evidence(gates, tasks, bar, baseline)


def _as_rounds(data: Rounds) -> list[Mapping[str, Outcomes]]:
    return [data] if isinstance(data, Mapping) else list(data)


def merged(data: Rounds) -> dict[str, list]:
    """Task id -> all its outcomes, round after round."""
    out: dict[str, list] = {}
    for round_ in _as_rounds(data):
        for task, outcomes in round_.items():
            out.setdefault(task, []).extend(outcomes)
    return out


def replay(k: int, bar: float, rounds: Rounds, tasks: Sequence[str],
           baseline: Rounds | None = None,
           aim: "Callable[[Evidence], tuple[np.ndarray, np.ndarray]] | None" = None,
           per_trial: bool = False, curtail_size: int | None = None) -> Evidence:
    """The evidence about "mean pass^k >= bar" on one gate, rebuilt as the gate saw it. The
    trials are taken in order of (round, index in the round): a fixed order, so each block
    can be bet with tilts planned (aimed at the bar, or where `aim` says from the evidence
    so far) from the blocks finished before its first trial. Rounds of one block a task
    replay exactly as they ran; a round of several blocks a task (or one look at a whole
    fixed run) is bet block by block, as a sequence of rounds. With per_trial the units
    are single trials (new_evidence), each bet with tilts planned from the trials before it.
    curtail_size: the rounds were curtailed, each of that size (_timed_blocks)."""
    rounds, n, size = _as_rounds(rounds), len(tasks), unit_trials(k, per_trial)
    base = None if baseline is None else baseline_blocks(baseline, tasks, size)
    evidence = new_evidence(k, 1, n, bar, base, per_trial)
    starting: dict[tuple[int, int], list] = {}
    ending: dict[tuple[int, int], list] = {}
    for i, t in enumerate(tasks):
        for start, end, success in _timed_blocks([r.get(t, []) for r in rounds], size, curtail_size):
            starting.setdefault(start, []).append(i)
            ending.setdefault(end, []).append((i, start, success))
    plans = {}
    for place in sorted(starting.keys() | ending.keys()):
        if place in starting:
            plans[place] = evidence.plan(aim(evidence) if aim else None)
        if place in ending:  # at most one block of each task ends at a place
            ran, success, plan = np.zeros((1, n), bool), np.zeros((1, n), bool), np.zeros((2, 1, n))
            for i, start, won in ending[place]:
                ran[0, i], success[0, i] = True, bool(won)
                plan[:, 0, i] = plans[start][:, 0, i]
            evidence.add(success, ran, plan)
    return evidence

def baseline_blocks(baseline: Rounds, tasks: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """A baseline's blocks as the virtual rounds its evidence is fed in: (outcomes, present),
    each (1, tasks, virtual rounds). A fixed run (one round) gives one virtual round per
    block index. An earlier gate (its rounds, in order) gives its rounds in the order they
    ran, each cut into its blocks: the gate chose each round's tasks from the rounds
    before it, so its blocks are bet in the order those choices were made, and each
    round's bets look only at the rounds before (fed in block-index order instead, a
    block chosen late would be bet before blocks whose outcomes chose it)."""
    columns: list[tuple[list[int], list[bool]]] = []
    for round_ in _as_rounds(baseline):
        cut = [blocks(list(round_.get(t, [])), k) for t in tasks]
        for b in range(max(map(len, cut), default=0)):
            columns.append(([c[b] if b < len(c) else 0 for c in cut], [b < len(c) for c in cut]))
    shape = (1, len(tasks), len(columns))
    outcomes = np.array([c[0] for c in columns], int).T.reshape(shape) if columns else np.zeros(shape, int)
    present = np.array([c[1] for c in columns], bool).T.reshape(shape) if columns else np.zeros(shape, bool)
    return outcomes, present

# ---- verdicts -----------------------------------------------------------------------------


@dataclass
class TaskLine:
    """One task's part in one criterion: its trials and estimates (regression: the
    candidate's and the baseline's)."""

    task_id: str
    evaluable: int
    trials: int
    estimate: float | None
    baseline: float | None = None
    passed: bool | None = None  # the task on its own meets the criterion's bar (None: no estimate)


@dataclass
class CriterionResult:
    criterion: Criterion
    verdict: str
    estimate: float | None
    low: float
    high: float
    coverage: float
    evaluable: int
    trials: int
    tasks: list[TaskLine] = field(default_factory=list)
    idle: set[str] = field(default_factory=set)  # more trials of these are not expected to help (see decide)
    futile: bool = False  # the budget left is unlikely to decide it (see decide)

    @property
    def decided(self) -> bool:
        return self.verdict != INCONCLUSIVE


def task_estimate(outcomes: Outcomes, k: int) -> float | None:
    scored = [o for o in outcomes if o is not None]
    return pass_hat(sum(scored), len(scored), k) if len(scored) >= k else None


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
    useful = worth_running(evidence, np.where(lean_pass, plan[Evidence.PASS], plan[Evidence.FAIL]),
                           np.where(lean_pass, q_pass[:, :n], q_fail[:, :n]))
    decided = passed | failed
    futile = ~decided & _futile(criterion, evidence, max_blocks) if max_blocks else np.zeros(len(passed), bool)
    return Decision(passed, failed, ~useful | (decided | futile)[:, None], futile)


def worth_running(evidence: Evidence, eta: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(B, tasks): whether each task's next block, bet with tilt eta, is expected to raise
    a test's least wealth, whose minimum sits at q, by at least WORTH of the best task's
    (KL(p, q) where p, the task's shrunk estimate, is on eta's side of q; otherwise
    p*eta - log(1 + q(e^eta - 1)), at most 0); a task with fewer
    than evidence.always_run units always runs."""
    n = evidence.tasks
    blocks_run = evidence.blocks[:, :n]
    p = shrunk_rates(evidence.successes, evidence.blocks, evidence.sign)[:, :n]
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
    V_end (1 - V_end / V). Only once every task has futility_from(max_blocks) blocks."""
    n = evidence.tasks
    m = evidence.blocks
    p = shrunk_rates(evidence.successes, m, evidence.sign)
    v = evidence.unit_variance(p)
    seen = np.maximum(m, 1)
    later = np.concatenate([np.maximum(m[:, :n], max_blocks), seen[:, n:]], axis=1)
    var_now, var_end = (v / seen).sum(axis=1) / n ** 2, (v / later).sum(axis=1) / n ** 2
    estimate = estimate_of(evidence)
    reach = np.sqrt(2 * math.log(1 / criterion.alpha) * var_end)
    spread = np.sqrt(np.maximum(var_end * (1 - var_end / np.maximum(var_now, 1e-300)), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(spread > 0, (np.abs(estimate - _bar(criterion)) - reach) / spread,
                     np.where(np.abs(estimate - _bar(criterion)) > reach, np.inf, -np.inf))
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


def estimate_of(evidence: Evidence) -> np.ndarray:
    """Per gate, theta's plain estimate from the blocks: the candidate's mean success rate
    (less the baseline's); a task with no block yet counts at 1/2."""
    n, rate = evidence.tasks, evidence.rates()
    return rate[:, :n].mean(axis=1) - rate[:, n:].sum(axis=1) / n


def evaluate(criterion: Criterion, candidate: Rounds, baseline: "Rounds | None" = None, *,
             max_trials: int | None = None, interval: bool = True, round_size: int | None = None,
             curtail: Sequence[int] = ()) -> CriterionResult:
    """The criterion's verdict on the trials so far (task id -> outcomes in the order
    they ran, per round), with its plug-in estimate and its confidence interval (one-sided
    bounds at 1 - confidence each, so 2 * confidence - 1 two-sided; interval=False skips
    the bisection). A regression's baseline is a run's outcomes or a gate's rounds. With max_trials (the
    budget per task) it also says whether the criterion is futile. With curtail (the
    gate's curtailed, when its rounds were) the candidate's rounds are cut as they ran, and
    a task's estimate is the share of its blocks that succeeded: C(c, k) / C(n, k) would
    count a block that stopped at its first failure as one trial."""
    k, alpha = criterion.k, criterion.alpha
    threshold = math.log(1 / alpha)
    data = merged(candidate)
    if criterion.kind == "regression":
        if baseline is None:
            raise GateError("a regression criterion needs a baseline run (--baseline RUN)")
        base_data = merged(baseline)
        tasks = sorted(set(data) & set(base_data))
    else:
        tasks, baseline, base_data = sorted(data), None, None
    curtail_size = max(curtail) if curtail else None
    evidence = replay(k, _bar(criterion), candidate, tasks, baseline, per_trial=criterion.per_trial,
                      curtail_size=curtail_size)

    def rejected(test: int, x: float) -> bool:
        return bool(evidence.evidence(test, x)[0][0] >= threshold)

    trials = sum(len(data.get(t, [])) for t in tasks)
    evaluable = sum(o is not None for t in tasks for o in data.get(t, []))
    coverage = evaluable / trials if trials else 0.0
    verdict, idle_tasks, futile = INCONCLUSIVE, set(), False
    if tasks and coverage >= MIN_COVERAGE:
        size = curtail_size or round_size or k  # units are cut within rounds of `size` trials
        max_blocks = (max_trials // size) * (size // unit_trials(k, criterion.per_trial)) if max_trials else None
        passed, failed, idle, futile_ = decide(criterion, evidence, max_blocks)
        verdict = PASS if passed[0] else FAIL if failed[0] else INCONCLUSIVE
        idle_tasks, futile = {t for t, i in zip(tasks, idle[0]) if i}, bool(futile_[0])
    rounds = _as_rounds(candidate)
    lines = [_task_line(criterion, t, data.get(t, []), base_data,
                        [r.get(t, []) for r in rounds] if curtail_size else None, curtail_size) for t in tasks]
    estimates = [line.estimate - (line.baseline or 0.0) for line in lines
                 if line.estimate is not None and (criterion.kind == "absolute" or line.baseline is not None)]
    low, high = math.nan, math.nan
    if interval and tasks:  # "theta <= x" rejected: theta > x; "theta >= x" rejected: theta < x
        low = bound(lambda x: rejected(Evidence.PASS, x), -1.0, 1.0, up=True)
        high = bound(lambda x: rejected(Evidence.FAIL, x), -1.0, 1.0, up=False)
        if criterion.kind == "absolute":
            low, high = max(low, 0.0), min(high, 1.0)
    return CriterionResult(
        criterion=criterion, verdict=verdict,
        estimate=sum(estimates) / len(estimates) if estimates else None,
        low=low, high=high, coverage=coverage, evaluable=evaluable, trials=trials, tasks=lines,
        idle=idle_tasks, futile=futile,
    )


def _task_line(criterion: Criterion, task_id: str, outcomes: Outcomes, baseline: dict[str, Outcomes] | None,
               rounds: Sequence[Outcomes] | None = None, curtail_size: int | None = None) -> TaskLine:
    if rounds is not None:  # curtailed: the share of its blocks that succeeded
        won = [success for _, _, success in _timed_blocks(rounds, criterion.k, curtail_size)]
        est = sum(won) / len(won) if won else None
    else:
        est = task_estimate(outcomes, criterion.k)
    base = task_estimate(baseline.get(task_id, []), criterion.k) if baseline is not None else None
    if criterion.kind == "absolute":
        passed = None if est is None else est >= criterion.threshold
    else:
        passed = None if est is None or base is None else est - base >= -criterion.max_drop
    return TaskLine(task_id, sum(o is not None for o in outcomes), len(outcomes), est, base, passed)


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
