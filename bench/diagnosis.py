"""Does the exact diagnosis of a failed trial name the mistake that made it fail?
scripted/faulty-P (passhat.infra.scripted_faults) makes one planned mistake per trial
with probability P; this bench runs it through passhat over all of airline and retail,
then compares each failed trial's diagnosis with the plan.

    python bench/diagnosis.py [--p 1.0] [--trials 3] [--concurrency 16] [--workers 1]

The run is `passhat run` as a process on the embedded Temporal server (a temporary home,
free ports). The ground truth is recomputed from each trial's seed, never read from the
run. Prints how often the diagnosis's first step off the gold path names the injected
kind and the step where it showed, a confusion table (injected kind x diagnosed kind), the
cases it got wrong, and the injected trials that still passed (a mistake the reward does
not see: airline and retail reward only DB and COMMUNICATE, so a write made without its
read passes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter

from passhat.outcomes import TRIAL_SCORED, is_success
from passhat.domains.registry import get_domain
from passhat.domains.tau2_version import installed_rules
from passhat.infra.scripted_faults import AGENT_FAULT_KINDS, facts_of, fault_step, planned_fault
from passhat.infra.store import Store

DOMAINS = ("airline", "retail")
TARGET = 0.95


def run_faulty(env: dict[str, str], run_id: str, p: float, trials: int, concurrency: int, workers: int) -> float:
    """`passhat run` of scripted/faulty-P over every task of DOMAINS; its wall time."""
    from passhat.testing.harness import PASSHAT

    args = [str(PASSHAT), "run", *[a for d in DOMAINS for a in ("--domain", d)],
            "--agent-model", f"scripted/faulty-{p:g}", "--user-model", "scripted/oracle",
            "--trials", str(trials), "--concurrency", str(concurrency), "--workers", str(workers),
            "--run-id", run_id, "--yes", "-o", "json"]
    if installed_rules().grades_nl_assertions:  # tau2 1.0.x: its NL-assertion judge, offline
        args += ["--judge-model", "scripted/judge"]
    started = time.monotonic()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=7200, stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        raise SystemExit(f"passhat run failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - started


def diagnoses(env: dict[str, str], store: Store, run_id: str) -> dict[str, dict | None]:
    """Each failed trial's stored diagnosis, by trial id: the store's reader where the
    diagnosis branch provides it, else `passhat trials RUN --failed -o json`."""
    reader = getattr(store, "trial_diagnosis", None)
    if reader is not None:
        return {t.trial_id: reader(run_id, t.trial_id) for t in store.trials(run_id) if not is_success(t.reward or 0.0)}
    from passhat.testing.harness import PASSHAT

    done = subprocess.run([str(PASSHAT), "trials", run_id, "--failed", "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    rows = json.loads(done.stdout or "[]") if done.returncode == 0 else []
    rows = rows.get("trials", rows) if isinstance(rows, dict) else rows
    return {r["trial_id"]: r.get("diagnosis") for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--p", type=float, default=1.0, help="scripted/faulty-P's P (default 1.0)")
    parser.add_argument("--trials", type=int, default=3, help="trials per task (default 3: ~450 failed)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    from passhat.testing.harness import PASSHAT, free_ports

    home = tempfile.mkdtemp(prefix="passhat-diagnosis-bench-")
    port, ui_port = free_ports(2)
    env = dict(os.environ, PASSHAT_HOME=home, PASSHAT_TEMPORAL_PORT=str(port), PASSHAT_UI_PORT=str(ui_port),
               LITELLM_LOCAL_MODEL_COST_MAP="True", PASSHAT_WARM_START="0")
    for name in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    run_id = "diagnosis-bench"
    try:
        wall = run_faulty(env, run_id, args.p, args.trials, args.concurrency, args.workers)
        store = Store(f"sqlite:///{home}/results.db")
        report(store, env, run_id, args, wall)
        store.close()
    finally:
        subprocess.run([str(PASSHAT), "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def report(store: Store, env: dict[str, str], run_id: str, args: argparse.Namespace, wall: float) -> None:
    domains = {d: get_domain(d) for d in DOMAINS}
    facts = {d: facts_of(domains[d]) for d in DOMAINS}
    trials = store.trials(run_id)
    found = diagnoses(env, store, run_id)
    injected, passed, clean_failed = Counter(), Counter(), []
    confusion: Counter = Counter()
    right = kind_right = step_right = failed = undiagnosed = 0
    argument_right = argument_cases = db_failed = db_answered = 0
    not_scored: list[str] = []
    wrong: list[str] = []
    for t in trials:
        task = domains[t.domain].task(t.task_id)
        fault = planned_fault(t.domain, task, facts[t.domain], t.seed, args.p)
        if fault is not None:
            injected[fault.kind] += 1
        if t.status != TRIAL_SCORED:  # not evaluable: no reward, so no diagnosis
            not_scored.append(f"{t.trial_id} ({t.termination_reason}: {(t.error or '')[:100]})")
            continue
        if is_success(t.reward or 0.0):
            if fault is not None:
                passed[fault.kind] += 1
            continue
        if fault is None:
            clean_failed.append(t.trial_id)
            continue
        failed += 1
        steps = [(s.step, s.message_list()) for s in store.steps(t.trial_id)]
        due = fault_step(fault, task, steps)
        diagnosis = found.get(t.trial_id)
        first = (diagnosis or {}).get("first_off_path") or {}
        said_kind, said_step = first.get("kind"), first.get("step")
        if diagnosis is None:
            undiagnosed += 1
        confusion[(fault.kind, said_kind or "(none)")] += 1
        kind_right += said_kind == fault.kind
        step_right += said_step == due
        if fault.kind == "wrong_argument":  # the diff names the very argument changed
            gold_args = task.gold_actions[fault.index].arguments
            changed = {k for k, v in fault.action.arguments.items() if gold_args.get(k) != v}
            named = {k for a in (diagnosis or {}).get("actions", []) for k in a.get("differing_arguments", {})}
            argument_right += changed <= named and bool(changed)
            argument_cases += 1
        if t.reward_info().get("breakdown", {}).get("DB", 1.0) < 1:
            db_failed += 1
            db_answered += bool((diagnosis or {}).get("db_differences"))
        if said_kind == fault.kind and said_step == due:
            right += 1
        else:
            wrong.append(f"  {t.trial_id}: injected {fault.kind} at step {due}"
                         f" ({_what(fault)}); diagnosed {said_kind} at step {said_step}")

    print(f"scripted/faulty-{args.p:g} (user scripted/oracle) on {', '.join(DOMAINS)}: {len(trials)} trials "
          f"({args.trials} per task), concurrency {args.concurrency}, {args.workers} worker(s), {wall:.0f} s")
    print(f"injected: {sum(injected.values())}  ({', '.join(f'{k} {injected[k]}' for k in AGENT_FAULT_KINDS)})")
    print(f"injected, trial passed (the reward does not see the mistake): {sum(passed.values())}"
          + (f"  ({', '.join(f'{k} {n}' for k, n in sorted(passed.items()))})" if passed else ""))
    print(f"not evaluable: {len(not_scored)}" + (f"  {not_scored[:3]}" if not_scored else ""))
    print(f"failed without an injected mistake: {len(clean_failed)}" + (f"  {clean_failed[:5]}" if clean_failed else ""))
    print(f"failed with an injected mistake: {failed}; without a stored diagnosis: {undiagnosed}")
    if failed and undiagnosed == failed:
        print("\nno failed trial has a stored diagnosis (is branch `diag` merged?): nothing to compare")
        return
    if failed:
        print(f"\ndiagnosis names the injected kind and its step: {right}/{failed} = {right / failed:.1%}"
              f"  (target >= {TARGET:.0%}: {'met' if right / failed >= TARGET else 'NOT met'})")
        print(f"  kind right: {kind_right}/{failed} = {kind_right / failed:.1%};"
              f" step right: {step_right}/{failed} = {step_right / failed:.1%}")
        if argument_cases:
            print(f"  wrong_argument: the changed argument named among the differing ones: "
                  f"{argument_right}/{argument_cases}")
        print(f"  DB part failed: {db_failed}; with its field-by-field differences: {db_answered}")
    said = sorted({s for _, s in confusion}, key=lambda s: (s not in AGENT_FAULT_KINDS, s))
    print("\nconfusion (rows: injected kind, columns: diagnosed kind)")
    width = max(len(s) for s in [*AGENT_FAULT_KINDS, *said])
    print(f"{'':{width}} " + " ".join(f"{s:>{len(s)}}" for s in said))
    for kind in AGENT_FAULT_KINDS:
        if any(confusion[(kind, s)] for s in said):
            print(f"{kind:{width}} " + " ".join(f"{confusion[(kind, s)]:>{len(s)}}" for s in said))
    if wrong:
        print(f"\nnot named right ({len(wrong)}; the first 40):")
        print("\n".join(wrong[:40]))


def _what(fault) -> str:  # noqa: ANN001 - an AgentFault
    if fault.kind == "missing_info":
        return f"info {fault.info!r}"
    what = f"gold action {fault.index}"
    if fault.action is not None:
        what += f", made {fault.action.name}({json.dumps(fault.action.arguments)[:80]})"
    return what


if __name__ == "__main__":
    main()
