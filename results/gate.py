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
succeeded, so its mean is q_t = p_t^k. For a hypothesised vector q, the wealth
    M(q) = mixture over tilts eta of prod_{t,b} exp(eta * Y_tb) / (1 - q_t + q_t * e^eta)
has mean 1 under q whatever the rounds and whichever tasks each round runs, as long as
those choices look only at the past: it is a test martingale, and by Ville's
inequality P(M(q_true) ever reaches 1/alpha) <= alpha. A criterion's null (say
"mean q <= X") is rejected once M(q) >= 1/alpha for every q in it. log M is convex in q,
so that minimum is exact through the Lagrangian dual (passhat.results.gate_evidence, on
arrays, so the benchmark simulates thousands of gates through this same code). The confidence
interval is the set of X whose nulls are not rejected: a confidence sequence, valid at
every look at once.

A criterion PASSes when its "violated" null is rejected at alpha = 1 - confidence, FAILs
when its "holds" null is rejected at alpha, and is otherwise undecided. The point
estimate of p_t^k is tau2's unbiased C(c, k) / C(n, k) (passhat.metrics.pass_hat).
Not-evaluable trials are left out: a block holding one is not used.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Sequence

import numpy as np

from passhat.metrics import pass_hat
from passhat.results.gate_evidence import Blocks, evidence, tests

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 3}
DEFAULT_CONFIDENCE = 0.95
# Below this share of evaluable trials a verdict is not given: INCONCLUSIVE.
MIN_COVERAGE = 0.9

# A task whose evaluable trials all agree over this many (and one round) gets no more.
SETTLE_TRIALS = 8
# A task whose blocks all went one way over this many may be idle (see decide).
IDLE_BLOCKS = 3

Outcomes = Sequence["bool | None"]  # a task's trials in the order they ran; None: not evaluable


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

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

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


def absolute(k: int, threshold: float, confidence: float = DEFAULT_CONFIDENCE) -> Criterion:
    _check(k, confidence)
    if not 0 <= threshold <= 1:
        raise GateError(f"a pass^k threshold must be within 0..1, got {threshold:g}")
    return Criterion("absolute", k, threshold=threshold, confidence=confidence)


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
    out = []
    for start in range(0, len(outcomes) - k + 1, k):
        block = outcomes[start:start + k]
        if all(o is not None for o in block):
            out.append(int(all(block)))
    return out


def evidence_state(data: dict[str, Outcomes], tasks: Sequence[str], k: int) -> Blocks:
    """The tasks' blocks (as `blocks` cuts them), fed in order to one gate's Blocks."""
    cut = [blocks(list(data.get(t, [])), k) for t in tasks]
    state = Blocks(1, len(tasks))
    for i in range(max(map(len, cut), default=0)):
        ran = np.array([[i < len(c) for c in cut]])
        state.add(np.array([[bool(c[i]) if i < len(c) else False for c in cut]]), ran)
    return state


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
    idle: set[str] = field(default_factory=set)  # more trials of these cannot help (see decide)

    @property
    def decided(self) -> bool:
        return self.verdict != INCONCLUSIVE


def _estimate(outcomes: Outcomes, k: int) -> float | None:
    scored = [o for o in outcomes if o is not None]
    return pass_hat(sum(scored), len(scored), k) if len(scored) >= k else None


def _bar(criterion: Criterion) -> float:
    return -criterion.max_drop if criterion.kind == "regression" else criterion.threshold


class Decision(NamedTuple):
    """Per gate of the arrays: whether the criterion PASSes (its "violated" null rejected
    at alpha), whether it FAILs (its "holds" null rejected, and it does not pass), and
    which tasks (gate x task) more trials cannot help while the verdict leans as it does."""

    passed: np.ndarray
    failed: np.ndarray
    idle: np.ndarray


def decide(criterion: Criterion, candidate: Blocks, baseline: Blocks | None, tasks: int) -> Decision:
    """The criterion on the arrays. Idle tasks: while the evidence leans to PASS, a task
    whose every block failed is bet down in the PASS test, the null sets its q to 0 and
    its wealth stays 1 however often it fails again, so its trials buy nothing (the mirror
    image for FAIL and a task whose every block succeeded). Leaving them out looks only at
    the past, so the error control holds."""
    threshold = math.log(1 / criterion.alpha)
    passing, failing = tests(candidate, baseline, _bar(criterion), tasks)
    toward_pass, toward_fail = evidence(*passing), evidence(*failing)
    passed = toward_pass >= threshold
    failed = ~passed & (toward_fail >= threshold)
    seen = candidate.blocks >= IDLE_BLOCKS
    only_failed, only_won = seen & candidate.failed & ~candidate.won, seen & candidate.won & ~candidate.failed
    idle = (toward_pass > toward_fail)[:, None] & only_failed | (toward_fail > toward_pass)[:, None] & only_won
    return Decision(passed, failed, idle | (passed | failed)[:, None])


def evaluate(criterion: Criterion, candidate: dict[str, Outcomes],
             baseline: dict[str, Outcomes] | None = None, *, interval: bool = True) -> CriterionResult:
    """The criterion's verdict on the trials so far (task id -> outcomes in the order
    they ran), with its estimate and its confidence interval (one-sided bounds at
    1 - confidence each; interval=False skips the bisection)."""
    k, alpha = criterion.k, criterion.alpha
    threshold = math.log(1 / alpha)
    if criterion.kind == "regression":
        if baseline is None:
            raise GateError("a regression criterion needs a baseline run (--baseline RUN)")
        tasks = sorted(set(candidate) & set(baseline))
        reference = evidence_state(baseline, tasks, k)
    else:
        tasks, reference = sorted(candidate), None
    state = evidence_state(candidate, tasks, k)
    passing, failing = tests(state, reference, 0.0, max(len(tasks), 1))
    n = max(len(tasks), 1)

    def holds_rejected(x: float) -> bool:  # "theta >= x" rejected: theta < x
        counts, sign, _ = failing
        return bool(evidence(counts, sign, np.array([-x * n]))[0] >= threshold)

    def violated_rejected(x: float) -> bool:  # "theta <= x" rejected: theta > x
        counts, sign, _ = passing
        return bool(evidence(counts, sign, np.array([x * n]))[0] >= threshold)

    trials = sum(len(candidate.get(t, [])) for t in tasks)
    evaluable = sum(o is not None for t in tasks for o in candidate.get(t, []))
    coverage = evaluable / trials if trials else 0.0
    verdict, idle_tasks = INCONCLUSIVE, set()
    if tasks and coverage >= MIN_COVERAGE:
        passed, failed, idle = decide(criterion, state, reference, len(tasks))
        verdict = PASS if passed[0] else FAIL if failed[0] else INCONCLUSIVE
        idle_tasks = {t for t, i in zip(tasks, idle[0]) if i}
    lines = [_task_line(criterion, t, candidate.get(t, []), baseline) for t in tasks]
    estimates = [line.estimate - (line.baseline or 0.0) for line in lines
                 if line.estimate is not None and (criterion.kind == "absolute" or line.baseline is not None)]
    low, high = (_bound(violated_rejected, -1.0, 1.0, up=True), _bound(holds_rejected, -1.0, 1.0, up=False)) \
        if interval and tasks else (math.nan, math.nan)
    if criterion.kind == "absolute" and interval and tasks:
        low, high = max(low, 0.0), min(high, 1.0)
    return CriterionResult(
        criterion=criterion, verdict=verdict,
        estimate=sum(estimates) / len(estimates) if estimates else None,
        low=low, high=high, coverage=coverage, evaluable=evaluable, trials=trials, tasks=lines, idle=idle_tasks,
    )


def _task_line(criterion: Criterion, task_id: str, outcomes: Outcomes,
               baseline: dict[str, Outcomes] | None) -> TaskLine:
    est = _estimate(outcomes, criterion.k)
    base = _estimate(baseline.get(task_id, []), criterion.k) if baseline is not None else None
    if criterion.kind == "absolute":
        passed = None if est is None else est >= criterion.threshold
    else:
        passed = None if est is None or base is None else est - base >= -criterion.max_drop
    return TaskLine(task_id, sum(o is not None for o in outcomes), len(outcomes), est, base, passed)


def _bound(rejected, low: float, high: float, *, up: bool) -> float:  # noqa: ANN001
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


# ---- rounds -------------------------------------------------------------------------------


def round_trials(criteria: Sequence[Criterion]) -> int:
    """Trials each task gets per round: one block of the largest k. Small rounds let the
    gate stop soon after the verdict is known."""
    return max(c.k for c in criteria)


def open_mask(trials: np.ndarray, scored: np.ndarray, agree: np.ndarray, size: int, max_trials: int,
              idle: np.ndarray | None = None) -> np.ndarray:
    """Which tasks the next round runs, on arrays (trials run, evaluable trials, whether
    those all agree, and the tasks `decide` found idle): those below max_trials whose
    outcomes can still move the verdict. A task whose evaluable trials all agree over
    SETTLE_TRIALS contributes near 0 or 1 whatever comes next. Any rule that looks only
    at the past keeps the error control; this one saves trials."""
    settled = agree & (scored >= max(size, SETTLE_TRIALS))
    chosen = (trials + size <= max_trials) & ~settled
    return chosen if idle is None else chosen & ~idle


def open_tasks(criteria: Sequence[Criterion], candidate: dict[str, Outcomes], max_trials: int,
               results: Sequence[CriterionResult] = ()) -> list[str]:
    """The tasks the next round runs (open_mask), by id: idle only when idle for every
    criterion of `results` (the evaluation of the trials so far)."""
    ids = sorted(candidate)
    scored = [[o for o in candidate[t] if o is not None] for t in ids]
    idle = np.array([bool(results) and all(t in r.idle for r in results) for t in ids])
    mask = open_mask(np.array([len(candidate[t]) for t in ids]), np.array([len(s) for s in scored]),
                     np.array([len(set(s)) == 1 for s in scored]), round_trials(criteria), max_trials, idle)
    return [t for t, chosen in zip(ids, mask) if chosen]
