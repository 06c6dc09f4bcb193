"""The HTML report: one self-contained file to open from disk or attach to a message.
No server and no network: the style and a few lines of script are inline, the charts
are inline SVG. Every string from the store (model output above all) goes through
html.escape, so a transcript cannot inject markup."""

from __future__ import annotations

import hashlib
import json
from html import escape
from typing import Any

from pydantic import BaseModel

from passhat.cli import plots
from passhat.cli.render import diagnosis_lines, error_words, trial_links
from passhat.cli.report_text import agent_lines, leaderboard_line
from passhat.contracts import DEFAULT_AGENT, trial_workflow_id
from passhat.messages import Message
from passhat.outcomes import outcome_label
from passhat.results.report import ACROSS_VERSIONS_NOTE, MISSING, REWARD_PARTS, GroupReport, Report, RunReport

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.partial{background:#fff3cd;border:1px solid #e0b400;padding:8px 12px;font-weight:600}
.complete{color:#2a6b2a}.departs{color:#a00;font-weight:600}
.grid td{width:22px;height:20px;padding:0;text-align:center}.grid td.task{width:auto;padding:0 6px;text-align:left}
.grid a{display:block;color:inherit;text-decoration:none}
.o-success{background:#3c9a50;color:#fff}.o-failure{background:#d9534f;color:#fff}
.o-not_evaluable{background:#888;color:#fff}.o-running,.o-cancelled{background:#f0ad4e}.o-missing{background:#fff}
details.trial{border:1px solid #ddd;margin:4px 0;padding:4px 8px}details.trial[open]{background:#fafafa}
summary{cursor:pointer}.msg{margin:4px 0;padding:4px 8px;border-left:4px solid #ccc;white-space:pre-wrap}
.msg.assistant{border-color:#4a78c2}.msg.user{border-color:#3c9a50}.msg.tool{border-color:#999;background:#f4f4f4}
.msg.error{border-color:#d9534f}.who{font-weight:600}pre{white-space:pre-wrap;background:#f4f4f4;padding:6px}
.chart svg{max-width:100%;height:auto}
.sides{display:flex;gap:12px}.sides>div{flex:1;min-width:0}.msg.split{background:#fff3cd}
.stepno{color:#888;margin-right:6px}.gridbox{display:inline-block;vertical-align:top;margin-right:28px}
"""

# A link to a trial opens its <details> (browsers scroll to it but leave it closed).
_SCRIPT = """
function openTarget(){var e=document.getElementById(decodeURIComponent(location.hash.slice(1)));
if(e&&e.tagName==='DETAILS'){e.open=true;e.scrollIntoView();}}
addEventListener('hashchange',openTarget);addEventListener('DOMContentLoaded',openTarget);
"""

_MARKS = {"success": "✓", "failure": "✗", "not_evaluable": "!", "running": "…", "cancelled": "…", MISSING: ""}


def anchor(trial_id: str) -> str:
    """An element id for a trial (trial ids hold slashes and dots)."""
    return "trial-" + hashlib.sha256(trial_id.encode()).hexdigest()[:16]


def _e(value: object) -> str:
    return escape("" if value is None else str(value))


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


class TrialView(BaseModel):
    """One trial as the HTML report's drill-down shows it."""

    trial_id: str
    run_id: str
    agent_model: str
    domain: str
    task_id: str
    trial_index: int
    outcome: str
    reward: float | None
    termination_reason: str | None
    error_class: str | None
    error_side: str | None
    error: str | None
    cost: float
    input_tokens: int
    output_tokens: int
    reward_info: dict[str, Any]
    messages: list[Message]
    message_steps: list[int] = []  # each message's step, as `passhat show` numbers them
    temporal_url: str | None
    jaeger_url: str | None
    reviews: list[dict[str, Any]] = []  # `passhat review`, every judge's
    diagnosis: dict[str, Any] | None = None  # a failed trial's, as `passhat show` gives it


def trial_views(store, run: RunReport, ui: str | None, namespace: str, jaeger: str) -> list[TrialView]:  # noqa: ANN001
    """Every recorded trial of a run with its conversation and links. `ui` is the
    Temporal UI's base URL when it is known without starting anything (None for an
    imported run, which has no workflows)."""
    from passhat.results.review_report import run_reviews_json

    steps = store.run_steps(run.run_id)
    reviews = run_reviews_json(store, run.run_id)
    views = []
    for row in store.trials(run.run_id):
        temporal_url, jaeger_url = trial_links(row, None if run.imported else ui, namespace, jaeger)
        views.append(TrialView(
            trial_id=row.trial_id, run_id=row.run_id, agent_model=row.agent_model,
            domain=row.domain, task_id=row.task_id, trial_index=row.trial_index,
            outcome=outcome_label(row.status, row.reward), reward=row.reward,
            termination_reason=row.termination_reason, error_class=row.error_class,
            error_side=row.error_side, error=row.error, cost=row.cost,
            input_tokens=row.input_tokens, output_tokens=row.output_tokens,
            reward_info=row.reward_info(),
            messages=[m for s in steps.get(row.trial_id, []) for m in s.message_list()],
            message_steps=[s.step for s in steps.get(row.trial_id, []) for _ in s.message_list()],
            temporal_url=None if temporal_url == "-" else temporal_url,
            jaeger_url=None if jaeger_url == "-" else jaeger_url,
            reviews=reviews.get(row.trial_id, []),
            diagnosis=row.diagnosis() if row.diagnosis_json else None,
        ))
    return views


def render(report: Report, trials: dict[str, list[TrialView]], reviews: list[list[str]] | None = None) -> str:
    """The whole page. `trials` maps each run id to its trials (trial_views);
    `reviews`, each run's LLM review summed up (passhat.results.review_report.lines)."""
    title = "passhat report " + ", ".join(r.run_id for r in report.runs)
    body = [f"<h1>{_e(title)}</h1>", _status(report), _summary(report), _charts(report),
            _comparisons(report), _robustness(report), _taxonomy(report), _causes(report), _partings(report, trials),
            _review_section(reviews or []), _grids(report),
            _drilldown(report, trials)]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(title)}</title><style>{_STYLE}</style><script>{_SCRIPT}</script></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def _status(report: Report) -> str:
    from passhat.domains.digest import digest_line

    out = ['<section id="status">']
    if report.across_tau2_versions:
        out.append(f'<p class="departs">{_e(ACROSS_VERSIONS_NOTE)}</p>')
    for run in report.runs:
        c = run.completeness
        # The note says PARTIAL itself; green only for a run that measured every trial.
        cls = "complete" if c.complete else "partial"
        out.append(f'<p class="{cls}">{_e(run.run_id)}{" (imported)" if run.imported else ""}: '
                   f"{_e(c.note)}</p>")
        out.append(f'<p class="tau2">{_e(run.run_id)}: {_e(run.tau2())}</p>')
        if run.agent != DEFAULT_AGENT:
            out.append(f'<p class="agent">{_e(run.run_id)} agent: {_e(run.agent)}</p>')
        # what the agent was (an A2A agent's card, a plugin's code), as the text report says it
        out += [f'<p class="agent">{_e(run.run_id)} {_e(line)}</p>' for line in agent_lines(run)]
        for name, digest in run.domain_digests.items():
            out.append(f'<p class="digest">{_e(run.run_id)} domain {_e(name)}: {_e(digest_line(digest))}</p>')
        if run.departures:
            out.append(f'<p class="departs">{_e(run.run_id)} departs from tau2: {_e("; ".join(run.departures))}</p>')
    out.append(f"<p>pass^k is the mean over tasks; intervals are {report.confidence:.0%} bootstrap "
               f"intervals over tasks ({report.resamples} resamples, seed {report.seed}).</p></section>")
    return "".join(out)


def _summary(report: Report) -> str:
    groups = report.groups()
    ks = sorted({k for g in groups for k in g.pass_hat_k}, key=int)
    head = "".join(f"<th>pass^{k}</th>" for k in ks)
    rows = []
    for g in groups:
        curve = "".join(
            f"<td>{g.pass_hat_k[k].value:.3f}<br><small>{g.pass_hat_k[k].low:.3f}–{g.pass_hat_k[k].high:.3f}</small></td>"
            if k in g.pass_hat_k else "<td>-</td>" for k in ks)
        # pass@k at the largest k only: the whole curve would not fit beside pass^k's.
        at = f"<td>{_num(g.pass_at_k.get(g.k()) if g.k() else None)}</td>"
        rows.append(
            f'<tr><td class="l">{_e(report.label(g))}</td><td class="l">{_e(g.user_model)}</td>'
            f'<td class="l">{_e(g.domain)}</td><td>{g.tasks}</td><td>{g.trials}</td><td>{g.evaluable}</td>'
            f"<td>{g.not_evaluable}</td><td>{g.unfinished}</td><td>{_num(g.avg_reward)}</td>{curve}{at}"
            f"<td>{_num(g.cost_per_trial, '.4f')}</td>"
            f"<td>{_num(g.input_tokens_per_trial, ',.0f')} / {_num(g.output_tokens_per_trial, ',.0f')}</td></tr>")
    return (
        '<section id="summary"><h2>Results</h2><table><tr><th class="l">agent model</th>'
        '<th class="l">user model</th><th class="l">domain</th><th>tasks</th><th>trials</th>'
        "<th>evaluable</th><th>not evaluable</th><th>unfinished</th><th>avg reward</th>"
        f"{head}<th>pass@k (largest k)</th><th>USD / trial</th><th>tokens in / out per trial</th></tr>{''.join(rows)}</table>"
        f"{_leaderboard(report)}</section>"
    )


def _leaderboard(report: Report) -> str:
    """pass^k as the leaderboard counts it, for the groups with trials not evaluable."""
    lines = [f'<li>{_e(report.label(g))} on {_e(g.domain)}: {_e(leaderboard_line(g))}</li>'
             for g in report.groups() if leaderboard_line(g)]
    if not lines:
        return ""
    return ('<p class="departs">pass^k above leaves not-evaluable trials out; so does the '
            "public leaderboard (tau2 1.0.1's submit prepare), which also stops k at the "
            f"fewest evaluable trials of a task:</p><ul>{''.join(lines)}</ul>")


def _charts(report: Report) -> str:
    return (
        '<section id="curves" class="chart"><h2>pass^k against k</h2>'
        f"{plots.svg(plots.pass_hat_figure(report))}</section>"
        '<section id="cost" class="chart"><h2>Cost against pass^k</h2>'
        f"{plots.svg(plots.cost_figure(report))}</section>"
    )


def _comparisons(report: Report) -> str:
    if not report.comparisons:
        return ""
    rows = "".join(
        f'<tr><td class="l">{_e(c.domain)}</td><td class="l">{_e(report.label(c.a))}</td>'
        f'<td class="l">{_e(report.label(c.b))}</td><td>{c.shared_tasks}</td>'
        f"<td>{c.difference.value:+.3f}</td><td>{c.difference.low:+.3f} – {c.difference.high:+.3f}</td>"
        f'<td class="l">{"distinguishable from noise" if c.distinguishable else "not distinguishable from noise"}</td>'
        f'<td class="l">{_cause_changes(c)}</td></tr>'
        for c in report.comparisons)
    return (
        '<section id="comparisons"><h2>Paired differences</h2>'
        f"<p>Per-task pass^1 of a minus b over the tasks both evaluated, paired by task; "
        f"distinguishable when the {report.confidence:.0%} interval excludes 0.</p>"
        '<table><tr><th class="l">domain</th><th class="l">a</th><th class="l">b</th><th>shared tasks</th>'
        f'<th>a − b</th><th>interval</th><th class="l">verdict</th>'
        f'<th class="l">first step off the gold path, a → b</th></tr>{rows}</table></section>'
    )


def _robustness(report: Report) -> str:
    """Per agent model and persona: pass^k under it and under tau2's user, and the drop
    paired by task (docs/personas.md); the pass^k chart above draws each persona's curve."""
    if not report.robustness:
        return ""

    def cell(e) -> str:  # noqa: ANN001 - an Estimate or None
        return "<td>-</td>" if e is None else f"<td>{e.value:.3f}<br><small>{e.low:.3f}–{e.high:.3f}</small></td>"

    rows = "".join(
        f'<tr><td class="l">{_e(r.agent_model)}</td><td class="l">{_e(r.user_persona)}</td>'
        f'<td class="l">{_e(r.domain)}</td><td>{_e(r.k() or "-")}</td>{cell(r.pass_hat_k.get(r.k() or ""))}'
        f'{cell(r.baseline_pass_hat_k.get(r.k() or ""))}'
        + (f"<td>{r.drop[r.k()].value:+.3f}<br><small>{r.drop[r.k()].low:+.3f} – {r.drop[r.k()].high:+.3f}</small></td>"
           if r.k() else "<td>-</td>")
        + f'<td>{r.shared_tasks}</td><td class="l">{_e(", ".join(r.broken_tasks) or "none")}</td></tr>'
        for r in report.robustness)
    chart = plots.persona_figure(report)
    return (
        '<section id="personas"><h2>Robustness to user personas</h2>'
        "<p>pass^k under each user persona and under tau2's own user, and the drop between them, "
        "paired by task: the same tasks with the same seeds under every user (docs/personas.md). "
        f"Intervals: {report.confidence:.0%} bootstrap over tasks.</p>"
        '<table><tr><th class="l">agent model</th><th class="l">persona</th><th class="l">domain</th>'
        "<th>k</th><th>pass^k, persona</th><th>pass^k, tau2's user</th><th>drop</th><th>tasks</th>"
        f'<th class="l">tasks it breaks</th></tr>{rows}</table>'
        + ("" if chart is None else f'<div id="persona-chart" class="chart">{plots.svg(chart)}</div>')
        + "</section>"
    )


def _cause_changes(c) -> str:  # noqa: ANN001 - a Comparison
    changed = [x for x in c.causes if x.change != "same"]
    if not c.causes:
        return "-"
    return "<br>".join(f"{_e(x.cause)}: {x.a} → {x.b} ({_e(x.change)})" for x in changed) or "no change"


def _counts(counts: dict[str, int]) -> str:
    return "<br>".join(f"{_e(name)}: {n}" for name, n in counts.items()) or "-"


def _taxonomy(report: Report) -> str:
    rows = "".join(
        f'<tr><td class="l">{_e(report.label(g))}</td><td class="l">{_e(g.domain)}</td>'
        f"<td>{g.failures.below_one} / {g.evaluable}</td>"
        f'<td class="l">{_counts(g.failures.termination)}</td><td class="l">{_counts(g.failures.failed_parts)}</td>'
        f'<td class="l">{_counts(g.failures.model_errors)}</td><td class="l">{_counts(g.failures.not_evaluable)}</td></tr>'
        for g in report.groups())
    parts = ", ".join(REWARD_PARTS.values())
    return (
        '<section id="taxonomy"><h2>Failure taxonomy</h2>'
        f"<p>Failed part: which part of tau2's reward ({_e(parts)}) was below 1 in the trials below 1.</p>"
        '<table><tr><th class="l">agent model</th><th class="l">domain</th><th>below 1</th>'
        '<th class="l">termination</th><th class="l">failed part</th><th class="l">model errors</th>'
        f'<th class="l">not evaluable</th></tr>{rows}</table></section>'
    )


def _causes(report: Report) -> str:
    """The failed trials' causes (first step off the gold path, from their diagnoses)
    counted per agent model and domain."""
    groups = [g for g in report.groups() if g.failures.causes]
    if not groups:
        return ""
    kinds = sorted({k for g in groups for k in g.failures.causes})
    head = "".join(f"<th>{_e(k)}</th>" for k in kinds)
    rows = "".join(
        f'<tr><td class="l">{_e(report.label(g))}</td><td class="l">{_e(g.domain)}</td>'
        f"<td>{sum(g.failures.causes.values())} / {g.failures.below_one}</td>"
        + "".join(f"<td>{g.failures.causes.get(k, 0)}</td>" for k in kinds) + "</tr>"
        for g in groups)
    return ('<section id="causes"><h2>Failure causes per model</h2><p>Each diagnosed failed '
            "trial's first step off the gold path, by kind (docs/failures.md).</p>"
            '<table><tr><th class="l">agent model</th><th class="l">domain</th><th>diagnosed / below 1</th>'
            f"{head}</tr>{rows}</table></section>")


# The steps a side-by-side view shows around a parting point: the one before it, it, and after.
_BEFORE, _AFTER = 1, 2


def _window(view: TrialView, step: int | None) -> str:
    if step is None:
        return "<p>(step unknown)</p>"
    shown = [(n, m) for n, m in zip(view.message_steps, view.messages) if step - _BEFORE <= n <= step + _AFTER]
    return "".join(_message(m, n, split=n == step) for n, m in shown) or "<p>(no steps recorded)</p>"


def _partings(report: Report, trials: dict[str, list[TrialView]]) -> str:
    """Each flaky task's parting points, a passing and a failing trial side by side from
    one step before the split."""
    views = {v.trial_id: v for run in trials.values() for v in run}
    out = []
    for g in report.groups():
        for task in g.task_results:
            if task.divergence is None:
                continue
            if task.divergence.kind != "flaky":
                out.append(f"<h3>{_e(task.task_id)} ({_e(report.label(g))} on {_e(g.domain)})</h3>"
                           f"<p>{_e(task.divergence.line)}</p>")
                continue
            out.append(f"<h3>{_e(task.task_id)} ({_e(report.label(g))} on {_e(g.domain)})</h3>")
            for part in task.divergence.groups:
                failing, passing = views.get(part.trials[0]), views.get(part.passing_trial or "")
                out.append(f'<div class="parting"><p>{_e(part.sentence)}</p>')
                if failing is not None and passing is not None:
                    out.append(
                        '<div class="sides">'
                        f'<div class="passing"><b>passing: <a href="#{anchor(passing.trial_id)}">'
                        f"{_e(passing.trial_id)}</a></b>{_window(passing, part.passing_step)}</div>"
                        f'<div class="failing"><b>failing: <a href="#{anchor(failing.trial_id)}">'
                        f"{_e(failing.trial_id)}</a></b>{_window(failing, part.steps[0])}</div></div>")
                out.append("</div>")
    if not out:
        return ""
    return ('<section id="parting"><h2>Where the trials part</h2><p>For a task with passing and failing '
            "trials: where each failing trial leaves the passing trial it follows longest (its tool "
            "calls and how it ended, not its wording), the split highlighted. For a task that failed "
            "every trial: its most common first step off the gold path.</p>" + "".join(out) + "</section>")


def _review_section(reviews: list[list[str]]) -> str:
    """The LLM reviews' summaries: categories per model, the failed trials blamed on the
    user simulator, and the labelled sensitivity pass^k (never the official figure)."""
    if not reviews:
        return ""
    blocks = "".join(f"<pre>{_e(chr(10).join(lines))}</pre>" for lines in reviews)
    return ('<section id="review"><h2>LLM review</h2><p>A judge model\'s opinion of the trials '
            "(<code>passhat review</code>); the official pass^k is above.</p>" + blocks + "</section>")


def _review(view: TrialView) -> str:
    out = []
    for r in view.reviews:
        head = (f"blame {r['blame']}, {len(r['errors'])} error(s)" if r["status"] == "reviewed"
                else f"not reviewable ({r['reason']})")
        items = "".join(f"<li>step {e['step']} {_e(e['side'])} <b>{_e(e['category'])}</b> ({_e(e['severity'])}): "
                        f"<q>{_e(e['quote'])}</q> {_e(e['explanation'])}</li>" for e in r["errors"])
        out.append(f"<h4>Review by {_e(r['judge_model'])} ({_e(r['prompt_version'])})</h4>"
                   f"<p>{_e(head)}, cost ${r['cost']:.4f}</p><ul>{items}</ul>")
    return "".join(out)


def _grid(report: Report, group: GroupReport) -> str:
    width = max((len(t.outcomes) for t in group.task_results), default=0)
    head = "".join(f"<th>{i}</th>" for i in range(width))
    rows = []
    for task in group.task_results:
        cells = []
        for index, outcome in enumerate(task.outcomes):
            mark = _MARKS.get(outcome, "?")
            trial_id = trial_workflow_id(group.run_id, group.agent_model, group.domain, task.task_id, index,
                                         group.user_persona)
            inner = (mark if outcome == MISSING else
                     f'<a href="#{anchor(trial_id)}" title="{_e(trial_id)}: {_e(outcome)}">{mark}</a>')
            cells.append(f'<td class="o-{_e(outcome)}">{inner}</td>')
        rows.append(f'<tr><td class="task">{_e(task.task_id)}</td>{"".join(cells)}'
                    f"<td>{task.successes}/{task.evaluable}</td></tr>")
    return (f'<div class="gridbox"><h3>{_e(report.label(group))} on {_e(group.domain)}</h3>'
            f'<table class="grid"><tr><th class="l">task</th>{head}<th>ok/n</th></tr>{"".join(rows)}</table></div>')


def _grids(report: Report) -> str:
    return ('<section id="grid"><h2>Outcomes: task × trial</h2><p>✓ success, ✗ failure, '
            "! not evaluable, … unfinished, blank: never started. A cell opens the trial below.</p>"
            + "".join(_grid(report, g) for g in report.groups()) + "</section>")


def _message(m, step: int | None = None, split: bool = False) -> str:  # noqa: ANN001 - a passhat Message
    who = {"assistant": "agent", "user": "user", "tool": "tool"}[m.role]
    if m.role == "tool":
        who = f"tool → {'agent' if (m.requestor or 'assistant') == 'assistant' else 'user'}"
    parts = []
    for call in m.tool_calls or []:
        args = call.invalid_arguments if call.invalid_arguments is not None else json.dumps(call.arguments)
        parts.append(f"<div>calls <code>{_e(call.name)}({_e(args)})</code></div>")
    if m.content or not m.tool_calls:
        parts.append(f"<div>{_e(m.content or '(empty)')}</div>")
    cls = f"msg {m.role}" + (" error" if m.error else "") + (" split" if split else "")
    number = f'<span class="stepno">{step}</span>' if step is not None else ""
    return f'<div class="{cls}">{number}<span class="who">{_e(who)}</span>{"".join(parts)}</div>'


def _trial(view: TrialView) -> str:
    links = []
    if view.temporal_url:
        links.append(f'<a href="{_e(view.temporal_url)}">Temporal UI</a>')
    if view.jaeger_url:
        links.append(f'<a href="{_e(view.jaeger_url)}">Jaeger trace</a>')
    breakdown = view.reward_info.get("breakdown") or {}
    parts = "".join(f'<tr><td class="l">{_e(REWARD_PARTS.get(k, k))}</td><td>{_e(v)}</td></tr>'
                    for k, v in breakdown.items())
    error = (f"<p>{_e(view.error_side or '')} {_e(error_words(view.error_class, view.error))}</p>"
             if view.error_class else "")
    return (
        f'<details class="trial" id="{anchor(view.trial_id)}"><summary>{_e(view.trial_id)} — '
        f'<span class="o-{_e(view.outcome)}">{_e(view.outcome)}</span>, reward {_e(_num(view.reward))}, '
        f"{_e(view.termination_reason or '-')}</summary>"
        f"<p>{' · '.join(links) or 'no workflow links (imported run, or Temporal UI address unknown)'}</p>"
        f"<p>cost ${view.cost:.4f}, tokens {view.input_tokens} in / {view.output_tokens} out</p>{error}"
        f"{_diagnosis(view)}"
        f'<h4>Reward breakdown</h4><table class="breakdown">{parts or "<tr><td>no part checked</td></tr>"}</table>'
        f"<details><summary>checks (tau2's reward info)</summary><pre>{_e(json.dumps(view.reward_info, indent=1, default=str))}</pre></details>"
        f'<h4>Transcript</h4><div class="transcript">{"".join(_message(m) for m in view.messages) or "(no steps recorded)"}</div>'
        f"{_review(view)}</details>"
    )


def _diagnosis(view: TrialView) -> str:
    """The diagnosis `passhat show` prints above the transcript: its one line, then each
    detail (docs/failures.md)."""
    lines = diagnosis_lines(view.diagnosis)
    if not lines:
        return ""
    details = "".join(f"<li>{_e(line)}</li>" for line in lines[1:])
    return (f'<h4>Diagnosis</h4><p class="diagnosis"><b>{_e(lines[0])}</b></p>'
            + (f"<ul>{details}</ul>" if details else ""))


def _drilldown(report: Report, trials: dict[str, list[TrialView]]) -> str:
    out = ['<section id="trials"><h2>Trials</h2>']
    for run in report.runs:
        out.append(f"<h3>{_e(run.run_id)}</h3>")
        out += [_trial(v) for v in trials.get(run.run_id, [])]
    out.append("</section>")
    return "".join(out)
