"""What finding where the trials of each task part costs at report time (issue 33: over a
whole run, seconds). Writes a run of N trials to a SQLite results store (airline's and
retail's gold paths, k trials per task, half of each task's trials failing: one with an
argument changed, one with the last write skipped), then times what `passhat report`
does for it: reading the run's steps in one query, and the parting points of every task.

    python bench/divergence_cost.py [--trials 10000] [--k 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sqlmodel import Session

from passhat.messages import Message, ToolCall
from passhat.outcomes import TRIAL_SCORED
from passhat.domains.registry import get_domain
from passhat.infra.store import Store
from passhat.infra.store_tables import StepRow, TrialRow
from passhat.results.divergence import run_divergences

RUN = "divergence-bench"


def conversation(gold, mistake: str | None) -> list[list[Message]]:  # noqa: ANN001 - tau2 Actions
    """The steps of a trial that plays the gold path, with one mistake or none."""
    steps = [[Message(role="assistant", content="Hi! How can I help you today?")],
             [Message(role="user", content="I need help with my booking.")]]
    for i, action in enumerate(gold):
        args = dict(action.arguments)
        last = i == len(gold) - 1
        if last and mistake == "skipped":
            continue
        if last and mistake == "argument" and args:
            key = next(iter(args))
            args[key] = f"{args[key]}X"
        steps.append([Message(role="assistant", content="Let me do that.", tool_calls=[
            ToolCall(id=f"c{i}", name=action.name, arguments=args)])])
        steps.append([Message(role="tool", content='{"ok": true}', tool_call_id=f"c{i}", requestor="assistant")])
    steps.append([Message(role="assistant", content="Done, anything else?")])
    steps.append([Message(role="user", content="###STOP###")])
    return steps


def write_run(store: Store, trials: int, k: int) -> int:
    """The run's trials and steps, written in one transaction; the number of steps."""
    cases = []
    for name in ("airline", "retail"):
        domain = get_domain(name)
        for task_id in domain.task_ids():
            criteria = domain._tau2_task(task_id).evaluation_criteria
            gold = [a for a in (criteria.actions or [] if criteria else []) if a.requestor == "assistant"]
            if gold:
                cases.append((name, task_id, gold))
    rows, steps = [], []
    mistakes = [None, "argument", None, "skipped"]
    for n in range(trials):
        task, index = divmod(n, k)
        domain, task_id, gold = cases[task % len(cases)]
        task_id = f"{task_id}.{task // len(cases)}"
        mistake = mistakes[index % len(mistakes)]
        trial_id = f"{RUN}/m/{domain}/{task_id}/trial-{index}"
        rows.append(TrialRow(trial_id=trial_id, run_id=RUN, agent_model="m", user_model="u", domain=domain,
                             task_id=task_id, trial_index=index, seed=n, status=TRIAL_SCORED,
                             reward=0.0 if mistake else 1.0, success=mistake is None,
                             termination_reason="user_stop",
                             diagnosis_json=json.dumps({"first_off_path": {"kind": "skipped_write", "step": 3,
                                                                           "tool": gold[-1].name}})
                             if mistake else None))
        for number, messages in enumerate(conversation(gold, mistake)):
            steps.append(StepRow(id=f"{trial_id}#{number}", trial_id=trial_id, run_id=RUN, step=number,
                                 role=messages[0].role,
                                 messages_json=json.dumps([m.model_dump(mode="json") for m in messages])))
    with Session(store.engine) as s:
        s.add_all(rows)
        s.add_all(steps)
        s.commit()
    return len(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=4)
    args = parser.parse_args()
    store = Store(f"sqlite:///{Path(tempfile.mkdtemp(prefix='passhat-divergence-bench-')) / 'results.db'}")
    n_steps = write_run(store, args.trials, args.k)
    start = time.perf_counter()
    rows = store.trials(RUN)
    loaded = store.run_messages(RUN)
    read = time.perf_counter() - start
    start = time.perf_counter()
    found = run_divergences(rows, lambda t: [(n, json.loads(m)) for n, m in loaded.get(t, [])])
    computed = time.perf_counter() - start
    flaky = sum(d.kind == "flaky" for d in found.values())
    print(f"{len(rows)} trials ({n_steps} steps), {len(found)} tasks with a failed trial ({flaky} flaky), k={args.k}")
    print(f"read trials and steps (SQLite, one query each): {read:.2f} s")
    print(f"parting points of every task: {computed:.2f} s, {computed / len(rows) * 1e6:.0f} us per trial")
    print(f"total: {read + computed:.2f} s")


if __name__ == "__main__":
    main()
