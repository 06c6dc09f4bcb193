"""Executing a run from the command that started it: this process and the worker
processes it forks serve the run while it is followed with a progress bar; what the run
ended with (not-evaluable trials, a budget stop) is said after its results."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import typer

from passhat.cli.common import (
    SERVER_GONE_EXIT,
    err_console,
    fail,
    interrupted_words,
    open_store,
    out_console,
    server_gone_words,
    starting_run,
    startup_mark,
)
from passhat.cli.run_options import UserInputError

MAX_CONCURRENT_ACTIVITIES = 64  # per worker process


def execute_here(config, *, workers: int | None = None, **kwargs):  # noqa: ANN001, ANN003, ANN201
    """Run `execute`, with this process's worker and `workers - 1` more worker processes
    (default: one per core; none with --detach); Ctrl-C stops them all, so say how to
    carry on. The run's summary, or None when detached."""
    from passhat.cli.worker_processes import default_process_count
    from passhat.domains.plugins import load_plugins

    startup_mark("imported")
    starting_run(config.run_id)  # an interruption says what of it was recorded
    extra = 0 if kwargs.get("detach") else (workers or default_process_count()) - 1
    # Before anything is recorded or forked: a plugin that does not import stops here,
    # and the forked workers inherit the ones that do.
    load_plugins(config.plugins)
    how = (f"`passhat resume {config.run_id}`" if kwargs.get("rounds") is None
           else "the same command again")
    try:
        with forked_workers(config, extra):
            startup_mark("forked")
            return asyncio.run(execute(config, **kwargs))
    except KeyboardInterrupt:
        if kwargs.get("detach"):
            raise
        if kwargs.get("rounds") is not None:  # its rounds are recorded as they run
            fail(f"interrupted: run {config.run_id} is recorded and waits in Temporal, but the "
                 f"worker in this process stopped; {how} continues it", 130)
        fail(interrupted_words(worker_here=True), 130)
    except Exception as err:  # noqa: BLE001 - only the server going away is said here
        from passhat.infra.temporal_client import server_gone

        if not server_gone(err):
            raise
        fail(f"run {config.run_id}: {server_gone_words(err, f'{how} carries on')}", SERVER_GONE_EXIT)


@contextlib.contextmanager
def forked_workers(config, extra: int):  # noqa: ANN001, ANN201 - a RunConfig
    """`extra` worker processes for the run's queues, forked now, before this process has
    an event loop, a client or a thread; a results store that cannot be opened is
    reported first (and closed again: no connection is carried into the children)."""
    from passhat.cli.worker_processes import worker_processes
    from passhat.workflows.worker import preload

    if extra:
        open_store().close()
        preload(config.domains, config.plugins)
    with worker_processes(extra, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                          provider_limits=config.provider_limits, plugins=config.plugins) as pids:
        yield pids


async def execute(config, *, detach: bool, output: str, resume: bool = False,
                  preview: bool = False, yes: bool = False, rounds=None):  # noqa: ANN001, ANN202
    """Start (or attach to, or with `resume` restart) the run's workflow; unless
    detached, serve it with a worker in this process and follow it to its summary.
    With `rounds` (a workflows.rounds.RoundsRequest), the same for a measurement in
    rounds of `config`'s suite: its record instead of a summary."""
    from passhat.workflows.client import start_rounds, start_run
    from passhat.cli.run_config import provider_limit_args
    from passhat.workflows.worker import build_worker
    from passhat.infra.temporal_client import connect, ui_url

    store = open_store()
    client = await connect()
    startup_mark("connected")
    if not detach:  # the embedded server runs now: the next run's command can start warm
        from passhat.cli.warm_start import start_warm_process

        start_warm_process()
    await _ensure_search_attributes(client)
    if preview:
        # A measurement in rounds says how big its first round is (every task).
        _announce(store, rounds.round_config(0, rounds.tasks(), 0.0) if rounds else config, yes=yes)

    async def start():  # noqa: ANN202
        if rounds is not None:
            return await start_rounds(client, store, rounds)
        return await start_run(client, store, config, resume=resume)

    if detach:
        await start()
        ui = ui_url()
        print(config.run_id)
        err_console.print(f"{'run' if rounds is None else rounds.measure.kind} {config.run_id} started; "
                          f"follow it with `passhat status {config.run_id}`"
                          + (f" or in the Temporal UI: {ui}" if ui else ""))
        worker_args = [*(f"--plugin {p}" for p in config.plugins),
                       *provider_limit_args(config.provider_limits)]
        if worker_args:
            # The caps live in the workers that serve the providers' queues, and only
            # workers with the run's plugins poll its queues.
            err_console.print("it is served only by workers started with "
                              f"`passhat worker {' '.join(worker_args)}`", highlight=False)
        return None

    # This process runs one worker; the others are its children (see execute_here). It
    # polls before the run starts, so the run's first workflow task is taken at once.
    async with build_worker(client, store, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                            provider_limits=config.provider_limits, plugins=config.plugins):
        startup_mark("worker started")
        handle = await start()
        startup_mark("run started")
        if rounds is not None:
            from passhat.cli.rounds import follow_rounds

            return await follow_rounds(handle, store, rounds, output)
        return await _follow(handle, store, config, output)


async def _follow(handle, store, config, output: str):  # noqa: ANN001, ANN202
    """Follow the run with a progress bar to its summary."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from passhat.cli.render import not_evaluable_line, progress_fields, progress_with_note, retry_line, workflow_link
    from passhat.infra.temporal_client import ui_url
    from passhat.workflows.client import follow

    ui = ui_url()
    if ui:
        err_console.print(f"Temporal UI: {workflow_link(ui, config.run_id)}", soft_wrap=True)
    # Under the bar: the model calls being retried, if any (a provider answering 500 to
    # every call would otherwise leave the bar still, with no sign of why).
    progress = progress_with_note(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("pass^1 {task.fields[pass1]}  not evaluable {task.fields[not_evaluable]}  "
                   "${task.fields[cost]}  {task.fields[eta]}"),
        TimeElapsedColumn(), console=err_console,
        disable=output == "json" and not err_console.is_terminal,
    )
    # -o json: stdout holds the result's one JSON object and nothing else, whatever a
    # library prints meanwhile.
    with progress, contextlib.redirect_stdout(sys.stderr) if output == "json" else contextlib.nullcontext():
        bar = progress.add_task(f"run {config.run_id}", total=None, **progress_fields(None, None))

        def update(p, eta_s) -> None:  # noqa: ANN001 - a store.RunProgress
            progress.update(bar, completed=p.done, total=p.total, **progress_fields(p, eta_s))
            progress.note = retry_line(p)

        def not_evaluable(row) -> None:  # noqa: ANN001 - a store.TrialRow
            progress.console.print(not_evaluable_line(row), highlight=False, markup=False, soft_wrap=True)

        return await follow(handle, store, config.run_id, update, on_not_evaluable=not_evaluable)


def _announce(store, config, *, yes: bool) -> None:  # noqa: ANN001 - a Store, a RunConfig
    """Before a new run starts (nothing is recorded yet): its size on stderr and, for a
    big run on a terminal without --yes, a question. A run that exists is attached to."""
    from typer.exceptions import Abort

    from passhat.activities.results import check_run
    from passhat.cli.preview import describe, needs_confirmation, run_size

    if check_run(store, config).stored is not None:
        return
    size = run_size(config)
    err_console.print(describe(config, size), highlight=False, markup=False)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if needs_confirmation(size, yes=yes, interactive=interactive):
        try:
            go = typer.confirm(f"Start {size.conversations:,} conversations?", default=False, err=True)
        except Abort:
            go = False
        if not go:
            fail(f"not started: nothing of run {config.run_id} was recorded", 1)


async def _ensure_search_attributes(client) -> None:  # noqa: ANN001
    """Trial workflows carry passhat's search attributes; a cluster must know them."""
    from passhat.infra import search_attributes, settings

    if settings.temporal_address() is None:
        return  # the embedded server registers them when it starts
    missing = [k.name for k in search_attributes.ALL
               if k.name not in await search_attributes.registered(client, client.namespace)]
    if missing:
        try:
            await search_attributes.register(client, client.namespace)
        except Exception as err:
            raise UserInputError(
                f"the Temporal cluster lacks passhat's search attributes {', '.join(missing)} and "
                f"registering them failed ({err}); ask an operator to run "
                "`passhat search-attributes register` against it"
            )


def print_outcome(summary, output: str) -> None:  # noqa: ANN001 - a RunSummary or None
    """Print a finished run's results; exit 1 when some trials could not be evaluated or
    the budget stopped it."""
    if summary is None:
        return
    from passhat.cli.render import print_summary, workflow_link
    from passhat.infra.temporal_client import ui_url

    print_summary(summary, output, out_console)
    if output == "table" and ui_url():
        out_console.print(f"Temporal UI: {workflow_link(ui_url(), summary.run_id)}", soft_wrap=True)
    over_budget = _budget_stop(summary.run_id)
    if over_budget:
        err_console.print(over_budget, highlight=False)
    missing = sum(r.trials - r.evaluable for r in summary.results)
    if missing:
        err_console.print(
            f"[bold yellow]{missing} trial(s) not evaluable[/] (infrastructure or provider errors; "
            f"left out of pass^k). `passhat trials {summary.run_id} --failed` shows why; fix the "
            f"cause and run `passhat resume {summary.run_id}`."
        )
    if missing or over_budget:
        raise typer.Exit(1)


def _budget_stop(run_id: str) -> str | None:
    """What to say about a run that stopped at its budget; None for any other run."""
    from passhat.outcomes import RUN_BUDGET_EXHAUSTED

    store = open_store()
    row = store.get_run(run_id)
    if row is None or row.status != RUN_BUDGET_EXHAUSTED:
        return None
    started = len(store.trials(run_id))
    return (
        f"[bold yellow]budget reached:[/] run {run_id} recorded {store.run_cost(run_id):.4g} USD of its "
        f"{row.run_config().max_cost:g} USD budget and started no more conversations "
        f"({started} of {row.total_trials} trials started); `passhat resume {run_id} --max-cost USD` "
        "continues it with a new budget."
    )
