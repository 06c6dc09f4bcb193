"""The diagnosis's cost per failed trial (issue 33: 10,000 trials in seconds, in a
worker). Diagnoses N trials built from airline's and retail's gold paths, each with one
argument changed so every gold write is looked for, and prints the time per trial."""

from __future__ import annotations

import argparse
import time

from passhat.contracts import Message, ToolCall
from passhat.domains.registry import get_domain


def failed_trial(gold) -> list[tuple[int, list[Message]]]:  # noqa: ANN001 - tau2 Actions
    steps = []
    for i, action in enumerate(gold):
        args = dict(action.arguments)
        if i == len(gold) - 1 and args:
            key = next(iter(args))
            args[key] = f"{args[key]}X"
        steps.append((2 * i + 1, [Message(role="assistant", tool_calls=[
            ToolCall(id=f"c{i}", name=action.name, arguments=args)])]))
        steps.append((2 * i + 2, [Message(role="tool", content="{}", tool_call_id=f"c{i}")]))
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
            cases.append((domain, task_id, failed_trial(criteria.actions or [] if criteria else [])))
    start = time.perf_counter()
    for i in range(args.trials):
        domain, task_id, steps = cases[i % len(cases)]
        domain.diagnose(task_id, steps, {"breakdown": {"DB": 0.0}}, "user_stop")
    elapsed = time.perf_counter() - start
    print(f"{args.trials} trials diagnosed in {elapsed:.2f} s: {elapsed / args.trials * 1e6:.0f} us per trial "
          f"({len(cases)} airline+retail tasks, cycled)")


if __name__ == "__main__":
    main()
