"""The commands that look after passhat's machinery rather than a run: the domains and
their tasks, a standalone worker, the embedded Temporal server, and passhat's search
attributes on a Temporal cluster."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from typing import Optional

import typer

from passhat.cli.common import one_line_errors, out_console
from passhat.cli.execute import MAX_CONCURRENT_ACTIVITIES
from passhat.cli.run_config import parse_provider_limits
from passhat.cli.run_options import UserInputError

REASON_WIDTH = 100  # `passhat tasks`: characters of a task's reason for calling


PLUGIN_HELP = "Import this module first (repeat for several): it may register domains."


domains_app = typer.Typer(help="List the domains and how many tasks each has; `domains check NAME` checks a domain's tasks.",
                          invoke_without_command=True)


@domains_app.callback()
@one_line_errors
def domains(ctx: typer.Context,
            plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help=PLUGIN_HELP)) -> None:
    """List the domains and how many tasks each has."""
    from passhat.domains.base import DomainLoadError
    from passhat.domains.plugins import load_plugins
    from passhat.domains.registry import domain_names, task_count
    from passhat.domains.task_sets import load_task_set, task_set_names
    from passhat.domains.tau2_catalog import tau2_task_count

    load_plugins(plugin)
    if ctx.invoked_subcommand is not None:
        return
    for name in domain_names():
        try:
            print(f"{name}\t{task_count(name)} tasks")
        except DomainLoadError as err:  # one domain's missing dependency hides none of the rest
            print(f"{name}\tcannot load\t{str(err).split(': ', 1)[-1]}")
    # Task sets beyond the domains' own: run with --domain D --task-set-name NAME.
    for name in task_set_names():
        count = tau2_task_count(name)
        if count is None:
            count = len(load_task_set(name, None))
        print(f"{name}\t{count} tasks\ttask set (--task-set-name {name})")


@domains_app.command("check")
@one_line_errors
def domains_check(
    domain: str = typer.Argument(..., help="Domain name."),
    task: list[str] = typer.Option([], "--task", "-t", help="Task id to check (repeat); default: every task."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help=PLUGIN_HELP),
) -> None:
    """Check a domain's tasks offline, as the scripted oracle plays them: gold actions that
    do not score 1.0, and evaluations that cannot fail. Exit 1 when something is found."""
    from passhat.domains.base import UnknownDomainError
    from passhat.domains.check import check_domain
    from passhat.domains.plugins import load_plugins
    from passhat.domains.registry import get_domain
    from passhat.domains.task_file import TaskFileError

    load_plugins(plugin)
    try:
        d = get_domain(domain)
        missing = [t for t in task if t not in set(d.task_ids())]
    except (UnknownDomainError, TaskFileError) as err:
        raise UserInputError(str(err))
    if missing:
        raise UserInputError(f"unknown task id(s) for domain {domain}: {', '.join(missing)} "
                             f"(see `passhat tasks {domain}`)")
    checks = check_domain(d, task or None)
    found = 0
    for result in checks:
        for finding in result.findings:
            print(f"{domain}\t{result.task_id}\t{finding}")
            found += 1
    flagged = sum(1 for r in checks if r.findings)
    print(f"{domain}: {len(checks)} task(s) checked, {flagged} with findings ({found} in all)")
    if found:
        raise typer.Exit(1)


@one_line_errors
def tasks(
    domain: str = typer.Argument(..., help="Domain name."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help=PLUGIN_HELP),
) -> None:
    """List a domain's task ids (or a task set's, such as telecom_full) with the user's reason for calling."""
    from passhat.domains.base import UnknownDomainError
    from passhat.domains.plugins import load_plugins
    from passhat.domains.task_file import TaskFileError

    load_plugins(plugin)
    try:
        reasons = _task_reasons(domain)
    except (UnknownDomainError, TaskFileError) as err:
        raise UserInputError(str(err))
    for task_id, reason in reasons:
        reason = (reason or "").strip().splitlines()
        # Whole words, and an ellipsis where the line was cut.
        print(f"{task_id}\t{textwrap.shorten(reason[0], REASON_WIDTH, placeholder=' …') if reason else ''}")


def _task_reasons(name: str) -> list[tuple[str, str | None]]:
    """Each task id of a domain, or of a task set of tau2's registry that is not a
    domain's own (telecom_full), with the user's reason for calling."""
    from passhat.domains.base import UnknownDomainError
    from passhat.domains.registry import get_domain
    from passhat.domains.task_sets import load_task_set, task_set_names

    try:
        d = get_domain(name)
    except UnknownDomainError:
        if name not in task_set_names():
            raise
        return [(t.id, getattr(t.user_scenario.instructions, "reason_for_call", None))
                for t in load_task_set(name, None)]
    return [(t, d.task(t).reason_for_call) for t in d.task_ids()]


@one_line_errors
def worker(
    processes: int = typer.Option(1, "--processes", "-p", help="Worker processes to run on this machine (one process uses one core)."),
    max_concurrent_activities: int = typer.Option(MAX_CONCURRENT_ACTIVITIES, help="Activities each worker process runs at once."),
    rate_limit: list[str] = typer.Option([], "--rate-limit", metavar="PROVIDER=N/min", help="Serve a capped provider's task queue at this rate; every worker of a run started with --rate-limit must be given the same caps."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help="Import this module (repeat for several) and serve the runs started with exactly these plugins (see docs/plugins.md)."),
) -> None:
    """Run a standalone worker on the passhat task queue (Ctrl-C to stop)."""
    import socket

    from passhat.cli.worker_processes import worker_processes
    from passhat.domains.plugins import PluginError, load_plugins, run_plugins
    from passhat.workflows.worker import preload, serve

    if processes < 1:
        raise UserInputError(f"--processes must be at least 1, got {processes}")
    limits = parse_provider_limits(rate_limit)
    plugins = run_plugins(plugin)
    try:  # before forking: every worker process inherits them
        load_plugins(plugins)
    except PluginError as err:
        raise UserInputError(f"{err} (worker on {socket.gethostname()}, pid {os.getpid()}; "
                             "it serves no run until the module imports)") from None
    # This process is one of the workers; the others are its children, forked with
    # the model client and tau2 already imported (the domains a run will use are
    # not known yet: each process loads them on first use).
    if processes > 1:
        preload([], plugins)
    try:
        with worker_processes(processes - 1, max_concurrent_activities=max_concurrent_activities,
                              provider_limits=limits, plugins=plugins):
            asyncio.run(serve(max_concurrent_activities=max_concurrent_activities,
                              provider_limits=limits, announce=True, plugins=plugins))
    except KeyboardInterrupt:
        # Ctrl-C is how a worker is meant to stop, not an error: one plain line, and
        # the shell's code for "ended by SIGINT" so a script that runs it can tell.
        print("passhat worker stopped", file=sys.stderr)
        raise typer.Exit(130) from None


server_app = typer.Typer(help="Manage the embedded Temporal dev server (database and web UI under PASSHAT_HOME).", no_args_is_help=True)


@server_app.command("start")
@one_line_errors
def server_start(
    port: Optional[int] = typer.Option(None, "--port", envvar="PASSHAT_TEMPORAL_PORT", show_default="7233", help="gRPC port of the server (PASSHAT_TEMPORAL_PORT sets it for every command that starts the server)."),
    ui_port: Optional[int] = typer.Option(None, "--ui-port", envvar="PASSHAT_UI_PORT", show_default="8233", help="Port of its web UI (PASSHAT_UI_PORT)."),
) -> None:
    """Start the embedded Temporal dev server (or report the running one, on its ports)."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    for value, name in ((port, "--port (or PASSHAT_TEMPORAL_PORT)"), (ui_port, "--ui-port (or PASSHAT_UI_PORT)")):
        if value is not None:
            try:
                settings.check_port(value, name)
            except ValueError as err:
                raise UserInputError(str(err)) from None
    from passhat.cli import warm_start

    server = asyncio.run(EmbeddedServer(settings.home(), port=port, ui_port=ui_port).ensure_running())
    warm_start.start_warm_process()  # in the background: the next run's command starts in it
    out_console.print(f"Temporal dev server at {server.address}\nWeb UI: {server.ui_url}")


@server_app.command("stop")
@one_line_errors
def server_stop() -> None:
    """Stop the embedded Temporal dev server (its database file is kept)."""
    from passhat.cli.warm_start import stop_warm_process
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    stop_warm_process()
    stopped = EmbeddedServer(settings.home()).stop()
    out_console.print("stopped" if stopped else "not running")


@server_app.command("status")
@one_line_errors
def server_status() -> None:
    """Is the embedded Temporal dev server running, and where."""
    from passhat.infra import settings
    from passhat.infra.temporal_server import EmbeddedServer

    from passhat.cli import warm_start

    st = EmbeddedServer(settings.home()).status()
    if st.running:
        out_console.print(f"running (pid {st.pid}) at {st.address}\nWeb UI: {st.ui_url}")
        warm = warm_start.warm_process_pid()
        out_console.print(f"warm process: pid {warm}, ready for the next run" if warm else
                          "warm process: none (the next run starts one; see docs/architecture.md)"
                          if warm_start.enabled() else "warm process: off (PASSHAT_WARM_START=0)")
    else:
        out_console.print("not running; `passhat server start` starts it")


search_attributes_app = typer.Typer(help="Passhat's custom search attributes on a Temporal cluster.", no_args_is_help=True)


@search_attributes_app.command("register")
@one_line_errors
def register_search_attributes() -> None:
    """Register PasshatRun, PasshatAgentModel, PasshatDomain, PasshatTask and
    PasshatOutcome (Keyword) on TEMPORAL_ADDRESS's namespace (needs operator rights)."""
    from temporalio.api.enums.v1 import IndexedValueType

    for name, kind in sorted(asyncio.run(_register_search_attributes()).items()):
        if name.startswith("Passhat"):
            print(f"{name}\t{IndexedValueType.Name(kind).removeprefix('INDEXED_VALUE_TYPE_').title()}")


async def _register_search_attributes() -> dict:
    from passhat.infra import search_attributes
    from passhat.infra.temporal_client import connect

    client = await connect()
    await search_attributes.register(client, client.namespace)
    return await search_attributes.registered(client, client.namespace)
