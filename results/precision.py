"""`passhat run --adaptive`: a plain measurement of pass^k, the mean over the suite's tasks
of p_t^k, run in rounds until it is known to a stated precision.

It is the gate's machinery without a bar (passhat.results.gate): the same blocks, the same
betting tests and replay, the same rule for which tasks the next round runs. The interval
is the gate's confidence sequence, each side at (1 - confidence) / 2, so it covers the
truth at every look at once with the stated confidence: stopping once it is narrow enough
keeps that coverage. Its two tests are aimed, each round, at the estimate so far minus
and plus the precision (the edges the interval must reach), from the blocks before the
round only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from passhat.results import gate
from passhat.results.gate_evidence import Evidence
from passhat.results.gate_rounds import open_mask


@dataclass(frozen=True)
class Target:
    """pass^k to within +-precision (the interval's half-width) at this confidence."""

    k: int
    precision: float
    confidence: float = gate.DEFAULT_CONFIDENCE

    def describe(self) -> str:
        return f"pass^{self.k} to +-{self.precision:g} at {self.confidence:.0%}"


def target(k: int, precision: float, confidence: float = gate.DEFAULT_CONFIDENCE) -> Target:
    if k < 1:
        raise gate.GateError(f"k of pass^k must be at least 1, got {k}")
    if not 0 < precision < 0.5:
        raise gate.GateError(f"--precision is the interval's half-width, within 0..0.5 (e.g. 0.05); got {precision:g}")
    if not 0.5 <= confidence < 1:
        raise gate.GateError(f"--confidence must be within 0.5..1 (e.g. 0.95), got {confidence:g}")
    return Target(k, precision, confidence)


@dataclass
class Measurement:
    target: Target
    estimate: float | None  # mean over tasks of tau2's C(c, k)/C(n, k): a plug-in, not unbiased once trials adapt
    low: float
    high: float
    reached: bool  # the interval is at most 2 * precision wide
    trials: int
    evaluable: int
    tasks: dict[str, int] = field(default_factory=dict)  # task id -> trials
    idle: set[str] = field(default_factory=set)  # more trials of these are not expected to help


def _aim(precision: float) -> Callable[[Evidence], tuple[np.ndarray, np.ndarray]]:
    def aim(evidence: Evidence) -> tuple[np.ndarray, np.ndarray]:
        estimate = gate.estimate_of(evidence)
        return np.maximum(estimate - precision, 0.0), np.minimum(estimate + precision, 1.0)
    return aim


def measure(want: Target, rounds: gate.Rounds) -> Measurement:
    """The measurement on the trials so far (per round, task id -> outcomes in the order
    they ran; None: not evaluable, read against each bound as the gate's tests read it)."""
    data = gate.merged(rounds)
    tasks = sorted(data)
    aim = _aim(want.precision)
    evidence = gate.replay(want.k, 0.0, rounds, tasks, aim=aim, aimed=False)
    threshold = math.log(2 / (1 - want.confidence))

    def rejected(test: int, x: float) -> bool:
        return bool(evidence.evidence(test, x)[0][0] >= threshold)

    low, high = 0.0, 1.0
    if tasks:  # "theta <= x" rejected: theta > x; "theta >= x" rejected: theta < x
        low = max(gate.bound(lambda x: rejected(Evidence.PASS, x), 0.0, 1.0, up=True), 0.0)
        high = min(gate.bound(lambda x: rejected(Evidence.FAIL, x), 0.0, 1.0, up=False), 1.0)
    reached = bool(tasks) and high - low <= 2 * want.precision
    idle = set(tasks)
    if tasks and not reached:
        below, above = aim(evidence)
        plan = evidence.plan((below, above))
        _, q_low = evidence.evidence(Evidence.PASS, below)
        _, q_high = evidence.evidence(Evidence.FAIL, above)
        useful = gate.worth_running(evidence, plan[Evidence.PASS], q_low, Evidence.PASS) | \
            gate.worth_running(evidence, plan[Evidence.FAIL], q_high, Evidence.FAIL)
        idle = {t for t, u in zip(tasks, useful[0]) if not u}
    estimates = [e for e in (gate.task_estimate(data[t], want.k) for t in tasks) if e is not None]
    return Measurement(
        target=want, estimate=sum(estimates) / len(estimates) if estimates else None,
        low=low, high=high, reached=reached,
        trials=sum(len(o) for o in data.values()),
        evaluable=sum(x is not None for o in data.values() for x in o),
        tasks={t: len(data[t]) for t in tasks}, idle=idle,
    )


def open_tasks(want: Target, max_trials: int, measured: Measurement) -> list[str]:
    """The tasks the next round runs: below max_trials (a round is one block of k) and not
    idle; when every task below max_trials is idle, all of them (a measurement short of its
    precision goes on while it has trials to spend)."""
    ids = sorted(measured.tasks)
    trials = np.array([measured.tasks[t] for t in ids], int)
    idle = np.array([t in measured.idle for t in ids], bool)
    mask = open_mask(trials[None], want.k, max_trials, idle[None], np.array([measured.reached]))[0]
    return [t for t, chosen in zip(ids, mask) if chosen]


def next_round(want: Target, max_trials: int, rounds: gate.Rounds) -> tuple[list[str], str | None]:
    """The tasks the next round runs, from the rounds so far; none once the precision is
    reached, or, with why, once every task has its max_trials."""
    measured = measure(want, rounds)
    if measured.reached:
        return [], None
    chosen = open_tasks(want, max_trials, measured)
    return chosen, None if chosen else f"every task has its {max_trials} trials (--trials)"


def record(run_id: str, measured: Measurement, *, rounds: list[str], fixed_trials: int,
           cost_usd: float, stopped: str | None) -> dict:
    """The measurement as one JSON-ready dict, the trials it spent against the fixed design
    (every task run fixed_trials times)."""
    def num(x: float | None) -> float | None:
        return None if x is None or math.isnan(x) else round(x, 4)

    return {
        "run": run_id,
        "target": measured.target.describe(),
        "metric": f"pass^{measured.target.k}",
        "confidence": measured.target.confidence,
        "precision": measured.target.precision,
        "estimate": num(measured.estimate),
        "low": num(measured.low),
        "high": num(measured.high),
        "reached": measured.reached,
        "stopped": stopped,
        "rounds": rounds,
        "conversations": measured.trials,
        "evaluable": measured.evaluable,
        "fixed_design_conversations": fixed_trials * len(measured.tasks),
        "cost_usd": round(cost_usd, 6),
        "tasks": [{"task": t, "trials": n} for t, n in sorted(measured.tasks.items())],
    }


def markdown(rec: dict) -> str:
    """What `passhat run --adaptive` prints: the estimate, its interval, and the trials
    spent against the fixed design."""
    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    spent, fixed = rec["conversations"], rec["fixed_design_conversations"]
    saved = f" ({1 - spent / fixed:.0%} fewer)" if fixed and spent < fixed else ""
    half = (rec["high"] - rec["low"]) / 2 if rec["low"] is not None and rec["high"] is not None else None
    lines = [
        f"## passhat run {rec['run']} (adaptive): {rec['metric']} = {fmt(rec['estimate'])}",
        "",
        "| metric | plug-in estimate | interval | half-width | target | reached |",
        "|---|---|---|---|---|---|",
        f"| {rec['metric']} | {fmt(rec['estimate'])} | {fmt(rec['low'])} – {fmt(rec['high'])} | {fmt(half)} | "
        f"+-{rec['precision']:g} at {rec['confidence']:.0%} | {'yes' if rec['reached'] else 'no'} |",
        "",
        f"Conversations: {spent} in {len(rec['rounds'])} round(s), against {fixed} for the fixed design "
        f"(every task its trials){saved}; {rec['evaluable']} evaluable. Cost: {rec['cost_usd']:.4g} USD.",
    ]
    if rec["stopped"]:
        lines.append(f"Stopped: {rec['stopped']}.")
    lines.append("")
    lines.append("Interval: anytime-valid confidence sequence for the mean over these tasks of p^k, "
                 f"two-sided at {rec['confidence']:.0%} (see docs/gate.md). Estimate: the mean over tasks of "
                 "tau2's C(c, k) / C(n, k), a plug-in (the rounds chose the trials from the outcomes, so it "
                 "is not unbiased), over the evaluable trials. A not-evaluable trial counts as a failure for the lower "
                 "bound and as a success for the upper one, so the interval holds whatever made it not evaluable.")
    return "\n".join(lines) + "\n"
