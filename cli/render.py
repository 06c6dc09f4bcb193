"""How results look on a terminal and as JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from passhat.contracts import RunSummary, outcome_label


def summary_json(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode="json"))


def summary_table(summary: RunSummary) -> Table:
    ks = sorted({k for r in summary.results for k in r.pass_hat_k}, key=int)
    title = f"passhat run {summary.run_id}"
    if summary.departures:
        title += "\nDEPARTS FROM tau2: " + "; ".join(summary.departures)
    table = Table(title=title)
    for col in ("agent model", "user model", "domain", "tasks", "trials", "evaluable", "avg reward"):
        table.add_column(col, justify="right" if col in ("tasks", "trials", "evaluable", "avg reward") else "left")
    for k in ks:
        table.add_column(f"pass^{k}", justify="right")
    for r in summary.results:
        table.add_row(
            r.agent_model, r.user_model, r.domain, str(r.tasks), str(r.trials), str(r.evaluable),
            "-" if r.avg_reward is None else f"{r.avg_reward:.3f}",
            *(f"{r.pass_hat_k[k]:.3f}" if k in r.pass_hat_k else "-" for k in ks),
        )
    return table


def print_summary(summary: RunSummary, output: str, console: Console) -> None:
    if output == "json":
        print(summary_json(summary))
    else:
        console.print(summary_table(summary))


def trial_links(row, ui: str | None, namespace: str, jaeger: str) -> tuple[str, str]:  # noqa: ANN001
    """Temporal UI and Jaeger links of a trial ("-" where there is none)."""
    from urllib.parse import quote

    temporal = (
        f"{ui}/namespaces/{namespace}/workflows?query="
        + quote(f'WorkflowId="{row.trial_id}"', safe="")
        if ui
        else "-"
    )
    return temporal, (f"{jaeger.rstrip('/')}/trace/{row.trace_id}" if row.trace_id else "-")


TRIAL_COLUMNS = ("trial", "outcome", "reward", "reason", "Temporal UI", "Jaeger")


def trial_rows(rows, ui: str | None, namespace: str, jaeger: str) -> list[tuple[str, ...]]:  # noqa: ANN001
    out = []
    for row in rows:
        reason = " ".join((row.error or row.termination_reason or "").split())
        temporal, jaeger_link = trial_links(row, ui, namespace, jaeger)
        out.append((
            row.trial_id, outcome_label(row.status, row.reward), "-" if row.reward is None else f"{row.reward:g}",
            (f"{row.error_class}: " if row.error_class and row.error else "") + reason[:300],
            temporal, jaeger_link,
        ))
    return out


def print_trials(rows, ui: str | None, namespace: str, jaeger: str, console: Console) -> None:  # noqa: ANN001
    """A table on a terminal; tab-separated lines (whole links, easy to grep) otherwise."""
    lines = trial_rows(rows, ui, namespace, jaeger)
    if not console.is_terminal:
        print("\t".join(TRIAL_COLUMNS))
        for line in lines:
            print("\t".join(line))
        return
    table = Table(title=f"{len(lines)} trial(s)")
    for col in TRIAL_COLUMNS:
        table.add_column(col, overflow="fold")
    for line in lines:
        table.add_row(*line)
    console.print(table)


def transcript(trial, steps, console: Console) -> None:  # noqa: ANN001
    """A trial's conversation: messages, tool calls and results, then the score."""
    console.print(
        f"[bold]{trial.trial_id}[/]\n"
        f"agent {trial.agent_model}, user {trial.user_model}, domain {trial.domain}, "
        f"task {trial.task_id}, trial {trial.trial_index}, seed {trial.seed}\n"
        f"outcome [bold]{outcome_label(trial.status, trial.reward)}[/], reward {trial.reward}, "
        f"termination {trial.termination_reason}, steps {trial.n_steps}, "
        f"tokens {trial.input_tokens} in / {trial.output_tokens} out, cost ${trial.cost:.4f}",
        highlight=False,
    )
    if trial.error:
        console.print(f"[red]not evaluable: {trial.error_class}: {trial.error}[/]", highlight=False)
    names = {"assistant": "agent", "user": "user", "tool": "tool"}
    for step in steps:
        for m in step.message_list():
            who = names[m.role] if m.role != "tool" else f"tool -> {names[m.requestor or 'assistant']}"
            if m.tool_calls:
                for call in m.tool_calls:
                    args = call.invalid_arguments if call.invalid_arguments is not None else json.dumps(call.arguments)
                    console.print(f"[dim]{step.step:>3}[/] [bold]{who}[/] calls {call.name}({args})", highlight=False, markup=True)
            if m.content or not m.tool_calls:
                style = "red" if m.error else ""
                text = (m.content or "(empty)").replace("[", "\\[")
                console.print(f"[dim]{step.step:>3}[/] [bold]{who}[/]: [{style}]{text}[/]" if style else f"[dim]{step.step:>3}[/] [bold]{who}[/]: {text}", highlight=False)
    info = trial.reward_info()
    if info:
        console.print("[bold]score[/]", highlight=False)
        console.print_json(json.dumps(info, default=str))
