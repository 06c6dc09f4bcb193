"""Helpers shared by test modules: what one test module would otherwise import from
another. Helpers for tests that run real workflows are in tests/runs.py; running the
passhat command is passhat.testing.harness.passhat."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from passhat.contracts import RunConfig, TaskUnit
from passhat.messages import Message
from passhat.domains.tau2_version import installed_rules
from passhat.infra.store import Store
from passhat.testing.harness import free_port

# Plugin modules of the tests (passhat.domains.plugins), on the import path as a user's
# PYTHONPATH puts theirs; the agents registered by TEST_AGENTS are in its docstring.
PLUGIN_MODULES = Path(__file__).resolve().parent / "plugin_modules"
TEST_AGENTS = "passhat_test_agents"

# For a test whose agent (noisy-P; over HTTP, passhat.testing.scripted_http plays no
# other failing agent) fails by an empty reply, and which counts its trials, calls or
# rewards as 26.3 does: an agent_error with reward 0, the reply asked for again within
# the step. tau2 1.0.x re-runs such a simulation from the start and then gives it up as
# not evaluable, which that accounting does not describe.
needs_agent_errors = pytest.mark.skipif(
    installed_rules().on_model_failure != "agent_error",
    reason="its agent (noisy-P) fails by empty replies, which this tau2 re-runs and gives up on")

# A custom task (tau2's task format) that airline accepts.
VALID_TASK = {
    "id": "t1",
    "user_scenario": {"instructions": {
        "domain": "airline", "reason_for_call": "Cancel reservation EHGLP3.",
        "known_info": "You are Emma Kim.", "task_instructions": "Insist politely."}},
    "evaluation_criteria": {"actions": [{
        "action_id": "a1", "name": "get_user_details", "arguments": {"user_id": "emma_kim_9957"}}]},
}


def cli_env(db_url: str, tmp_path: Path) -> dict[str, str]:
    """The environment of passhat commands that read the store at `db_url` and must not
    need Temporal."""
    env = dict(os.environ)
    env.update(
        PASSHAT_DB_URL=db_url,
        PASSHAT_HOME=str(tmp_path / "home"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        # Nothing listens here: these commands must not need Temporal.
        TEMPORAL_ADDRESS=f"127.0.0.1:{free_port()}",
    )
    Path(env["PASSHAT_HOME"]).mkdir(parents=True, exist_ok=True)
    return env


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The command failed as passhat fails: exit 2, one "error:" line, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def store_rows(store: Store) -> dict[str, list]:
    """Every row of the results store's tables, to show that a refused command changed
    nothing."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return {t: [tuple(r) for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY 1"))]
                for t in ("runs", "trials", "steps", "task_results", "run_tasks")}


def make_config(run_id="r1", **overrides) -> RunConfig:
    fields = {
        "agent_models": ["agent-m"],
        "user_model": "user-m",
        "domains": ["mock"],
        "trials": 3,
    }
    return RunConfig(run_id=run_id, **{**fields, **overrides})


def make_spec(run_id="r1", task_id="t1", index=0):
    unit = TaskUnit(
        run_id=run_id,
        agent_model="agent-m",
        user_model="user-m",
        domain="mock",
        task_id=task_id,
        seeds=[11, 22, 33],
    )
    return unit.trial(index)


def conversation(store: Store, trial_id: str) -> list[Message]:
    """A trial's recorded conversation: every step's messages, in step order."""
    return [m for row in store.steps(trial_id) for m in row.message_list()]


def tasks_with_agent_writes(n: int, *, after_first: bool = False, prefer: tuple[str, ...] = ()) -> list[str]:
    """The first `n` airline tasks of the installed tau2 whose gold actions have a write of
    the agent's (with `after_first`, one after its first action, whose tool no later action
    calls again): the tasks differ between
    26.3 and 1.0.x (1.0.x's 2 and 9 only read). `prefer`red ids come first where they qualify."""
    from passhat.domains.registry import get_domain

    domain = get_domain("airline")
    kinds = domain.tool_kinds()

    def qualifies(task_id: str) -> bool:
        actions = [a for a in domain.task(task_id).gold_actions if a.requestor == "assistant"]
        if not after_first:
            return any(kinds.get(a.name) == "write" for a in actions)
        # and no later action calls the first one's tool: an agent that stops after its
        # first action has then plainly left out the rest (as a review reads it)
        later = actions[1:]
        return any(kinds.get(a.name) == "write" for a in later) and all(a.name != actions[0].name for a in later)

    chosen = [t for t in dict.fromkeys([*prefer, *domain.task_ids()]) if qualifies(t)][:n]
    return [t for t in domain.task_ids() if t in chosen]  # in the domain's order


def first_agent_write(task_id: str) -> str:
    """The name of the first write tool among the agent's gold actions of an airline task."""
    from passhat.domains.registry import get_domain

    domain = get_domain("airline")
    kinds = domain.tool_kinds()
    return next(a.name for a in domain.task(task_id).gold_actions
                if a.requestor == "assistant" and kinds.get(a.name) == "write")
