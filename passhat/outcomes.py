"""What runs and trials come to, shared by every layer: their states in the results store,
when a reward is a success, and the outcomes and summaries a run's workflows return."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, model_serializer

from passhat.contracts import without_unset_persona

# A run's state in the results store.
RunStatus = Literal["running", "completed", "cancelled", "failed", "imported", "budget_exhausted"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
RUN_RUNNING: RunStatus = "running"
RUN_COMPLETED: RunStatus = "completed"
RUN_CANCELLED: RunStatus = "cancelled"
# A run that stopped starting conversations once its recorded cost reached its budget
# (RunConfig.max_cost); `passhat resume RUN --max-cost USD` continues it.
RUN_BUDGET_EXHAUSTED: RunStatus = "budget_exhausted"
# A run loaded from results files (`passhat import`): it has no workflows.
RUN_IMPORTED: RunStatus = "imported"

# A trial's state in the results store.
TRIAL_RUNNING = "running"
TRIAL_SCORED = "scored"
TRIAL_NOT_EVALUABLE = "not_evaluable"
TRIAL_CANCELLED = "cancelled"

SUCCESS_THRESHOLD = 1.0 - 1e-6  # tau2 counts a trial as a success when reward == 1


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_THRESHOLD


def outcome_label(status: str, reward: float | None) -> str:
    """The one word a trial shows everywhere (Temporal search attribute, trace, CLI):
    success or failure once scored, otherwise its status (running, not_evaluable)."""
    if status == TRIAL_SCORED:
        return "success" if is_success(reward or 0.0) else "failure"
    return status


class TrialOutcome(BaseModel):
    trial_id: str
    task_id: str
    trial_index: int
    evaluable: bool
    reward: float | None = None
    termination_reason: str | None = None
    error: str | None = None  # why the trial is not evaluable
    error_class: str | None = None

    @property
    def label(self) -> str:
        return outcome_label(TRIAL_SCORED if self.evaluable else TRIAL_NOT_EVALUABLE, self.reward)


class TaskOutcome(BaseModel):
    run_id: str
    agent_model: str
    user_model: str
    user_persona: str | None = None
    domain: str
    task_id: str
    trials: int
    evaluable: int
    successes: int
    avg_reward: float | None
    pass_hat: dict[str, float]


class ModelDomainSummary(BaseModel):
    agent_model: str
    user_model: str
    user_persona: str | None = None  # left out when None: `run --output json` as before personas
    domain: str
    tasks: int
    trials: int
    evaluable: int
    avg_reward: float | None
    pass_hat_k: dict[str, float]
    # pass@k: the chance that at least one of k trials succeeds, averaged over tasks.
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    # pass^k as the public leaderboard counts it (tau2 1.0.1's `submit prepare`): trials
    # that were not evaluable left out, k only up to the fewest evaluable trials of a
    # task (metrics.leaderboard_curves); None when every trial was evaluable (then it is
    # pass_hat_k).
    pass_hat_k_leaderboard: dict[str, float] | None = None

    @model_serializer(mode="wrap")
    def _persona_only_when_set(self, handler: Any) -> dict[str, Any]:
        return without_unset_persona(self, handler(self), "user_persona")


class RunSummary(BaseModel):
    run_id: str
    results: list[ModelDomainSummary]
    # How the run departs from tau2's rules (TrialSettings.departures); empty for a run
    # whose numbers compare with the leaderboard's.
    departures: list[str] = Field(default_factory=list)
