"""The passhat command line. Commands are thin: validation and orchestration live in
cli.launch, rendering in cli.render; heavy imports (tau2, litellm, temporalio workers)
happen inside commands so `passhat --help` stays fast."""

from __future__ import annotations

import asyncio
import sys
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(
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
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _guard(fn):  # noqa: ANN001, ANN202
    """Run a command body, turning known failures into one clear line and an exit code."""
    from cli.launch import UserInputError
    from infra.store import ConfigMismatchError, StoreError
    from infra.temporal_server import TemporalUnreachable, TemporalServerError

    try:
        return fn()
    except (UserInputError, ConfigMismatchError, StoreError, TemporalUnreachable, TemporalServerError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail("interrupted: the run goes on in Temporal; `passhat status RUN` shows it", 130)


@app.command()
def run(
    domain: list[str] = typer.Option(..., "--domain", "-d", help="Domain to evaluate (repeat for several): airline, retail, telecom, mock."),
    agent_model: list[str] = typer.Option(..., "--agent-model", "-m", help="litellm model string for the agent (repeat for a sweep), e.g. openai/gpt-4.1 or scripted/oracle."),
    user_model: str = typer.Option(..., "--user-model", "-u", help="litellm model string for the user simulator."),
    task: list[str] = typer.Option([], "--task", "-t", help="Task id to run (repeat); default: every task of the domain."),
    trials: int = typer.Option(1, "--trials", "-k", help="Independent trials per task (the k of pass^k)."),
    concurrency: int = typer.Option(8, "--concurrency", "-c", help="Conversations in flight at once."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name the run; starting an existing run id with the same configuration attaches to it."),
    agent_args: Optional[str] = typer.Option(None, "--agent-args", help='JSON passed to litellm for agent calls, e.g. \'{"temperature": 0, "api_base": "http://..."}\'.'),
    user_args: Optional[str] = typer.Option(None, "--user-args", help="JSON passed to litellm for user-simulator calls."),
    max_steps: int = typer.Option(100, help="tau2's max steps per conversation."),
    max_errors: int = typer.Option(10, help="tau2's max tool errors per conversation."),
    max_attempts: int = typer.Option(8, help="Attempts per model call on transient provider errors (rate limits, 5xx, timeouts)."),
    detach: bool = typer.Option(False, "--detach", help="Start the run and return; a `passhat worker` must be running."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
) -> None:
    """Evaluate agent models on tau2 domains and report pass^k."""
    _guard(lambda: _run_command(
        domains=domain, task_ids=task, agent_models=agent_model, user_model=user_model,
        trials=trials, concurrency=concurrency, run_id=run_id, agent_args=agent_args,
        user_args=user_args, max_steps=max_steps, max_errors=max_errors,
        max_attempts=max_attempts, detach=detach, output=output, limit=None,
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
        max_steps=100, max_errors=10, max_attempts=8, detach=False, output=output, limit=tasks,
    ))


def _run_command(*, output: str, detach: bool, limit: int | None, **kwargs) -> None:  # noqa: ANN003
    from cli.launch import UserInputError, build_config

    if output not in ("table", "json"):
        raise UserInputError(f"--output must be 'table' or 'json', got '{output}'")
    config = build_config(limit=limit, **kwargs)
    summary = asyncio.run(_execute(config, detach=detach, output=output))
    if summary is None:
        return
    from cli.render import print_summary

    print_summary(summary, output, out_console)
    if output == "table":
        from infra.temporal_server import ui_url

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


async def _execute(config, *, detach: bool, output: str):  # noqa: ANN001, ANN202
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cli.launch import follow, start_run
    from infra.store import Store
    from infra.temporal_server import connect, ui_url
    from infra.worker import build_worker

    store = Store()
    client = await connect()
    handle = await start_run(client, store, config)
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

        async with build_worker(client, store):
            summary = await follow(handle, store, config.run_id, update)
    return summary


@app.command()
def status(run_id: str = typer.Argument(..., help="Run id.")) -> None:
    """Show a run's progress and the state of its workflow."""

    def body() -> None:
        from cli.launch import workflow_status
        from infra.store import Store
        from infra.temporal_server import connect

        store = Store()
        row = store.get_run(run_id)
        if row is None:
            fail(f"no run '{run_id}' in the results store ({store.url}); `passhat runs` lists them")
        done, total, pass1 = store.progress(run_id)
        not_eval = len(store.trials(run_id, status="not_evaluable"))
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
    from cli.launch import workflow_status
    from infra.temporal_server import connect

    return await workflow_status(await connect(), run_id)


@app.command()
def report(
    run_id: str = typer.Argument(..., help="Run id."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """pass^k per agent model and domain, from the results store."""

    def body() -> None:
        from activities.results import summarize
        from cli.render import print_summary
        from infra.store import Store

        store = Store()
        if store.get_run(run_id) is None:
            fail(f"no run '{run_id}' in the results store ({store.url})")
        print_summary(summarize(store, run_id), output, out_console)

    _guard(body)


@app.command()
def domains() -> None:
    """List the domains and how many tasks each has."""
    from domains.registry import domain_names, get_domain

    for name in domain_names():
        print(f"{name}\t{len(get_domain(name).task_ids())} tasks")


@app.command()
def tasks(domain: str = typer.Argument(..., help="Domain name.")) -> None:
    """List a domain's task ids with the user's reason for calling."""

    def body() -> None:
        from cli.launch import UserInputError
        from domains.base import UnknownDomainError
        from domains.registry import get_domain

        try:
            d = get_domain(domain)
        except UnknownDomainError as err:
            raise UserInputError(str(err))
        for task_id in d.task_ids():
            reason = (d.task(task_id).reason_for_call or "").strip().splitlines()
            print(f"{task_id}\t{reason[0][:100] if reason else ''}")

    _guard(body)


@app.command()
def worker(
    max_concurrent_activities: int = typer.Option(64, help="Activities this worker runs at once."),
) -> None:
    """Run a standalone worker on the passhat task queue (Ctrl-C to stop)."""

    async def serve() -> None:
        from infra.store import Store
        from infra.temporal_server import connect
        from infra.worker import build_worker

        client = await connect()
        w = build_worker(client, Store(), max_concurrent_activities=max_concurrent_activities)
        err_console.print("passhat worker polling task queue 'passhat'")
        await w.run()

    _guard(lambda: asyncio.run(serve()))


@server_app.command("start")
def server_start() -> None:
    """Start the embedded Temporal dev server (or report the running one)."""

    def body() -> None:
        from infra import settings
        from infra.temporal_server import EmbeddedServer

        server = asyncio.run(EmbeddedServer(settings.home()).ensure_running())
        out_console.print(f"Temporal dev server at {server.address}\nWeb UI: {server.ui_url}")

    _guard(body)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded Temporal dev server (its database file is kept)."""
    from infra import settings
    from infra.temporal_server import EmbeddedServer

    stopped = EmbeddedServer(settings.home()).stop()
    out_console.print("stopped" if stopped else "not running")


@server_app.command("status")
def server_status() -> None:
    """Is the embedded Temporal dev server running, and where."""
    from infra import settings
    from infra.temporal_server import EmbeddedServer

    st = EmbeddedServer(settings.home()).status()
    if st.running:
        out_console.print(f"running (pid {st.pid}) at {st.address}\nWeb UI: {st.ui_url}")
    else:
        out_console.print("not running; `passhat server start` starts it")


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
