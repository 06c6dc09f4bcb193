"""The passhat command line. Commands are thin: validation and orchestration live in
passhat.cli.launch, rendering in passhat.cli.render; heavy imports (tau2, litellm, temporalio workers)
happen inside commands so `passhat --help` stays fast."""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import contextmanager
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
# typer vendors click (pinned in pyproject); these are the errors its parser raises.
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from passhat.contracts import DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS, DEFAULT_SEED, RetryConfig

_RETRY = RetryConfig()  # the defaults the options show
MAX_CONCURRENT_ACTIVITIES = 64  # per worker process


@contextmanager
def _usage_errors_as_one_line():  # noqa: ANN202
    try:
        yield
    except NoArgsIsHelpError:
        raise  # `passhat` alone prints the help
    except UsageError as err:
        where = f" — see `{err.ctx.command_path} --help`" if err.ctx else ""
        fail(f"{err.format_message()}{where}", err.exit_code)


class _OneLineUsageErrors(TyperGroup):
    """Usage mistakes (a missing or unknown option, a value of the wrong type) reported
    like every other passhat error, one "error:" line on stderr, instead of click's
    usage box. Subcommands are parsed inside the group's invoke, so both are wrapped."""

    def make_context(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        with _usage_errors_as_one_line():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):  # noqa: ANN001, ANN201
        with _usage_errors_as_one_line():
            return super().invoke(ctx)


app = typer.Typer(
    cls=_OneLineUsageErrors,
    help="Durable pass^k evaluation of tool-using AI agents on tau2 benchmarks, run as Temporal workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
server_app = typer.Typer(help="Manage the embedded Temporal dev server (database and web UI under PASSHAT_HOME).", no_args_is_help=True)
app.add_typer(server_app, name="server")

# Piped output keeps whole table rows rather than wrapping at rich's 80-column default.
err_console = Console(stderr=True, soft_wrap=True)
out_console = Console(width=None if sys.stdout.isatty() else 200)

DEMO_MODELS = ["scripted/oracle", "scripted/noisy-0.7"]


def fail(message: str, code: int = 2) -> None:
    # escape: messages quote user input and file paths, which may contain [brackets].
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _guard(fn):  # noqa: ANN001, ANN202
    """Run a command body, turning known failures into one clear line and an exit code."""
    from passhat.cli.launch import RunEnded, UserInputError
    from passhat.infra.store import ConfigMismatchError, StoreError
    from passhat.infra.temporal_server import TemporalUnreachable, TemporalServerError

    try:
        return fn()
    except TemporalServerError as err:
        fail(str(err))  # multi-line on purpose: it ends with the server's log excerpt
    except (UserInputError, ConfigMismatchError, StoreError, TemporalUnreachable, RunEnded) as err:
        # One line: database drivers (psycopg) wrap and indent their messages.
        fail(" ".join(str(err).split()))
    except KeyboardInterrupt:
        fail("interrupted: the run goes on in Temporal; `passhat status RUN` shows it", 130)


def existing_run(store, run_id: str):  # noqa: ANN001, ANN201 - a Store, its RunRow
    """The run's record, or one clear line saying there is no such run."""
    row = store.get_run(run_id)
    if row is None:
        fail(f"no run '{run_id}' in the results store ({store.safe_url}); `passhat runs` lists them")
    return row


def _refuse_imported(row, action: str) -> None:  # noqa: ANN001 - a RunRow
    """An imported run (`passhat import`) has no workflows: nothing to resume or cancel."""
    from passhat.infra.store import RUN_IMPORTED

    if row.status == RUN_IMPORTED:
        fail(f"run {row.run_id} is imported from results files: it has no workflows and "
             f"nothing to {action}")


@app.command()
def run(
    domain: list[str] = typer.Option(..., "--domain", "-d", help="Domain to evaluate (repeat for several): airline, retail, telecom, mock."),
    agent_model: list[str] = typer.Option(..., "--agent-model", "-m", help="litellm model string for the agent (repeat for a sweep), e.g. openai/gpt-4.1 or scripted/oracle."),
    user_model: str = typer.Option(..., "--user-model", "-u", help="litellm model string for the user simulator."),
    task: list[str] = typer.Option([], "--task", "-t", help="Task id to run (repeat); default: every task of the domain."),
    task_file: Optional[str] = typer.Option(None, "--task-file", help="JSON list of your own tasks in tau2's format, run with the one --domain's tools and policy."),
    trials: int = typer.Option(1, "--trials", "-k", help="Independent trials per task (the k of pass^k)."),
    concurrency: int = typer.Option(8, "--concurrency", "-c", help="Conversations in flight at once."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name the run; starting an existing run id with the same configuration attaches to it."),
    agent_args: Optional[str] = typer.Option(None, "--agent-args", help='JSON passed to litellm for agent calls, e.g. \'{"api_base": "http://..."}\'; temperature is 0.0 (tau2 run\'s default) unless it sets one.'),
    user_args: Optional[str] = typer.Option(None, "--user-args", help="JSON passed to litellm for user-simulator calls; temperature 0.0 unless it sets one."),
    max_steps: int = typer.Option(DEFAULT_MAX_STEPS, help="Steps (messages and tool batches) after which a conversation ends as max_steps; tau2 run's default."),
    max_errors: int = typer.Option(DEFAULT_MAX_ERRORS, help="Tool errors in a conversation after which it ends as too_many_errors; tau2 run's default."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="tau2 run's --seed: trial i of every task sends the provider the i-th seed tau2 derives from it."),
    lenient_tool_args: bool = typer.Option(False, "--lenient-tool-args", help="Departure from tau2, recorded on the run and shown in reports: answer tool arguments that are not valid JSON with a tool error instead of ending the conversation as agent_error."),
    retry_for: str = typer.Option(f"{_RETRY.retry_for_s / 60:g}m", "--retry-for", help="How long a model call is retried on transient provider errors (rate limits, 5xx, timeouts, dropped connections), e.g. 90s, 15m, 2h; then the trial is not evaluable."),
    max_attempts: int = typer.Option(_RETRY.max_attempts, help="Attempts per model call within --retry-for; 0 means no limit."),
    model_timeout: float = typer.Option(_RETRY.model_call_timeout_s, help="Seconds one model call may take before it is retried as a timeout."),
    detach: bool = typer.Option(False, "--detach", help="Start the run and return; a `passhat worker` must be running."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Worker processes this command runs for the run (one process uses one core); default: the machine's cores."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
) -> None:
    """Evaluate agent models on tau2 domains and report pass^k."""
    _guard(lambda: _run_command(
        domains=domain, task_ids=task, agent_models=agent_model, user_model=user_model,
        trials=trials, concurrency=concurrency, run_id=run_id, agent_args=agent_args,
        user_args=user_args, max_steps=max_steps, max_errors=max_errors,
        max_attempts=max_attempts, model_timeout=model_timeout, retry_for=retry_for, detach=detach,
        output=output, limit=None, workers=workers,
        task_file=task_file, seed=seed, lenient_tool_args=lenient_tool_args,
    ))


@app.command()
def demo(
    tasks: int = typer.Option(10, help="How many airline tasks to sweep."),
    trials: int = typer.Option(4, "--trials", "-k", help="Trials per task."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """A short offline sweep: scripted/oracle and scripted/noisy-0.7 on airline, k=4, on the embedded Temporal server. No keys needed."""
    _guard(lambda: _run_command(
        domains=["airline"], task_ids=[], agent_models=DEMO_MODELS, user_model="scripted/oracle",
        trials=trials, concurrency=16, run_id=None, agent_args=None, user_args=None,
        detach=False, output=output, limit=tasks,
    ))


def _run_command(*, output: str, detach: bool, limit: int | None, workers: int | None = None, **kwargs) -> None:  # noqa: ANN003
    from passhat.cli.launch import UserInputError, build_config

    if output not in ("table", "json"):
        raise UserInputError(f"--output must be 'table' or 'json', got '{output}'")
    if workers is not None and workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {workers}")
    config = build_config(limit=limit, **kwargs)
    _finish(_execute_here(config, detach=detach, output=output, workers=workers), output)


def _execute_here(config, **kwargs):  # noqa: ANN001, ANN003, ANN202
    """Run _execute; Ctrl-C stops this process's worker, so say how to carry on."""
    try:
        return asyncio.run(_execute(config, **kwargs))
    except KeyboardInterrupt:
        if kwargs.get("detach"):
            raise
        fail(
            f"interrupted: run {config.run_id} is recorded and waits in Temporal, but the "
            f"worker in this process stopped; `passhat resume {config.run_id}` continues it",
            130,
        )


def _finish(summary, output: str) -> None:  # noqa: ANN001
    """Print a finished run's results; exit 1 when some trials could not be evaluated."""
    if summary is None:
        return
    from passhat.cli.render import print_summary

    print_summary(summary, output, out_console)
    if output == "table":
        from passhat.infra.temporal_server import ui_url

        if ui_url():
            out_console.print(f"Temporal UI: {ui_url()}/namespaces/default/workflows/{summary.run_id}", soft_wrap=True)
    missing = sum(r.trials - r.evaluable for r in summary.results)
    if missing:
        err_console.print(
            f"[bold yellow]{missing} trial(s) not evaluable[/] (infrastructure or provider errors; "
            f"left out of pass^k). `passhat trials {summary.run_id} --failed` shows why; fix the "
            f"cause and run `passhat resume {summary.run_id}`."
        )
        raise typer.Exit(1)


async def _execute(config, *, detach: bool, output: str, resume: bool = False, workers: int | None = None):  # noqa: ANN001, ANN202
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from passhat.cli.launch import follow, start_run
    from passhat.infra.store import Store
    from passhat.infra.temporal_server import connect, ui_url
    from passhat.cli.worker import build_worker, default_process_count, worker_processes

    store = Store()
    client = await connect()
    await _ensure_search_attributes(client)
    handle = await start_run(client, store, config, resume=resume)
    ui = ui_url()
    if detach:
        print(config.run_id)
        err_console.print(f"run {config.run_id} started; follow it with `passhat status {config.run_id}`"
                          + (f" or in the Temporal UI: {ui}" if ui else ""))
        return None
    if ui:
        err_console.print(f"Temporal UI: {ui}/namespaces/default/workflows/{config.run_id}")
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("pass^1 {task.fields[pass1]}"), TimeElapsedColumn(), console=err_console,
        disable=output == "json" and not err_console.is_terminal,
    )
    with progress:
        bar = progress.add_task(f"run {config.run_id}", total=None, pass1="-")

        def update(done: int, total: int, pass1: float | None) -> None:
            progress.update(bar, completed=done, total=total, pass1="-" if pass1 is None else f"{pass1:.3f}")

        # This process runs one worker; the others are child processes, which end with it.
        extra = (workers or default_process_count()) - 1
        with worker_processes(extra, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES):
            async with build_worker(client, store, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES):
                summary = await follow(handle, store, config.run_id, update)
    return summary


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
            from passhat.cli.launch import UserInputError

            raise UserInputError(
                f"the Temporal cluster lacks passhat's search attributes {', '.join(missing)} and "
                f"registering them failed ({err}); ask an operator to run "
                "`passhat search-attributes register` against it"
            )


@app.command()
def resume(
    run_id: str = typer.Argument(..., help="Run id."),
    detach: bool = typer.Option(False, "--detach", help="Restart the run and return; a `passhat worker` must be running."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Finish an interrupted run: only unfinished and not-evaluable trials run again;
    scored trials and recorded steps are kept as they are."""

    def body() -> None:
        from passhat.infra.store import Store

        row = existing_run(Store(), run_id)
        _refuse_imported(row, "resume")
        _finish(_execute_here(row.run_config(), detach=detach, output=output, resume=True), output)

    _guard(body)


@app.command()
def cancel(run_id: str = typer.Argument(..., help="Run id.")) -> None:
    """Stop a run cleanly; what it recorded stays, and `passhat resume` can continue it."""

    async def body() -> str:
        from passhat.cli.launch import cancel_run
        from passhat.infra.store import Store
        from passhat.infra.temporal_server import connect

        store = Store()
        _refuse_imported(existing_run(store, run_id), "cancel")
        return await cancel_run(await connect(), store, run_id)

    how = _guard(lambda: asyncio.run(body()))
    out_console.print(f"run {run_id}: {how}")


@app.command()
def runs() -> None:
    """List the runs in the results store, newest first."""

    def body() -> None:
        from passhat.infra.store import Store

        store = Store()
        for row in store.list_runs():
            done, total, pass1 = store.progress(row.run_id)
            print(f"{row.run_id}\t{row.status}\t{done}/{total}\tpass^1 {'-' if pass1 is None else f'{pass1:.3f}'}")

    _guard(body)


sa_app = typer.Typer(help="Passhat's custom search attributes on a Temporal cluster.", no_args_is_help=True)
app.add_typer(sa_app, name="search-attributes")


@sa_app.command("register")
def search_attributes_register() -> None:
    """Register PasshatRun, PasshatAgentModel, PasshatDomain, PasshatTask and
    PasshatOutcome (Keyword) on TEMPORAL_ADDRESS's namespace (needs operator rights)."""

    async def body() -> dict:
        from passhat.infra import search_attributes
        from passhat.infra.temporal_server import connect

        client = await connect()
        await search_attributes.register(client, client.namespace)
        return await search_attributes.registered(client, client.namespace)

    from temporalio.api.enums.v1 import IndexedValueType

    registered = _guard(lambda: asyncio.run(body()))
    for name, kind in sorted(registered.items()):
        if name.startswith("Passhat"):
            print(f"{name}\t{IndexedValueType.Name(kind).removeprefix('INDEXED_VALUE_TYPE_').title()}")


@app.command()
def status(run_id: str = typer.Argument(..., help="Run id.")) -> None:
    """Show a run's progress and the state of its workflow."""

    def body() -> None:
        from passhat.infra.store import Store

        store = Store()
        row = existing_run(store, run_id)
        done, total, pass1 = store.progress(run_id)
        not_eval = len(store.trials(run_id, status="not_evaluable"))
        source = store.import_source(run_id)
        if source is not None:  # an imported run has no workflow to ask Temporal about
            names = ", ".join(os.path.basename(f["path"]) for f in source.get("files", []))
            wf = f"none (imported from {names})"
        else:
            try:
                wf = asyncio.run(_status_of(run_id))
            except Exception as err:  # the store answers even when Temporal is down
                wf = f"unknown ({err})"
        out_console.print(
            f"run {run_id}: {row.status}; workflow {wf}\n"
            f"trials done {done}/{total}, not evaluable {not_eval}, "
            f"pass^1 {'-' if pass1 is None else f'{pass1:.3f}'}"
        )

    _guard(body)


async def _status_of(run_id: str) -> str | None:
    from passhat.cli.launch import workflow_status
    from passhat.infra.temporal_server import connect

    return await workflow_status(await connect(), run_id)


@app.command()
def report(
    run_id: str = typer.Argument(..., help="Run id."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """pass^k per agent model and domain, from the results store."""

    def body() -> None:
        from passhat import metrics
        from passhat.cli.render import print_summary
        from passhat.infra.store import Store

        store = Store()
        config = existing_run(store, run_id).run_config()
        summary = metrics.summarize(run_id, store.task_results(run_id), config.departures())
        print_summary(summary, output, out_console)

    _guard(body)


@app.command()
def trials(
    run_id: str = typer.Argument(..., help="Run id."),
    failed: bool = typer.Option(False, "--failed", help="Only failed trials: scored below 1, or not evaluable."),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="Only this domain."),
    agent_model: Optional[str] = typer.Option(None, "--agent-model", "-m", help="Only this agent model."),
) -> None:
    """List a run's trials with outcome, reason, Temporal UI link and Jaeger link."""

    def body() -> None:
        from passhat.cli.render import print_trials
        from passhat.infra import settings
        from passhat.infra.store import Store
        from passhat.infra.temporal_server import ui_url

        store = Store()
        existing_run(store, run_id)
        rows = store.trials(run_id, domain=domain, agent_model=agent_model, failed_only=failed)
        # An imported run has no workflows: no Temporal UI links.
        ui = None if store.import_source(run_id) is not None else ui_url()
        print_trials(rows, ui, settings.temporal_namespace(), settings.jaeger_ui_url(), out_console)

    _guard(body)


@app.command()
def show(trial_id: str = typer.Argument(..., help="Trial id, as `passhat trials` lists it.")) -> None:
    """Print a trial's transcript: messages, tool calls and results, the score breakdown."""

    def body() -> None:
        from passhat.cli.render import transcript
        from passhat.infra.store import Store

        store = Store()
        trial = store.get_trial(trial_id)
        if trial is None:
            fail(f"no trial '{trial_id}'; `passhat trials RUN` lists a run's trial ids")
        transcript(trial, store.steps(trial_id), out_console)

    _guard(body)


@app.command()
def export(
    run_id: str = typer.Argument(..., help="Run id."),
    format: str = typer.Option("tau2", "--format", "-f", help="tau2: one file per agent model and domain in tau2's results schema (tau2 evaluate-trajs and submit read it); jsonl: one trial per line (schema in the README)."),
    output_dir: str = typer.Option(".", "--output-dir", "-o", help="Directory to write to (created if missing)."),
    partial: bool = typer.Option(False, "--partial", help="Export a run that has not finished: only its finished trials, in files named *.partial.*"),
) -> None:
    """Write a run's results to files: tau2's results schema, or JSON lines."""

    def body() -> None:
        from passhat.cli.exchange import export_run
        from passhat.infra.store import Store

        store = Store()
        existing_run(store, run_id)
        result = export_run(store, run_id, format, output_dir, partial=partial)
        for path in result.paths:
            print(path)
        note = f"{result.trials} trial(s) in {len(result.paths)} file(s)"
        if result.partial:
            note += "; PARTIAL: the run has not finished"
        if result.left_out:
            note += (f"; {result.left_out} trial(s) not scored (not evaluable or unfinished) left out, "
                     "as tau2 has no such state (--format jsonl has them)")
        err_console.print(f"exported run {run_id}: {note}", highlight=False)

    _guard(body)


@app.command("import")
def import_(
    files: list[str] = typer.Argument(..., help="tau2 results files (one per agent model and domain) and/or tau-bench v1 result files."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name the run; default: derived from the files' contents, so importing the same files again changes nothing."),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="tau-bench files only: airline or retail, when the file does not show it."),
    agent_model: Optional[str] = typer.Option(None, "--agent-model", "-m", help="tau-bench files only: the agent model (default: from tau-bench's file name)."),
    user_model: Optional[str] = typer.Option(None, "--user-model", "-u", help="tau-bench files only: the user model (default: from tau-bench's file name)."),
) -> None:
    """Load results files into the store as an imported run that report, trials, show
    and export work on (it has no workflows: resume and cancel refuse it)."""

    def body() -> None:
        from passhat.cli.exchange import import_files
        from passhat.infra.store import Store

        result = import_files(Store(), files, run_id=run_id, domain=domain,
                              agent_model=agent_model, user_model=user_model)
        print(result.run_id)
        if result.already:
            err_console.print(f"already imported as run {result.run_id}; nothing changed", highlight=False)
        else:
            err_console.print(
                f"imported run {result.run_id}: {result.trials} trial(s) of {result.tasks} task(s) from "
                f"{result.files} file(s) ({'; '.join(result.summary)}); `passhat report {result.run_id}` shows pass^k",
                highlight=False,
            )

    _guard(body)


@app.command()
def domains() -> None:
    """List the domains and how many tasks each has."""
    from passhat.domains.registry import domain_names, get_domain

    for name in domain_names():
        print(f"{name}\t{len(get_domain(name).task_ids())} tasks")


@app.command()
def tasks(domain: str = typer.Argument(..., help="Domain name.")) -> None:
    """List a domain's task ids with the user's reason for calling."""

    def body() -> None:
        from passhat.cli.launch import UserInputError
        from passhat.domains.base import UnknownDomainError
        from passhat.domains.registry import get_domain
        from passhat.domains.task_file import TaskFileError

        try:
            d = get_domain(domain)
        except (UnknownDomainError, TaskFileError) as err:
            raise UserInputError(str(err))
        for task_id in d.task_ids():
            reason = (d.task(task_id).reason_for_call or "").strip().splitlines()
            print(f"{task_id}\t{reason[0][:100] if reason else ''}")

    _guard(body)


@app.command()
def worker(
    processes: int = typer.Option(1, "--processes", "-p", help="Worker processes to run on this machine (one process uses one core)."),
    max_concurrent_activities: int = typer.Option(MAX_CONCURRENT_ACTIVITIES, help="Activities each worker process runs at once."),
) -> None:
    """Run a standalone worker on the passhat task queue (Ctrl-C to stop)."""

    async def serve() -> None:
        from passhat.infra.store import Store
        from passhat.infra.temporal_server import connect
        from passhat.cli.worker import build_worker

        client = await connect()
        w = build_worker(client, Store(), max_concurrent_activities=max_concurrent_activities)
        err_console.print("passhat worker polling task queue 'passhat'")
        await w.run()

    def body() -> None:
        from passhat.cli.launch import UserInputError
        from passhat.cli.worker import end_with_parent, worker_processes

        if processes < 1:
            raise UserInputError(f"--processes must be at least 1, got {processes}")
        end_with_parent()
        # This process is one of the workers; the others are its children.
        with worker_processes(processes - 1, max_concurrent_activities=max_concurrent_activities):
            asyncio.run(serve())

    _guard(body)


@server_app.command("start")
def server_start() -> None:
    """Start the embedded Temporal dev server (or report the running one)."""

    def body() -> None:
        from passhat.infra import settings
        from passhat.infra.temporal_server import EmbeddedServer

        server = asyncio.run(EmbeddedServer(settings.home()).ensure_running())
        out_console.print(f"Temporal dev server at {server.address}\nWeb UI: {server.ui_url}")

    _guard(body)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded Temporal dev server (its database file is kept)."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    stopped = EmbeddedServer(settings.home()).stop()
    out_console.print("stopped" if stopped else "not running")


@server_app.command("status")
def server_status() -> None:
    """Is the embedded Temporal dev server running, and where."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    st = EmbeddedServer(settings.home()).status()
    if st.running:
        out_console.print(f"running (pid {st.pid}) at {st.address}\nWeb UI: {st.ui_url}")
    else:
        out_console.print("not running; `passhat server start` starts it")


def main() -> None:
    """Entry point. Ends the process with os._exit once output is flushed: a process
    that used a Temporal client can crash in the SDK's native threads during
    interpreter shutdown (temporalio/sdk-python#300), which would turn a finished
    command's exit code into 134."""
    code = 0
    try:
        app()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    from passhat.infra import tracing

    tracing.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
