"""How results look on a terminal and as JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from workflows.specs import RunSummary


def summary_json(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode="json"))


def summary_table(summary: RunSummary) -> Table:
    ks = sorted({k for r in summary.results for k in r.pass_hat_k}, key=int)
    table = Table(title=f"passhat run {summary.run_id}")
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
