"""Curtailed blocks: a gate on pass^k (k > 1) runs a task's trials one after another
within a round and stops once the round's blocks are decided.

A block of k trials is 1 when all k succeed, so its first failure decides it: the trials
after that one cannot change it, and a fixed design that runs them pays for nothing
(deterministic curtailment: Jennison & Turnbull, "Group Sequential Methods with
Applications to Clinical Trials", 2000, ch. 10). A round gives each criterion of size k
the same number of blocks, size // k (size: the round's trials, the largest k), cut in
order from the round's trials: a block ends at its first failure or after k successes,
and the next block starts with the trial after it. Every block a round opens is run until
it is decided, so whether a block is counted never depends on its own outcomes, and its
outcome is a draw of "k successes in a row", as a full block's is.

A not-evaluable trial is read by each of the gate's tests against itself (a failure by
the PASS test, a success by the FAIL test: passhat.results.gate_units.CANDIDATE_READS),
so every trial decides something in both readings: the blocks of each reading are cut on
their own, and the round runs until both readings' blocks are decided, never more than
its size. Nothing is replaced, so no block is ever left undecided or dropped. Pure
functions: the run workflow's scheduler (workflows/window.py) calls `wanted`, the gate
(results/gate_units.py) calls `cut`."""

from __future__ import annotations

from typing import Optional, Sequence

Outcome = Optional[bool]  # None: not evaluable

# How the gate's two tests read a trial: the PASS test counts a not-evaluable trial as a
# failure, the FAIL test as a success (passhat.results.gate_units.CANDIDATE_READS).
READINGS = (lambda o: o is True, lambda o: o is not False)


def cut(outcomes: Sequence[Outcome], k: int, blocks: int) -> list[tuple[int, int, int]]:
    """The decided blocks among a round's trials (in the order they ran), at most `blocks`
    of them: (index of its first trial, index of its last, 1 if all k succeeded). A
    not-evaluable trial (None) is passed over: callers that read it as an outcome map it
    first."""
    out: list[tuple[int, int, int]] = []
    first, wins = None, 0
    for i, outcome in enumerate(outcomes):
        if len(out) == blocks:
            break
        if outcome is None:
            continue
        first = i if first is None else first
        wins += outcome
        if not outcome or wins == k:
            out.append((first, i, int(bool(outcome))))
            first, wins = None, 0
    return out


def wanted(outcomes: Sequence[Outcome], ks: Sequence[int], size: int) -> bool:
    """Does a task whose round has run `outcomes` so far need another trial: has some
    criterion (of size k in ks) a block of the round not decided yet, in either test's
    reading? Never past `size` trials: every trial decides something in both readings."""
    return any(len(cut([read(o) for o in outcomes], k, size // k)) < size // k for k in ks for read in READINGS)
