"""What CI sees of a gate: one JSON-ready dict (`gate_record`), and the markdown summary
and JUnit XML made from it, so the three always say the same."""

from __future__ import annotations

import math
from typing import Any, Sequence
from xml.etree import ElementTree as ET

from passhat.results.gate import CriterionResult, overall
from passhat.results.gate_personas import bonferroni_note

def _num(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, 4)


def gate_record(gate_id: str, results: Sequence[CriterionResult], *, rounds: list[str],
                conversations: int, tasks: int, cost_usd: float, stopped: str | None = None,
                curtailed: bool = False, max_trials: int = 8) -> dict[str, Any]:
    """The gate's outcome: verdict, each criterion with its estimates, interval and
    tasks, the trials spent against the fixed design of the same budget (max_trials on
    every task), cost, and the round runs. curtailed: its rounds stopped each block at
    its first failure (passhat.curtailment)."""
    return {
        "gate": gate_id,
        "verdict": overall(results),
        "stopped": stopped,
        "rounds": rounds,
        "curtailed": curtailed,
        "conversations": conversations,
        "max_trials": max_trials,
        "fixed_design_conversations": max_trials * tasks,
        "cost_usd": round(cost_usd, 6),
        "criteria": [
            {
                "criterion": r.criterion.describe(),
                "kind": r.criterion.kind,
                "k": r.criterion.k,
                "confidence": r.criterion.confidence,
                "verdict": r.verdict,
                # Under personas: whose trials it read, and over how many personas alpha was split.
                **({} if r.criterion.persona is None else {"persona": r.criterion.persona,
                                                           "split": r.criterion.split,
                                                           "family_alpha": round(r.criterion.alpha * r.criterion.split, 6)}),
                "futile": r.futile,
                "estimate": _num(r.estimate),
                # The same with every not-evaluable trial counted as a failure (the PASS test's reading).
                "estimate_if_failed": _num(r.estimate_if_failed),
                "low": _num(r.low),
                "high": _num(r.high),
                # Each bound is one-sided at the criterion's confidence (the verdict's test),
                # so together they cover theta with 1 - 2 * alpha.
                "interval_coverage": round(2 * r.criterion.confidence - 1, 4),
                "coverage": round(r.coverage, 4),
                "not_evaluable": round(1 - r.coverage, 4) if r.trials else None,
                "evaluable": r.evaluable,
                "trials": r.trials,
                "tasks": [
                    {"task": t.task_id, "trials": t.trials, "evaluable": t.evaluable,
                     "estimate": _num(t.estimate), "baseline": _num(t.baseline), "passed": t.passed}
                    for t in r.tasks
                ],
            }
            for r in results
        ],
    }


def _confidence(c: dict[str, Any]) -> str:
    """A criterion's confidence; a split one (personas) to the hundredth of a percent."""
    return f"{c['confidence']:.2%}" if c.get("persona") is not None else f"{c['confidence']:.0%}"


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


# What the bench measured of the plug-in estimate's error given the verdict, where that
# verdict had a chance of 0.2 or more, and where it was rarer (bench/gate_calibration.py,
# docs/gate.md "What is estimated"): the summary says it.
BIAS = ("0.00 to 0.07 high after a PASS and 0.00 to 0.06 low after a FAIL where the verdict was a likely one, "
        "and up to 0.45 off where it was a rare one")


def markdown(record: dict[str, Any]) -> str:
    """The summary a CI job shows: verdict, criteria (with the share of trials not
    evaluable and the estimate with them as failures), trials against the fixed design of
    the same budget, cost, and the tasks that decided it (below the bar)."""
    spent, fixed = record["conversations"], record["fixed_design_conversations"]
    saved = f" ({1 - spent / fixed:.0%} fewer)" if fixed and spent < fixed else ""
    lines = [
        f"## passhat gate {record['gate']}: **{record['verdict']}**",
        "",
        "| criterion | confidence | verdict | plug-in estimate | not-evaluable as failures | interval | "
        "not evaluable |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in record["criteria"]:
        missing = c["trials"] - c["evaluable"]
        lines.append(f"| {c['criterion']} | {_confidence(c)} | {c['verdict']} | {_fmt(c['estimate'])} | "
                     f"{_fmt(c.get('estimate_if_failed'))} | "
                     f"{_fmt(c['low'])} – {_fmt(c['high'])} ({c['interval_coverage']:.0%} two-sided) | "
                     f"{missing}/{c['trials']} ({1 - c['coverage'] if c['trials'] else 0:.0%}) |")
    per_task = record.get("max_trials")
    lines += ["", f"Conversations: {spent} in {len(record['rounds'])} round(s), against {fixed} for the fixed "
              f"design of {per_task} trials on every task (--max-trials){saved}. Cost: {record['cost_usd']:.4g} USD."]
    if record["stopped"]:
        lines.append(f"Stopped: {record['stopped']}.")
    note = bonferroni_note(record["criteria"])
    if note:
        lines.append(note)
    if any(c["kind"] == "persona_drop" for c in record["criteria"]):
        lines.append("Persona drop: the persona's pass^k less tau2's user's (its bar: minus the drop allowed), "
                     "decided on pairs of the same task's blocks under both users, which share their seeds; "
                     "a not-evaluable trial is read against each test, tau2's user's the other way round "
                     "(docs/gate.md, A persona's drop).")
    for c in record["criteria"]:
        below = [t["task"] for t in c["tasks"] if t["passed"] is False]
        if below:
            lines.append(f"- {c['criterion']}: below the bar on its own: {', '.join(below[:20])}"
                         + (f" and {len(below) - 20} more" if len(below) > 20 else ""))
    lines.append("")
    estimate = ("the mean over tasks of the share of a task's blocks that succeeded (its blocks stopped at their "
                "first failure: curtailed, see docs/gate.md)" if record.get("curtailed") else
                "the mean over tasks of tau2's C(c, k) / C(n, k)")
    lines.append("Intervals: anytime-valid confidence sequence for the mean over these tasks of p^k "
                 "(see docs/gate.md): each bound is one-sided at the criterion's confidence, the bound "
                 "its verdict is read from, so the two together cover it with 1 - 2(1 - confidence). "
                 "A not-evaluable trial counts as a failure for PASS and as a success for FAIL, so the verdict "
                 "holds whatever made it not evaluable. "
                 f"Plug-in estimate: {estimate}, over the evaluable trials; the gate chose each task's trials "
                 f"from the outcomes, so it is not unbiased: in simulation it ran {BIAS}.")
    return "\n".join(lines) + "\n"


def junit(record: dict[str, Any]) -> str:
    """JUnit XML: a suite per criterion, a test case per task (failed when the task on
    its own is below the criterion's bar, skipped when it has too few trials), and one
    case for the criterion's verdict."""
    root = ET.Element("testsuites", name=f"passhat gate {record['gate']}")
    for c in record["criteria"]:
        failures = sum(t["passed"] is False for t in c["tasks"]) + (c["verdict"] == "FAIL")
        skipped = sum(t["passed"] is None for t in c["tasks"]) + (c["verdict"] == "INCONCLUSIVE")
        suite = ET.SubElement(root, "testsuite", name=c["criterion"], tests=str(len(c["tasks"]) + 1),
                              failures=str(failures), skipped=str(skipped), errors="0")
        verdict = ET.SubElement(suite, "testcase", classname=c["criterion"], name="verdict")
        about = (f"{c['verdict']} at {_confidence(c)}: plug-in estimate {_fmt(c['estimate'])}, "
                 f"{c['interval_coverage']:.0%} interval {_fmt(c['low'])}-{_fmt(c['high'])}")
        if c.get("persona") is not None:
            verdict.set("persona", c["persona"])
            about += (f"; persona {c['persona']}, alpha {c['family_alpha']:g} split over {c['split']} "
                      f"personas (Bonferroni)")
        if c["verdict"] == "FAIL":
            ET.SubElement(verdict, "failure", message=about)
        elif c["verdict"] == "INCONCLUSIVE":
            ET.SubElement(verdict, "skipped", message=about)
        for t in c["tasks"]:
            case = ET.SubElement(suite, "testcase", classname=c["criterion"], name=t["task"])
            said = f"pass^{c['k']} {_fmt(t['estimate'])}" + (
                f" (baseline {_fmt(t['baseline'])})" if t["baseline"] is not None else "") + \
                f" over {t['evaluable']} evaluable of {t['trials']} trials"
            if t["passed"] is False:
                ET.SubElement(case, "failure", message=said)
            elif t["passed"] is None:
                ET.SubElement(case, "skipped", message=said)
            else:
                ET.SubElement(case, "system-out").text = said
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
