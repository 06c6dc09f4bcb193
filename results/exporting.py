"""`passhat export`: a run of the results store written as tau2 Results files (one per
agent model and domain) or as passhat's JSON lines.

Every mistake is a ResultsError (one line) raised before anything is written: every
file is built and validated first, and only then moved into place.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from passhat.contracts import RunConfig
from passhat.outcomes import RUN_IMPORTED
from passhat.results.jsonl import jsonl_line
from passhat.results.records import ResultsError, ResultsFileError, trial_record
from passhat.results.report import tau2_words
from passhat.results.tau2_writer import to_tau2_results, written_to_tau2
from passhat.results.tau_bench import TAU_BENCH_PREFIX
from passhat.run_identity import agent_identity

EXPORT_FORMATS = ("tau2", "jsonl")
# A run in these states has all the trials it will ever have.
_FINISHED = ("completed", "imported")


@dataclass
class Exported:
    paths: list[Path]
    trials: int  # trials written
    left_out: int = 0  # trials a tau2 file cannot hold (unfinished, or not evaluable but not given up on)
    partial: bool = False
    tau2: str = ""  # the run's tau2 version and data digest, in words


def export_run(store, run_id: str, fmt: str, out_dir: str, *, partial: bool = False) -> Exported:  # noqa: ANN001 - a Store
    """Write run `run_id` to `out_dir` as tau2 Results files (one per agent model and
    domain) or as one JSON-lines file (one trial per line)."""
    if fmt not in EXPORT_FORMATS:
        raise ResultsError(f"--format must be {' or '.join(EXPORT_FORMATS)}, not '{fmt}'")
    run = store.get_run(run_id)
    config = run.run_config()
    progress = store.run_progress(run_id)
    done, total = progress.done, progress.total
    unfinished = run.status not in _FINISHED
    if unfinished and not partial:
        raise ResultsError(
            f"run {run_id} is {run.status} ({done}/{total} trials finished), so an export "
            f"would be incomplete; let it finish (`passhat resume {run_id}` for a stopped "
            "run), or export the finished trials now with --partial (files named *.partial.*)"
        )
    partial = partial and unfinished
    rows = store.trials(run_id)
    steps = store.run_steps(run_id)
    imported = run.status == RUN_IMPORTED
    if fmt == "tau2":
        kept = {domain: row.tasks() for domain, row in store.run_tasks(run_id).items()}
        from passhat.results.review_report import tau2_reviews

        files, written = _tau2_files(config, rows, steps, partial, kept, imported, tau2_reviews(store, run_id))
    else:
        from passhat.results.review_report import run_reviews_json

        files, written = _jsonl_files(config, rows, steps, partial, run_reviews_json(store, run_id))
    paths = _write_all(Path(out_dir), files)
    return Exported(paths=paths, trials=written, left_out=len(rows) - written, partial=partial,
                    tau2=tau2_words(config.tau2_version, config.tau2_data, imported))


def _tau2_files(config: RunConfig, rows, steps, partial: bool,  # noqa: ANN001
                kept: dict[str, list], imported: bool, reviews: dict[str, dict[str, str]]) -> tuple[dict[str, str], int]:
    for domain in config.domains:
        if domain.startswith(TAU_BENCH_PREFIX):
            raise ResultsError(
                f"run {config.run_id} holds {domain} results from a tau-bench v1 file: "
                "their tasks are tau-bench's, not tau2's, so they cannot be written in "
                "tau2's schema; use --format jsonl"
            )
    files: dict[str, str] = {}
    written = 0
    # A file per agent model, domain and user: tau2's file holds one user's trials (a
    # persona's go to a file of their own, named with it: docs/personas.md).
    for model, persona, domain in ((m, p, d) for m in config.agent_models for p in config.personas()
                                   for d in config.domains):
        records = [
            trial_record(r, steps.get(r.trial_id, []))
            for r in rows
            if r.agent_model == model and r.domain == domain and r.user_persona == persona
            and written_to_tau2(r.status, r.termination_reason)
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
                # tau2's Info has no field for them: its free-text version field
                # carries the tau2 and data a run was made with.
                git_commit=f"{_passhat_version()}; "
                           + tau2_words(config.tau2_version, config.tau2_data, imported),
                kept_tasks=kept.get(domain),
                reviews=reviews,
                agent=agent_identity(config, model),
            )
        except ResultsFileError as err:
            raise ResultsError(f"cannot export run {config.run_id}: {err}") from None
        label = model if persona is None else f"{model}__{persona}"
        files[_file_name(files, config.run_id, label, domain, partial, ".json")] = text
        written += len(records)
    return files, written


def _jsonl_files(config: RunConfig, rows, steps, partial: bool,  # noqa: ANN001
                 reviews: dict[str, list[dict]]) -> tuple[dict[str, str], int]:
    # Every line says which tau2 (and data) its trial was made with, and its domain's digest.
    tau2 = {"tau2_version": config.tau2_version, "tau2_data": config.tau2_data}
    digests = config.domain_digests or {}
    # Each trial's LLM reviews (`passhat review`), by every judge that reviewed it.
    agents = {model: agent_identity(config, model) for model in config.agent_models}
    lines = [json.dumps({**jsonl_line(config.run_id, r, steps.get(r.trial_id, []), digests.get(r.domain),
                                      agents.get(r.agent_model)), **tau2,
                         "reviews": reviews.get(r.trial_id, [])})
             for r in rows]
    name = f"{_slug(config.run_id)}{'.partial' if partial else ''}.jsonl"
    return {name: "".join(line + "\n" for line in lines)}, len(rows)


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
        raise ResultsError(f"cannot create output directory {out_dir}: {err.strerror or err}") from None
    if not out_dir.is_dir():
        raise ResultsError(f"output directory {out_dir} is not a directory")
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
            raise ResultsError(f"cannot write {target}: {err.strerror or err}") from None
        paths.append(target)
    return paths


def _passhat_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"passhat {version('passhat')}"
    except PackageNotFoundError:
        return "passhat"
