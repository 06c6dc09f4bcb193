"""The commands that read recorded results: runs, status, trials, show, report, export and
import. None of them starts a run or the Temporal server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from passhat.cli.common import (
    check_output,
    err_console,
    existing_run,
    fail,
    load_recorded_plugins,
    one_line_errors,
    open_store,
    out_console,
    pipe_width,
)
from passhat.cli.run_options import UserInputError
from passhat.outcomes import RUN_IMPORTED, TRIAL_CANCELLED, TRIAL_RUNNING


@one_line_errors
def runs(
    output: str = typer.Option("table", "--output", "-o", help="table (tab-separated, with a header) or json (schema in the README)."),
) -> None:
    """List the runs in the results store, newest first."""
    check_output(output)
    store = open_store()
    listed = [(row, store.run_progress(row.run_id)) for row in store.list_runs()]
    if output == "json":
        print(json.dumps({"runs": [_run_json(row, p) for row, p in listed]}))
        return
    if not listed:
        err_console.print(f"no runs in the results store ({store.safe_url})", highlight=False)
        return
    print("run\tstatus\ttrials done\tpass^1\tnot evaluable\tcost USD\tcreated (UTC)\ttau2\tdata")
    for row, p in listed:
        version, data = _tau2_of(row)
        print(f"{row.run_id}\t{row.status}\t{p.done}/{p.total}\t{_pass1(p.pass1)}\t"
              f"{p.not_evaluable}\t{p.cost:.4f}\t{row.created_at:%Y-%m-%d %H:%M:%S}\t"
              f"{version or '-'}\t{data or '-'}")


def _tau2_of(row) -> tuple[str | None, str | None]:  # noqa: ANN001 - a RunRow
    """The tau2 version a run's numbers belong to, and its data digest."""
    from passhat.results.report import recorded_tau2

    config = row.run_config()
    return recorded_tau2(config.tau2_version, row.status == RUN_IMPORTED), config.tau2_data


def _pass1(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _run_json(row, progress) -> dict:  # noqa: ANN001 - a RunRow, its RunProgress
    """A run in `runs -o json` and `status -o json` (schema in the README)."""
    version, data = _tau2_of(row)
    return {
        "run_id": row.run_id, "status": row.status, "tau2_version": version, "tau2_data": data,
        "trials": progress.total, "done": progress.done, "not_evaluable": progress.not_evaluable,
        "pass1": progress.pass1, "cost": progress.cost,
        "retrying": progress.retrying, "retry_error": progress.retry_error,
        "created_at": row.created_at.isoformat(), "updated_at": row.updated_at.isoformat(),
    }


@one_line_errors
def status(
    run_id: str = typer.Argument(..., help="Run id."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (schema in the README)."),
) -> None:
    """Show a run's progress and the state of its workflow (never starts the Temporal server)."""
    from passhat.cli.render import retry_line
    from passhat.infra.temporal_client import TemporalUnreachable

    check_output(output)
    store = open_store()
    if store.get_run(run_id) is None:  # a gate or an adaptive run: its rounds are runs
        from passhat.cli.rounds import print_status

        if print_status(store, run_id, output):
            return
    row = existing_run(store, run_id)
    p = store.run_progress(run_id)
    source = store.import_source(run_id)
    if source is not None:  # an imported run has no workflow to ask Temporal about
        names = ", ".join(os.path.basename(f["path"]) for f in source.get("files", []))
        wf, detail = "none", f"imported from {names}"
    else:
        try:
            wf, detail = asyncio.run(_workflow_status(run_id, row.run_config().plugins)) or (
                "unknown", "Temporal has no workflow with this id (closed workflows are kept for the namespace's retention)")
        except TemporalUnreachable as err:  # the store answers even when Temporal is down
            wf, detail = "unknown", " ".join(str(err).split())
        except Exception as err:  # noqa: BLE001 - a status line is better than a traceback
            wf, detail = "unknown", f"{type(err).__name__}: {' '.join(str(err).split())}"
    if output == "json":
        print(json.dumps({**_run_json(row, p), "workflow": wf, "workflow_detail": detail}))
        return
    out_console.print(
        f"run {run_id}: {row.status}; workflow {wf}"
        + (f": {detail}" if wf == "unknown" else f" ({detail})" if detail else "") + "\n"
        f"trials done {p.done}/{p.total}, not evaluable {p.not_evaluable}, "
        f"pass^1 {_pass1(p.pass1)}, cost ${p.cost:.4f}"
        + (f"\n{retry_line(p)}" if p.retrying else ""),
        highlight=False, markup=False,
    )


async def _workflow_status(run_id: str, plugins: list[str]) -> tuple[str, str | None] | None:
    from passhat.workflows.client import workflow_status
    from passhat.infra.temporal_client import connect

    # Read-only: asks a running server, never starts the embedded one.
    return await workflow_status(await connect(start=False), run_id, plugins)


@one_line_errors
def report(
    run_ids: list[str] = typer.Argument(..., metavar="RUN", help="Run ids; with two or more, or one run of several agent models, models are compared task by task."),
    output: str = typer.Option("table", "--output", "-o", help="table (fits 80 columns), json (schema in the README), csv, markdown or html (one self-contained file)."),
    by: Optional[str] = typer.Option(None, "--by", show_default="model", help="model: pass^k curves per model and domain; task: one row per task (table, csv and markdown only: json and html always have both)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Also draw pass^k against k per model, with confidence bands, to this .png (or .svg, .pdf) file."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the report to this file instead of stdout."),
    across_tau2_versions: bool = typer.Option(False, "--across-tau2-versions", help="Compare runs made with different tau2 versions (refused without it: the versions hold and grade conversations differently); the report says so."),
) -> None:
    """pass^k per agent model and domain with bootstrap confidence intervals, cost,
    failure taxonomy and paired comparisons, from the results store; partial runs
    report the trials they finished and say what is missing."""
    from passhat.cli.plots import PLOT_SUFFIXES
    from passhat.cli.report_text import GROUPINGS, OUTPUTS
    from passhat.results.report import build_report

    if output not in OUTPUTS:
        raise UserInputError(f"--output must be one of {', '.join(OUTPUTS)}, got '{output}'")
    if by is not None and by not in GROUPINGS:
        raise UserInputError(f"--by must be one of {', '.join(GROUPINGS)}, got '{by}'")
    if by is not None and output in ("json", "html"):
        raise UserInputError(f"--by applies to table, csv and markdown; -o {output} always has "
                             "both views (per model and per task): leave --by out")
    if plot is not None and Path(plot).suffix.lower() not in PLOT_SUFFIXES:
        raise UserInputError(f"--plot must name a {', '.join(PLOT_SUFFIXES)} file, got '{plot}'")
    # Before anything is printed: a report followed by an error reads as a failed report.
    for option, path in (("--out", out), ("--plot", plot)):
        if path is not None:
            _check_writable(option, Path(path))
    store = open_store()
    for run_id in run_ids:
        existing_run(store, run_id)
    result = build_report(store, run_ids, across_tau2_versions=across_tau2_versions)
    try:
        _write_report(store, result, output, by or "model", out)
        if plot is not None:
            from passhat.cli import plots

            plots.save(plots.pass_hat_figure(result), Path(plot))
    except OSError as err:
        raise UserInputError(f"cannot write {err.filename or out or plot}: {err.strerror or err}")
    for run in result.runs:
        if not run.completeness.complete and (output != "table" or out):
            err_console.print(f"[bold yellow]run {escape(run.run_id)} is PARTIAL:[/] "
                              f"{escape(run.completeness.note)}", highlight=False)


def _check_writable(option: str, path: Path) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UserInputError(f"cannot write {option} {path}: no folder {folder}")
    if path.is_dir():
        raise UserInputError(f"cannot write {option} {path}: it is a folder")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise UserInputError(f"cannot write {option} {path}: permission denied")


# The table's width on a terminal is the terminal's; in a file or a pipe, COLUMNS when
# it is set, else the 80 columns it promises.
TABLE_WIDTH = 80


def _write_report(store, result, output: str, by: str, out: str | None) -> None:  # noqa: ANN001 - a Store, a Report
    from passhat.cli import report_text

    if output == "table":
        if out is None:
            console = out_console if out_console.is_terminal else Console(width=pipe_width(TABLE_WIDTH),
                                                                                     soft_wrap=False)
            report_text.report_table(result, by, console)
            _review_summaries(store, result, console)
            return
        with open(out, "w") as f:
            console = Console(file=f, width=pipe_width(TABLE_WIDTH))
            report_text.report_table(result, by, console)
            _review_summaries(store, result, console)
        return
    if output == "html":
        from passhat.cli import html_report
        from passhat.cli.html_report import trial_views
        from passhat.infra import settings
        from passhat.infra.temporal_client import ui_url

        # ui_url() only looks for a running embedded server: a report starts nothing.
        ui, namespace, jaeger = ui_url(), settings.temporal_namespace(), settings.jaeger_ui_url()
        from passhat.results.review_report import lines, summary

        reviews = [lines(data) for data in (summary(store, r.run_id) for r in result.runs) if data is not None]
        text = html_report.render(result, {r.run_id: trial_views(store, r, ui, namespace, jaeger)
                                           for r in result.runs}, reviews)
    elif output == "json":
        from passhat.results.review_report import summary

        # The LLM review of each run that has one (`passhat review`): never in place of pass^k.
        reviews = {r.run_id: summary(store, r.run_id) for r in result.runs}
        text = json.dumps({**json.loads(result.model_dump_json()), "reviews": reviews}, indent=1) + "\n"
    elif output == "csv":
        text = report_text.report_csv(result, by)
    else:
        text = report_text.report_markdown(result, by)
    if out is None:
        sys.stdout.write(text)
    else:
        with open(out, "w") as f:
            f.write(text)


def _review_summaries(store, result, console: Console) -> None:  # noqa: ANN001 - a Store, a Report
    """Under the table: each run's LLM review, labelled as such (`passhat review`)."""
    from passhat.results.review_report import lines, summary

    for run in result.runs:
        data = summary(store, run.run_id)
        if data is not None:
            console.print("\n".join(lines(data)), highlight=False, markup=False, soft_wrap=True)


@one_line_errors
def trials(
    run_id: str = typer.Argument(..., help="Run id."),
    failed: bool = typer.Option(False, "--failed", help="Only failed trials: scored below 1, or not evaluable."),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="Only this domain."),
    agent_model: Optional[str] = typer.Option(None, "--agent-model", "-m", help="Only this agent model."),
    links: bool = typer.Option(False, "--links", help="On a terminal, show each trial's Temporal UI and Jaeger links (piped output always has them)."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (schema in the README)."),
) -> None:
    """List a run's trials with outcome and reason (and Temporal UI and Jaeger links)."""
    from passhat.cli.render import print_trials, trials_json
    from passhat.infra import settings
    from passhat.infra.temporal_client import ui_url

    check_output(output)
    store = open_store()
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


@one_line_errors
def show(
    trial_id: str = typer.Argument(..., help="Trial id, as `passhat trials` lists it."),
    output: str = typer.Option("table", "--output", "-o", help="table (the transcript) or json (one object, as a line of `export --format jsonl`)."),
) -> None:
    """Print a trial's transcript: messages, tool calls and results, the score breakdown."""
    from passhat.cli.render import judge_json, review_lines, transcript
    from passhat.results.review_report import trial_reviews_json
    from passhat.run_identity import agent_identity

    check_output(output)
    store = open_store()
    trial = store.get_trial(trial_id)
    if trial is None:
        fail(f"no trial '{trial_id}'; `passhat trials RUN` lists a run's trial ids")
    from passhat.domains.a2a_protocol import RESTART as A2A_RESTART
    from passhat.domains.nl_judge import judge_key

    steps = store.steps(trial_id)
    # tau2 1.0.x's NL-assertion judge: a model call of its own, kept beside the conversation.
    judge = store.get_step(judge_key(trial_id), 0)
    reviews = trial_reviews_json(store, trial_id)  # `passhat review`: every judge's
    if trial.status in (TRIAL_RUNNING, TRIAL_CANCELLED):
        # A trial's row gets its totals when it ends; until then its steps hold them.
        trial = trial.model_copy(update={
            "n_steps": len(steps), "input_tokens": sum(s.input_tokens for s in steps),
            "output_tokens": sum(s.output_tokens for s in steps), "cost": sum(s.cost for s in steps)})
    run = store.get_run(trial.run_id)
    agent = None if run is None else agent_identity(run.run_config(), trial.agent_model)
    restarts = store.set_aside_ending(trial.run_id, A2A_RESTART, trial_id).get(trial_id, 0)
    if output == "json":
        from passhat.results.jsonl import jsonl_line

        print(json.dumps({**jsonl_line(trial.run_id, trial, steps, agent=agent),
                          "attempts": trial.attempts, "n_steps": trial.n_steps, "a2a_restarts": restarts,
                          "judge": judge_json(judge), "diagnosis": trial.diagnosis(), "reviews": reviews}))
        return
    transcript(trial, steps, out_console, judge=judge, agent=agent, restarts=restarts)
    review_lines(reviews, out_console)


@one_line_errors
def export(
    run_id: str = typer.Argument(..., help="Run id."),
    format: str = typer.Option("tau2", "--format", "-f", help="tau2: one file per agent model and domain in tau2's results schema (tau2 evaluate-trajs and submit read it); jsonl: one trial per line (schema in the README)."),
    # No -o: everywhere else -o is --output, the format of what a command prints.
    output_dir: str = typer.Option(".", "--output-dir", help="Directory to write to (created if missing)."),
    partial: bool = typer.Option(False, "--partial", help="Export a run that has not finished: only its finished trials, in files named *.partial.*"),
) -> None:
    """Write a run's results to files: tau2's results schema, or JSON lines."""
    from passhat.results.exporting import export_run

    store = open_store()
    load_recorded_plugins(existing_run(store, run_id))
    result = export_run(store, run_id, format, output_dir, partial=partial)
    for path in result.paths:
        print(path)
    note = f"{result.trials} trial(s) in {len(result.paths)} file(s), {result.tau2}"
    if result.partial:
        note += "; PARTIAL: the run has not finished"
    if result.left_out:
        note += (f"; {result.left_out} trial(s) not scored (not evaluable or unfinished) left out, "
                 "as tau2 has no such state (--format jsonl has them)")
    err_console.print(f"exported run {run_id}: {note}", highlight=False)


@one_line_errors
def import_files(
    files: list[str] = typer.Argument(..., help="tau2 results files (one per agent model and domain) and/or tau-bench v1 result files."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name the run; default: derived from the files' contents, so importing the same files again changes nothing."),
    domain: Optional[str] = typer.Option(None, "--domain", "-d", help="tau-bench files only: airline or retail, when the file does not show it."),
    agent_model: Optional[str] = typer.Option(None, "--agent-model", "-m", help="tau-bench files only: the agent model (default: from tau-bench's file name)."),
    user_model: Optional[str] = typer.Option(None, "--user-model", "-u", help="tau-bench files only: the user model (default: from tau-bench's file name)."),
    plugin: list[str] = typer.Option([], "--plugin", metavar="MODULE", help="Import this module first (repeat for several): it registers the files' domain; the run records it, as a run made with it would."),
) -> None:
    """Load results files into the store as an imported run that report, trials, show
    and export work on (it has no workflows: resume and cancel refuse it)."""
    from passhat.domains.plugins import load_plugins, run_plugins
    from passhat.results import importing

    plugins = run_plugins(plugin)
    load_plugins(plugins)
    result = importing.import_files(open_store(), files, run_id=run_id, domain=domain,
                                   agent_model=agent_model, user_model=user_model, plugins=plugins)
    print(result.run_id)
    if result.already:
        err_console.print(f"already imported as run {result.run_id}; nothing changed", highlight=False)
    else:
        err_console.print(
            f"imported run {result.run_id}: {result.trials} trial(s) of {result.tasks} task(s) from "
            f"{result.files} file(s) ({'; '.join(result.summary)}); `passhat report {result.run_id}` shows pass^k",
            highlight=False,
        )
