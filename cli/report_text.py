"""`passhat report` as text: a terminal table, markdown and CSV. Every format renders the
one Report (passhat.results.report); html is passhat.cli.html_report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from passhat.contracts import DEFAULT_AGENT
from passhat.results.report import ACROSS_VERSIONS_NOTE

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
    if f.agent_code:
        lines.append(f"  the agent's own code: {join(f.agent_code)}")
    if f.causes:
        lines.append(f"  first step off the gold path: {join(f.causes)}")
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
    lines += agent_lines(run)
    if run.a2a_restarts:
        n = sum(run.a2a_restarts.values())
        lines.append(f"A2A restarts: {n} in {len(run.a2a_restarts)} trial(s), each in a fresh context after a "
                     f"turn whose outcome was not known ({', '.join(sorted(run.a2a_restarts))})")
    lines += [f"domain {name}: {digest_line(d)}" for name, d in run.domain_digests.items()]
    if run.departures:
        lines.append("DEPARTS FROM tau2: " + "; ".join(run.departures))
    return lines


def agent_lines(run) -> list[str]:  # noqa: ANN001 - a RunReport
    """The agent each agent model was, with the digest of what makes it (none for a run
    recorded before passhat measured its agent)."""
    seen = {g.agent_model: g.agent for g in run.groups if g.agent is not None and g.agent.digest}
    return [f"agent with {model}: {agent.words()}" for model, agent in seen.items()]


def leaderboard_line(group) -> str | None:  # noqa: ANN001 - a GroupReport
    """pass^k as the leaderboard counts it (what tau2 1.0.1's `submit prepare` computes
    from these trials), when some trial is not evaluable, with what its rule hides beside
    it: the trials it leaves out, a pass^k it cannot give, and the figure with them
    counted as failures."""
    board = group.pass_hat_k_leaderboard
    if board is None:
        return None
    curve = ", ".join(f"pass^{k} {e.value:.3f} ({_ci(e)})"
                      for k, e in sorted(board.items(), key=lambda kv: int(kv[0])))
    expected = group.trials // group.tasks if group.tasks else 0
    shown = max(map(int, board), default=0)
    notes = [f"it leaves out {group.leaderboard_left_out} of {group.trials} trials "
             f"({group.not_evaluable} not evaluable), not counting them as failures"]
    if shown < expected:
        missing = f"pass^{shown + 1}" + (f"..{expected}" if expected > shown + 1 else "")
        notes.append(f"no {missing}: a task has only {shown} evaluable trial"
                     + ("" if shown == 1 else "s") if shown else "no pass^k at all: no trial was evaluable")
    counted = group.pass_hat_k_failures_counted or {}
    if counted:
        notes.append("counted as failures (as prepare counts them under pandas 3.x): " + ", ".join(
            f"pass^{k} {v:.3f}" for k, v in sorted(counted.items(), key=lambda kv: int(kv[0]))))
    return "as the leaderboard counts (tau2 1.0.1 submit prepare, pandas 2.x): " + (curve or "-") + \
        " -- " + "; ".join(notes)


def _curve_rows(group) -> list[tuple[str, str, str, str]]:  # noqa: ANN001
    return [(k, f"{group.pass_hat_k[k].value:.3f}", _ci(group.pass_hat_k[k]),
             _num(group.pass_at_k.get(k)))
            for k in sorted(group.pass_hat_k, key=int)]


def _task_rows(group) -> list[tuple[str, str, str, str, str]]:  # noqa: ANN001
    k = str(max(1, max((t.trials for t in group.task_results), default=1)))
    return [(t.task_id, "".join(OUTCOME_MARKS.get(o, "?") for o in t.outcomes),
             f"{t.successes}/{t.evaluable}", _num(t.pass_hat_k.get("1")), _num(t.pass_hat_k.get(k)))
            for t in group.task_results]


def divergence_lines(group) -> list[str]:  # noqa: ANN001 - a GroupReport
    """A line per task with a failed trial: where its trials part, or its most common
    first step off the gold path (docs/failures.md); a task whose failing trials part
    at several points has a line for each, the largest group first."""
    out = []
    for t in group.task_results:
        if t.divergence is None:
            continue
        sentences = [g.sentence for g in t.divergence.groups] or [t.divergence.line]
        out += [f"{t.task_id}: {sentence}" for sentence in sentences]
    return out


def cause_change_words(comparison) -> str | None:  # noqa: ANN001 - a Comparison
    """How the failure causes changed from a to b: "wrong_argument 3 -> 1 (shrank), ..."."""
    changed = [c for c in comparison.causes if c.change != "same"]
    if not comparison.causes:
        return None
    return ", ".join(f"{c.cause} {c.a} -> {c.b} ({c.change})" for c in changed) or "no change"


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
            if by == "task" and broken_line(report, group):
                say("  " + broken_line(report, group))
            if by == "task" and divergence_lines(group):
                say("  why trials failed, per task:")
                for line in divergence_lines(group):
                    say("    " + line)
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
            if cause_change_words(c):
                say(f"    first step off the gold path, a -> b: {cause_change_words(c)}")
    if report.robustness:
        console.print()
        say(robustness_heading(report), "bold")
        for title, lines in robustness_lines(report):
            say(f"  {title}")
            for line in lines:
                say(f"    {line}")


def robustness_heading(report) -> str:  # noqa: ANN001 - a Report
    return (f"robustness to user personas: pass^k under each persona vs tau2's own user, the drop paired "
            f"by task (same tasks, same seeds; {report.confidence:.0%} CI); see docs/personas.md")


def robustness_lines(report) -> list[tuple[str, list[str]]]:  # noqa: ANN001 - a Report
    """Per persona finding: its title and its lines."""
    return [(f"{report.label(r)} on {r.domain}", [*r.lines(), r.broken_words()]) for r in report.robustness]


def broken_line(report, group) -> str | None:  # noqa: ANN001 - a Report, a GroupReport
    """--by task, a persona's group: the tasks it breaks, against tau2's own user."""
    for r in report.robustness:
        if (r.run_id, r.agent_model, r.user_model, r.domain, r.user_persona) == (
                group.run_id, group.agent_model, group.user_model, group.domain, group.user_persona):
            return f"against tau2's own user (same seeds), this persona {r.broken_words()}"
    return None


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
                if broken_line(report, group):
                    out += [broken_line(report, group).capitalize(), ""]
                if divergence_lines(group):
                    out += ["Why trials failed, per task:", "", *(f"- {line}" for line in divergence_lines(group)), ""]
            elif group.pass_hat_k:
                out += _md_table(("k", "pass^k", "95% CI", "pass@k"), _curve_rows(group))
            if leaderboard_line(group):
                out += [f"**{leaderboard_line(group)}**", ""]
            out += [f"{'  ' if line.startswith(' ') else ''}- {line.strip()}" for line in _failure_lines(group)] + [""]
    if report.comparisons:
        out += ["## Paired differences" + (" (across tau2 versions)" if report.across_tau2_versions else ""), "",
                f"Per-task pass^1, a - b, over shared tasks ({report.confidence:.0%} CI).", ""]
        for c in report.comparisons:
            out.append(f"- {c.statement}")
            if cause_change_words(c):
                out.append(f"  - first step off the gold path, a -> b: {cause_change_words(c)}")
        out.append("")
    if report.robustness:
        out += ["## Robustness to user personas", "", robustness_heading(report)[0].upper() + robustness_heading(report)[1:] + ".", ""]
        for title, lines in robustness_lines(report):
            out += [f"- **{title}**", *(f"  - {line}" for line in lines)]
        out.append("")
    return "\n".join(out)


def report_csv(report, by: str) -> str:  # noqa: ANN001
    """One row per model and domain (or per task with --by task); pass^k columns for
    every k of the report, empty where a row has no such k."""
    import csv
    import io

    groups = report.groups()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # A persona column only where there are personas: a report without keeps its columns.
    personas = any(g.user_persona for g in groups)
    key = ["run_id", "agent_model", "user_model", *(["user_persona"] * personas), "domain"]

    def key_of(g) -> list:  # noqa: ANN001 - a GroupReport
        return [g.run_id, g.agent_model, g.user_model, *([g.user_persona or ""] * personas), g.domain]

    if by == "task":
        ks = sorted({k for g in groups for t in g.task_results for k in t.pass_hat_k}, key=int)
        writer.writerow(key + ["task_id", "trials", "evaluable", "successes", "outcomes"]
                        + [f"pass^{k}" for k in ks] + ["diagnosis"])
        for g in groups:
            for t in g.task_results:
                writer.writerow([*key_of(g), t.task_id, t.trials,
                                 t.evaluable, t.successes, " ".join(t.outcomes)]
                                + [t.pass_hat_k.get(k, "") for k in ks]
                                + [t.divergence.line if t.divergence else ""])
        return buffer.getvalue()
    ks = sorted({k for g in groups for k in g.pass_hat_k}, key=int)
    complete = {r.run_id: r.completeness.complete for r in report.runs}
    # The leaderboard's k never exceeds the report's (it stops at a task's fewest trials).
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
        writer.writerow([*key_of(g), complete[g.run_id], g.tasks,
                         g.trials, g.evaluable, g.not_evaluable, g.unfinished,
                         "" if g.avg_reward is None else g.avg_reward, *curve, g.cost_usd,
                         *("" if v is None else v for v in (g.cost_per_trial, g.input_tokens_per_trial,
                                                           g.output_tokens_per_trial)),
                         *(lost[k].value if k in lost else "" for k in lost_ks),
                         runs[g.run_id].tau2_version or "", runs[g.run_id].tau2_data or ""])
    return buffer.getvalue()
