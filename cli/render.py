"""How a run, its trials, its progress and a transcript look on a terminal and as JSON.
The report's formats are passhat.cli.report_text (table, markdown, csv) and
passhat.cli.html_report."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from passhat.outcomes import TRIAL_NOT_EVALUABLE, RunSummary, outcome_label
from passhat.domains.diagnosis import one_line
from passhat.results.jsonl import jsonl_line


def summary_json(summary: RunSummary) -> str:
    return json.dumps(summary.model_dump(mode="json"))


def summary_table(summary: RunSummary) -> Table:
    ks = sorted({k for r in summary.results for k in r.pass_hat_k}, key=int)
    title = f"passhat run {summary.run_id}"
    if summary.departures:
        title += "\nDEPARTS FROM tau2: " + "; ".join(summary.departures)
    lost = [f"{r.agent_model} on {r.domain}: " + (", ".join(
                f"pass^{k} {v:.3f}" for k, v in sorted(r.pass_hat_k_leaderboard.items(), key=lambda kv: int(kv[0])))
                or "no pass^k") + f" ({r.trials - r.evaluable} of {r.trials} trials left out)"
            for r in summary.results if r.pass_hat_k_leaderboard is not None]
    caption = ("pass^k leaves not-evaluable trials out; as the leaderboard counts (tau2 1.0.1 "
               "submit prepare: left out too, k only up to a task's fewest evaluable trials): "
               + "; ".join(lost)) if lost else None
    table = Table(title=title, caption=caption)
    for col in ("agent model", "user model", "domain", "tasks", "trials", "evaluable", "avg reward"):
        table.add_column(col, justify="right" if col in ("tasks", "trials", "evaluable", "avg reward") else "left")
    for k in ks:
        table.add_column(f"pass^{k}", justify="right")
    for r in summary.results:
        # Escaped: rich would read "[impatient:2]" as markup and drop it.
        user = r.user_model if r.user_persona is None else escape(f"{r.user_model} [{r.user_persona}]")
        table.add_row(
            r.agent_model, user, r.domain, str(r.tasks), str(r.trials), str(r.evaluable),
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


def print_diagnosis(diagnosis, console: Console) -> None:  # noqa: ANN001 - dict | None
    """A failed trial's diagnosis, above its transcript (docs/failures.md)."""
    lines = diagnosis_lines(diagnosis)
    if lines:
        console.print(f"[bold]diagnosis[/]: {escape(lines[0])}", highlight=False)
    for line in lines[1:]:
        console.print(f"  {line}", highlight=False, markup=False)


def diagnosis_lines(diagnosis) -> list[str]:  # noqa: ANN001 - dict | None
    """A failed trial's diagnosis as `passhat show` and the HTML report give it: its one
    line, then each detail (an action off the gold path, a write no gold action
    explains or the tool refused, information never given, a DB field that differs)."""
    if not diagnosis:
        return []
    out = [one_line(diagnosis)]
    for action in diagnosis["actions"]:
        if action["matched"]:
            continue
        if action.get("never_called"):
            out.append(f"action {action['action']}: never called")
        else:
            diff = ", ".join(f"{k}: gold {v['gold']!r} vs {v['actual']!r}"
                             for k, v in action["differing_arguments"].items())
            out.append(f"action {action['action']}: closest call at step {action['closest_step']}, {diff}")
    out += [f"write no gold action explains: {w['tool']} at step {w['step']}" for w in diagnosis["unexplained_writes"]]
    out += [f"attempted write, the tool refused it: {w['tool']} at step {w['step']}: {w['error']}"
            for w in diagnosis.get("attempted_writes") or []]  # version 3 on
    out += [f"never told the user: {info!r}" for info in diagnosis["communicate_missing"]]
    out += [f"NL assertion failed: {check}" for check in diagnosis["nl_failed"]]
    out += [f"{d['database']} DB {d['path']}: gold {_short(d['gold'])} vs {_short(d['actual'])}"
            for d in diagnosis.get("db_differences") or []]  # version 2 on
    return out


def _short(value, width: int = 120) -> str:  # noqa: ANN001 - any JSON value
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def trial_rows(rows, ui: str | None, namespace: str, jaeger: str) -> list[tuple[str, ...]]:  # noqa: ANN001
    out = []
    for row in rows:
        reason = (error_words(row.error_class, row.error) if row.error
                  else " ".join((row.termination_reason or "").split()))
        diagnosis = one_line(row.diagnosis()) if row.diagnosis_json else ""
        if diagnosis:  # why it failed, against the gold path (docs/failures.md)
            reason = f"{reason}: {diagnosis}" if reason else diagnosis
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
                       "diagnosis": row.diagnosis(),
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


def transcript(trial, steps, console: Console, judge=None, agent=None, restarts: int = 0) -> None:  # noqa: ANN001
    """A trial's conversation: messages, tool calls and results, the NL-assertion
    judge's step when it had one (tau2 1.0.x), then the score. `agent`: the agent that
    played (run_identity.AgentIdentity), named with its digest; `restarts`: how often
    the conversation restarted in a fresh A2A context."""
    console.print(
        f"[bold]{trial.trial_id}[/]\n"
        f"agent {trial.agent_model}, user {trial.user_model}"
        + (f", persona {escape(trial.user_persona)}" if getattr(trial, "user_persona", None) else "")
        + f", domain {trial.domain}, "
        f"task {trial.task_id}, trial {trial.trial_index}, seed {trial.seed}\n"
        f"{_outcome_words(trial)}, "
        + (f"termination {trial.termination_reason}, " if trial.termination_reason else "")
        + f"steps {trial.n_steps}, "
        f"tokens {trial.input_tokens} in / {trial.output_tokens} out, cost ${trial.cost:.4f}",
        highlight=False,
    )
    if agent is not None:
        console.print(f"agent {escape(agent.words())}", highlight=False)
    if restarts:
        console.print(f"restarted {restarts} time{'s' if restarts > 1 else ''} in a fresh A2A context "
                      "(a turn's outcome was not known); the conversation below is the last", highlight=False)
    if trial.error:
        where = getattr(trial, "error_at", None)
        what = ("not evaluable" if trial.status == TRIAL_NOT_EVALUABLE else
                "the agent's own code failed" if where else f"{trial.error_side or 'model'} failure")
        console.print(f"[red]{what}: {escape(error_words(trial.error_class, trial.error))}[/]", highlight=False)
        if where:
            console.print(f"[red]  at {escape(where)}[/]", highlight=False)
    print_diagnosis(trial.diagnosis(), console)
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
        a2a = (step.agent_turn() or {}).get("a2a") if getattr(step, "agent_state_json", None) else None
        if a2a:  # an agent behind A2A: how its turn went
            console.print(f"[dim]      A2A {escape(a2a.get('state') or '?')}, {step.latency_s:.2f} s[/]", highlight=False)
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


def review_lines(reviews: list[dict], console: Console) -> None:
    """A trial's LLM reviews (`passhat review`), one block per judge: each error with its
    step, side, category, severity and quote, then (tau2 1.0.x's reviewer) the
    authentication classification."""
    for r in reviews:
        head = (f"[bold]review[/] by {escape(r['judge_model'])} ({escape(r['prompt_version'])}): "
                + (f"blame {escape(str(r['blame']))}, {len(r['errors'])} error(s)" if r["status"] == "reviewed"
                   else f"not reviewable ({escape(r['reason'] or '')})")
                + f", cost ${r['cost']:.4f}")
        console.print(head, highlight=False)
        for e in r["errors"]:
            console.print(f"  step {e['step']} {escape(e['side'])} {escape(e['category'])} ({escape(e['severity'])}): "
                          f"\"{escape(e['quote'])}\" {escape(e['explanation'])}", highlight=False)
        auth = r.get("auth_classification")
        if auth:  # tau2 1.0.x's reviewer: its authentication classification, or why there is none
            console.print(f"  authentication: {escape(auth['status'])} "
                          f"({escape(auth.get('reasoning') or auth.get('reason') or '')})", highlight=False)
