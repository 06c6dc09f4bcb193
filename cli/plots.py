"""Charts of a report, drawn with matplotlib on its Agg backend (no display needed):
pass^k against k with confidence bands, and cost against pass^k. `--plot FILE` saves
the first; the HTML report inlines both as SVG text."""

from __future__ import annotations

import io
from pathlib import Path

from passhat.results.report import GroupReport, Report

PLOT_SUFFIXES = (".png", ".svg", ".pdf")  # the formats `report --plot` writes


def _pyplot():  # noqa: ANN202
    # Imported here: matplotlib takes a second to load, and only charts need it.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(report: Report) -> str:
    runs = ", ".join(r.run_id for r in report.runs)
    partial = [r.run_id for r in report.runs if not r.completeness.complete]
    return f"passhat {runs}" + (f" (PARTIAL: {', '.join(partial)})" if partial else "")


def _name(report: Report, group: GroupReport) -> str:
    domains = {g.domain for g in report.groups()}
    return report.label(group) + (f" ({group.domain})" if len(domains) > 1 else "")


def pass_hat_figure(report: Report):  # noqa: ANN201 - a matplotlib Figure
    """pass^k against k, one line per model (and domain), the band its 95% interval."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    for group in report.groups():
        ks = sorted(group.pass_hat_k, key=int)
        if not ks:
            continue
        x = [int(k) for k in ks]
        est = [group.pass_hat_k[k] for k in ks]
        line, = ax.plot(x, [e.value for e in est], marker="o", label=_name(report, group))
        ax.fill_between(x, [e.low for e in est], [e.high for e in est], alpha=0.2, color=line.get_color())
    ax.set_xlabel("k (trials that must all succeed)")
    ax.set_ylabel("pass^k")
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.set_title(f"{_title(report)}\npass^k, bands: {report.confidence:.0%} bootstrap interval over tasks",
                 fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def cost_figure(report: Report):  # noqa: ANN201
    """Cost per trial against pass^k (at each model's largest k), with its interval.
    Scripted and unpriced models cost nothing; then tokens per trial stand in for cost."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    groups = [g for g in report.groups() if g.k() and g.cost_per_trial is not None]
    priced = any(g.cost_per_trial for g in groups)
    for group in groups:
        k = group.k()
        est = group.pass_hat_k[k]
        x = group.cost_per_trial if priced else (group.input_tokens_per_trial + group.output_tokens_per_trial)
        ax.errorbar([x], [est.value], yerr=[[est.value - est.low], [est.high - est.value]],
                    fmt="o", capsize=4, label=f"{_name(report, group)}: pass^{k}")
    ax.set_xlabel("cost per trial (USD)" if priced else "tokens per trial (no cost recorded)")
    ax.set_ylabel("pass^k at the run's k")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"{_title(report)}\ncost against pass^k", fontsize=9)
    if groups:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save(fig, path: Path) -> None:  # noqa: ANN001
    fig.savefig(path)
    _pyplot().close(fig)


def svg(fig) -> str:  # noqa: ANN001
    """The figure as an <svg> element to inline in HTML (no XML prolog, no DOCTYPE)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    _pyplot().close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]
