"""Is the release gate right as often as it says? Simulated suites with known per-task
success probabilities (and, where a case says so, trials that go missing: not evaluable,
at random or more often when they would fail); every gate is decided by the code `passhat
gate` runs, thousands at once (passhat.results.gate_simulation: the same simulation the
gate's budget check and power preview use).

    python bench/gate_calibration.py [--gates 1000] [--seed 0] [--k 1] [--cases GROUPS] [--bets trials]
    python bench/gate_calibration.py --cases personadrop   # the bound on a persona's drop, its own table

Prints, per case, how often the gate says PASS / FAIL / INCONCLUSIVE, the rate of the
verdict that would be wrong there with its Monte Carlo upper bound (one-sided 95%,
Clopper-Pearson), the conversations it spent (mean per gate, and the most one task got),
the plug-in estimate's bias given the verdict, and the same beside the fixed design (every
task its max trials, decided once by the same test). Exits 1 when some case's upper bound
of a wrong verdict is above alpha. The cases come in groups (`cases`); --cases picks some.
`bench/gate_end_to_end.py` runs gates as `passhat gate` processes beside the same cases.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from typing import NamedTuple

import numpy as np

from passhat.results import gate, gate_simulation, paired_drop
from passhat.results.gate_simulation import FAIL, PASS, fixed, fixed_baseline, simulate

TASKS = 50
FIXED_K = 8
ALPHA = 1 - gate.DEFAULT_CONFIDENCE


def leaderboard_suite(rng: np.random.Generator) -> np.ndarray:
    """A spread like the leaderboards': many tasks near 0 or 1, some in between."""
    middle = np.round(rng.uniform(0.15, 0.9, 14), 3)
    return np.concatenate([[1.0] * 18, [0.97] * 6, [0.0] * 8, [0.03] * 4, middle])


def theta(ps: np.ndarray, k: int) -> float:
    return float(np.mean(ps ** k))


def upper_bound(wrong: int, n: int, confidence: float = 0.95) -> float:
    """Clopper-Pearson one-sided upper confidence bound of a rate seen `wrong` times in n."""
    if wrong >= n:
        return 1.0

    def at_most(p: float) -> float:  # P(Binomial(n, p) <= wrong)
        return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                            + i * math.log(p) + (n - i) * math.log1p(-p)) for i in range(wrong + 1))

    low, high = wrong / n, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if at_most(mid) > 1 - confidence else (low, mid)
    return high


def gate_baseline(history: list, gates: int, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """An earlier gate's trials (pass^1: a block a trial, all evaluable) as
    gate.baseline_blocks feeds them: its rounds in the order they ran, each round's trials
    by index."""
    size = history[0][2].shape[2] if history else 1
    outcomes = np.zeros((gates, tasks, len(history) * size), bool)
    present = np.zeros(outcomes.shape, bool)
    for r, (live, ran, success, _) in enumerate(history):
        for j in range(size):
            outcomes[live, :, r * size + j] = success[:, :, j]
            present[live, :, r * size + j] = ran
    return np.stack([outcomes, outcomes]), np.stack([present, present])


class Case(NamedTuple):
    group: str
    name: str
    ps: np.ndarray
    criteria: list
    wrong: tuple  # the verdicts that would be wrong: FAIL where every criterion holds, PASS where one is violated
    max_trials: int
    baseline: str | None = None  # "fixed": a fixed run of the same suite; "gate": an earlier gate on it
    baseline_ps: np.ndarray | None = None
    missing: tuple = (0.0, 0.0)  # chance a trial is not evaluable when it would succeed, when it would fail
    whole_blocks: bool = False
    # chance a continuation of a not-evaluable trial completes it, when it would succeed, when it would fail
    continued: tuple = (0.0, 0.0)


def cases(rng: np.random.Generator, k: int, margin: float, max_trials: int) -> list[Case]:
    """The cases by group (--cases picks groups): the leaderboard suite at pass^k ("classic"),
    a perfect agent at high bars on 20 and 19 tasks ("perfect"), pass^4 at 8 and 16 trials
    ("k4"), half the tasks at 1 and half below ("half"), 5-task suites ("small"), pass^3
    beside pass^4 ("k3k4"), a regression against an earlier gate ("gatebase"), failures
    that go missing ("missing"), trials missing at random in curtailed and whole rounds
    ("mar"), p = 0.99 a trial at pass^4 >= 0.9 by budget ("power"), one task over a long
    horizon at its bar ("horizon"), and pass^4 at max 8 on several suites ("savings")."""
    board = leaderboard_suite(rng)
    t = theta(board, k)
    broken = board.copy()
    broken[:round(2 * margin * TASKS)] = 0.0  # breaks tasks that always succeeded: pass^k drops 2 margins
    both = (PASS, FAIL)  # at the threshold, either verdict is wrong
    out = [
        Case("classic", f"pass^{k} at threshold", board, [gate.absolute(k, t)], both, max_trials),
        Case("classic", f"pass^{k} holds by {margin}", board, [gate.absolute(k, max(t - margin, 0))], (FAIL,),
             max_trials),
        Case("classic", f"pass^{k} violated by {margin}", board, [gate.absolute(k, min(t + margin, 1))], (PASS,),
             max_trials),
        Case("classic", f"pass^{k} holds by {margin / 2:g}", board, [gate.absolute(k, max(t - margin / 2, 0))],
             (FAIL,), max_trials),
        Case("classic", "A/A regression, max-drop 0", board, [gate.regression(k, 0.0)], both, max_trials, "fixed"),
        Case("classic", f"A/A regression, max-drop {margin}", board, [gate.regression(k, margin)], (FAIL,),
             max_trials, "fixed"),
        Case("classic", f"regression, drop {2 * margin:g} > max-drop {margin}", broken, [gate.regression(k, margin)],
             (PASS,), max_trials, "fixed", board),
    ]
    for n in (20, 19):
        perfect = np.ones(n)
        out += [Case("perfect", f"{n} tasks at p=1, pass^1 >= {bar:g}", perfect, [gate.absolute(1, bar)], (FAIL,), 8)
                for bar in (0.85, 0.9, 0.95, 0.99)]
        out += [Case("perfect", f"{n} tasks at p=1, pass^4 >= {bar:g}, max {cap}", perfect, [gate.absolute(4, bar)],
                     (FAIL,), cap) for bar, cap in ((0.9, 8), (0.9, 16), (0.95, 16))]
    t4 = theta(board, 4)
    for cap in (8, 16):
        out += [
            Case("k4", f"pass^4 at threshold, max {cap}", board, [gate.absolute(4, t4)], both, cap),
            Case("k4", f"pass^4 holds by 0.1, max {cap}", board, [gate.absolute(4, t4 - 0.1)], (FAIL,), cap),
            Case("k4", f"pass^4 violated by 0.1, max {cap}", board, [gate.absolute(4, t4 + 0.1)], (PASS,), cap),
        ]
    half = np.concatenate([np.ones(25), np.full(25, 0.7)])
    out += [
        Case("half", "25 at p=1, 25 at 0.7: at threshold", half, [gate.absolute(1, theta(half, 1))], both, 8),
        Case("half", "25 at p=1, 25 at 0.7: holds by 0.05", half, [gate.absolute(1, theta(half, 1) - 0.05)],
             (FAIL,), 8),
        Case("half", "25 at p=1, 25 at 0.7: violated by 0.05", half, [gate.absolute(1, theta(half, 1) + 0.05)],
             (PASS,), 8),
    ]
    small = np.array([1.0, 0.9, 0.7, 0.5, 0.2])
    ts = theta(small, 1)
    out += [
        Case("small", "5 tasks: at threshold", small, [gate.absolute(1, ts)], both, 8),
        Case("small", "5 tasks: holds by 0.2", small, [gate.absolute(1, ts - 0.2)], (FAIL,), 8),
        Case("small", "5 tasks: violated by 0.2", small, [gate.absolute(1, ts + 0.2)], (PASS,), 8),
    ]
    t3 = theta(board, 3)
    out += [
        Case("k3k4", "pass^3 and pass^4 both at threshold, max 16", board,
             [gate.absolute(3, t3), gate.absolute(4, t4)], both, 16),
        Case("k3k4", "pass^3 holds by 0.1, pass^4 violated by 0.1, max 16", board,
             [gate.absolute(3, t3 - 0.1), gate.absolute(4, t4 + 0.1)], (PASS,), 16),
    ]
    out += [
        Case("gatebase", "A/A regression on an earlier gate, max-drop 0", board, [gate.regression(1, 0.0)], both, 8,
             "gate"),
        Case("gatebase", "A/A regression on an earlier gate, max-drop 0.1", board, [gate.regression(1, 0.1)],
             (FAIL,), 8, "gate"),
    ]
    for whole in (False, True):
        how = "whole blocks" if whole else "curtailed"
        out += [
            Case("missing", f"pass^4 0.75 < bar 0.8, every failure not evaluable, max 16, {how}",
                 np.full(20, 0.75 ** 0.25), [gate.absolute(4, 0.8)], (PASS,), 16, missing=(0.0, 1.0),
                 whole_blocks=whole),
            Case("missing", f"pass^4 0.8 at bar 0.8, half of failures not evaluable, max 16, {how}",
                 np.full(20, 0.8 ** 0.25), [gate.absolute(4, 0.8)], both, 16, missing=(0.0, 0.5),
                 whole_blocks=whole),
        ]
    out += [
        Case("missing", "pass^1 0.9 at bar 0.9, half of failures not evaluable, max 8", np.full(20, 0.9),
             [gate.absolute(1, 0.9)], both, 8, missing=(0.0, 0.5)),
        Case("missing", "pass^1 0.9 at bar 0.9, half of successes not evaluable, max 8", np.full(20, 0.9),
             [gate.absolute(1, 0.9)], both, 8, missing=(0.5, 0.0)),
    ]
    for r in (0.02, 0.05, 0.10, 0.12):
        for whole in (False, True):
            out.append(Case("mar", f"bench suite, pass^4 holds by 0.1, max 16, {r:.0%} not evaluable at random, "
                            f"{'whole blocks' if whole else 'curtailed'}", board, [gate.absolute(4, t4 - 0.1)],
                            (FAIL,), 16, missing=(r, r), whole_blocks=whole,
                            # a continuation is lost as often as a whole trial (it runs the rest of one)
                            continued=(1 - r, 1 - r)))
    for cap in (8, 16, 32, 64, 96):
        out.append(Case("power", f"20 tasks at p=0.99 (pass^4 0.961), pass^4 >= 0.9, max {cap}", np.full(20, 0.99),
                        [gate.absolute(4, 0.9)], (FAIL,), cap))
    one = np.array([0.7])
    out += [
        Case("horizon", "one task at p=0.7, pass^1 >= 0.7 (at its bar), max 256", one, [gate.absolute(1, 0.7)],
             both, 256),
        Case("horizon", "one task at p=0.7, pass^1 >= 0.7, 10% not evaluable at random, max 256", one,
             [gate.absolute(1, 0.7)], both, 256, missing=(0.1, 0.1)),
    ]
    no_zeros = board[(board > 0.03)]
    for name, suite in (("bench suite", board), ("bench suite without its always-failing tasks", no_zeros),
                        ("20 tasks at p=0.9", np.full(20, 0.9)), ("20 tasks at p=0.97", np.full(20, 0.97))):
        out.append(Case("savings", f"{name}: pass^4 holds by 0.1, max 8", suite,
                        [gate.absolute(4, max(theta(suite, 4) - 0.1, 0.0))], (FAIL,), 8))
    # The missing cases above lose their trials' continuations too (a provider that always
    # loses a long conversation); here a would-be success's continuation always completes
    # and a would-be failure's one time in ten. (Last, so that every case above draws as
    # it did before these were added.)
    out += [case._replace(name=f"{case.name}, continued: successes complete, failures 0.1", continued=(1.0, 0.1))
            for case in out if case.group == "missing"]
    return out


def run_case(rng: np.random.Generator, case: Case, gates: int,
             continuations: int = gate_simulation.CONTINUATIONS) -> dict:
    """The case simulated: verdict rates, conversations, bias, and the fixed design beside."""
    baseline = None
    if case.baseline == "fixed":
        baseline = fixed_baseline(rng, gates, case.ps if case.baseline_ps is None else case.baseline_ps,
                                  case.criteria[0].k, FIXED_K)
    elif case.baseline == "gate":  # an earlier gate, "holds by 0.1" on the same suite, as the baseline
        history: list = []
        simulate(rng, case.ps, [gate.absolute(1, theta(case.ps, 1) - 0.1)], gates, case.max_trials, history=history)
        baseline = gate_baseline(history, gates, len(case.ps))
    done = simulate(rng, case.ps, case.criteria, gates, case.max_trials, baseline=baseline, missing=case.missing,
                    continued=case.continued, continuations=continuations, whole_blocks=case.whole_blocks)
    fixed_verdict, fixed_curtailed = fixed(rng, case.ps, case.criteria, gates, case.max_trials, baseline)
    out = {"verdict": done.verdict, "spent": done.conversations, "most": done.most, "fixed": fixed_verdict,
           "fixed_curtailed": fixed_curtailed, "bias": {}}
    [first] = case.criteria[:1]
    if len(case.criteria) == 1 and first.kind == "absolute" and case.missing == (0.0, 0.0):
        error = done.estimates[0] - theta(case.ps, first.k)
        out["bias"] = {v: float(np.nanmean(error[done.verdict == v])) if (done.verdict == v).any() else None
                       for v in (PASS, FAIL, gate_simulation.INCONCLUSIVE)}
        out["bias"]["all"] = float(np.nanmean(error))
    return out


def persona_drop_cases(rng: np.random.Generator) -> list[tuple]:
    """The bound on a persona's drop (--max-persona-drop; passhat.results.paired_drop), on the
    leaderboard-like suite: (name, q_user, q_persona, together, criterion, max_trials, wrong
    verdicts). A task's pass^k under the persona is tau2's user's scaled to the suite's drop;
    a pair's two blocks succeed together with chance rho * min + (1 - rho) * product (rho 0.9:
    strongly correlated, as the same seeds make them; 0: independent)."""
    board = leaderboard_suite(rng)
    out = []
    for k, max_trials in ((1, 16), (4, 16)):
        q = board ** k
        for name, drop, bound, rho, wrong in (
                ("A/A, max drop 0", 0.0, 0.0, 0.9, ("PASS", "FAIL")),
                ("A/A, max drop 0, independent pairs", 0.0, 0.0, 0.0, ("PASS", "FAIL")),
                ("drop 0.1 at the bound 0.1", 0.1, 0.1, 0.9, ("PASS", "FAIL")),
                ("drop 0.15 above the bound 0.1", 0.15, 0.1, 0.9, ("PASS",)),
                ("no drop, bound 0.1", 0.0, 0.1, 0.9, ("FAIL",)),
                ("drop 0.02, bound 0.1", 0.02, 0.1, 0.9, ("FAIL",)),
                ("drop 0.3, bound 0.1", 0.3, 0.1, 0.9, ("PASS",))):
            qp = q * (1 - drop / q.mean())
            together = rho * np.minimum(q, qp) + (1 - rho) * q * qp
            out.append((f"pass^{k}, {name}, max {max_trials}", q, qp, together,
                        paired_drop.criterion(k, bound, gate.DEFAULT_CONFIDENCE), max_trials, wrong))
    return out


def persona_drop_table(gates: int, seed: int) -> list[str]:
    """The persona-drop cases' table; returns the cases whose wrong-verdict bound is above alpha."""
    rng, over = np.random.default_rng(seed), []
    print(f"{gates} gates per case; the bound on a persona's drop against tau2's user (--max-persona-drop), "
          f"{TASKS} leaderboard-like tasks, every round running every task under both users")
    print("| case | wrong verdict (upper bound) | PASS | FAIL | INC | conversations | fixed design |")
    print("|---|---|---|---|---|---|---|")
    for name, q, qp, together, criterion, max_trials, wrong in persona_drop_cases(rng):
        verdict, rounds = paired_drop.simulate(rng, q, qp, together, criterion, gates, max_trials,
                                               size=criterion.k)
        said = []
        for code in wrong:
            seen = int((verdict == code).sum())
            bound = upper_bound(seen, gates)
            over += [name] if bound > ALPHA else []
            said.append(f"false {code} {seen / gates:.3f} ({bound:.3f})")
        per_round = 2 * len(q) * criterion.k
        print(f"| {name} | {', '.join(said)} | "
              + " | ".join(f"{np.mean(verdict == v):.3f}" for v in ("PASS", "FAIL", "INCONCLUSIVE"))
              + f" | {rounds.mean() * per_round:.0f} | {max_trials // criterion.k * per_round} |", flush=True)
    return over


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gates", type=int, default=1000, help="gates per case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--k", type=int, default=1, help="the k of the classic cases' criteria")
    parser.add_argument("--max-trials", type=int, default=None, help="per task, classic cases; default passhat gate's")
    parser.add_argument("--cases", default="classic,perfect,k4,half,small,k3k4,gatebase,missing,mar,power,horizon",
                        help="groups of cases, comma-separated (see `cases`; also: savings)")
    parser.add_argument("--continuations", type=int, default=gate_simulation.CONTINUATIONS,
                        help="times a round continues a trial left not evaluable (0: as before they were)")
    parser.add_argument("--bets", choices=("blocks", "trials"), default="blocks",
                        help="bet absolute pass^k criteria on blocks of k or on every trial (gate.Criterion.bets)")
    args = parser.parse_args()
    from passhat.cli.gate_commands import DEFAULT_MAX_TRIALS

    rng = np.random.default_rng(args.seed)
    groups = args.cases.split(",")
    if groups == ["personadrop"]:
        over = persona_drop_table(args.gates, args.seed)
        if over:
            print(f"upper bound above alpha = {ALPHA:.2f}: {'; '.join(over)}")
            sys.exit(1)
        return
    print(f"{args.gates} gates per case; alpha = {ALPHA:.2f}; a wrong verdict's rate with its one-sided 95% "
          f"upper bound (Clopper-Pearson); the classic cases on {TASKS} leaderboard-like tasks, the rest as named")
    print("| case | wrong verdict (upper bound) | PASS | FAIL | INC | conversations | most a task | fewer than fixed "
          "| fixed: PASS | fixed: FAIL | fixed: conversations | fixed, curtailed | bias: all, PASS, FAIL |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    names, over = {PASS: "PASS", FAIL: "FAIL"}, []
    for case in cases(rng, args.k, args.margin, args.max_trials or DEFAULT_MAX_TRIALS):
        if case.group not in groups:
            continue
        if args.bets == "trials":  # every absolute criterion bet per trial (gate.Criterion.bets)
            case = case._replace(criteria=[dataclasses.replace(c, bets="trials") if c.kind == "absolute" else c
                                           for c in case.criteria])
        started = time.monotonic()
        r = run_case(rng, case, args.gates, args.continuations)
        wrong = []
        for code in case.wrong:
            seen = int((r["verdict"] == code).sum())
            bound = upper_bound(seen, args.gates)
            if bound > ALPHA:
                over.append(case.name)
            wrong.append(f"false {names[code]} {seen / args.gates:.3f} ({bound:.3f})")
        fixed_convs = case.max_trials * len(case.ps)
        bias = r["bias"]
        said = " / ".join("-" if bias.get(v) is None else f"{bias[v]:+.3f}" for v in ("all", PASS, FAIL)) if bias \
            else "-"
        print(f"| {case.name} | {', '.join(wrong)} | "
              + " | ".join(f"{np.mean(r['verdict'] == v):.3f}" for v in (PASS, FAIL, gate_simulation.INCONCLUSIVE))
              + f" | {r['spent'].mean():.0f} | {r['most'].max()} | {1 - r['spent'].mean() / fixed_convs:.0%} | "
              f"{np.mean(r['fixed'] == PASS):.3f} | {np.mean(r['fixed'] == FAIL):.3f} | {fixed_convs} | "
              f"{r['fixed_curtailed'].mean():.0f} | {said} |  ({time.monotonic() - started:.0f}s)", flush=True)
    print(f"wrong verdict: the rate of an error the case allows (false FAIL where every criterion holds, false PASS "
          f"where one is violated, either at the threshold); each must be at most {ALPHA:.2f}, its upper bound too. "
          "PASS/FAIL/INC: the gate's verdicts (power: PASS where it holds by a margin, FAIL where violated); "
          "conversations: mean per gate; most a task: the most conversations one task got in any gate; fixed: every "
          "task its max trials, decided once by the same test; fixed, curtailed: the same design with its pass^k "
          "blocks stopped at their first failure, as the gate's; bias: the plug-in estimate less the truth, over "
          "all gates and given PASS and FAIL (single absolute criteria, every trial evaluable).")
    if over:
        print(f"upper bound above alpha = {ALPHA:.2f}: {'; '.join(over)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
