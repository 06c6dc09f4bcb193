"""What every passhat command shares: the consoles, the one-line error (`fail`, and the
`one_line_errors` decorator that turns known failures into it), the checks of options
several commands have, and typer's help and usage-error plumbing."""

from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from typing import Any, Callable

import typer
from rich.console import Console
from rich.markup import escape
# typer vendors click (pinned in pyproject); these are the errors its parser raises.
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from passhat.cli.run_options import UserInputError



def pipe_width(default: int) -> int:
    """The width of output that goes to a pipe or a file: COLUMNS when it is set (a
    positive number), as on a terminal, else `default`."""
    import os

    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else default


# No emoji codes: ":x:" in a path or a message (a passwd line, a transcript) stays as
# written. Piped output keeps whole table rows rather than wrapping at rich's 80-column
# default, unless COLUMNS says how wide it may be.
err_console = Console(stderr=True, soft_wrap=True, emoji=False)
out_console = Console(width=None if sys.stdout.isatty() else pipe_width(200), emoji=False)


# Exit codes (docs/cli.md): 0 done; 1 some trials not evaluable or the budget stopped
# the run; 2 bad input; 3 the run ended without completing (cancelled, terminated,
# failed); 4 the Temporal server stopped answering while the command ran (what was
# recorded is kept); 130 interrupted.
RUN_ENDED_EXIT = 3
SERVER_GONE_EXIT = 4


def fail(message: str, code: int = 2) -> None:
    # escape: messages quote user input and file paths, which may contain [brackets].
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def one_line_errors(command: Callable) -> Callable:
    """Run a command, turning known failures into one clear line and an exit code."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt:
            fail(interrupted_words(), 130)
        except Exception as err:  # noqa: BLE001 - sorted below; the rest propagates
            _fail_if_known(err)
            raise

    return guarded


# The run a command starts or continues ("" while its id is not known yet), so that an
# interruption says what of it was recorded. One command per process.
_command_run: list[str] = []


def starting_run(run_id: str = "") -> None:
    """This command starts or continues run `run_id` (empty: its id is not known yet)."""
    _command_run[:] = [run_id]


def interrupted_words(worker_here: bool = False) -> str:
    """What an interruption (Ctrl-C) left, as the results store says: nothing, or a run
    that is recorded. `worker_here`: this process served the run, and its worker stopped."""
    if not _command_run:
        return "interrupted"
    run_id = _command_run[0]
    try:
        from passhat.workflows.client import rounds_of

        store = open_store()  # a run, or a measurement in rounds (gate, --adaptive)
        recorded = bool(run_id) and (store.get_run(run_id) is not None or bool(rounds_of(store, run_id)))
    except Exception:  # noqa: BLE001 - the store is not what was interrupted: say less
        return f"interrupted{f' (run {run_id})' if run_id else ''}"
    if not recorded:
        return (f"interrupted before run {run_id} was recorded: nothing of it was started" if run_id
                else "interrupted before the run was recorded: nothing of it was started")
    if worker_here:
        return (f"interrupted: run {run_id} is recorded and waits in Temporal, but the worker in this "
                f"process stopped; `passhat resume {run_id}` continues it")
    return f"interrupted: run {run_id} is recorded; `passhat status {run_id}` shows it"


def _fail_if_known(err: Exception) -> None:
    """One clear line and its exit code for a failure passhat expects; nothing for
    others. The error classes are imported only once something failed: their modules
    (the Temporal SDK, the store) are slow to load, and `passhat domains` needs neither."""
    if isinstance(err, (typer.Exit, typer.Abort, ClickException)):
        return  # how a command ends on purpose
    from passhat.domains.base import DomainLoadError
    from passhat.domains.plugins import PluginError
    from passhat.domains.task_file import TaskFileError
    from passhat.infra.store import StoreError
    from passhat.infra.temporal_client import TemporalUnreachable
    from passhat.infra.temporal_server import TemporalServerError
    from passhat.results.records import ResultsError
    from passhat.run_identity import ConfigMismatchError
    from passhat.workflows.client import RunEnded

    if isinstance(err, TemporalServerError):
        fail(str(err))  # multi-line on purpose: it ends with the server's log excerpt
    if isinstance(err, (UserInputError, PluginError, DomainLoadError, ResultsError, ConfigMismatchError,
                        StoreError, TemporalUnreachable, TaskFileError)):
        # One line: database drivers (psycopg) wrap and indent their messages.
        fail(" ".join(str(err).split()))
    if isinstance(err, RunEnded):
        # Not bad input: the run was cancelled (from another shell) or terminated.
        fail(str(err), RUN_ENDED_EXIT)
    from passhat.infra.temporal_client import server_gone

    if server_gone(err):
        fail(server_gone_words(err), SERVER_GONE_EXIT)


def server_gone_words(err: Exception, then: str = "run the command again") -> str:
    """What to say when the Temporal server stopped answering under a command."""
    from passhat.infra import settings

    start = "" if settings.temporal_address() else " (`passhat server start` starts the embedded one)"
    return (f"the Temporal server stopped answering ({getattr(err, 'message', None) or err}); what was "
            f"recorded is kept: once it is back{start}, {then}")


def open_store():  # noqa: ANN201 - a passhat.infra.store.Store
    """The results store. Its module is imported here, when a command runs, and not at
    the top: SQLAlchemy takes longer to import than the rest of `passhat --help`."""
    from passhat.infra.store import Store

    return Store()


def existing_run(store, run_id: str):  # noqa: ANN001, ANN201 - a Store, its RunRow
    """The run's record, or one clear line saying there is no such run."""
    row = store.get_run(run_id)
    if row is None:
        from passhat.cli.rounds import recorded_rounds

        rounds = recorded_rounds(store, run_id)
        if rounds:  # a gate's or an adaptive run's id: its rounds are the runs
            fail(f"'{run_id}' ran in rounds, each a run of its own: {', '.join(rounds)}; name them "
                 f"(`passhat report {' '.join(rounds)}`), or `passhat status {run_id}` for its result")
        fail(f"no run '{run_id}' in the results store ({store.safe_url}); `passhat runs` lists them")
    return row


def load_recorded_plugins(row) -> None:  # noqa: ANN001 - a RunRow
    """Import the plugins a run was made with, as `resume` does: its domains may be
    theirs, and reading its results (its tasks, its tau2 environment) needs them."""
    from passhat.domains.plugins import load_run_plugins

    load_run_plugins(row.run_id, row.run_config().plugins, [], then="run the command again")


def check_output(output: str) -> None:
    if output not in ("table", "json"):
        raise UserInputError(f"--output must be 'table' or 'json', got '{output}'")


@contextmanager
def _usage_errors_as_one_line():  # noqa: ANN202
    try:
        yield
    except NoArgsIsHelpError:
        raise  # `passhat` alone prints the help
    except UsageError as err:
        where = f" — see `{err.ctx.command_path} --help`" if err.ctx else ""
        fail(f"{err.format_message()}{where}", err.exit_code)


class OneLineUsageErrors(TyperGroup):
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


def startup_mark(phase: str) -> None:
    """With PASSHAT_STARTUP_LOG set (bench/throughput.py sets it), append when this
    process reached a phase of its start-up: `<phase> <unix time>`, one a line."""
    import os

    path = os.environ.get("PASSHAT_STARTUP_LOG")
    if path:
        import time

        with open(path, "a") as log:
            log.write(f"{phase} {time.time():.4f}\n")
