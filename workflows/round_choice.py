"""What a measurement in rounds asks between its rounds (`passhat gate`, `passhat run
--adaptive`): which tasks the next round runs, and, once none, the measurement's record.

Both are pure computations over the outcomes recorded so far (passhat.results.gate and
passhat.results.precision). They run as activities, not in the workflow's own code: a
gate's evidence over a large suite takes longer than a workflow task may hold its thread,
and the choice is then recorded in the history, so a replay reads it back instead of
computing it again."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel
from temporalio import activity

from passhat.results import gate, gate_rounds
from passhat.results import precision

# Task ids are "domain/task"; a round's outcomes map them to True, False, or None (not
# evaluable) in the order the trials ran.
Outcomes = dict[str, list[Optional[bool]]]


class Measure(BaseModel):
    """What the rounds measure: a gate's criteria (with its baseline's outcomes) or a
    pass^k to a precision; with the most trials any task gets."""

    kind: Literal["gate", "adaptive"]
    max_trials: int
    criteria: list[dict[str, Any]] = []  # gate: passhat.results.gate.Criterion fields
    # gate: the baseline's outcomes, task id -> trials; an earlier gate's, per round
    baseline: Optional[Union[Outcomes, list[Outcomes]]] = None
    target: Optional[dict[str, Any]] = None  # adaptive: passhat.results.precision.Target fields
    # gate: run every block whole (`--whole-blocks`) where its rounds would be curtailed
    whole_blocks: bool = False
    # gate: the block sizes the baseline's rounds were curtailed to, when it is such a gate
    baseline_curtail: list[int] = []

    def gate_criteria(self) -> list[gate.Criterion]:
        return [gate.Criterion(**c) for c in self.criteria]

    def precision_target(self) -> precision.Target:
        return precision.Target(**(self.target or {}))

    def round_trials(self) -> int:
        """Trials each chosen task gets in a round (a curtailed round: at most)."""
        if self.kind == "gate":
            return gate_rounds.round_trials(self.gate_criteria())
        return self.precision_target().k

    def curtail(self) -> list[int]:
        """RunConfig.curtail of the rounds: a gate's block sizes when its rounds are
        curtailed (gate.curtailed)."""
        return gate_rounds.curtailed(self.gate_criteria()) if self.kind == "gate" and not self.whole_blocks else []


class ChoiceRequest(BaseModel):
    measure: Measure
    rounds: list[Outcomes]  # per round so far (the first lists every task)


class Choice(BaseModel):
    tasks: list[str]  # the next round's tasks; none: the rounds are over
    stopped: Optional[str] = None  # why they ended early, when they did


class RecordRequest(BaseModel):
    measure: Measure
    run_id: str
    rounds: list[str]
    outcomes: list[Outcomes]
    tasks: int  # in the suite
    fixed_trials: int  # trials per task of the fixed design the record is compared with
    cost_usd: float
    stopped: Optional[str] = None
    seed_offset: int = 0


@activity.defn
def choose_round(req: ChoiceRequest) -> Choice:
    m = req.measure
    if m.kind == "gate":
        tasks, stopped = gate_rounds.next_round(m.gate_criteria(), req.rounds, m.baseline, m.max_trials,
                                                m.baseline_curtail)
    else:
        tasks, stopped = precision.next_round(m.precision_target(), m.max_trials, req.rounds)
    return Choice(tasks=tasks, stopped=stopped)


@activity.defn
def measure_record(req: RecordRequest) -> dict[str, Any]:
    """The gate's record (passhat.results.gate_outputs) or the adaptive run's
    (passhat.results.precision.record): what the CLI prints, JUnit and -o json."""
    from passhat.results.gate_outputs import gate_record

    m = req.measure
    if m.kind == "gate":
        criteria = m.gate_criteria()
        results = [gate.evaluate(c, req.outcomes, m.baseline, max_trials=m.max_trials, curtail=m.curtail(),
                                 round_size=gate_rounds.round_trials(criteria), baseline_curtail=m.baseline_curtail)
                   for c in criteria]
        record = gate_record(req.run_id, results, rounds=req.rounds, stopped=req.stopped, tasks=req.tasks,
                             conversations=sum(len(v) for v in gate.merged(req.outcomes).values()),
                             cost_usd=req.cost_usd, curtailed=bool(m.curtail()), max_trials=m.max_trials)
    else:
        record = precision.record(req.run_id, precision.measure(m.precision_target(), req.outcomes),
                                  rounds=req.rounds, fixed_trials=req.fixed_trials, cost_usd=req.cost_usd,
                                  stopped=req.stopped)
    return record | {"seed_offset": req.seed_offset}
