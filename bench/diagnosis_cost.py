"""The diagnosis's cost per failed trial (issue 33: 10,000 trials in seconds, in a
worker). Diagnoses N trials built from airline's and retail's gold paths, each with one
argument changed so every gold write is looked for, and prints the time per trial: with
the DB part failed (the field-by-field diff replays the conversation through tau2's
environments) and without (the gold-path comparison alone)."""

from __future__ import annotations

import argparse
import time

from passhat.messages import Message, ToolCall
from passhat.domains.registry import get_domain


def failed_trial(domain, task_id: str, gold) -> list[tuple[int, list[Message]]]:  # noqa: ANN001
    """The gold path with the last action's first argument changed, each call answered
    by the domain (the diff's replay must reproduce every answer, as tau2's does)."""
    steps = [(0, [Message(role="user", content="Hello.")])]
    history = list(steps[0][1])
    for i, action in enumerate(gold):
        args = dict(action.arguments)
        if i == len(gold) - 1 and args:
            key = next(iter(args))
            args[key] = f"{args[key]}X"
        call = ToolCall(id=f"c{i}", name=action.name, arguments=args, requestor=action.requestor)
        asked = Message(role="user" if action.requestor == "user" else "assistant", tool_calls=[call])
        answers = domain.execute(task_id, history, [call])
        history += [asked, *answers]
        steps += [(2 * i + 1, [asked]), (2 * i + 2, answers)]
    steps.append((2 * len(gold) + 1, [Message(role="assistant", content="Done.")]))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    args = parser.parse_args()
    cases = []
    for name in ("airline", "retail"):
        domain = get_domain(name)
        for task_id in domain.task_ids():
            criteria = domain._tau2_task(task_id).evaluation_criteria
            cases.append((domain, task_id, failed_trial(domain, task_id, criteria.actions or [] if criteria else [])))
    for failed in ("DB", "COMMUNICATE"):
        start = time.perf_counter()
        for i in range(args.trials):
            domain, task_id, steps = cases[i % len(cases)]
            domain.diagnose(task_id, steps, {"breakdown": {failed: 0.0}}, "user_stop")
        elapsed = time.perf_counter() - start
        print(f"{args.trials} trials diagnosed, {failed} part failed, in {elapsed:.2f} s: "
              f"{elapsed / args.trials * 1e6:.0f} us per trial ({len(cases)} airline+retail tasks, cycled)")


if __name__ == "__main__":
    main()
