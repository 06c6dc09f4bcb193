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


# Okabe and Ito's colour-blind-safe palette, without its yellow (faint on white). Its
# green and vermilion stay apart where two bands overlap; matplotlib's default green
# and red blend to brown.
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")
BAND_ALPHA = 0.07  # light: where three or four bands overlap, the tint stays pale
DODGE = 0.06  # k units between the curves at one k: equal curves side by side, not hidden


def _style(i: int) -> dict:
    """Series i's colour, marker and line style: no two of the first 28 series alike,
    so a curve drawn over an equal one still shows."""
    return {"color": COLORS[i % len(COLORS)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def pass_hat_figure(report: Report):  # noqa: ANN201 - a matplotlib Figure
    """pass^k against k, one line per model (and domain), the band its 95% interval.
    At each k the curves are set a little apart, so equal curves are all seen."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    drawn = [g for g in report.groups() if g.pass_hat_k]
    for i, group in enumerate(drawn):
        ks = sorted(group.pass_hat_k, key=int)
        x = [int(k) + (i - (len(drawn) - 1) / 2) * DODGE for k in ks]
        est = [group.pass_hat_k[k] for k in ks]
        style = _style(i)
        ax.plot(x, [e.value for e in est], label=_name(report, group), markersize=5, **style)
        low, high = [e.low for e in est], [e.high for e in est]
        ax.fill_between(x, low, high, alpha=BAND_ALPHA, color=style["color"], linewidth=0)
        # Each band's edges in its own colour: where bands overlap, the tints mix, and
        # the edges still say which band ends where.
        for edge in (low, high):
            ax.plot(x, edge, color=style["color"], linewidth=0.7, alpha=0.6,
                    linestyle=style["linestyle"], label="_band")
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
    for i, group in enumerate(groups):
        k = group.k()
        est = group.pass_hat_k[k]
        x = group.cost_per_trial if priced else (group.input_tokens_per_trial + group.output_tokens_per_trial)
        style = _style(i)
        ax.errorbar([x], [est.value], yerr=[[est.value - est.low], [est.high - est.value]],
                    fmt=style["marker"], color=style["color"], capsize=4,
                    label=f"{_name(report, group)}: pass^{k}")
    ax.set_xlabel("cost per trial (USD)" if priced else "tokens per trial (no cost recorded)")
    ax.set_ylabel("pass^k at the run's k")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"{_title(report)}\ncost against pass^k", fontsize=9)
    if groups:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def persona_figure(report: Report):  # noqa: ANN201 - a matplotlib Figure, or None without personas
    """pass^k of each user (tau2's own first, then each persona) at each k, one panel per
    agent model (and domain) of a run with personas: a persona x k grid, its cells
    shaded by pass^k and written with it. None when no group has a persona."""
    groups = [g for g in report.groups() if g.pass_hat_k]
    if not any(g.user_persona is not None for g in groups):
        return None
    panels: dict[tuple, list[GroupReport]] = {}
    for g in groups:
        panels.setdefault((g.run_id, g.agent_model, g.user_model, g.domain), []).append(g)
    panels = {key: users for key, users in panels.items() if any(u.user_persona is not None for u in users)}
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4.5, 3.6 * len(panels)), 3.6), dpi=100, squeeze=False)
    for ax, users in zip(axes[0], panels.values()):
        users = sorted(users, key=lambda u: (u.user_persona is not None, u.user_persona or ""))
        ks = sorted({k for u in users for k in u.pass_hat_k}, key=int)
        grid = [[u.pass_hat_k[k].value if k in u.pass_hat_k else float("nan") for k in ks] for u in users]
        ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for row, values in enumerate(grid):
            for col, value in enumerate(values):
                if value == value:  # not nan
                    ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=8,
                            color="black" if value > 0.6 else "white")
        ax.set_xticks(range(len(ks)), [f"pass^{k}" for k in ks], fontsize=8)
        ax.set_yticks(range(len(users)), [u.user_persona or "tau2's user" for u in users], fontsize=8)
        ax.set_title(_name(report, users[0]).split(" [")[0], fontsize=8)
    fig.suptitle(f"{_title(report)}\npass^k by user persona and k", fontsize=9)
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
