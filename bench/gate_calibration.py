"""Is the release gate right as often as it says? Simulated suites with known per-task
success probabilities; every gate is decided by the code `passhat gate` runs
(passhat.results.gate: `decide` after every round, `gate_rounds.open_mask` to pick the next round's
tasks, the evidence's `plan` for the next round's bets), thousands of simulated gates at
once on arrays.

    python bench/gate_calibration.py [--gates 1000] [--seed 0] [--k 1] [--cases GROUPS] [--bets trials]
        [--end-to-end N]

Prints, per case, how often the gate says PASS / FAIL / INCONCLUSIVE, the mean
conversations it spent, and the same beside the fixed design (every task its max trials,
decided once by the same test). The cases come in groups (`cases`), --cases picks some.
Monte Carlo margin: 2 standard errors of a rate at alpha.

--end-to-end N then runs N gates of each of a few cases as `passhat gate` processes on
the embedded Temporal server (a temporary home, free ports), scripted/noisy-P agents on
airline tasks, and prints their verdicts and conversations next to the simulated figures
of the same case (same per-task P, same criterion).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from typing import NamedTuple

import numpy as np

from passhat.results import gate, gate_rounds
from passhat.results.gate_evidence import Evidence

TASKS = 50
FIXED_K = 8


def leaderboard_suite(rng: np.random.Generator) -> np.ndarray:
    """A spread like the leaderboards': many tasks near 0 or 1, some in between."""
    middle = np.round(rng.uniform(0.15, 0.9, 14), 3)
    return np.concatenate([[1.0] * 18, [0.97] * 6, [0.0] * 8, [0.03] * 4, middle])


def theta(ps: np.ndarray, k: int) -> float:
    return float(np.mean(ps ** k))


class Suite:
    """G simulated gates on one suite and one criterion: each task's blocks so far, and
    their evidence. The trials themselves are drawn by the caller, shared by the criteria."""

    def __init__(self, gates: int, ps: np.ndarray, criterion: gate.Criterion,
                 baseline: "tuple[np.ndarray, np.ndarray] | None" = None):
        self.ps, self.k = ps, criterion.k
        self.unit = gate.unit_trials(criterion.k, criterion.per_trial)
        self.evidence = gate.new_evidence(criterion.k, gates, len(ps), gate._bar(criterion), baseline,
                                          criterion.per_trial)

    def run(self, live: np.ndarray, ran: np.ndarray, outcomes: np.ndarray, curtailed: bool = False) -> np.ndarray:
        """A round's trials (live gates, tasks, size) for the tasks where `ran`, cut into
        units (gate.unit_trials: blocks of k, or single trials) within the
        round, each bet as the evidence plans from the units before it (as gate.replay
        does); trials past the round's last whole unit are not used. Curtailed rounds are
        cut as passhat.curtailment cuts them. Returns the trials the cut used per task."""
        size = outcomes.shape[2]
        if curtailed:
            blocks, used = curtailed_cut(outcomes, self.unit, size // self.unit)
        else:
            whole = size // self.unit * self.unit
            used = np.full(ran.shape, whole)
            blocks = outcomes[..., :whole].reshape(*ran.shape, size // self.unit, self.unit).all(axis=3)
        evidence = self.evidence.rows(live)
        for block in blocks.transpose(2, 0, 1):
            evidence.add(block, ran, evidence.plan())
        self._put(live, evidence)
        return used

    def _put(self, live: np.ndarray, part: Evidence) -> None:
        ev = self.evidence
        ev.successes[live], ev.blocks[live] = part.successes, part.blocks
        for whole, w in zip(ev.wealth, part.wealth):
            if w.eta.shape[2] > whole.eta.shape[2]:
                grow = np.zeros((*whole.filled.shape, w.eta.shape[2] - whole.eta.shape[2]))
                whole.eta, whole.y = np.concatenate([whole.eta, grow], 2), np.concatenate([whole.y, grow], 2)
            whole.eta[live, :, :w.eta.shape[2]], whole.y[live, :, :w.eta.shape[2]] = w.eta, w.y
            whole.filled[live] = w.filled


def curtailed_cut(trials: np.ndarray, k: int, blocks: int) -> tuple[np.ndarray, np.ndarray]:
    """passhat.curtailment.cut on arrays (..., size) of trials (all evaluable): the
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


def fixed_baseline(rng: np.random.Generator, gates: int, ps: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A baseline run of the fixed design (FIXED_K trials a task): its blocks as the
    virtual rounds gate.baseline_blocks makes of them, (outcomes, present)."""
    trials = rng.random((gates, len(ps), FIXED_K - FIXED_K % k)) < ps[None, :, None]
    blocks = trials.reshape(gates, len(ps), -1, k).all(axis=3)
    return blocks, np.ones(blocks.shape, bool)


def gate_baseline(history: list, gates: int, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """An earlier gate's trials (pass^1: a block a trial) as gate.baseline_blocks feeds
    them: its rounds in the order they ran, each round's trials by index."""
    size = history[0][2].shape[2] if history else 1
    outcomes = np.zeros((gates, tasks, len(history) * size), bool)
    present = np.zeros(outcomes.shape, bool)
    for r, (live, ran, drawn) in enumerate(history):
        for j in range(size):
            outcomes[live, :, r * size + j] = drawn[:, :, j]
            present[live, :, r * size + j] = ran
    return outcomes, present


def adaptive(rng, ps, criteria, baseline, gates, max_trials, history=None):  # noqa: ANN001, ANN201
    """Each gate's verdict (0 inconclusive, 1 PASS, 2 FAIL) and conversations, the rounds
    chosen as gate_rounds.next_round chooses them: every criterion decided on its own evidence,
    a task idle when idle for every open criterion, the gate stopped once its verdict is
    known or every open criterion is futile. `history` (a list) receives each round's
    (live gates, tasks run, trials)."""
    suites = [Suite(gates, ps, c, baseline) for c in criteria]
    size, curtailed = gate_rounds.round_trials(criteria), bool(gate_rounds.curtailed(criteria))
    trials = np.zeros((gates, len(ps)), int)  # what the budget counts: a round's size, curtailed or not
    spent = np.zeros((gates, len(ps)), int)  # the conversations that ran
    verdict = np.zeros(gates, int)
    live = np.arange(gates)
    while len(live):
        decisions = [gate.decide(c, s.evidence.rows(live), max_trials // size * (size // s.unit))
                     for c, s in zip(criteria, suites)]
        passed = np.all([d.passed for d in decisions], axis=0)
        failed = np.any([d.failed for d in decisions], axis=0)
        settled = np.all([d.passed | d.failed | d.futile for d in decisions], axis=0)
        idle = np.all([d.idle for d in decisions], axis=0)  # a decided criterion's tasks are all idle
        verdict[live[passed]], verdict[live[failed]] = 1, 2
        chosen = gate_rounds.open_mask(trials[live], size, max_trials, idle, passed | failed | settled)
        running = chosen.any(axis=1)
        live, chosen = live[running], chosen[running]
        drawn = (rng.random((*chosen.shape, size)) < ps[None, :, None]) & chosen[..., None]
        trials[live] += chosen * size
        used = np.max([s.run(live, chosen, drawn, curtailed) for s in suites], axis=0)
        spent[live] += chosen * used
        if history is not None and len(live):
            history.append((live, chosen, drawn))
    return verdict, spent.sum(axis=1)


def fixed(rng, ps, criteria, baseline, gates, per_task):  # noqa: ANN001, ANN201
    """The fixed design (per_task trials on every task, in rounds as the gate's, decided
    once by the same test): each gate's verdict, and the conversations the same design
    would run were its blocks curtailed as the gate's are (the full count where they are not)."""
    suites = [Suite(gates, ps, c, baseline) for c in criteria]
    size, curtailed = gate_rounds.round_trials(criteria), bool(gate_rounds.curtailed(criteria))
    everything, ran = np.arange(gates), np.ones((gates, len(ps)), bool)
    spent = np.zeros(gates, int)
    for _ in range(per_task // size):
        drawn = rng.random((gates, len(ps), size)) < ps[None, :, None]
        spent += np.max([s.run(everything, ran, drawn, curtailed) for s in suites], axis=0).sum(axis=1)
    decisions = [gate.decide(c, s.evidence) for c, s in zip(criteria, suites)]
    passed = np.all([d.passed for d in decisions], axis=0)
    failed = np.any([d.failed for d in decisions], axis=0)
    return np.where(failed, 2, np.where(passed, 1, 0)), spent


E2E_TASKS = 20  # airline tasks 0..19: scripted/oracle solves every airline task
E2E_P = 0.7  # scripted/noisy-0.7: each trial succeeds with this chance, on every task


def end_to_end(gates: int, simulated: int, rng: np.random.Generator) -> None:
    """`passhat gate` as real processes, N per case, beside the same cases simulated: the
    noisy agent at 0.7 around its bars (pass^4 with its blocks curtailed), and a perfect
    agent (scripted/oracle) at 0.95."""
    from passhat.testing.harness import PASSHAT, free_ports

    home = tempfile.mkdtemp(prefix="passhat-gate-bench-")
    port, ui_port = free_ports(2)
    env = dict(os.environ, PASSHAT_HOME=home, PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    for name in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    tasks = ["--domain", "airline", *[a for t in range(E2E_TASKS) for a in ("--task", str(t))],
             "--user-model", "scripted/oracle", "--yes"]
    noisy, oracle = ["--agent-model", f"scripted/noisy-{E2E_P:g}"], ["--agent-model", "scripted/oracle"]
    p, one = np.full(E2E_TASKS, E2E_P), np.ones(E2E_TASKS)
    cases = [  # name, agent, its per-task p, criterion, flags, max trials a task
        ("holds by 0.2", noisy, p, gate.absolute(1, E2E_P - 0.2), ["--require", f"pass^1 >= {E2E_P - 0.2:g}"], 8),
        ("violated by 0.2", noisy, p, gate.absolute(1, E2E_P + 0.2), ["--require", f"pass^1 >= {E2E_P + 0.2:g}"], 8),
        ("at threshold", noisy, p, gate.absolute(1, E2E_P), ["--require", f"pass^1 >= {E2E_P:g}"], 8),
        ("A/A regression, max-drop 0.1", noisy, p, gate.regression(1, 0.1), ["--max-drop", "0.1"], 8),
        ("pass^4 holds by 0.1, max 8", noisy, p, gate.absolute(4, E2E_P ** 4 - 0.1),
         ["--require", f"pass^4 >= {E2E_P ** 4 - 0.1:.4f}", "--max-trials", "8"], 8),  # curtailed blocks
        ("oracle, pass^1 >= 0.95", oracle, one, gate.absolute(1, 0.95), ["--require", "pass^1 >= 0.95"], 8),
        ("oracle, pass^4 >= 0.95, max 16", oracle, one, gate.absolute(4, 0.95),
         ["--require", "pass^4 >= 0.95", "--max-trials", "16"], 16),
    ]
    print(f"\nEnd to end: {gates} `passhat gate` process(es) per case, {E2E_TASKS} airline tasks; "
          f"simulated: {simulated} gates of the same case")
    print(f"{'case':30} {'end to end: verdicts':>28} {'convs':>6} | {'simulated: PASS':>15} {'FAIL':>6} {'INC':>6} "
          f"{'convs':>6}")
    try:
        for c, (name, agent, ps, criterion, flags, max_trials) in enumerate(cases):
            suite = [*tasks, *agent]
            verdicts, spent = [], []
            for g in range(gates):
                seed = 1000 * (c * gates + g) + 1  # new draws for every gate; its rounds add 0, 1, ...
                extra = list(flags)
                if criterion.kind == "regression":  # a fixed run of k=8 as each gate's own baseline
                    base_id = f"e2e-base-{c}-{g}"
                    _passhat(env, "run", *suite, "--trials", str(FIXED_K), "--seed", str(seed + 500),
                             "--run-id", base_id, "-o", "json")
                    extra += ["--baseline", base_id]
                record = json.loads(_passhat(env, "gate", *suite, *extra, "--seed", str(seed),
                                             "--run-id", f"e2e-{c}-{g}", "-o", "json"))
                verdicts.append(record["verdict"])
                spent.append(record["conversations"])
            baseline = fixed_baseline(rng, simulated, ps, 1) if criterion.kind == "regression" else None
            sim, sim_spent = adaptive(rng, ps, [criterion], baseline, simulated, max_trials)
            said = ", ".join(f"{v} {verdicts.count(v)}" for v in ("PASS", "FAIL", "INCONCLUSIVE") if v in verdicts)
            print(f"{name:30} {said:>28} {np.mean(spent):>6.0f} | "
                  + " ".join(f"{np.mean(sim == code):>{w}.3f}" for code, w in ((1, 15), (2, 6), (0, 6)))
                  + f" {sim_spent.mean():>6.0f}", flush=True)
    finally:
        subprocess.run([str(PASSHAT), "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def _passhat(env: dict[str, str], *args: str) -> str:
    """`passhat ARGS` as a process; its stdout (the one JSON object of -o json)."""
    from passhat.testing.harness import PASSHAT

    done = subprocess.run([str(PASSHAT), *args], env=env, capture_output=True, text=True, timeout=3600,
                          stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"passhat {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


class Case(NamedTuple):
    group: str
    name: str
    ps: np.ndarray
    criteria: list
    wrong: int  # the verdict that would be wrong here: 2 (FAIL) where every criterion holds, 1 where one is violated
    max_trials: int
    baseline: str | None = None  # "fixed": a fixed run of the same suite; "gate": an earlier gate on it
    baseline_ps: np.ndarray | None = None


def cases(rng: np.random.Generator, k: int, margin: float, max_trials: int) -> list[Case]:
    """The cases by group (--cases picks groups): the leaderboard suite at pass^k ("classic"),
    a perfect agent at high bars ("perfect"), pass^4 at 8 and 16 trials ("k4"), half the
    tasks at 1 and half below ("half"), 5-task suites ("small"), pass^3 beside pass^4
    ("k3k4"), and a regression against an earlier gate ("gatebase")."""
    board = leaderboard_suite(rng)
    t = theta(board, k)
    broken = board.copy()
    broken[:round(2 * margin * TASKS)] = 0.0  # breaks tasks that always succeeded: pass^k drops 2 margins
    out = [
        Case("classic", f"pass^{k} holds, at threshold", board, [gate.absolute(k, t)], 2, max_trials),
        Case("classic", f"pass^{k} holds by {margin}", board, [gate.absolute(k, max(t - margin, 0))], 2, max_trials),
        Case("classic", f"pass^{k} violated by {margin}", board, [gate.absolute(k, min(t + margin, 1))], 1, max_trials),
        Case("classic", f"pass^{k} holds by {margin / 2:g}", board, [gate.absolute(k, max(t - margin / 2, 0))], 2,
             max_trials),
        Case("classic", "A/A regression, max-drop 0", board, [gate.regression(k, 0.0)], 2, max_trials, "fixed"),
        Case("classic", f"A/A regression, max-drop {margin}", board, [gate.regression(k, margin)], 2, max_trials,
             "fixed"),
        Case("classic", f"regression, drop {2 * margin:g} > max-drop {margin}", broken, [gate.regression(k, margin)],
             1, max_trials, "fixed", board),
    ]
    perfect = np.ones(20)
    out += [Case("perfect", f"20 tasks at p=1, pass^1 >= {bar:g}", perfect, [gate.absolute(1, bar)], 2, 8)
            for bar in (0.85, 0.9, 0.95, 0.99)]
    out += [Case("perfect", f"20 tasks at p=1, pass^4 >= {bar:g}, max 16", perfect, [gate.absolute(4, bar)], 2, 16)
            for bar in (0.9, 0.95)]
    t4 = theta(board, 4)
    for cap in (8, 16):
        out += [
            Case("k4", f"pass^4 holds at threshold, max {cap}", board, [gate.absolute(4, t4)], 2, cap),
            Case("k4", f"pass^4 holds by 0.1, max {cap}", board, [gate.absolute(4, t4 - 0.1)], 2, cap),
            Case("k4", f"pass^4 violated by 0.1, max {cap}", board, [gate.absolute(4, t4 + 0.1)], 1, cap),
        ]
    half = np.concatenate([np.ones(25), np.full(25, 0.7)])
    out += [
        Case("half", "25 at p=1, 25 at 0.7: at threshold", half, [gate.absolute(1, theta(half, 1))], 2, 8),
        Case("half", "25 at p=1, 25 at 0.7: holds by 0.05", half, [gate.absolute(1, theta(half, 1) - 0.05)], 2, 8),
        Case("half", "25 at p=1, 25 at 0.7: violated by 0.05", half, [gate.absolute(1, theta(half, 1) + 0.05)], 1, 8),
    ]
    small = np.array([1.0, 0.9, 0.7, 0.5, 0.2])
    ts = theta(small, 1)
    out += [
        Case("small", "5 tasks: at threshold", small, [gate.absolute(1, ts)], 2, 8),
        Case("small", "5 tasks: holds by 0.2", small, [gate.absolute(1, ts - 0.2)], 2, 8),
        Case("small", "5 tasks: violated by 0.2", small, [gate.absolute(1, ts + 0.2)], 1, 8),
    ]
    t3 = theta(board, 3)
    out += [
        Case("k3k4", "pass^3 and pass^4 both at threshold, max 16", board,
             [gate.absolute(3, t3), gate.absolute(4, t4)], 2, 16),
        Case("k3k4", "pass^3 holds by 0.1, pass^4 violated by 0.1, max 16", board,
             [gate.absolute(3, t3 - 0.1), gate.absolute(4, t4 + 0.1)], 1, 16),
    ]
    out += [
        Case("gatebase", "A/A regression on an earlier gate, max-drop 0", board, [gate.regression(1, 0.0)], 2, 8,
             "gate"),
        Case("gatebase", "A/A regression on an earlier gate, max-drop 0.1", board, [gate.regression(1, 0.1)], 2, 8,
             "gate"),
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1000, help="gates per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--k", type=int, default=1, help="the k of the classic cases' criteria")
    parser.add_argument("--max-trials", type=int, default=None, help="per task, classic cases; default passhat gate's")
    parser.add_argument("--cases", default="classic,perfect,k4,half,small,k3k4,gatebase",
                        help="groups of cases, comma-separated (see `cases`)")
    parser.add_argument("--bets", choices=("blocks", "trials"), default="blocks",
                        help="bet absolute pass^k criteria on blocks of k or on every trial (gate.Criterion.bets)")
    parser.add_argument("--end-to-end", type=int, default=0, metavar="N",
                        help="also run N `passhat gate` processes per end-to-end case")
    args = parser.parse_args()
    from passhat.cli.gate_commands import DEFAULT_MAX_TRIALS

    max_trials = args.max_trials or DEFAULT_MAX_TRIALS
    rng = np.random.default_rng(args.seed)
    alpha = 1 - gate.DEFAULT_CONFIDENCE
    mc = 2 * math.sqrt(alpha * (1 - alpha) / args.gates)
    groups = args.cases.split(",")
    print(f"{args.gates} gates per case; alpha = {alpha:.2f}; Monte Carlo margin +-{mc:.3f}; "
          f"the classic cases on {TASKS} leaderboard-like tasks, the rest as named")
    print("| case | wrong verdict | PASS | FAIL | INC | conversations | fewer than fixed | fixed: wrong | "
          "fixed: PASS | fixed: FAIL | fixed: conversations | fixed, curtailed: conversations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    names = {1: "PASS", 2: "FAIL"}
    for case in cases(rng, args.k, args.margin, max_trials):
        if case.group not in groups:
            continue
        if args.bets == "trials":  # every absolute criterion bet per trial (gate.Criterion.bets)
            case = case._replace(criteria=[dataclasses.replace(c, bets="trials") if c.kind == "absolute" else c
                                           for c in case.criteria])
        started = time.monotonic()
        baseline = fixed_base = None
        if case.baseline == "fixed":
            baseline = fixed_baseline(rng, args.gates, case.ps if case.baseline_ps is None else case.baseline_ps,
                                      case.criteria[0].k)
            fixed_base = baseline
        elif case.baseline == "gate":  # an earlier gate, "holds by 0.1" on the same suite, as the baseline
            history: list = []
            adaptive(rng, case.ps, [gate.absolute(1, theta(case.ps, 1) - 0.1)], None, args.gates, case.max_trials,
                     history)
            baseline = fixed_base = gate_baseline(history, args.gates, len(case.ps))
        verdict, spent = adaptive(rng, case.ps, case.criteria, baseline, args.gates, case.max_trials)
        fixed_verdict, fixed_curtailed = fixed(rng, case.ps, case.criteria, fixed_base, args.gates, case.max_trials)
        fixed_convs = case.max_trials * len(case.ps)

        def rate(v, code):  # noqa: ANN001, ANN202
            return float(np.mean(v == code))

        print(f"| {case.name} | false {names[case.wrong]} {rate(verdict, case.wrong):.3f} | {rate(verdict, 1):.3f} | "
              f"{rate(verdict, 2):.3f} | {rate(verdict, 0):.3f} | {spent.mean():.0f} | "
              f"{1 - spent.mean() / fixed_convs:.0%} | {rate(fixed_verdict, case.wrong):.3f} | "
              f"{rate(fixed_verdict, 1):.3f} | {rate(fixed_verdict, 2):.3f} | {fixed_convs} | "
              f"{fixed_curtailed.mean():.0f} |  ({time.monotonic() - started:.0f}s)",
              flush=True)
    print(f"wrong verdict: the rate of the error the case allows (false FAIL where every criterion holds, false "
          f"PASS where one is violated); it must be at most {alpha:.2f} + {mc:.3f}. PASS/FAIL/INC: the adaptive "
          "gate's verdicts (power: PASS where it holds by a margin, FAIL where violated); conversations: mean per "
          "gate; fixed: every task its max trials, decided once by the same test; fixed, curtailed: the same "
          "design with its pass^k blocks stopped at their first failure, as the gate's (passhat.curtailment).")
    if args.end_to_end:
        end_to_end(args.end_to_end, args.gates, rng)


if __name__ == "__main__":
    main()
