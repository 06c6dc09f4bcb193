"""How results look on a terminal and as JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from passhat.contracts import DEFAULT_AGENT, TRIAL_NOT_EVALUABLE, RunSummary, outcome_label
from passhat.results.jsonl import jsonl_line
from passhat.results.report import ACROSS_VERSIONS_NOTE


def summary_json(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode="json"))


def summary_table(summary: RunSummary) -> Table:
    ks = sorted({k for r in summary.results for k in r.pass_hat_k}, key=int)
    title = f"passhat run {summary.run_id}"
    if summary.departures:
        title += "\nDEPARTS FROM tau2: " + "; ".join(summary.departures)
    lost = [f"{r.agent_model} on {r.domain}: " + ", ".join(
                f"pass^{k} {v:.3f}" for k, v in sorted(r.pass_hat_k_leaderboard.items(), key=lambda kv: int(kv[0])))
            for r in summary.results if r.pass_hat_k_leaderboard is not None]
    caption = ("pass^k leaves not-evaluable trials out; as the leaderboard counts them "
               "(failures): " + "; ".join(lost)) if lost else None
    table = Table(title=title, caption=caption)
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


def workflow_link(ui: str, workflow_id: str, namespace: str | None = None) -> str:
    """The Temporal UI page of one workflow (its latest execution), in the configured
    namespace unless told otherwise."""
    from urllib.parse import quote

    from passhat.infra import settings

    namespace = namespace or settings.temporal_namespace()
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace, safe='')}/workflows/{quote(workflow_id, safe='')}"


def trial_links(row, ui: str | None, namespace: str, jaeger: str) -> tuple[str, str]:  # noqa: ANN001
    """Temporal UI and Jaeger links of a trial ("-" where there is none)."""
    temporal = workflow_link(ui, row.trial_id, namespace) if ui else "-"
    return temporal, (f"{jaeger.rstrip('/')}/trace/{row.trace_id}" if row.trace_id else "-")


TRIAL_COLUMNS = ("trial", "outcome", "reward", "reason", "Temporal UI", "Jaeger")


def _reward(row) -> str:  # noqa: ANN001
    return "-" if row.reward is None else f"{row.reward:g}"


def error_words(error_class: str | None, error: str | None) -> str:
    """An error on one line, its class named once. passhat's own messages begin with
    the class ("AuthenticationError (HTTP 401) calling m: ..."), and providers' often
    repeat it ("AuthenticationError: AuthenticationError: ...")."""
    name = error_class or "error"
    text = " ".join((error or "").split())
    while text.startswith(f"{name}: "):
        text = text[len(name) + 2:]
    if not text:
        return name
    if text == name or text.startswith((f"{name} ", f"{name}:")):
        return text
    return f"{name}: {text}"


def trial_rows(rows, ui: str | None, namespace: str, jaeger: str) -> list[tuple[str, ...]]:  # noqa: ANN001
    out = []
    for row in rows:
        reason = (error_words(row.error_class, row.error) if row.error
                  else " ".join((row.termination_reason or "").split()))
        temporal, jaeger_link = trial_links(row, ui, namespace, jaeger)
        out.append((
            row.trial_id, outcome_label(row.status, row.reward), _reward(row), reason[:300],
            temporal, jaeger_link,
        ))
    return out


# The trials table's columns after the id: outcome, reward, and at least this much reason.
_OUTCOME_W, _REWARD_W, _REASON_MIN_W = 13, 6, 12


def print_trials(rows, ui: str | None, namespace: str, jaeger: str, console: Console,  # noqa: ANN001
                 *, links: bool = False) -> None:
    """On a terminal, one line per trial with its whole id (copyable, never wrapped) and
    the reason cut to the width; with `links`, each trial's Temporal UI and Jaeger links
    on lines of their own. Piped: tab-separated lines with every column, links included
    (whole, easy to grep)."""
    lines = trial_rows(rows, ui, namespace, jaeger)
    if not console.is_terminal:
        print("\t".join(TRIAL_COLUMNS))
        for line in lines:
            print("\t".join(line))
        return
    id_width = max((len(line[0]) for line in lines), default=5)
    reason_width = console.width - id_width - _OUTCOME_W - _REWARD_W - 6
    if not links and reason_width >= _REASON_MIN_W:
        # Fixed columns: the ids' width is never shared out, so an id is never cut.
        console.print(f"{len(lines)} trial(s)", highlight=False)
        for trial, outcome, reward, reason in [("trial", "outcome", "reward", "reason"),
                                               *(line[:4] for line in lines)]:
            if len(reason) > reason_width:
                reason = reason[: reason_width - 1] + "…"
            console.print(f"{trial:<{id_width}}  {outcome:<{_OUTCOME_W}}  {reward:>{_REWARD_W}}  {reason}",
                          highlight=False, markup=False, no_wrap=True, overflow="ignore")
    else:  # ids too long for a table at this width, or links asked for: a block per trial
        console.print(f"{len(lines)} trial(s)", highlight=False)
        for trial, outcome, reward, reason, temporal, jaeger_link in lines:
            console.print(trial, highlight=False, markup=False, soft_wrap=True)
            console.print(f"    {outcome}, reward {reward}" + (f": {reason}" if reason else ""),
                          highlight=False, markup=False, no_wrap=True, overflow="ellipsis")
            if links:
                console.print(f"    Temporal UI: {temporal}\n    Jaeger: {jaeger_link}",
                              highlight=False, markup=False, soft_wrap=True)
    if not links and any(line[4] != "-" or line[5] != "-" for line in lines):
        console.print("[dim]--links shows each trial's Temporal UI and Jaeger links[/]", highlight=False)


def trials_json(run_id: str, rows, ui: str | None, namespace: str, jaeger: str) -> str:  # noqa: ANN001
    """`passhat trials -o json`: one object, each trial as in the JSON-lines export
    without its conversation and score details, plus its outcome, attempts and links."""
    trials = []
    for row in rows:
        line = jsonl_line(run_id, row, [])
        del line["messages"], line["reward_info"]
        temporal, jaeger_link = trial_links(row, ui, namespace, jaeger)
        trials.append({**line, "outcome": outcome_label(row.status, row.reward),
                       "attempts": row.attempts, "n_steps": row.n_steps,
                       "temporal_ui": None if temporal == "-" else temporal,
                       "jaeger": None if jaeger_link == "-" else jaeger_link})
    return json.dumps({"run_id": run_id, "trials": trials})


def not_evaluable_line(row) -> str:  # noqa: ANN001 - a TrialRow
    """The console's one line for a trial that could not be evaluated."""
    error = error_words(row.error_class, row.error)
    if len(error) > 200:
        error = error[:197] + "..."
    return f"not evaluable: {row.trial_id}: {error}"


def retry_line(progress) -> str | None:  # noqa: ANN001 - a RunProgress
    """What the progress bar and `status` say while model calls are being retried: how
    many, and the latest error's class (the provider's text is in the log), e.g.
    "retrying 2 calls: InternalServerError (HTTP 500)"; None while none is."""
    if progress is None or not progress.retrying:
        return None
    calls = "call" if progress.retrying == 1 else "calls"
    return f"retrying {progress.retrying} {calls}: {progress.retry_error}"


def progress_with_note(*columns, **kwargs):  # noqa: ANN002, ANN003, ANN201 - a rich Progress
    """A rich Progress that shows a line under its bars, its `note` (when not empty)."""
    from rich.progress import Progress
    from rich.text import Text

    class NotedProgress(Progress):
        note: str | None = None

        def get_renderables(self):  # noqa: ANN202
            yield from super().get_renderables()
            if self.note:
                yield Text(self.note, style="yellow")

    return NotedProgress(*columns, **kwargs)


def progress_fields(progress, eta_s: float | None) -> dict[str, str]:  # noqa: ANN001 - a RunProgress
    """The progress bar's fields: pass^1, not-evaluable count, cost so far, ETA."""
    if progress is None:
        return {"pass1": "-", "not_evaluable": "0", "cost": "0.0000", "eta": "ETA -"}
    if eta_s is None:
        eta = "ETA -"
    else:
        minutes, seconds = divmod(int(round(eta_s)), 60)
        eta = f"ETA {minutes // 60}:{minutes % 60:02d}:{seconds:02d}"
    return {
        "pass1": "-" if progress.pass1 is None else f"{progress.pass1:.3f}",
        "not_evaluable": str(progress.not_evaluable),
        "cost": f"{progress.cost:.4f}",
        "eta": eta,
    }


def _outcome_words(trial) -> str:  # noqa: ANN001 - a TrialRow
    """outcome and reward as a sentence: no "reward None" for a trial without one."""
    label = outcome_label(trial.status, trial.reward)
    if trial.reward is not None:
        return f"outcome [bold]{label}[/], reward {trial.reward:g}"
    why = "not scored: not evaluable" if trial.status == TRIAL_NOT_EVALUABLE else "not scored yet"
    return f"outcome [bold]{label}[/] ({why})"


def judge_json(step) -> dict | None:  # noqa: ANN001 - a StepRow or None
    """The NL-assertion judge's step of a trial (tau2 1.0.x), or None when it had none."""
    if step is None:
        return None
    replies = step.message_list()
    return {"model": step.model, "reply": replies[-1].content if replies else None,
            "tokens": {"input": step.input_tokens, "output": step.output_tokens}, "cost": step.cost,
            "failure_class": step.failure_class, "failure": step.failure}


def transcript(trial, steps, console: Console, judge=None) -> None:  # noqa: ANN001
    """A trial's conversation: messages, tool calls and results, the NL-assertion
    judge's step when it had one (tau2 1.0.x), then the score."""
    console.print(
        f"[bold]{trial.trial_id}[/]\n"
        f"agent {trial.agent_model}, user {trial.user_model}, domain {trial.domain}, "
        f"task {trial.task_id}, trial {trial.trial_index}, seed {trial.seed}\n"
        f"{_outcome_words(trial)}, "
        + (f"termination {trial.termination_reason}, " if trial.termination_reason else "")
        + f"steps {trial.n_steps}, "
        f"tokens {trial.input_tokens} in / {trial.output_tokens} out, cost ${trial.cost:.4f}",
        highlight=False,
    )
    if trial.error:
        what = "not evaluable" if trial.status == TRIAL_NOT_EVALUABLE else f"{trial.error_side or 'model'} failure"
        console.print(f"[red]{what}: {escape(error_words(trial.error_class, trial.error))}[/]", highlight=False)
    names = {"assistant": "agent", "user": "user", "tool": "tool"}
    for step in steps:
        for m in step.message_list():
            who = names[m.role] if m.role != "tool" else f"tool -> {names[m.requestor or 'assistant']}"
            if m.tool_calls:
                for call in m.tool_calls:
                    args = call.invalid_arguments if call.invalid_arguments is not None else json.dumps(call.arguments)
                    console.print(f"[dim]{step.step:>3}[/] [bold]{who}[/] calls {escape(f'{call.name}({args})')}", highlight=False, markup=True)
            if m.content or not m.tool_calls:
                style = "red" if m.error else ""
                text = escape(m.content or "(empty)")
                console.print(f"[dim]{step.step:>3}[/] [bold]{who}[/]: [{style}]{text}[/]" if style else f"[dim]{step.step:>3}[/] [bold]{who}[/]: {text}", highlight=False)
    if judge is not None:
        view = judge_json(judge)
        console.print(f"[bold]judge[/] {escape(view['model'] or '')}: tokens {view['tokens']['input']} in / "
                      f"{view['tokens']['output']} out, cost ${view['cost']:.4f}", highlight=False)
        if view["failure_class"]:
            console.print(f"[red]{escape(error_words(view['failure_class'], view['failure']))}[/]", highlight=False)
        console.print(escape(view["reply"] or "(empty)"), highlight=False)
    info = trial.reward_info()
    if info:
        console.print("[bold]score[/]", highlight=False)
        console.print_json(json.dumps(info, default=str))


# ---- `passhat report` -----------------------------------------------------------------------
# Every format renders the one Report (passhat.results.report); html is passhat.cli.html_report.

OUTPUTS = ("table", "json", "csv", "markdown", "html")
GROUPINGS = ("model", "task")  # report --by

# One character per trial in the by-task views: the outcome grid of a task.
OUTCOME_MARKS = {"success": "+", "failure": "x", "not_evaluable": "!", "running": ".",
                 "cancelled": ".", "missing": "."}
OUTCOME_LEGEND = "+ success, x failure, ! not evaluable, . unfinished"


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _ci(est) -> str:  # noqa: ANN001 - an Estimate
    return f"{est.low:.3f}-{est.high:.3f}"


def _group_title(report, group) -> str:  # noqa: ANN001
    return f"{report.label(group)} (user {group.user_model}) on {group.domain}"


def _group_facts(group) -> list[str]:  # noqa: ANN001
    cost = ("-" if group.cost_per_trial is None else
            f"${group.cost_per_trial:.4f}/trial, ${group.cost_usd:.4f} in all")
    tokens = ("-" if group.input_tokens_per_trial is None else
              f"{group.input_tokens_per_trial:,.0f} in + {group.output_tokens_per_trial:,.0f} out per trial")
    return [
        f"{group.tasks} tasks, {group.trials} trials, {group.evaluable} evaluable"
        + (f", {group.not_evaluable} not evaluable" if group.not_evaluable else "")
        + (f", {group.unfinished} unfinished" if group.unfinished else "")
        + f", avg reward {_num(group.avg_reward)}",
        f"cost {cost}; tokens {tokens}",
    ]


def _failure_lines(group) -> list[str]:  # noqa: ANN001
    f = group.failures

    def join(counts: dict[str, int]) -> str:
        return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"

    lines = [f"failures: {f.below_one} of {group.evaluable} scored trials below reward 1",
             f"  termination: {join(f.termination)}",
             f"  failed part of the reward: {join(f.failed_parts)}",
             f"  model errors: {join(f.model_errors)}"]
    if f.not_evaluable:
        lines.append(f"  not evaluable: {join(f.not_evaluable)}")
    return lines


def _run_header(run) -> list[str]:  # noqa: ANN001 - a RunReport
    from passhat.domains.digest import digest_line

    c = run.completeness
    lines = [f"passhat report {run.run_id}" + (" (imported)" if run.imported else ""), c.note,
             run.tau2()]
    if run.agent != DEFAULT_AGENT:
        lines.append(f"agent: {run.agent}")
    lines += [f"domain {name}: {digest_line(d)}" for name, d in run.domain_digests.items()]
    if run.departures:
        lines.append("DEPARTS FROM tau2: " + "; ".join(run.departures))
    return lines


def leaderboard_line(group) -> str | None:  # noqa: ANN001 - a GroupReport
    """pass^k as the leaderboard counts it, when some trial is not evaluable."""
    if group.pass_hat_k_leaderboard is None:
        return None
    curve = ", ".join(f"pass^{k} {e.value:.3f} ({_ci(e)})"
                      for k, e in sorted(group.pass_hat_k_leaderboard.items(), key=lambda kv: int(kv[0])))
    return (f"as the leaderboard counts ({group.not_evaluable} not evaluable as failures): "
            + (curve or "-"))


def _curve_rows(group) -> list[tuple[str, str, str, str]]:  # noqa: ANN001
    return [(k, f"{group.pass_hat_k[k].value:.3f}", _ci(group.pass_hat_k[k]),
             _num(group.pass_at_k.get(k)))
            for k in sorted(group.pass_hat_k, key=int)]


def _task_rows(group) -> list[tuple[str, str, str, str, str]]:  # noqa: ANN001
    k = str(max(1, max((t.trials for t in group.task_results), default=1)))
    return [(t.task_id, "".join(OUTCOME_MARKS.get(o, "?") for o in t.outcomes),
             f"{t.successes}/{t.evaluable}", _num(t.pass_hat_k.get("1")), _num(t.pass_hat_k.get(k)))
            for t in group.task_results]


def _task_columns(group) -> tuple[str, ...]:  # noqa: ANN001
    k = max(1, max((t.trials for t in group.task_results), default=1))
    return ("task", "trials", "ok/n", "pass^1", f"pass^{k}")


def report_table(report, by: str, console: Console) -> None:  # noqa: ANN001 - a Report
    """For a terminal of any width down to 80 columns: every model a block of short
    lines (which wrap, never truncate) and a narrow table."""
    from rich.text import Text

    def say(line: str, style: str = "") -> None:
        console.print(Text(line, style=style))

    say(f"pass^k: mean over tasks; CI: {report.confidence:.0%} bootstrap interval over tasks "
        f"({report.resamples} resamples)", "dim")
    if report.across_tau2_versions:
        say(ACROSS_VERSIONS_NOTE, "bold yellow")
    for run in report.runs:
        console.print()
        header = _run_header(run)
        say(header[0], "bold")
        for line in header[1:]:
            say(line, "bold yellow" if not run.completeness.complete or line.startswith("DEPARTS") else "")
        for group in run.groups:
            console.print()
            say(_group_title(report, group), "bold")
            for line in _group_facts(group):
                say("  " + line)
            if by == "task":
                table = Table()
                for col in _task_columns(group):
                    table.add_column(col, overflow="fold", justify="left" if col in ("task", "trials") else "right")
                for row in _task_rows(group):
                    table.add_row(*row)
            else:
                table = Table()
                for col in ("k", "pass^k", "95% CI", "pass@k"):
                    table.add_column(col, justify="right", no_wrap=True)
                for row in _curve_rows(group):
                    table.add_row(*row)
            if table.rows:
                console.print(table)
                if by == "task":  # a line of its own: a caption would wrap to the table's width
                    say("  trials: " + OUTCOME_LEGEND, "dim")
            if leaderboard_line(group):
                say("  " + leaderboard_line(group), "yellow")
            for line in _failure_lines(group):
                say("  " + line)
    if report.comparisons:
        console.print()
        say(f"paired differences: per-task pass^1, a - b, over shared tasks ({report.confidence:.0%} CI)"
            + (" ACROSS tau2 VERSIONS" if report.across_tau2_versions else ""), "bold")
        # Short lines: one sentence would be twice the width of a terminal.
        for c in report.comparisons:
            say(f"  a {report.label(c.a)}")
            say(f"  b {report.label(c.b)} on {c.domain}")
            say(f"    a - b: {c.measured()}")
            say(f"    {c.verdict()}")


def _md(cells) -> str:  # noqa: ANN001
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _md_table(columns, rows) -> list[str]:  # noqa: ANN001
    return [_md(columns), _md(["---"] * len(columns)), *(_md(r) for r in rows), ""]


def report_markdown(report, by: str) -> str:  # noqa: ANN001
    # The title first: a markdown viewer takes the first heading for the document's name.
    out = [f"# passhat report {', '.join(r.run_id for r in report.runs)}", "",
           f"pass^k: mean over tasks; CI: {report.confidence:.0%} bootstrap interval over tasks "
           f"({report.resamples} resamples)", ""]
    if report.across_tau2_versions:
        out += [f"**{ACROSS_VERSIONS_NOTE}**", ""]
    for run in report.runs:
        header = _run_header(run)
        out += [f"## run {run.run_id}" + (" (imported)" if run.imported else ""), "",
                *(f"**{line}**" if not run.completeness.complete else line for line in header[1:]), ""]
        for group in run.groups:
            out += [f"### {_group_title(report, group)}", "", *(f"- {line}" for line in _group_facts(group)), ""]
            if by == "task":
                out += [f"Trials: {OUTCOME_LEGEND}", ""]
                out += _md_table(_task_columns(group), [(f"`{r[0]}`", f"`{r[1]}`", *r[2:]) for r in _task_rows(group)])
            elif group.pass_hat_k:
                out += _md_table(("k", "pass^k", "95% CI", "pass@k"), _curve_rows(group))
            if leaderboard_line(group):
                out += [f"**{leaderboard_line(group)}**", ""]
            out += [f"{'  ' if line.startswith(' ') else ''}- {line.strip()}" for line in _failure_lines(group)] + [""]
    if report.comparisons:
        out += ["## Paired differences" + (" (across tau2 versions)" if report.across_tau2_versions else ""), "",
                f"Per-task pass^1, a - b, over shared tasks ({report.confidence:.0%} CI).", ""]
        out += [f"- {c.statement}" for c in report.comparisons] + [""]
    return "\n".join(out)


def report_csv(report, by: str) -> str:  # noqa: ANN001
    """One row per model and domain (or per task with --by task); pass^k columns for
    every k of the report, empty where a row has no such k."""
    import csv
    import io

    groups = report.groups()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    key = ["run_id", "agent_model", "user_model", "domain"]
    if by == "task":
        ks = sorted({k for g in groups for t in g.task_results for k in t.pass_hat_k}, key=int)
        writer.writerow(key + ["task_id", "trials", "evaluable", "successes", "outcomes"]
                        + [f"pass^{k}" for k in ks])
        for g in groups:
            for t in g.task_results:
                writer.writerow([g.run_id, g.agent_model, g.user_model, g.domain, t.task_id, t.trials,
                                 t.evaluable, t.successes, " ".join(t.outcomes)]
                                + [t.pass_hat_k.get(k, "") for k in ks])
        return buffer.getvalue()
    ks = sorted({k for g in groups for k in g.pass_hat_k}, key=int)
    complete = {r.run_id: r.completeness.complete for r in report.runs}
    # Counting not-evaluable trials as failures can give a task more trials, so more k.
    lost_ks = sorted({k for g in groups for k in g.pass_hat_k_leaderboard or {}} | set(ks), key=int)
    writer.writerow(key + ["complete", "tasks", "trials", "evaluable", "not_evaluable", "unfinished",
                           "avg_reward"]
                    + [f"{name}{k}{end}" for k in ks for name, end in
                       (("pass^", ""), ("pass^", "_low"), ("pass^", "_high"), ("pass@", ""))]
                    + ["cost_usd", "cost_per_trial", "input_tokens_per_trial", "output_tokens_per_trial"]
                    + [f"pass^{k}_leaderboard" for k in lost_ks] + ["tau2_version", "tau2_data"])
    runs = {r.run_id: r for r in report.runs}
    for g in groups:
        curve, lost = [], g.pass_hat_k_leaderboard or {}
        for k in ks:
            est = g.pass_hat_k.get(k)
            curve += [est.value, est.low, est.high] if est else ["", "", ""]
            curve.append(g.pass_at_k.get(k, ""))
        writer.writerow([g.run_id, g.agent_model, g.user_model, g.domain, complete[g.run_id], g.tasks,
                         g.trials, g.evaluable, g.not_evaluable, g.unfinished,
                         "" if g.avg_reward is None else g.avg_reward, *curve, g.cost_usd,
                         *("" if v is None else v for v in (g.cost_per_trial, g.input_tokens_per_trial,
                                                           g.output_tokens_per_trial)),
                         *(lost[k].value if k in lost else "" for k in lost_ks),
                         runs[g.run_id].tau2_version or "", runs[g.run_id].tau2_data or ""])
    return buffer.getvalue()
