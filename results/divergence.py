"""Where the k trials of a task part (issue 33, item 2): pure computation over recorded
steps and stored diagnoses, run at report time.

A trial is read as the sequence of the agent's actions: each tool call it made (name and
arguments), then how the conversation ended (the termination reason, at the agent's
first message after its last call). The agent's free text is not compared: a model words the same answer
differently from one trial to the next.

For a task with passing and failing trials, each failing trial is lined up with the
passing trial it shares the longest run of first actions with; the action after that
run is its parting point: what it did there, and what the passing trial did. Failing
trials that parted the same way (same preceding action, same tool or ending on both
sides, same differing arguments) form one group. A failing trial whose actions are all
a passing trial's differs only in what the agent said: it is grouped by its stored
diagnosis's first step off the gold path (missing_info, mostly).

For a task that failed every trial: the most common first step off the gold path among
the trials' stored diagnoses (domains/diagnosis.py). A trial's failure cause is the kind
of that step; the report counts causes per model and compares them between runs.

Cost: per task, failing x passing trials x the length of their shared start; linear in
the run's trials for the small k pass^k uses.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from passhat.messages import Message
from passhat.outcomes import TRIAL_SCORED, is_success
from passhat.domains.diagnosis import ENDED_BY


@dataclass(frozen=True)
class Action:
    """One action of the agent: a tool call, or the end of the conversation (name None)."""

    step: int | None
    name: str | None
    arguments: dict[str, Any]
    ended: str | None = None  # the termination reason, for the end
    key: str = ""  # what two trials compare: the call with its arguments, or how it ended

    def words(self) -> str:
        if self.name is None:
            return f"ended ({ENDED_BY.get(self.ended or '', self.ended or 'unknown')})"
        return f"called {self.name}"


def agent_actions(steps: Iterable[tuple[int, list[Message | dict[str, Any]]]],
                  termination_reason: str | None) -> list[Action]:
    """The agent's tool calls in order, then the end. The end's step is the agent's
    first message after its last call (where it went on talking instead of calling, as
    when it asks the user to act, or closes), else the last recorded step."""
    out: list[Action] = []
    closing = last = None
    opened = False  # the agent's greeting, before the user's first message, is no answer
    for step_no, messages in steps:
        last = step_no
        for m in messages:
            # A report reads thousands of conversations: stored JSON, not Message models.
            m = m if isinstance(m, dict) else m.model_dump()
            opened = opened or m["role"] == "user"
            if m["role"] != "assistant":
                continue
            for call in m.get("tool_calls") or []:
                if call.get("requestor", "assistant") != "assistant":
                    continue
                args = (dict(call.get("arguments") or {}) if call.get("invalid_arguments") is None
                        else {"(invalid JSON)": call["invalid_arguments"]})
                out.append(Action(step_no, call["name"], args,
                                  key=json.dumps([call["name"], args], sort_keys=True, default=str)))
                closing = None
            if (m.get("content") or "").strip() and not m.get("tool_calls") and closing is None and opened:
                closing = step_no
    end = termination_reason or "unknown"
    out.append(Action(closing if closing is not None else last, None, {}, ended=end, key=f"end:{end}"))
    return out


@dataclass(frozen=True)
class TrialActions:
    """What divergence needs of one scored trial."""

    trial_id: str
    trial_index: int
    success: bool
    actions: list[Action]
    diagnosis: dict[str, Any] | None = None


class PartingGroup(BaseModel):
    """Failing trials of a task that parted from the passing ones at the same point."""

    trials: list[str] = Field(description="the failing trials' ids")
    steps: list[int | None] = Field(description="each failing trial's step at the parting point, as `passhat show` numbers them")
    after: str | None = Field(description="the last action the failing and passing trials shared; null: none (they part at the first action)")
    failing: str = Field(description="what the failing trials did there, e.g. 'called cancel_reservation' or 'ended (user stopped)'; "
                                     "'same actions' when every action matched a passing trial")
    passing: str = Field(description="what the passing trial did there")
    differing_arguments: dict[str, Any] = Field(default_factory=dict, description=(
        "same tool on both sides: {argument: {passing, failing}} of the first failing trial"))
    passing_trial: str | None = Field(description="the passing trial the first failing trial was lined up with")
    passing_step: int | None = Field(description="that trial's step at the parting point")
    first_off_path: str | None = Field(default=None, description=(
        "for 'same actions': the stored diagnosis's first step off the gold path (kind)"))
    sentence: str


class TaskDivergence(BaseModel):
    """Where a task's trials go wrong: the parting points of a task with passing and
    failing trials ("flaky"), or the most common first step off the gold path of a task
    that failed every trial ("all_failed")."""

    kind: str = Field(description="flaky or all_failed")
    failed: int
    scored: int
    line: str = Field(description="the task's line in a report: flaky, every parting point's sentence "
                                  "(largest group first, joined by '; '); all_failed, its most common first step")
    groups: list[PartingGroup] = Field(default_factory=list, description="flaky: largest first")
    first_off_path: dict[str, Any] | None = Field(default=None, description=(
        "all_failed: the most common {kind, tool} off the gold path, with its count and the trials' steps"))


class CauseChange(BaseModel):
    """One kind of first step off the gold path, counted in a and in b."""

    cause: str
    a: int
    b: int
    change: str = Field(description="grew, shrank or same (b against a)")


def _prefix(a: list[Action], b: list[Action]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x.key != y.key:
            break
        n += 1
    return n


def _differing(passing: dict[str, Any], failing: dict[str, Any]) -> dict[str, Any]:
    return {k: {"passing": passing.get(k), "failing": failing.get(k)}
            for k in sorted(set(passing) | set(failing)) if passing.get(k) != failing.get(k)}


def _first_leaf_difference(passing: Any, failing: Any, path: str) -> tuple[str, Any, Any]:
    """Inside two differing argument values, the first place they differ (`passengers[0].dob`)."""
    if isinstance(passing, dict) and isinstance(failing, dict):
        for k in sorted(set(passing) | set(failing)):
            if passing.get(k) != failing.get(k):
                return _first_leaf_difference(passing.get(k), failing.get(k), f"{path}.{k}")
    if isinstance(passing, list) and isinstance(failing, list) and len(passing) == len(failing):
        for i, (p, f) in enumerate(zip(passing, failing)):
            if p != f:
                return _first_leaf_difference(p, f, f"{path}[{i}]")
    return path, passing, failing


def _value(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _steps_words(steps: list[int | None]) -> str:
    known = sorted({s for s in steps if s is not None})
    if not known:
        return "step unknown"
    if len(known) == 1:
        return f"step {known[0]}"
    return "steps " + ", ".join(map(str, known[:4])) + (", ..." if len(known) > 4 else "")


def _parting(failing: TrialActions, passing: list[TrialActions]) -> tuple[tuple, dict[str, Any]]:
    """(group key, facts) of one failing trial against the passing ones."""
    best, shared = passing[0], -1
    for p in passing:  # the passing trial it shares the longest start with; ties: the first
        n = _prefix(failing.actions, p.actions)
        if n > shared:
            best, shared = p, n
    acts, other = failing.actions, best.actions
    if shared >= min(len(acts), len(other)):  # every action a passing trial's: only words differ
        first = (failing.diagnosis or {}).get("first_off_path") or {}
        # A cause with no step of its own (an NL assertion) is judged at the end.
        step = first.get("step") if first.get("step") is not None else acts[-1].step
        return ("same", first.get("kind")), {
            "step": step, "after": None, "failing": "same actions", "passing": "same actions",
            "differing": {}, "passing_trial": best.trial_id, "passing_step": other[-1].step,
            "first_off_path": first.get("kind"),
        }
    mine, theirs = acts[shared], other[shared]
    after = acts[shared - 1].name if shared else None
    differing = _differing(theirs.arguments, mine.arguments) if mine.name is not None and mine.name == theirs.name else {}
    key = (after, mine.name or f"end:{mine.ended}", theirs.name or f"end:{theirs.ended}", tuple(differing))
    return key, {
        "step": mine.step, "after": after, "failing": mine.words(), "passing": theirs.words(),
        "differing": differing, "passing_trial": best.trial_id, "passing_step": theirs.step,
        "first_off_path": None,
    }


def _group_sentence(n: int, scored: int, facts: dict[str, Any], steps: list[int | None]) -> str:
    trials = f"{n} of {scored} trials"
    where = _steps_words(steps)
    if facts["failing"] == "same actions":
        kind = facts["first_off_path"]
        return (f"{trials} made the same calls as a passing trial and differ only in what the agent said"
                + (f" ({kind} at {where})" if kind else ""))
    context = f"{where}, after {facts['after']}" if facts["after"] else f"{where}, the first action"
    if facts["differing"]:
        args = ", ".join(f"{path}={_value(f)} not {_value(p)}" for path, p, f in (
            _first_leaf_difference(v["passing"], v["failing"], k) for k, v in list(facts["differing"].items())[:3]))
        return f"{trials} {facts['failing']} with {args} ({context})"
    return f"{trials} {facts['failing']} where the passing ones {facts['passing']} ({context})"


def task_divergence(trials: list[TrialActions]) -> TaskDivergence | None:
    """The divergence of one task's scored trials; None when none failed."""
    failing = sorted((t for t in trials if not t.success), key=lambda t: t.trial_index)
    passing = sorted((t for t in trials if t.success), key=lambda t: t.trial_index)
    if not failing:
        return None
    scored = len(trials)
    if not passing:
        return _all_failed(failing, scored)
    grouped: dict[tuple, list[tuple[TrialActions, dict[str, Any]]]] = {}
    for trial in failing:
        key, facts = _parting(trial, passing)
        grouped.setdefault(key, []).append((trial, facts))
    groups = []
    for members in sorted(grouped.values(), key=lambda ms: (-len(ms), ms[0][0].trial_index)):
        facts = members[0][1]
        steps = [f["step"] for _, f in members]
        groups.append(PartingGroup(
            trials=[t.trial_id for t, _ in members], steps=steps, after=facts["after"],
            failing=facts["failing"], passing=facts["passing"], differing_arguments=facts["differing"],
            passing_trial=facts["passing_trial"], passing_step=facts["passing_step"],
            first_off_path=facts["first_off_path"],
            sentence=_group_sentence(len(members), scored, facts, steps),
        ))
    line = "; ".join(g.sentence for g in groups)  # every parting point, the largest group first
    return TaskDivergence(kind="flaky", failed=len(failing), scored=scored, line=line, groups=groups)


def _all_failed(failing: list[TrialActions], scored: int) -> TaskDivergence:
    firsts = [((t.diagnosis or {}).get("first_off_path"), t) for t in failing if t.diagnosis]
    if not firsts:
        return TaskDivergence(kind="all_failed", failed=len(failing), scored=scored,
                              line=f"all {scored} trials failed; no diagnosis recorded")
    counts = Counter((f["kind"], f.get("tool")) if f else ("on the gold path", None) for f, _ in firsts)
    (kind, tool), n = min(counts.items(), key=lambda kv: (-kv[1], kv[0][0], str(kv[0][1])))
    steps = [f.get("step") for f, _ in firsts if f and (f["kind"], f.get("tool")) == (kind, tool)]
    what = f"{kind} ({tool})" if tool else kind
    line = (f"all {scored} trials failed; most common first step off the gold path: {what} in {n} of "
            f"{len(firsts)} diagnosed" + (f", {_steps_words(steps)}" if steps else ""))
    return TaskDivergence(kind="all_failed", failed=len(failing), scored=scored, line=line,
                          first_off_path={"kind": kind, "tool": tool, "count": n, "diagnosed": len(firsts),
                                          "steps": steps})


def run_divergences(rows: list[Any], steps_of: Any) -> dict[tuple[str, str, str, str], TaskDivergence]:
    """The divergence of every task with a failed trial, by (agent model, user model,
    domain, task id). `rows`: a run's trial rows (TrialRow); `steps_of(trial_id)`: that
    trial's recorded steps as (step number, messages: Message models or their stored
    JSON dicts), asked only for tasks with both passing and failing trials."""
    by_task: dict[tuple[str, str, str, str], list[Any]] = {}
    for row in rows:
        if row.status == TRIAL_SCORED and row.reward is not None:
            by_task.setdefault((row.agent_model, row.user_model, row.domain, row.task_id), []).append(row)
    out = {}
    for key, scored in by_task.items():
        outcomes = {is_success(r.reward) for r in scored}
        if outcomes == {True}:
            continue
        flaky = outcomes == {True, False}
        out[key] = task_divergence([
            TrialActions(r.trial_id, r.trial_index, is_success(r.reward),
                         agent_actions(steps_of(r.trial_id), r.termination_reason) if flaky else [],
                         None if is_success(r.reward) else r.diagnosis())
            for r in scored])
    return out


def cause_of(diagnosis: dict[str, Any]) -> str:
    """A diagnosed trial's failure cause: the kind of its first step off the gold path;
    with none, "agent DB differs" or "user DB differs" where the final state does (as the
    diagnosis's one line says), else "on the gold path"."""
    first = diagnosis.get("first_off_path")
    if first:
        return first["kind"]
    db = diagnosis.get("db_differences") or []
    return f"{db[0]['database']} DB differs" if db else "on the gold path"


def cause_changes(a: dict[str, int], b: dict[str, int]) -> list[CauseChange]:
    """Each cause of a or b with its two counts, the largest change first."""
    kinds = sorted(set(a) | set(b),
                   key=lambda c: (-abs(b.get(c, 0) - a.get(c, 0)), c))
    return [CauseChange(cause=c, a=a.get(c, 0), b=b.get(c, 0),
                        change=("grew" if b.get(c, 0) > a.get(c, 0) else
                                "shrank" if b.get(c, 0) < a.get(c, 0) else "same"))
            for c in kinds]
