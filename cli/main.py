"""The passhat command line: the app, its commands, and the entry point. Each group of
commands has its own module (run_commands, result_commands, admin_commands); what they
share is in passhat.cli.common. Commands import tau2, litellm and the Temporal worker
when they run, so `passhat --help` stays fast."""

from __future__ import annotations

import gc
import os
import sys

import typer

from passhat.cli import admin_commands, diagnose_command, gate_commands, result_commands, review_commands, run_commands
from passhat.cli.common import OneLineUsageErrors

STARTUP_GC_THRESHOLD = 50_000  # new container objects between two young collections

app = typer.Typer(
    cls=OneLineUsageErrors,
    help="Durable pass^k evaluation of tool-using AI agents on tau2 benchmarks, run as Temporal workflows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command()(run_commands.run)
app.command()(run_commands.demo)
app.command()(run_commands.resume)
app.command()(run_commands.cancel)
app.command()(gate_commands.gate)
app.command()(review_commands.review)
app.command()(diagnose_command.diagnose)
app.command()(result_commands.runs)
app.command()(result_commands.status)
app.command()(result_commands.report)
app.command()(result_commands.trials)
app.command()(result_commands.show)
app.command()(result_commands.export)
app.command("import")(result_commands.import_files)
app.add_typer(admin_commands.domains_app, name="domains")
app.command()(admin_commands.tasks)
app.command()(admin_commands.worker)
app.add_typer(admin_commands.server_app, name="server")
app.add_typer(admin_commands.search_attributes_app, name="search-attributes")

# Commands that load tau2, whose loguru messages are routed to the log file first.
_LOADS_TAU2 = {"run", "gate", "review", "diagnose", "demo", "resume", "worker", "domains", "tasks", "export", "import"}


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        print(f"passhat {version('passhat')}")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print passhat's version and exit."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, show_default=False, help="Show more on the console: -v every library's warnings and passhat's info with tracebacks, -vv debug output. Everything goes to PASSHAT_HOME/logs/passhat.log anyway."),
) -> None:
    """Durable pass^k evaluation of tool-using AI agents on tau2 benchmarks, run as Temporal workflows."""
    from passhat.infra import logs

    logs.setup(verbose)
    if ctx.invoked_subcommand in _LOADS_TAU2:
        logs.route_loguru()


def main() -> None:
    """Entry point. Ends the process with os._exit once output is flushed: a process
    that used a Temporal client can crash in the SDK's native threads during
    interpreter shutdown (temporalio/sdk-python#300), which would turn a finished
    command's exit code into 134."""
    # The collector's default (a collection per 700 new container objects) runs
    # thousands of times while litellm, tau2 and pydantic's models are imported, which
    # live until the process ends. A worker sets it back when it starts
    # (workflows.worker.build_worker).
    gc.set_threshold(STARTUP_GC_THRESHOLD)
    code = 0
    try:
        # Named, not guessed from the process: in the warm process's fork, click would
        # guess `python -m passhat.cli.<argv[0]>` from its __main__ (passhat.cli.warm_server).
        app(prog_name="passhat")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if "passhat.infra.tracing" in sys.modules:  # importing it costs a quarter second
        sys.modules["passhat.infra.tracing"].shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
