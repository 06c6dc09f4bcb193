"""passhat's own JSON-lines format: one trial per line, with its conversation and score
details (the schema is in the README). `passhat export --format jsonl` writes it, and
`passhat show -o json` and `passhat trials -o json` print the same fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from passhat.results.records import aware
from passhat.run_identity import AgentIdentity


def jsonl_line(run_id: str, row, steps, domain_digest: dict[str, str] | None = None,  # noqa: ANN001 - a TrialRow, its StepRows
               agent: AgentIdentity | None = None) -> dict[str, Any]:
    """One trial in the JSON-lines export, with the digest of its domain as the run
    measured it (RunConfig.domain_digests; None for a run recorded before them) and the
    agent that played it (run_identity.agent_identity; None: not known here)."""
    return {
        "run_id": run_id,
        "trial_id": row.trial_id,
        "agent": None if agent is None else agent.model_dump(),
        "agent_model": row.agent_model,
        "user_model": row.user_model,
        # The user persona the trial ran under (docs/personas.md), only where there is one.
        **({"user_persona": row.user_persona} if getattr(row, "user_persona", None) else {}),
        "domain": row.domain,
        "domain_digest": domain_digest,
        "task_id": row.task_id,
        "trial": row.trial_index,
        "seed": row.seed,
        "status": row.status,
        "reward": row.reward,
        "termination_reason": row.termination_reason,
        "error_class": row.error_class,
        "error_side": getattr(row, "error_side", None),
        "error": row.error,
        "error_at": getattr(row, "error_at", None),
        "cost": row.cost,
        "tokens": {"input": row.input_tokens, "output": row.output_tokens},
        "started_at": _iso(row.started_at),
        "finished_at": _iso(row.finished_at),
        "reward_info": row.reward_info(),
        "messages": [
            {"step": step.step, **message.model_dump(mode="json")}
            for step in steps
            for message in step.message_list()
        ],
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else aware(value).isoformat()
