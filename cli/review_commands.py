"""`passhat review RUN`: an LLM judge reviews a run's finished trials, as a Temporal
workflow (workflows/review.py) served by this process's workers while it is followed.

Killed, the command loses nothing: every judge answer is kept as it arrives, and the
same command again resumes the review where it was. `passhat cancel RUN~review` stops
it."""

from __future__ import annotations

import asyncio
import json
from typing import Optional

import typer

from passhat.cli.common import check_output, err_console, existing_run, fail, one_line_errors, open_store, out_console
from passhat.cli.run_options import UserInputError



@one_line_errors
def review(
    run_id: str = typer.Argument(..., help="Run id."),
    failed: bool = typer.Option(True, "--failed/--all", help="Review the failed trials (default), or every scored trial."),
    task: Optional[list[str]] = typer.Option(None, "--task", help="Only this task (an id, or DOMAIN/ID); repeatable."),
    judge_model: str = typer.Option(..., "--judge-model", help="The judge: a litellm model string (scripted/reviewer offline)."),
    judge_args: Optional[str] = typer.Option(None, "--judge-args", help='litellm args of the judge as a JSON object, e.g. \'{"temperature": 0}\'; no keys (use {"api_key_env": "NAME"}).'),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Start no review once the judge's calls on this run have cost this much (USD)."),
    concurrency: int = typer.Option(8, "--concurrency", help="Reviews in flight at once."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Worker processes; default: the machine's cores."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
) -> None:
    """Review a run's trials with an LLM judge: each error's step, side (agent or user
    simulator), category, severity and quote; durable, resumable, priced."""
    from passhat.activities.review import ReviewRequest
    from passhat.cli.run_config import _model_args, check_model
    from passhat.cli.run_options import check_budget

    check_output(output)
    if concurrency < 1:
        raise UserInputError(f"--concurrency must be at least 1, got {concurrency}")
    if workers is not None and workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {workers}")
    check_budget(max_cost)
    check_model(judge_model, "--judge-model")
    args = _model_args(judge_args, "--judge-args")
    _check_judge_key(judge_model, args)
    store = open_store()
    row = existing_run(store, run_id)
    config = row.run_config()
    req = ReviewRequest(run_id=run_id, judge_model=judge_model, judge_args=args, failed_only=failed,
                        tasks=list(task or []), max_cost=max_cost, concurrency=concurrency, retry=config.retry)
    trials = store.trials(run_id)
    unfinished = sum(t.finished_at is None for t in trials) + max(0, row.total_trials - len(trials))
    if not any(req.wants(t) for t in trials):
        what = "failed scored trial" if failed else "scored trial"
        later = f" yet ({unfinished} trial(s) not finished)" if unfinished else ""
        fail(f"nothing to review: run {run_id} has no {what}" + (" of the tasks given" if task else "") + later
             + ("" if not failed else "; --all reviews the passing ones too"))
    if unfinished:
        err_console.print(f"run {run_id} is not finished: only its finished trials are reviewed ({unfinished} "
                          "not finished); the same command later reviews the rest", highlight=False)
    result = _execute(req, config, workers, output)
    _print(store, result, output)
    if result.get("first_error") or result.get("stopped"):
        raise typer.Exit(1)


def _check_judge_key(model: str, args: dict) -> None:
    from passhat.infra import scripted_provider as scripted
    from passhat.infra.llm import missing_key_variables

    if model.startswith(f"{scripted.PROVIDER}/"):
        return
    missing = missing_key_variables(model, args)
    if missing:
        raise UserInputError(f"{' and '.join(missing)} (for the judge model {model}) is not set in this "
                             'environment; export it, or name the variable that holds the key with '
                             '{"api_key_env": "NAME"} in --judge-args')


def _execute(req, config, workers: int | None, output: str) -> dict:  # noqa: ANN001
    from passhat.cli.execute import forked_workers
    from passhat.cli.worker_processes import default_process_count
    from passhat.domains.plugins import load_plugins

    load_plugins(config.plugins)
    try:
        with forked_workers(config, (workers or default_process_count()) - 1):
            return asyncio.run(_serve_and_follow(req, config, output))
    except KeyboardInterrupt:
        fail(f"interrupted: the review of {req.run_id} keeps what it recorded; the same command continues it", 130)


async def _serve_and_follow(req, config, output: str) -> dict:  # noqa: ANN001
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from temporalio.client import WorkflowFailureError

    from passhat.infra import review_store
    from passhat.infra.temporal_client import connect
    from passhat.workflows.client import RunEnded, start_review
    from passhat.workflows.worker import build_worker

    store = open_store()
    client = await connect()
    key = req.review_key()
    selected = {t.trial_id for t in store.trials(req.run_id) if req.wants(t)}
    from passhat.cli.execute import MAX_CONCURRENT_ACTIVITIES

    async with build_worker(client, store, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                            provider_limits=config.provider_limits, plugins=config.plugins):
        handle = await start_review(client, req, config.task_queue())
        err_console.print(f"reviewing run {req.run_id} with {req.judge_model} as workflow {req.workflow_id()} "
                          f"(`passhat cancel {req.workflow_id()}` stops it)", highlight=False)
        result = asyncio.ensure_future(handle.result())
        progress = Progress(TextColumn("[bold]review"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=err_console, disable=output == "json" and not err_console.is_terminal)
        bar = progress.add_task("review", total=len(selected))

        def look() -> int:
            return sum(r.trial_id in selected for r in review_store.reviews(store, req.run_id, key))

        with progress:
            while not result.done():
                progress.update(bar, completed=await asyncio.to_thread(look))
                await asyncio.wait({result}, timeout=0.5)
            progress.update(bar, completed=await asyncio.to_thread(look))
        try:
            return result.result()
        except WorkflowFailureError as err:
            raise RunEnded(f"the review of {req.run_id} ended unfinished ({err.cause or err}); what it recorded "
                           "is kept, and the same command continues it") from err


def _print(store, result: dict, output: str) -> None:  # noqa: ANN001 - a Store
    from passhat.results.review_report import lines, summary

    data = summary(store, result["run_id"], result["review_key"])
    if output == "json":
        print(json.dumps({"review": result, "summary": data}))
        return
    said = (f"reviewed {result['reviewed']}, not reviewable {result['not_reviewable']}, failed {result['failed']}"
            f" (reviewed before: {result['already']}); judge cost ${result['cost_usd']:.4f}")
    if result["unfinished"]:
        said += f"; {result['unfinished']} trial(s) of the run not finished were not reviewed"
    out_console.print(said, highlight=False, markup=False)
    if result["stopped"]:
        out_console.print(f"stopped: {result['stopped']}; {result['not_started']} review(s) not started",
                          highlight=False, markup=False)
    if result["first_error"]:
        out_console.print(f"review calls that failed: {result['first_error']}", highlight=False, markup=False)
    if data is not None:
        out_console.print("\n".join(lines(data)), highlight=False, markup=False)
