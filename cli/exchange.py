"""`passhat export` and `passhat import`: results files in tau2's schema, tau-bench v1
result lists and passhat's own JSON lines, to and from the results store.

The conversions live in passhat.domains.tau2_results; this module reads the store,
checks what the user asked for, and writes files or records one imported run. Every
mistake is a UserInputError (one line, exit 2) raised before anything is written: an
export builds and validates every file first and then moves them into place; an import
reads and checks every file first and then records the run in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from passhat.cli.run_options import UserInputError
from passhat.contracts import TRIAL_SCORED, RunConfig, is_success, trial_workflow_id

EXPORT_FORMATS = ("tau2", "jsonl")
# A run in these states has all the trials it will ever have.
_FINISHED = ("completed", "imported")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


# ---------------------------------------------------------------------------------------
# export


@dataclass
class Exported:
    paths: list[Path]
    trials: int  # trials written
    left_out: int = 0  # trials a tau2 file cannot hold (not evaluable or unfinished)
    partial: bool = False


def export_run(store, run_id: str, fmt: str, out_dir: str, *, partial: bool = False) -> Exported:  # noqa: ANN001 - a Store
    """Write run `run_id` to `out_dir` as tau2 Results files (one per agent model and
    domain) or as one JSON-lines file (one trial per line)."""
    if fmt not in EXPORT_FORMATS:
        raise UserInputError(f"--format must be {' or '.join(EXPORT_FORMATS)}, not '{fmt}'")
    run = store.get_run(run_id)
    config = run.run_config()
    done, total, _ = store.progress(run_id)
    unfinished = run.status not in _FINISHED
    if unfinished and not partial:
        raise UserInputError(
            f"run {run_id} is {run.status} ({done}/{total} trials finished), so an export "
            f"would be incomplete; let it finish (`passhat resume {run_id}` for a stopped "
            "run), or export the finished trials now with --partial (files named *.partial.*)"
        )
    partial = partial and unfinished
    rows = store.trials(run_id)
    steps = store.run_steps(run_id)
    if fmt == "tau2":
        files, written = _tau2_files(config, rows, steps, partial)
    else:
        files, written = _jsonl_files(config, rows, steps, partial)
    paths = _write_all(Path(out_dir), files)
    return Exported(paths=paths, trials=written, left_out=len(rows) - written, partial=partial)


def _tau2_files(config: RunConfig, rows, steps, partial: bool) -> tuple[dict[str, str], int]:  # noqa: ANN001
    from passhat.domains.tau2_results import (
        TAU_BENCH_PREFIX,
        ResultsFileError,
        to_tau2_results,
    )

    for domain in config.domains:
        if domain.startswith(TAU_BENCH_PREFIX):
            raise UserInputError(
                f"run {config.run_id} holds {domain} results from a tau-bench v1 file: "
                "their tasks are tau-bench's, not tau2's, so they cannot be written in "
                "tau2's schema; use --format jsonl"
            )
    files: dict[str, str] = {}
    written = 0
    for model in config.agent_models:
        for domain in config.domains:
            records = [
                _record(r, steps.get(r.trial_id, []))
                for r in rows
                if r.agent_model == model and r.domain == domain and r.status == TRIAL_SCORED
            ]
            try:
                text = to_tau2_results(
                    domain=domain,
                    agent_model=model,
                    user_model=config.user_model,
                    agent_args=config.agent_args_for(model),
                    user_args=config.user_args,
                    task_ids=config.task_ids.get(domain, []),
                    trials=config.trials,
                    seed=config.seed,
                    max_steps=config.max_steps,
                    max_errors=config.max_errors,
                    records=records,
                    git_commit=_passhat_version(),
                )
            except ResultsFileError as err:
                raise UserInputError(f"cannot export run {config.run_id}: {err}") from None
            files[_file_name(files, config.run_id, model, domain, partial, ".json")] = text
            written += len(records)
    return files, written


def _jsonl_files(config: RunConfig, rows, steps, partial: bool) -> tuple[dict[str, str], int]:  # noqa: ANN001
    lines = [json.dumps(jsonl_line(config.run_id, r, steps.get(r.trial_id, []))) for r in rows]
    name = f"{_slug(config.run_id)}{'.partial' if partial else ''}.jsonl"
    return {name: "".join(line + "\n" for line in lines)}, len(rows)


def jsonl_line(run_id: str, row, steps) -> dict[str, Any]:  # noqa: ANN001 - a TrialRow, its StepRows
    """One trial in the JSON-lines export (its schema is in the README)."""
    return {
        "run_id": run_id,
        "trial_id": row.trial_id,
        "agent_model": row.agent_model,
        "user_model": row.user_model,
        "domain": row.domain,
        "task_id": row.task_id,
        "trial": row.trial_index,
        "seed": row.seed,
        "status": row.status,
        "reward": row.reward,
        "termination_reason": row.termination_reason,
        "error_class": row.error_class,
        "error_side": getattr(row, "error_side", None),
        "error": row.error,
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


def _record(row, steps):  # noqa: ANN001, ANN202 - a TrialRow, its StepRows -> TrialRecord
    from passhat.domains.tau2_results import StepRecord, TrialRecord

    return TrialRecord(
        trial_id=row.trial_id,
        task_id=row.task_id,
        trial_index=row.trial_index,
        seed=row.seed,
        status=row.status,
        reward=row.reward,
        reward_info=row.reward_info(),
        termination_reason=row.termination_reason,
        error=row.error,
        error_class=row.error_class,
        error_side=getattr(row, "error_side", None),
        started_at=row.started_at,
        finished_at=row.finished_at,
        cost=row.cost,
        steps=[
            StepRecord(
                step=s.step,
                role=s.role,
                messages=s.message_list(),
                model=s.model,
                input_tokens=s.input_tokens,
                output_tokens=s.output_tokens,
                cost=s.cost,
                created_at=s.created_at,
                failure_class=getattr(s, "failure_class", None),
                failure=getattr(s, "failure", None),
            )
            for s in steps
        ],
    )


def _file_name(taken: dict[str, str], run_id: str, model: str, domain: str, partial: bool, ext: str) -> str:
    base, _, path = domain.partition("@")
    label = f"{base}-{Path(path).stem}" if path else base
    stem = f"{_slug(run_id)}__{_slug(model)}__{_slug(label)}"
    suffix = (".partial" if partial else "") + ext
    name, n = stem + suffix, 2
    while name in taken:  # two models whose names differ only in characters slugged away
        name, n = f"{stem}-{n}{suffix}", n + 1
    return name


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def _write_all(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write every file (each through a temporary file and a rename, so a reader never
    sees half a file) only once all of them have been built."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserInputError(f"cannot create output directory {out_dir}: {err.strerror or err}") from None
    if not out_dir.is_dir():
        raise UserInputError(f"output directory {out_dir} is not a directory")
    umask = os.umask(0)
    os.umask(umask)
    paths = []
    for name, text in files.items():
        target = out_dir / name
        try:
            fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the file from others
            os.replace(tmp, target)
        except OSError as err:
            raise UserInputError(f"cannot write {target}: {err.strerror or err}") from None
        paths.append(target)
    return paths


def _passhat_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"passhat {version('passhat')}"
    except PackageNotFoundError:
        return "passhat"


# ---------------------------------------------------------------------------------------
# import


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
) -> Imported:
    """Record tau2 results files and tau-bench v1 result files as one imported run."""
    from passhat.domains.tau2_results import ResultsFileError, read_results_file

    if not paths:
        raise UserInputError("give at least one results file")
    if run_id is not None and not _RUN_ID.fullmatch(run_id):
        raise UserInputError(
            f"--run-id '{run_id}' must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    digests: dict[str, str] = {}
    for path in paths:
        digest = _digest(path)
        if digest in digests:
            raise UserInputError(f"{path} holds the same results as {digests[digest]}; give each file once")
        digests[digest] = path
    combined = hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()
    fingerprint = f"imported:{combined}"
    before = store.runs_with_fingerprint(fingerprint)
    if before:
        return Imported(run_id=before[0].run_id, files=len(paths), already=True)
    run_id = run_id or f"import-{combined[:12]}"
    if store.get_run(run_id) is not None:
        raise UserInputError(f"run {run_id} already exists in the results store; choose another --run-id")

    files = []
    for path in paths:
        try:
            files.append(read_results_file(
                path, domain=domain, agent_model=agent_model, user_model=user_model
            ))
        except ResultsFileError as err:
            raise UserInputError(str(err)) from None
    if any(f.format == "tau2" for f in files) and (agent_model or user_model):
        raise UserInputError(
            "--agent-model and --user-model are for tau-bench files; a tau2 results file names its models"
        )
    config = _merged_config(run_id, files)
    trials, steps, outcomes = [], [], []
    from passhat import metrics

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
        raise UserInputError(f"run {run_id} already exists in the results store; choose another --run-id")
    return Imported(
        run_id=run_id,
        files=len(files),
        trials=len(trials),
        tasks=sum(len(f.task_ids) for f in files),
        summary=[f"{f.agent_model} on {f.domain} ({f.format})" for f in files],
    )


def _merged_config(run_id: str, files) -> RunConfig:  # noqa: ANN001 - ResultsFiles
    """One RunConfig for all files: a run has one user model, one set of model
    arguments, one number of trials, one seed and one set of limits."""
    first = files[0]
    for other in files[1:]:
        for what, attr in (
            ("user model", "user_model"), ("agent model arguments", "agent_args"),
            ("user model arguments", "user_args"), ("number of trials", "trials"),
            ("seed", "seed"), ("max steps", "max_steps"), ("max errors", "max_errors"),
        ):
            a, b = getattr(first, attr), getattr(other, attr)
            if a != b:
                raise UserInputError(
                    f"{first.path} and {other.path} differ in their {what} ({a!r} vs {b!r}); "
                    "a passhat run has one: import them separately"
                )
    pairs: dict[tuple[str, str], str] = {}
    for f in files:
        key = (f.agent_model, f.domain)
        if key in pairs:
            raise UserInputError(
                f"{pairs[key]} and {f.path} both hold {f.agent_model} on {f.domain}; import them separately"
            )
        pairs[key] = f.path
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
        user_args=first.user_args,
        max_steps=first.max_steps,
        max_errors=first.max_errors,
    )


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
        "n_steps": max(0, len(record.steps) - 1),
        "input_tokens": sum(s.input_tokens for s in record.steps),
        "output_tokens": sum(s.output_tokens for s in record.steps),
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
    }


def _digest(path: str) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except FileNotFoundError:
        raise UserInputError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise UserInputError(f"{path} is a directory; give the results files in it") from None
    except OSError as err:
        raise UserInputError(f"cannot read {path}: {err.strerror or err}") from None
    return h.hexdigest()


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()
