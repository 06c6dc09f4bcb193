"""The commands that run a run: run, demo, resume and cancel. A run's options and their
checks are in passhat.cli.run_options; executing it from this process is in
passhat.cli.execute."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer

from passhat.cli.common import check_output, existing_run, fail, one_line_errors, open_store, out_console, starting_run
from passhat.cli.execute import execute_here, print_outcome
from passhat.cli.preview import CONFIRM_ABOVE
from passhat.cli.run_config import build_config, check_keys
from passhat.cli.run_options import (
    RunOptions,
    UserInputError,
    check_budget,
    given_on_command_line,
    with_run_options,
)

DEMO_MODELS = ["scripted/oracle", "scripted/noisy-0.7"]


@one_line_errors
@with_run_options(after={"config": "user_model", "yes": "max_cost", "detach": "model_timeout",
                         "workers": "model_timeout", "output": "max_concurrent", "adaptive": "trials",
                         "precision": "trials", "confidence": "trials", "precision_metric": "trials"})
def run(
    ctx: typer.Context,
    options: RunOptions,
    config: Optional[str] = typer.Option(None, "--config", help="A sweep config (TOML): agent models each with their own args, user model, domains, tasks, trials, seed, limits, retry, budget (see the README). Options given on the command line override it."),
    yes: bool = typer.Option(False, "--yes", "-y", help=f"Start without asking: a run of more than {CONFIRM_ABOVE} conversations asks for confirmation on a terminal."),
    detach: bool = typer.Option(False, "--detach", help="Start the run and return; a `passhat worker` must be running."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Worker processes this command runs for the run (one process uses one core); default: the machine's cores."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
    adaptive: bool = typer.Option(False, "--adaptive", help="Run in rounds and stop giving tasks trials once the run's pass^k (see --precision-metric) is known to --precision at --confidence; --trials is then the most any task gets. One --agent-model; a killed run resumes with the same command and --run-id."),
    precision: Optional[float] = typer.Option(None, "--precision", metavar="D", help="With --adaptive: the half-width its interval must reach; default 0.05."),
    confidence: Optional[float] = typer.Option(None, "--confidence", help="With --adaptive: the interval's confidence; default 0.95."),
    precision_metric: Optional[str] = typer.Option(None, "--precision-metric", metavar="pass^K", help="With --adaptive: the metric measured to --precision; default pass^1."),
) -> None:
    """Evaluate agent models on tau2 domains and report pass^k."""
    from passhat.cli import sweep_config
    from passhat.domains.plugins import load_plugins

    check_output(output)
    starting_run(options.run_id or "")  # an interruption from here on says what it left
    if workers is not None and workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {workers}")
    load_plugins(options.plugins)  # the config file's domains may be theirs
    options = sweep_config.merge(sweep_config.load(config) if config else None,
                                 options, given_on_command_line(ctx))
    sweep_config.check_required(options, f" — see `{ctx.command_path} --help`")
    run_config = build_config(options)
    starting_run(run_config.run_id)
    target = None
    if adaptive:
        from passhat.cli import adaptive as adaptive_run

        target = adaptive_run.check(run_config, precision_metric, 0.05 if precision is None else precision,
                                    0.95 if confidence is None else confidence)
    elif (precision, confidence, precision_metric) != (None, None, None):
        raise UserInputError("--precision, --confidence and --precision-metric go with --adaptive")
    if not detach:  # a detached run's keys are in its workers' environment, not here
        check_keys(run_config)
    if target is not None:
        adaptive_run.run_adaptive(run_config, target, workers=workers, yes=yes, output=output, detach=detach)
        return
    print_outcome(execute_here(run_config, detach=detach, output=output, workers=workers,
                               preview=True, yes=yes), output)


@one_line_errors
def demo(
    tasks: int = typer.Option(10, help="How many of the domain's tasks to sweep (airline has 50)."),
    trials: int = typer.Option(4, "--trials", "-k", help="Trials per task (at least 1)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    yes: bool = typer.Option(False, "--yes", "-y", help=f"Start without asking: more than {CONFIRM_ABOVE} conversations ask for confirmation on a terminal."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help="Import this module first (repeat for several); with --domain, sweep one of its domains."),
    domain: str = typer.Option("airline", "--domain", "-d", help="The domain to sweep."),
) -> None:
    """A short offline sweep: scripted/oracle and scripted/noisy-0.7 on airline, k=4, on the embedded Temporal server. No keys needed."""
    check_output(output)
    config = build_config(RunOptions(domains=[domain], agent_models=DEMO_MODELS, plugins=plugin,
                                     user_model="scripted/oracle", trials=trials, concurrency=16),
                          limit=tasks)
    print_outcome(execute_here(config, detach=False, output=output, preview=True, yes=yes), output)


@one_line_errors
def resume(
    run_id: str = typer.Argument(..., help="Run id."),
    detach: bool = typer.Option(False, "--detach", help="Restart the run and return; a `passhat worker` must be running."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", metavar="USD", help="A new budget for the run (all it has recorded counts toward it); default: the budget it was started with, if any."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help="Not needed: the run's recorded plugins are imported, and its work stays on their task queue. If given, it must name the same set (a run keeps its plugins; see docs/plugins.md)."),
) -> None:
    """Finish an interrupted run: only unfinished and not-evaluable trials run again;
    scored trials and recorded steps are kept as they are."""
    check_budget(max_cost)
    starting_run(run_id)
    row = existing_run(open_store(), run_id)
    _refuse_imported(row, "resume")
    config = row.run_config()
    from passhat.domains.plugins import load_run_plugins

    load_run_plugins(run_id, config.plugins, plugin)
    # Its domains and agent as they are now: start_run refuses the run if they changed.
    from passhat.domains.a2a_protocol import is_a2a
    from passhat.domains.digest import measured_again

    for agent in [config.agent, *config.a2a_agents]:
        if is_a2a(agent):  # an agent behind A2A is what its card says now
            from passhat.cli.agent_choice import read_a2a_card

            read_a2a_card(agent)
    config = measured_again(config)
    if max_cost is not None:
        config = config.model_copy(update={"max_cost": max_cost})
    if not detach:
        check_keys(config)
    print_outcome(execute_here(config, detach=detach, output=output, resume=True), output)


@one_line_errors
def cancel(run_id: str = typer.Argument(..., help="Run id.")) -> None:
    """Stop a run cleanly; what it recorded stays, and `passhat resume` can continue it."""
    from passhat.cli.rounds import recorded_rounds

    from passhat.activities.review import review_workflow_id

    store = open_store()
    reviewing = run_id.endswith(review_workflow_id(""))  # a run's review: no run of its own
    if not reviewing and (store.get_run(run_id) is not None or not recorded_rounds(store, run_id)):  # else a gate's rounds
        _refuse_imported(existing_run(store, run_id), "cancel")
    how = asyncio.run(_cancel(store, run_id))
    out_console.print(f"run {run_id}: {how}")


async def _cancel(store, run_id: str) -> str:  # noqa: ANN001 - a Store
    from passhat.workflows.client import cancel_run
    from passhat.infra.temporal_client import connect

    # The line before the wait says what is going on while the conversations stop.
    return await cancel_run(await connect(), store, run_id,
                            say=lambda line: out_console.print(f"run {run_id}: {line}"))


def _refuse_imported(row, action: str) -> None:  # noqa: ANN001 - a RunRow
    """An imported run (`passhat import`) has no workflows: nothing to resume or cancel."""
    from passhat.outcomes import RUN_IMPORTED

    if row.status == RUN_IMPORTED:
        fail(f"run {row.run_id} is imported from results files: it has no workflows and "
             f"nothing to {action}")
