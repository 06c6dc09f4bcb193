"""How a gate's recorded trials become evidence: each round's trials cut into units (blocks
of k, or single trials), in each test's reading of a not-evaluable trial, and replayed into
passhat.results.gate_evidence in a fixed order; a baseline's the same way; and a task's
plug-in estimates. passhat.results.gate decides on what this builds."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence, Union

import numpy as np

from passhat import curtailment
from passhat.metrics import pass_hat
from passhat.results.gate_evidence import Evidence
from passhat.results.gate_trials import TrialEvidence

Outcomes = Sequence["bool | None"]  # a task's trials in the order they ran; None: not evaluable
# The trials of a gate so far: one mapping task id -> outcomes per round, in round order
# (a single mapping is one round).
Rounds = Union[Mapping[str, Outcomes], Sequence[Mapping[str, Outcomes]]]


class GateError(ValueError):
    """A criterion that cannot be read or checked; the message says how to write it."""


# How each test reads a trial (True: a success, False: a failure, None: not evaluable): a
# candidate's not-evaluable trial counts against the test, a failure for PASS and a success
# for FAIL; a baseline's the other way round (the baseline's rate enters theta negatively).
CANDIDATE_READS = curtailment.READINGS
BASELINE_READS = (CANDIDATE_READS[1], CANDIDATE_READS[0])


def cut_round(outcomes: Outcomes, k: int, read: Callable[[object], bool],
              curtail_size: int | None = None) -> list[int]:
    """A round's trials (in the order they ran) cut into blocks of k, each 1 when all k
    succeeded as `read` reads them. Blocks are cut within each round, never across two: a
    round's size is fixed before it runs, so whether a block completes never depends on its
    own first trials (a pass^3 block spanning two rounds of 4 would complete more often
    after early successes, through the other criteria's choice of tasks). A round's trials
    past its last whole block are not used by this k. A curtailed round (curtail_size: its
    size) is cut as it ran: size // k blocks, a block ending at its first failure
    (passhat.curtailment); every trial is read, so each block is decided within the round."""
    seen = [read(o) for o in outcomes]
    if curtail_size:
        return [won for _, _, won in curtailment.cut(seen, k, curtail_size // k)]
    return [int(all(seen[start:start + k])) for start in range(0, len(seen) - k + 1, k)]


def round_units(outcomes: Outcomes, k: int, reads=CANDIDATE_READS,  # noqa: ANN001
                curtail_size: int | None = None) -> tuple[list[int], list[int]]:
    """A round's units of evidence per test (cut_round in each test's reading)."""
    return tuple(cut_round(outcomes, k, read, curtail_size) for read in reads)  # type: ignore[return-value]


def blocks(outcomes: Outcomes, k: int) -> list[int]:
    """A task's trials cut into consecutive blocks of k, each 1 when all k succeeded, a
    not-evaluable trial read as a failure (the PASS test's reading); a block not yet full is
    left out."""
    return cut_round(list(outcomes), k, CANDIDATE_READS[0])


def unit_trials(k: int, per_trial: bool = False) -> int:
    """Trials per unit of evidence about pass^k: a block of k, or 1 when every trial is
    bet on (Criterion.bets "trials": passhat.results.gate_trials)."""
    return 1 if per_trial else k


def new_evidence(k: int, gates: int, tasks: int, bar: float,
                 baseline: "tuple[np.ndarray, np.ndarray] | None" = None, per_trial: bool = False,
                 aimed: bool = True, aims: tuple[float, float] = (0.0, 0.0)) -> Evidence:
    """The evidence about "mean pass^k >= bar" (less the baseline's, its units cut with
    unit_trials): blocks of k, each bet on q = p^k (the default: see docs/gate.md, "Per
    trial", for why), or with per_trial (absolute criteria only) every trial bet on p_t
    (TrialEvidence). At k = 1 the two coincide and the blocks' exact dual is used."""
    if per_trial and k > 1:
        if baseline is not None:
            raise GateError("per-trial bets are for absolute criteria; a regression bets on blocks of k")
        return TrialEvidence(gates, tasks, bar, k, aimed=aimed, aims=aims)
    return Evidence(gates, tasks, bar, baseline, aimed, aims)


def as_rounds(data: Rounds) -> list[Mapping[str, Outcomes]]:
    return [data] if isinstance(data, Mapping) else list(data)


def merged(data: Rounds) -> dict[str, list]:
    """Task id -> all its outcomes, round after round."""
    out: dict[str, list] = {}
    for round_ in as_rounds(data):
        for task, outcomes in round_.items():
            out.setdefault(task, []).extend(outcomes)
    return out


def replay(k: int, bar: float, rounds: Rounds, tasks: Sequence[str],
           baseline: Rounds | None = None,
           aim: "Callable[[Evidence], tuple[np.ndarray, np.ndarray]] | None" = None,
           per_trial: bool = False, curtail_size: int | None = None, baseline_curtail: Sequence[int] = (),
           aimed: bool = True, aims: tuple[float, float] = (0.0, 0.0)) -> Evidence:
    """The evidence about "mean pass^k >= bar" on one gate, rebuilt as the gate saw it. The
    units are taken in order of (round, index of the unit in its task's round): a fixed
    order, and a round's units exist whatever their outcomes (a round's size is fixed
    before it runs), so each unit can be bet with tilts planned (aimed at the bar, or where
    `aim` says from the evidence so far) from the units before it in that order. Rounds of
    one block a task replay exactly as they ran; a round of several blocks a task (or one
    look at a whole fixed run) is bet block by block, as a sequence of rounds. With
    per_trial the units are single trials (new_evidence). curtail_size: the rounds were
    curtailed, each of that size (cut_round); baseline_curtail: the baseline's rounds were
    (baseline_blocks). aimed=False: the pooled prior sits at 1/2 (an adaptive
    measurement's); aims: how far past the bar it aims (passhat.results.gate.aims)."""
    rounds, n, size = as_rounds(rounds), len(tasks), unit_trials(k, per_trial)
    base = None if baseline is None else baseline_blocks(baseline, tasks, size, baseline_curtail)
    evidence = new_evidence(k, 1, n, bar, base, per_trial, aimed, aims)
    for round_ in rounds:
        cut = [round_units(round_.get(t, []), size, curtail_size=curtail_size) for t in tasks]
        depth = max((len(units) for views in cut for units in views), default=0)
        for j in range(depth):
            success, ran = np.zeros((2, 1, n), bool), np.zeros((2, 1, n), bool)
            for i, views in enumerate(cut):
                for test, units in enumerate(views):
                    if j < len(units):
                        ran[test, 0, i], success[test, 0, i] = True, bool(units[j])
            evidence.add(success, ran, evidence.plan(aim(evidence) if aim else None))
    return evidence


def baseline_units(outcomes: Outcomes, k: int, read: Callable[[object], bool],
                   curtail: Sequence[int] = ()) -> list[int]:
    """A baseline round's units of pass^k in one reading. A curtailed round (curtail: the
    block sizes it was curtailed to) gives its blocks of k when k is one of them, and for
    k = 1 the first trial of each of its smallest blocks: every block's first trial runs
    whatever it and its block show, so it is a draw of one trial (a later trial runs only
    after successes, and would lean the baseline upward)."""
    if not curtail:
        return cut_round(outcomes, k, read)
    size = max(curtail)
    if k in curtail:
        return cut_round(outcomes, k, read, size)
    if k == 1:
        seen = [read(o) for o in outcomes]
        return [int(seen[first]) for first, _, _ in curtailment.cut(seen, min(curtail), size // min(curtail))]
    raise GateError(curtailed_baseline_refusal(curtail, k))


def curtailed_baseline_refusal(curtail: Sequence[int], k: int) -> str:
    sizes = "/".join(map(str, sorted(set(curtail))))
    return (f"a gate whose rounds were curtailed to blocks of pass^{sizes} can be the baseline of pass^1 or "
            f"pass^{sizes}, not pass^{k}: give --regression-metric one of those, or a run (`passhat run`) "
            "as the baseline")


def baseline_blocks(baseline: Rounds, tasks: Sequence[str], k: int, curtail: Sequence[int] = ()
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A baseline's blocks as the virtual rounds its evidence is fed in: (outcomes, present),
    each (2 tests, 1, tasks, virtual rounds), each test reading the baseline's not-evaluable
    trials against itself (BASELINE_READS). A fixed run (one round) gives one virtual round
    per block index. An earlier gate (its rounds, in order; curtail: its rounds' block sizes
    when they were curtailed) gives its rounds in the order they ran, each cut into its
    blocks: the gate chose each round's tasks from the rounds before it, so its blocks are
    bet in the order those choices were made, and each round's bets look only at the rounds
    before (fed in block-index order instead, a block chosen late would be bet before blocks
    whose outcomes chose it)."""
    columns: list[tuple[list[list[int]], list[list[bool]]]] = []
    for round_ in as_rounds(baseline):
        cut = [[baseline_units(list(round_.get(t, [])), k, read, curtail) for t in tasks] for read in BASELINE_READS]
        for b in range(max((len(c) for view in cut for c in view), default=0)):
            columns.append(([[c[b] if b < len(c) else 0 for c in view] for view in cut],
                            [[b < len(c) for c in view] for view in cut]))
    shape = (2, 1, len(tasks), len(columns))
    if not columns:
        return np.zeros(shape, int), np.zeros(shape, bool)
    outcomes = np.array([c[0] for c in columns], int).transpose(1, 2, 0).reshape(shape)
    present = np.array([c[1] for c in columns], bool).transpose(1, 2, 0).reshape(shape)
    return outcomes, present


# ---- a task's estimates (what the summary prints; never a verdict) ----------------------------


def task_estimate(outcomes: Outcomes, k: int) -> float | None:
    """tau2's C(c, k) / C(n, k) over the evaluable trials."""
    scored = [o for o in outcomes if o is not None]
    return pass_hat(sum(scored), len(scored), k) if len(scored) >= k else None


def task_estimate_if_failed(outcomes: Outcomes, k: int, failed: bool = True) -> float | None:
    """The same over every trial, a not-evaluable one counted as a failure (or, with
    failed=False, as a success)."""
    seen = [o is True if failed else o is not False for o in outcomes]
    return pass_hat(sum(seen), len(seen), k) if len(seen) >= k else None


def estimates(rounds: Sequence[Outcomes], k: int, curtail: Sequence[int], failed: bool
               ) -> tuple[float | None, float | None]:
    """A task's plug-in estimate of p^k over its evaluable trials, and the same with its
    not-evaluable trials counted as failures (failed=False: as successes). Rounds curtailed
    to blocks of k (or, for k = 1, whose blocks' first trials are its units: baseline_units)
    give the share of their units won."""
    if curtail:
        kept = [u for r in rounds for u in evaluable_units(r, k, curtail, max(curtail))]
        read = CANDIDATE_READS[0] if failed else CANDIDATE_READS[1]
        worst = [u for r in rounds for u in baseline_units(r, k, read, curtail)]
        return (sum(kept) / len(kept) if kept else None), (sum(worst) / len(worst) if worst else None)
    outcomes = [o for r in rounds for o in r]
    return task_estimate(outcomes, k), task_estimate_if_failed(outcomes, k, failed)


def evaluable_units(outcomes: Outcomes, k: int, curtail: Sequence[int], size: int) -> list[int]:
    """A curtailed round's units of pass^k over its evaluable trials only (a not-evaluable
    trial passed over, as if missing at random): for the plug-in estimate, never a verdict."""
    if k in curtail:
        return [won for _, _, won in curtailment.cut(outcomes, k, size // k)]
    return [int(bool(outcomes[first])) for first, _, _ in curtailment.cut(outcomes, min(curtail), size // min(curtail))]
