"""`passhat import`: tau2 Results files and tau-bench v1 result files recorded as one
imported run, which report, trials, show and export work on.

Every file is read and checked first, and the run is recorded in one transaction, so a
mistake (a ResultsError, one line) leaves the store as it was. The run's fingerprint is
the files' contents: importing the same files again changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from passhat import metrics
from passhat.contracts import DEFAULT_AGENT, RUN_ID_PATTERN, RUN_ID_RULE, RunConfig, trial_workflow_id
from passhat.outcomes import TRIAL_SCORED, is_success
from passhat.domains.input_files import read_bytes
from passhat.results.reading import IS_A_DIRECTORY, read_results_file
from passhat.results.records import ResultsError


@dataclass
class Imported:
    run_id: str
    files: int
    trials: int = 0
    tasks: int = 0
    already: bool = False  # the same files were imported before, as run_id
    summary: list[str] = field(default_factory=list)  # "MODEL on DOMAIN" per file


def import_files(
    store,  # noqa: ANN001 - a Store
    paths: list[str],
    *,
    run_id: str | None = None,
    domain: str | None = None,
    agent_model: str | None = None,
    user_model: str | None = None,
    plugins: list[str] | None = None,
) -> Imported:
    """Record tau2 results files and tau-bench v1 result files as one imported run.
    `plugins` (imported by the caller) registered the files' domains where they are not
    tau2's own; the run records them, so report and export import them again."""
    if not paths:
        raise ResultsError("give at least one results file")
    if run_id is not None and not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise ResultsError(f"--run-id '{run_id}' {RUN_ID_RULE}")
    digests: dict[str, str] = {}
    for path in paths:
        digest = _digest(path)
        if digest in digests:
            raise ResultsError(f"{path} holds the same results as {digests[digest]}; give each file once")
        digests[digest] = path
    combined = hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()
    fingerprint = f"imported:{combined}"
    before = store.runs_with_fingerprint(fingerprint)
    if before:
        return Imported(run_id=before[0].run_id, files=len(paths), already=True)
    run_id = run_id or f"import-{combined[:12]}"
    if store.get_run(run_id) is not None:
        raise ResultsError(f"run {run_id} already exists in the results store; choose another --run-id")

    files = [
        read_results_file(path, domain=domain, agent_model=agent_model, user_model=user_model)
        for path in paths
    ]
    if any(f.format == "tau2" for f in files) and (agent_model or user_model):
        raise ResultsError(
            "--agent-model and --user-model are for tau-bench files; a tau2 results file names its models"
        )
    config = _merged_config(run_id, files).model_copy(update={"plugins": list(plugins or [])})
    trials, steps, outcomes = [], [], []
    for f in files:
        for record in f.records:
            trial_id = trial_workflow_id(run_id, f.agent_model, f.domain, record.task_id, record.trial_index)
            trials.append(_trial_values(trial_id, f, record))
            steps.extend(_step_values(trial_id, s) for s in record.steps)
        for task_id in f.task_ids:
            rewards = [
                r.reward for r in f.records
                if r.task_id == task_id and r.status == TRIAL_SCORED and r.reward is not None
            ]
            unit = SimpleNamespace(
                run_id=run_id, agent_model=f.agent_model, user_model=f.user_model,
                domain=f.domain, task_id=task_id,
            )
            outcomes.append(metrics.task_outcome(unit, rewards, config.trials))
    source = {
        "imported_at": datetime.now(UTC).isoformat(),
        "files": [
            {
                "path": str(Path(f.path).absolute()),
                "format": f.format,
                "sha256": digest,
                "agent_model": f.agent_model,
                "domain": f.domain,
                "trials": len(f.records),
            }
            for f, digest in zip(files, digests)
        ],
    }
    if not store.import_run(config, fingerprint, source, trials, steps, outcomes):
        raise ResultsError(f"run {run_id} already exists in the results store; choose another --run-id")
    return Imported(
        run_id=run_id,
        files=len(files),
        trials=len(trials),
        tasks=sum(len(f.task_ids) for f in files),
        summary=[f"{f.agent_model} on {f.domain} ({f.format})" for f in files],
    )


def _merged_config(run_id: str, files) -> RunConfig:  # noqa: ANN001 - ResultsFiles
    """One RunConfig for all files: a run has one user model, one number of trials, one
    seed and one set of limits, and one set of arguments per agent model (a sweep gives
    each model its own, so passhat's export of one differs there from file to file)."""
    first = files[0]
    for other in files[1:]:
        for what, attr in (
            ("user model", "user_model"), ("user model arguments", "user_args"),
            ("number of trials", "trials"), ("seed", "seed"), ("max steps", "max_steps"),
            ("max errors", "max_errors"),
        ):
            a, b = getattr(first, attr), getattr(other, attr)
            if a != b:
                raise ResultsError(
                    f"{first.path} and {other.path} differ in their {what} ({a!r} vs {b!r}); "
                    "a passhat run has one: import them separately"
                )
    pairs: dict[tuple[str, str], str] = {}
    model_args: dict[str, Any] = {}
    for f in files:
        seen = model_args.setdefault(f.agent_model, (f.path, f.agent_args))
        if seen[1] != f.agent_args:
            raise ResultsError(
                f"{seen[0]} and {f.path} give agent model {f.agent_model} different arguments "
                f"({seen[1]!r} vs {f.agent_args!r}); a passhat run has one set per model: "
                "import them separately"
            )
        key = (f.agent_model, f.domain)
        if key in pairs:
            raise ResultsError(
                f"{pairs[key]} and {f.path} both hold {f.agent_model} on {f.domain}; import them separately"
            )
        pairs[key] = f.path
    per_model = {model: args for model, (_, args) in model_args.items()}
    task_ids: dict[str, list[str]] = {}
    for f in files:
        task_ids[f.domain] = list(dict.fromkeys(task_ids.get(f.domain, []) + f.task_ids))
    return RunConfig(
        run_id=run_id,
        agent_models=list(dict.fromkeys(f.agent_model for f in files)),
        domains=list(task_ids),
        task_ids=task_ids,
        trials=first.trials,
        seed=first.seed,
        user_model=first.user_model,
        agent_args=first.agent_args,
        # Only when the models' args differ: a run whose models share theirs has one.
        agent_model_args=per_model if any(a != first.agent_args for a in per_model.values()) else {},
        user_args=first.user_args,
        max_steps=first.max_steps,
        max_errors=first.max_errors,
        # Named by passhat's own export: kept when every file names the same.
        tau2_version=_same(f.tau2_version for f in files),
        tau2_data=_same(f.tau2_data for f in files),
        **_agent(files),
    )


def _agent(files) -> dict[str, Any]:  # noqa: ANN001 - ResultsFiles
    """The run's agent, as the files name it (tau2's agent_info.implementation; a
    tau-bench file names none): one agent for a run, with the parts of its identity
    when passhat's export wrote them and every file agrees on them."""
    named = [f for f in files if f.agent is not None]
    agents = {f.agent for f in named}
    if len(agents) > 1:
        a, b = (next(f for f in named if f.agent == name) for name in sorted(agents)[:2])
        raise ResultsError(f"{a.path} and {b.path} hold different agents ({a.agent} and {b.agent}); "
                           "a passhat run has one: import them separately")
    name = agents.pop() if agents else DEFAULT_AGENT
    parts = _same(json.dumps(f.agent_parts, sort_keys=True) for f in files)
    return {
        "agent": None if name == DEFAULT_AGENT else name,
        "agent_digests": None if parts in (None, "null") else {name: json.loads(parts)},
    }


def _same(values) -> Any:  # noqa: ANN001 - an iterable
    """The one value all give, or None."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _trial_values(trial_id: str, f, record) -> dict[str, Any]:  # noqa: ANN001 - ResultsFile, TrialRecord
    scored = record.status == TRIAL_SCORED
    return {
        "trial_id": trial_id,
        "agent_model": f.agent_model,
        "user_model": f.user_model,
        "domain": f.domain,
        "task_id": record.task_id,
        "trial_index": record.trial_index,
        "seed": record.seed,
        "status": record.status,
        "reward": record.reward,
        "success": is_success(record.reward) if scored and record.reward is not None else None,
        "reward_info": record.reward_info,
        "termination_reason": record.termination_reason,
        "error": record.error,
        "error_class": record.error_class,
        "error_side": record.error_side,
        "error_at": record.error_at,
        "n_steps": max(0, len(record.steps) - 1),
        "input_tokens": record.total_tokens()[0],
        "output_tokens": record.total_tokens()[1],
        "cost": record.total_cost(),
        "started_at": record.started_at,
        "finished_at": record.finished_at or record.started_at,
    }


def _step_values(trial_id: str, step) -> dict[str, Any]:  # noqa: ANN001 - a StepRecord
    return {
        "trial_id": trial_id,
        "step": step.step,
        "role": step.role,
        "messages": step.messages,
        "model": step.model,
        "input_tokens": step.input_tokens,
        "output_tokens": step.output_tokens,
        "cost": step.cost,
        "created_at": step.created_at,
        "failure_class": step.failure_class,
        "failure": step.failure,
        "failure_at": step.failure_at,
    }


def _digest(path: str) -> str:
    return hashlib.sha256(read_bytes(path, path, error=ResultsError, on_directory=IS_A_DIRECTORY)).hexdigest()
