"""The passhat command line. Commands are thin: validation and orchestration live in
passhat.cli.launch, rendering in passhat.cli.render; heavy imports (tau2, litellm, temporalio workers)
happen inside commands so `passhat --help` stays fast."""

from __future__ import annotations

import asyncio
import contextlib
import gc
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

from passhat.cli.preview import CONFIRM_ABOVE
from passhat.contracts import DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS, DEFAULT_SEED, RetryConfig

_RETRY = RetryConfig()  # the defaults the options show
MAX_CONCURRENT_ACTIVITIES = 64  # per worker process
STARTUP_GC_THRESHOLD = 50_000  # new container objects between two young collections


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

    def get_command(self, ctx, cmd_name):  # noqa: ANN001, ANN201
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _tidy_metavars(command, ctx)
        return command

    def format_help(self, ctx, formatter):  # noqa: ANN001, ANN201
        _tidy_metavars(self, ctx)
        return super().format_help(ctx, formatter)


def _tidy_metavars(command, ctx) -> None:  # noqa: ANN001 - a click Command, its Context
    """Typer's help shows each option's Python type: `<bool>` for a flag, which takes no
    value, and `<list[str]>` for a repeatable option, which takes one value each time.
    Flags get no metavar and repeatable options their element's type; an explicit
    metavar= stays. Subcommands of a group get the same."""
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            shown = param.display_type(ctx)
            if shown.startswith("<list[") and shown.endswith("]>"):  # its type column
                param.display_type_rich = lambda ctx, label=f"<{shown[6:-2]}>...": label
            continue
        if param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        elif getattr(param, "multiple", False):
            shown = param.display_type(ctx)  # "<list[str]>"
            if shown.startswith("<list[") and shown.endswith("]>"):
                param.metavar = f"<{shown[6:-2]}>"
    for name in getattr(command, "commands", {}):
        _tidy_metavars(command.commands[name], ctx)


app = typer.Typer(
    cls=_OneLineUsageErrors,
    help="Durable pass^k evaluation of tool-using AI agents on tau2 benchmarks, run as Temporal workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Commands that load tau2, whose loguru messages are routed to the log file first.
_LOADS_TAU2 = {"run", "demo", "resume", "worker", "tasks", "export", "import"}


@app.callback()
def _global_options(
    ctx: typer.Context,
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, show_default=False, help="Show more on the console: -v every library's warnings and passhat's info with tracebacks, -vv debug output. Everything goes to PASSHAT_HOME/logs/passhat.log anyway."),
) -> None:
    """Durable pass^k evaluation of tool-using AI agents on tau2 benchmarks, run as Temporal workflows."""
    from passhat.infra import logs

    logs.setup(verbose)
    if ctx.invoked_subcommand in _LOADS_TAU2:
        logs.route_loguru()


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
    from passhat.results.records import ResultsError

    try:
        return fn()
    except TemporalServerError as err:
        fail(str(err))  # multi-line on purpose: it ends with the server's log excerpt
    except (UserInputError, ResultsError, ConfigMismatchError, StoreError, TemporalUnreachable, RunEnded) as err:
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
    ctx: typer.Context,
    domain: list[str] = typer.Option([], "--domain", "-d", help="Domain to evaluate (repeat for several): airline, retail, telecom, mock. Required unless --config has domains."),
    agent_model: list[str] = typer.Option([], "--agent-model", "-m", help="litellm model string for the agent (repeat for a sweep), e.g. openai/gpt-4.1 or scripted/oracle. Required unless --config has agents."),
    user_model: Optional[str] = typer.Option(None, "--user-model", "-u", help="litellm model string for the user simulator. Required unless --config has a user."),
    config: Optional[str] = typer.Option(None, "--config", help="A sweep config (TOML): agent models each with their own args, user model, domains, tasks, trials, seed, limits, retry, budget (see the README). Options given on the command line override it."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", metavar="USD", help="Budget: once the run's recorded model cost reaches it, no new conversation starts; those in flight finish and the run ends as budget_exhausted (`passhat resume RUN --max-cost USD` continues it)."),
    yes: bool = typer.Option(False, "--yes", "-y", help=f"Start without asking: a run of more than {CONFIRM_ABOVE} conversations asks for confirmation on a terminal."),
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
    rate_limit: list[str] = typer.Option([], "--rate-limit", metavar="PROVIDER=N/min", help="Cap a provider's model calls per minute (repeat per provider; also N/s, N/h), for every worker of the run: enforced by the Temporal server on the provider's own task queue."),
    max_concurrent: list[str] = typer.Option([], "--max-concurrent", metavar="PROVIDER=N", help="Cap a provider's model calls in flight (repeat per provider), over every worker of the run: the run workflow starts no more conversations that call it."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
) -> None:
    """Evaluate agent models on tau2 domains and report pass^k."""
    _guard(lambda: _run_command(
        domains=domain, task_ids=task, agent_models=agent_model, user_model=user_model,
        trials=trials, concurrency=concurrency, run_id=run_id, agent_args=agent_args,
        user_args=user_args, max_steps=max_steps, max_errors=max_errors,
        max_attempts=max_attempts, model_timeout=model_timeout, retry_for=retry_for, detach=detach,
        output=output, limit=None, workers=workers, rate_limits=rate_limit, max_concurrent=max_concurrent,
        task_file=task_file, seed=seed, lenient_tool_args=lenient_tool_args, max_cost=max_cost,
        yes=yes, sweep=config, given=_given_options(ctx), help_hint=f" — see `{ctx.command_path} --help`",
    ))


# `run`'s options by the build_config parameter they set, for a --config file to fill in.
_BUILD_PARAMS = {
    "domain": "domains", "task": "task_ids", "agent_model": "agent_models", "task_file": "task_file",
    "user_model": "user_model", "trials": "trials", "concurrency": "concurrency", "run_id": "run_id",
    "agent_args": "agent_args", "user_args": "user_args", "max_steps": "max_steps",
    "max_errors": "max_errors", "seed": "seed", "lenient_tool_args": "lenient_tool_args",
    "retry_for": "retry_for", "max_attempts": "max_attempts", "model_timeout": "model_timeout",
    "max_cost": "max_cost", "rate_limit": "rate_limits", "max_concurrent": "max_concurrent",
}


def _given_options(ctx: typer.Context) -> set[str]:
    """The build_config parameters whose options were given on the command line."""
    from typer._click.core import ParameterSource

    return {build for param, build in _BUILD_PARAMS.items()
            if ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT)}


@app.command()
def demo(
    tasks: int = typer.Option(10, help="How many airline tasks to sweep (1-50: airline has 50)."),
    trials: int = typer.Option(4, "--trials", "-k", help="Trials per task (at least 1)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    yes: bool = typer.Option(False, "--yes", "-y", help=f"Start without asking: more than {CONFIRM_ABOVE} conversations ask for confirmation on a terminal."),
) -> None:
    """A short offline sweep: scripted/oracle and scripted/noisy-0.7 on airline, k=4, on the embedded Temporal server. No keys needed."""
    _guard(lambda: _run_command(
        domains=["airline"], task_ids=[], agent_models=DEMO_MODELS, user_model="scripted/oracle",
        trials=trials, concurrency=16, run_id=None, agent_args=None, user_args=None,
        detach=False, output=output, limit=tasks, yes=yes,
    ))


def _run_command(*, output: str, detach: bool, limit: int | None, workers: int | None = None,
                 yes: bool = False, sweep: str | None = None,
                 given: set[str] | None = None, help_hint: str = "", **kwargs) -> None:  # noqa: ANN003
    """`given` (the options given on the command line) comes from `run`, whose required
    options may come from the `sweep` config file instead."""
    from passhat.cli import sweep_config
    from passhat.cli.launch import UserInputError, build_config

    _check_output(output)
    if workers is not None and workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {workers}")
    if given is not None:
        kwargs = sweep_config.merge(sweep_config.load(sweep) if sweep else None,
                                    {**kwargs, "agent_model_args": None}, given)
        sweep_config.check_required(kwargs, help_hint)
    config = build_config(limit=limit, **kwargs)
    _finish(_execute_here(config, detach=detach, output=output, workers=workers, preview=True, yes=yes), output)


def _execute_here(config, *, workers: int | None = None, **kwargs):  # noqa: ANN001, ANN003, ANN202
    """Run _execute, with this process's worker and `workers - 1` more worker processes
    (default: one per core; none with --detach); Ctrl-C stops them all, so say how to
    carry on."""
    from passhat.cli.worker import default_process_count, preload, worker_processes
    from passhat.infra.store import Store

    extra = 0 if kwargs.get("detach") else (workers or default_process_count()) - 1
    try:
        # Forked now, before this process has an event loop, a client or a thread; a
        # results store that cannot be opened is reported first (and closed again: no
        # connection is carried into the children).
        if extra:
            Store().close()
            preload(config.domains)
        with worker_processes(extra, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                              provider_limits=config.provider_limits):
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

        from passhat.cli.render import workflow_link

        if ui_url():
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
    from passhat.infra.store import RUN_BUDGET_EXHAUSTED, Store

    store = Store()
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


def _announce(store, config, *, yes: bool) -> None:  # noqa: ANN001 - a Store, a RunConfig
    """Before a new run starts (nothing is recorded yet): its size on stderr and, for a
    big run on a terminal without --yes, a question. A run that exists is attached to."""
    from passhat.cli.preview import describe, needs_confirmation, run_size
    from typer.exceptions import Abort

    if store.check_config(config) is not None:
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


async def _execute(config, *, detach: bool, output: str, resume: bool = False,
                   preview: bool = False, yes: bool = False):  # noqa: ANN001, ANN202
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from passhat.cli.launch import follow, provider_limit_args, start_run
    from passhat.infra.store import Store
    from passhat.infra.temporal_server import connect, ui_url
    from passhat.cli.worker import build_worker

    store = Store()
    client = await connect()
    await _ensure_search_attributes(client)
    if preview:
        _announce(store, config, yes=yes)
    handle = await start_run(client, store, config, resume=resume)
    ui = ui_url()
    if detach:
        print(config.run_id)
        err_console.print(f"run {config.run_id} started; follow it with `passhat status {config.run_id}`"
                          + (f" or in the Temporal UI: {ui}" if ui else ""))
        if config.provider_limits:
            # The caps live in the workers that serve the providers' queues.
            err_console.print("its capped providers' calls are served only by workers started with "
                              f"`passhat worker {' '.join(provider_limit_args(config.provider_limits))}`",
                              highlight=False)
        return None
    from passhat.cli.render import not_evaluable_line, progress_fields, workflow_link

    if ui:
        err_console.print(f"Temporal UI: {workflow_link(ui, config.run_id)}", soft_wrap=True)
    progress = Progress(
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

        def not_evaluable(row) -> None:  # noqa: ANN001 - a store.TrialRow
            progress.console.print(not_evaluable_line(row), highlight=False, markup=False, soft_wrap=True)

        # This process runs one worker; the others are its children (see _execute_here).
        async with build_worker(client, store, max_concurrent_activities=MAX_CONCURRENT_ACTIVITIES,
                                provider_limits=config.provider_limits):
            summary = await follow(handle, store, config.run_id, update, on_not_evaluable=not_evaluable)
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
    max_cost: Optional[float] = typer.Option(None, "--max-cost", metavar="USD", help="A new budget for the run (all it has recorded counts toward it); default: the budget it was started with, if any."),
) -> None:
    """Finish an interrupted run: only unfinished and not-evaluable trials run again;
    scored trials and recorded steps are kept as they are."""

    def body() -> None:
        from passhat.cli.launch import check_budget
        from passhat.infra.store import Store

        check_budget(max_cost)
        row = existing_run(Store(), run_id)
        _refuse_imported(row, "resume")
        config = row.run_config()
        if max_cost is not None:
            config = config.model_copy(update={"max_cost": max_cost})
        _finish(_execute_here(config, detach=detach, output=output, resume=True), output)

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
def runs(
    output: str = typer.Option("table", "--output", "-o", help="table (tab-separated, with a header) or json (schema in the README)."),
) -> None:
    """List the runs in the results store, newest first."""

    def body() -> None:
        import json

        from passhat.infra.store import Store

        _check_output(output)
        store = Store()
        listed = [(row, store.run_progress(row.run_id)) for row in store.list_runs()]
        if output == "json":
            print(json.dumps({"runs": [_run_json(row, p) for row, p in listed]}))
            return
        if not listed:
            err_console.print(f"no runs in the results store ({store.safe_url})", highlight=False)
            return
        print("run\tstatus\ttrials done\tpass^1\tnot evaluable\tcost USD\tcreated (UTC)")
        for row, p in listed:
            print(f"{row.run_id}\t{row.status}\t{p.done}/{p.total}\t{_pass1(p.pass1)}\t"
                  f"{p.not_evaluable}\t{p.cost:.4f}\t{row.created_at:%Y-%m-%d %H:%M:%S}")

    _guard(body)


def _check_output(output: str) -> None:
    from passhat.cli.launch import UserInputError

    if output not in ("table", "json"):
        raise UserInputError(f"--output must be 'table' or 'json', got '{output}'")


def _pass1(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _run_json(row, progress) -> dict:  # noqa: ANN001 - a RunRow, its RunProgress
    """A run in `runs -o json` and `status -o json` (schema in the README)."""
    return {
        "run_id": row.run_id, "status": row.status,
        "trials": progress.total, "done": progress.done, "not_evaluable": progress.not_evaluable,
        "pass1": progress.pass1, "cost": progress.cost,
        "created_at": row.created_at.isoformat(), "updated_at": row.updated_at.isoformat(),
    }


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
def status(
    run_id: str = typer.Argument(..., help="Run id."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (schema in the README)."),
) -> None:
    """Show a run's progress and the state of its workflow (never starts the Temporal server)."""

    def body() -> None:
        import json

        from passhat.infra.store import Store
        from passhat.infra.temporal_server import TemporalUnreachable

        _check_output(output)
        store = Store()
        row = existing_run(store, run_id)
        p = store.run_progress(run_id)
        source = store.import_source(run_id)
        if source is not None:  # an imported run has no workflow to ask Temporal about
            names = ", ".join(os.path.basename(f["path"]) for f in source.get("files", []))
            wf, detail = "none", f"imported from {names}"
        else:
            try:
                wf, detail = asyncio.run(_status_of(run_id)), None
                if wf is None:
                    wf, detail = "unknown", "Temporal has no workflow with this id (closed workflows are kept for the namespace's retention)"
            except TemporalUnreachable as err:  # the store answers even when Temporal is down
                wf, detail = "unknown", " ".join(str(err).split())
            except Exception as err:  # noqa: BLE001 - a status line is better than a traceback
                wf, detail = "unknown", f"{type(err).__name__}: {' '.join(str(err).split())}"
        if output == "json":
            print(json.dumps({**_run_json(row, p), "workflow": wf, "workflow_detail": detail}))
            return
        out_console.print(
            f"run {run_id}: {row.status}; workflow {wf}"
            + (f" ({detail})" if detail and wf == "none" else f": {detail}" if detail else "") + "\n"
            f"trials done {p.done}/{p.total}, not evaluable {p.not_evaluable}, "
            f"pass^1 {_pass1(p.pass1)}, cost ${p.cost:.4f}",
            highlight=False, markup=False,
        )

    _guard(body)


async def _status_of(run_id: str) -> str | None:
    from passhat.cli.launch import workflow_status
    from passhat.infra.temporal_server import connect

    # Read-only: asks a running server, never starts the embedded one.
    return await workflow_status(await connect(start=False), run_id)


@app.command()
def report(
    run_ids: list[str] = typer.Argument(..., metavar="RUN", help="Run ids; with two or more, or one run of several agent models, models are compared task by task."),
    output: str = typer.Option("table", "--output", "-o", help="table (fits 80 columns), json (schema in the README), csv, markdown or html (one self-contained file)."),
    by: str = typer.Option("model", "--by", help="model: pass^k curves per model and domain; task: one row per task (table, csv, markdown)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Also draw pass^k against k per model, with confidence bands, to this .png (or .svg, .pdf) file."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the report to this file instead of stdout."),
) -> None:
    """pass^k per agent model and domain with bootstrap confidence intervals, cost,
    failure taxonomy and paired comparisons, from the results store; partial runs
    report the trials they finished and say what is missing."""

    def body() -> None:
        from pathlib import Path

        from passhat.cli.launch import UserInputError
        from passhat.cli.plots import PLOT_SUFFIXES
        from passhat.cli.render import GROUPINGS, OUTPUTS
        from passhat.results.report import build_report
        from passhat.infra.store import Store

        if output not in OUTPUTS:
            raise UserInputError(f"--output must be one of {', '.join(OUTPUTS)}, got '{output}'")
        if by not in GROUPINGS:
            raise UserInputError(f"--by must be one of {', '.join(GROUPINGS)}, got '{by}'")
        if plot is not None and Path(plot).suffix.lower() not in PLOT_SUFFIXES:
            raise UserInputError(f"--plot must name a {', '.join(PLOT_SUFFIXES)} file, got '{plot}'")
        store = Store()
        for run_id in run_ids:
            existing_run(store, run_id)
        result = build_report(store, run_ids)
        try:
            _write_report(store, result, output, by, out)
            if plot is not None:
                from passhat.cli import plots

                plots.save(plots.pass_hat_figure(result), Path(plot))
        except OSError as err:
            raise UserInputError(f"cannot write {err.filename or out or plot}: {err.strerror or err}")
        for run in result.runs:
            if not run.completeness.complete and (output != "table" or out):
                err_console.print(f"[bold yellow]run {escape(run.run_id)} is PARTIAL:[/] "
                                  f"{escape(run.completeness.note)}", highlight=False)

    _guard(body)


def _write_report(store, result, output: str, by: str, out: str | None) -> None:  # noqa: ANN001 - a Store, a Report
    from passhat.cli import render

    if output == "table":
        if out is None:
            render.report_table(result, by, out_console)
            return
        with open(out, "w") as f:
            render.report_table(result, by, Console(file=f, width=100))
        return
    if output == "html":
        from passhat.cli import html_report
        from passhat.cli.html_report import trial_views
        from passhat.infra import settings
        from passhat.infra.temporal_server import ui_url

        # ui_url() only looks for a running embedded server: a report starts nothing.
        ui, namespace, jaeger = ui_url(), settings.temporal_namespace(), settings.jaeger_ui_url()
        text = html_report.render(result, {r.run_id: trial_views(store, r, ui, namespace, jaeger)
                                           for r in result.runs})
    elif output == "json":
        text = result.model_dump_json(indent=1) + "\n"
    elif output == "csv":
        text = render.report_csv(result, by)
    else:
        text = render.report_markdown(result, by)
    if out is None:
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)


@app.command()
def trials(
    run_id: str = typer.Argument(..., help="Run id."),
    failed: bool = typer.Option(False, "--failed", help="Only failed trials: scored below 1, or not evaluable."),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="Only this domain."),
    agent_model: Optional[str] = typer.Option(None, "--agent-model", "-m", help="Only this agent model."),
    links: bool = typer.Option(False, "--links", help="On a terminal, show each trial's Temporal UI and Jaeger links (piped output always has them)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (schema in the README)."),
) -> None:
    """List a run's trials with outcome and reason (and Temporal UI and Jaeger links)."""

    def body() -> None:
        from passhat.cli.launch import UserInputError
        from passhat.cli.render import print_trials, trials_json
        from passhat.infra import settings
        from passhat.infra.store import Store
        from passhat.infra.temporal_server import ui_url

        _check_output(output)
        store = Store()
        config = existing_run(store, run_id).run_config()
        for option, value, known in (("domain", domain, config.domains),
                                     ("agent model", agent_model, config.agent_models)):
            if value is not None and value not in known:  # a typo would list nothing
                raise UserInputError(f"run {run_id} has no {option} '{value}'; its {option}s: {', '.join(known)}")
        rows = store.trials(run_id, domain=domain, agent_model=agent_model, failed_only=failed)
        # An imported run has no workflows: no Temporal UI links.
        ui = None if store.import_source(run_id) is not None else ui_url()
        args = (rows, ui, settings.temporal_namespace(), settings.jaeger_ui_url())
        if output == "json":
            print(trials_json(run_id, *args))
        else:
            print_trials(*args, out_console, links=links)

    _guard(body)


@app.command()
def show(
    trial_id: str = typer.Argument(..., help="Trial id, as `passhat trials` lists it."),
    output: str = typer.Option("table", "--output", "-o", help="table (the transcript) or json (one object, as a line of `export --format jsonl`)."),
) -> None:
    """Print a trial's transcript: messages, tool calls and results, the score breakdown."""

    def body() -> None:
        import json

        from passhat.cli.render import transcript
        from passhat.infra.store import Store

        _check_output(output)
        store = Store()
        trial = store.get_trial(trial_id)
        if trial is None:
            fail(f"no trial '{trial_id}'; `passhat trials RUN` lists a run's trial ids")
        if output == "json":
            from passhat.results.jsonl import jsonl_line

            print(json.dumps({**jsonl_line(trial.run_id, trial, store.steps(trial_id)),
                              "attempts": trial.attempts, "n_steps": trial.n_steps}))
            return
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
        from passhat.results.exporting import export_run
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
        from passhat.results.importing import import_files
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
    from passhat.domains.registry import domain_names, task_count

    for name in domain_names():
        print(f"{name}\t{task_count(name)} tasks")


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
    rate_limit: list[str] = typer.Option([], "--rate-limit", metavar="PROVIDER=N/min", help="Serve a capped provider's task queue at this rate; every worker of a run started with --rate-limit must be given the same caps."),
) -> None:
    """Run a standalone worker on the passhat task queue (Ctrl-C to stop)."""

    def body() -> None:
        from passhat.cli.launch import UserInputError, parse_provider_limits
        from passhat.cli.worker import preload, serve, worker_processes

        if processes < 1:
            raise UserInputError(f"--processes must be at least 1, got {processes}")
        limits = parse_provider_limits(rate_limit)
        # This process is one of the workers; the others are its children, forked with
        # the model client and tau2 already imported (the domains a run will use are
        # not known yet: each process loads them on first use).
        if processes > 1:
            preload([])
        with worker_processes(processes - 1, max_concurrent_activities=max_concurrent_activities,
                              provider_limits=limits):
            asyncio.run(serve(max_concurrent_activities=max_concurrent_activities,
                              provider_limits=limits, announce=True))

    _guard(body)


@server_app.command("start")
def server_start(
    port: Optional[int] = typer.Option(None, "--port", envvar="PASSHAT_TEMPORAL_PORT", show_default="7233", help="gRPC port of the server (PASSHAT_TEMPORAL_PORT sets it for every command that starts the server)."),
    ui_port: Optional[int] = typer.Option(None, "--ui-port", envvar="PASSHAT_UI_PORT", show_default="8233", help="Port of its web UI (PASSHAT_UI_PORT)."),
) -> None:
    """Start the embedded Temporal dev server (or report the running one, on its ports)."""

    def body() -> None:
        from passhat.infra import settings
        from passhat.infra.temporal_server import EmbeddedServer

        server = asyncio.run(EmbeddedServer(settings.home(), port=port, ui_port=ui_port).ensure_running())
        out_console.print(f"Temporal dev server at {server.address}\nWeb UI: {server.ui_url}")

    _guard(body)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded Temporal dev server (its database file is kept)."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    stopped = _guard(lambda: EmbeddedServer(settings.home()).stop())
    out_console.print("stopped" if stopped else "not running")


@server_app.command("status")
def server_status() -> None:
    """Is the embedded Temporal dev server running, and where."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    st = _guard(lambda: EmbeddedServer(settings.home()).status())
    if st.running:
        out_console.print(f"running (pid {st.pid}) at {st.address}\nWeb UI: {st.ui_url}")
    else:
        out_console.print("not running; `passhat server start` starts it")


def main() -> None:
    """Entry point. Ends the process with os._exit once output is flushed: a process
    that used a Temporal client can crash in the SDK's native threads during
    interpreter shutdown (temporalio/sdk-python#300), which would turn a finished
    command's exit code into 134."""
    # The collector's default (a collection per 700 new container objects) runs
    # thousands of times while litellm, tau2 and pydantic's models are imported, which
    # live until the process ends: a quarter of a run's start-up CPU. A worker sets it
    # back when it starts (cli.worker.build_worker).
    gc.set_threshold(STARTUP_GC_THRESHOLD)
    code = 0
    try:
        app()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if "passhat.infra.tracing" in sys.modules:  # importing it costs a quarter second
        sys.modules["passhat.infra.tracing"].shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
