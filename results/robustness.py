"""How an agent holds up against users who are not ideal (docs/personas.md): per agent
model, domain and user persona, pass^k under the persona beside pass^k under tau2's own
user, and the drop between them, paired by task.

A run with personas runs every task under tau2's own user and under each persona with the
same k seeds (trial i of every task sends the provider the same seed under every user),
so the two are paired: the drop is the mean over the tasks both evaluated of the
per-task pass^k under tau2's user minus under the persona, with a bootstrap interval over
those tasks (metrics.paired_difference), far narrower than the two intervals apart. A
task the persona breaks is one with fewer successes under it than under tau2's user, of
as many evaluated trials.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from passhat import metrics
from passhat.results.estimate import Estimate

if TYPE_CHECKING:
    from passhat.results.report import GroupReport


class PersonaRobustness(BaseModel):
    """One agent model under one user persona on one domain of a run, against the same
    model under tau2's own user."""

    run_id: str
    agent_model: str
    user_model: str
    domain: str
    user_persona: str
    pass_hat_k: dict[str, Estimate] = Field(description="pass^k under the persona, by k")
    baseline_pass_hat_k: dict[str, Estimate] = Field(description="pass^k under tau2's own user, by k")
    drop: dict[str, Estimate] = Field(description=(
        "by k: tau2's user's pass^k minus the persona's, the mean of per-task differences over "
        "the tasks both evaluated (same tasks, same seeds), with its bootstrap interval over them"))
    shared_tasks: int = Field(description="tasks evaluated under both users: the ones the drop is over")
    broken_tasks: list[str] = Field(description=(
        "tasks with fewer successes under the persona than under tau2's user, of as many evaluated trials"))

    def k(self) -> str | None:
        return max(self.drop, key=int) if self.drop else None

    def lines(self) -> list[str]:
        """The finding in words, lines that fit a terminal: "pass^4 0.250 [0.000, 0.500]
        vs 1.000 [1.000, 1.000] under tau2's user" and "drop +0.750 [+0.500, +1.000]
        over 4 tasks"."""
        k = self.k()
        if k is None:
            return ["no task evaluated under both users: no drop to measure"]
        out = [f"pass^{k} {_ci(self.pass_hat_k.get(k))} vs {_ci(self.baseline_pass_hat_k.get(k))} under tau2's user",
               f"drop {_ci(self.drop[k], signed=True)} over {self.shared_tasks} tasks"]
        if "1" in self.drop and k != "1":
            out.append(f"pass^1 drop {_ci(self.drop['1'], signed=True)}")
        return out

    def broken_words(self) -> str:
        if not self.broken_tasks:
            return "breaks no task"
        return f"breaks {len(self.broken_tasks)} task(s): " + ", ".join(self.broken_tasks)


def _ci(estimate: Estimate | None, signed: bool = False) -> str:
    if estimate is None:
        return "-"
    spec = "+.3f" if signed else ".3f"
    return f"{estimate.value:{spec}} [{estimate.low:{spec}}, {estimate.high:{spec}}]"


def persona_robustness(groups: list[GroupReport]) -> list[PersonaRobustness]:
    """A PersonaRobustness for each persona group of a run that has a group of the same
    agent model, user model and domain under tau2's own user; in the groups' order."""
    baselines = {(g.run_id, g.agent_model, g.user_model, g.domain): g for g in groups if g.user_persona is None}
    out = []
    for group in groups:
        base = baselines.get((group.run_id, group.agent_model, group.user_model, group.domain))
        if group.user_persona is None or base is None:
            continue
        mine, theirs = _by_task(group), _by_task(base)
        shared = [t for t in theirs if t in mine]  # in the run's task order (17 after 8, not before 7)
        drop = {}
        for k in sorted({k for t in shared for k in theirs[t].pass_hat_k}, key=int):
            paired = metrics.paired_difference(
                {t: theirs[t].pass_hat_k[k] for t in shared if k in theirs[t].pass_hat_k and k in mine[t].pass_hat_k},
                {t: mine[t].pass_hat_k[k] for t in shared if k in theirs[t].pass_hat_k and k in mine[t].pass_hat_k})
            if paired is not None:
                drop[k] = Estimate.of(paired.difference)
        out.append(PersonaRobustness(
            run_id=group.run_id, agent_model=group.agent_model, user_model=group.user_model,
            domain=group.domain, user_persona=group.user_persona, pass_hat_k=group.pass_hat_k,
            baseline_pass_hat_k=base.pass_hat_k, drop=drop, shared_tasks=len(shared),
            broken_tasks=[t for t in shared if mine[t].evaluable == theirs[t].evaluable
                          and mine[t].successes < theirs[t].successes],
        ))
    return out


def _by_task(group: GroupReport) -> dict:
    return {t.task_id: t for t in group.task_results if t.evaluable}
