"""tau2's environment check, as its evaluator makes it (EnvironmentEvaluator): the
conversation's tool calls replayed on the task's initial state, compared with the gold
final state (the task's gold actions made on it). Each database is parsed once per
process (tau2_data, shared_db) and a task's gold state is computed once, where tau2
rebuilds both environments for every trial; the same two environments answer the
diagnosis's field-by-field DB diff (domains/db_diff.py)."""

from __future__ import annotations

from typing import Any

from passhat.domains.shared_db import kept, same_data
from passhat.domains.tau2_data import domain_data, gc_paused


class EnvironmentReplay:
    """The environment check of one tau2 domain."""

    def __init__(self, tau2_name: str):
        self.tau2_name = tau2_name
        # task id -> gold final databases, as shared_db.kept keeps them (see gold_state).
        # Two threads may compute the same entry at once; both get the same value, so no
        # lock is needed.
        self._gold: dict[str, tuple[Any, Any]] = {}

    def reward(self, task: Any, trajectory: list[Any]) -> Any:
        """tau2's environment check: the databases after replaying the trajectory must
        hash like the gold ones, and the task's environment assertions must hold."""
        from tau2.data_model.simulation import DBCheck, EnvAssertionCheck, RewardInfo
        from tau2.data_model.tasks import RewardType

        criteria = task.evaluation_criteria
        if criteria.actions is None and criteria.env_assertions is None:
            return RewardInfo(
                reward=1.0,
                db_check=DBCheck(db_match=True, db_reward=1.0),
                info={"note": "No expected actions or env assertions"},
            )
        predicted = self.predicted_environment(task, trajectory)
        gold_db, gold_user_db = self.gold_state(task)
        db_match = same_data(gold_db, predicted.tools.db) and same_data(
            gold_user_db, predicted.user_tools.db if predicted.user_tools else None
        )
        db_check = DBCheck(db_match=db_match, db_reward=1.0 if db_match else 0.0)
        assertions = []
        for assertion in criteria.env_assertions or []:
            met = predicted.run_env_assertion(assertion, raise_assertion_error=False)
            assertions.append(EnvAssertionCheck(env_assertion=assertion, met=met, reward=1.0 if met else 0.0))
        reward, breakdown = 1.0, {}
        if RewardType.DB in criteria.reward_basis:
            breakdown[RewardType.DB] = db_check.db_reward
            reward *= db_check.db_reward
        if RewardType.ENV_ASSERTION in criteria.reward_basis:
            met_all = 1.0 if all(a.met for a in assertions) else 0.0
            breakdown[RewardType.ENV_ASSERTION] = met_all
            reward *= met_all
        return RewardInfo(
            reward=reward,
            db_check=db_check,
            env_assertions=assertions,
            reward_basis=criteria.reward_basis,
            reward_breakdown=breakdown,
        )

    def gold_state(self, task: Any) -> tuple[Any, Any]:  # shared-database domains only
        """The agent and user databases after the task's gold actions, from its initial
        state, computed once per task and kept as shared_db.kept keeps them."""
        state = self._gold.get(task.id)
        if state is None:
            gold = self.gold_environment(task)
            state = self._gold[task.id] = (
                kept(gold.tools.db), kept(gold.user_tools.db if gold.user_tools else None)
            )
        return state

    def gold_environment(self, task: Any) -> Any:
        """tau2's gold environment: the task's initial state, then its gold actions, each
        made as tau2's evaluator makes them."""
        init = task.initial_state
        gold = domain_data(self.tau2_name).new_environment()
        gold.set_state(
            initialization_data=init.initialization_data if init else None,
            initialization_actions=init.initialization_actions if init else None,
            message_history=(init.message_history or []) if init else [],
        )
        for action in task.evaluation_criteria.actions or []:
            try:
                gold.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
            except Exception:  # noqa: BLE001
                pass  # as in tau2: a gold action that fails leaves the state as it was
        return gold

    def predicted_environment(self, task: Any, trajectory: list[Any]) -> Any:
        """tau2's environment after replaying the conversation, as its evaluator replays it
        (the tool calls of both sides, each domain's sync_tools included)."""
        init = task.initial_state
        predicted = domain_data(self.tau2_name).new_environment()
        predicted.set_state(
            initialization_data=init.initialization_data if init else None,
            initialization_actions=init.initialization_actions if init else None,
            message_history=trajectory,
        )
        return predicted

    def database_differences(self, task: Any, trajectory: list[Any]) -> list[dict[str, Any]]:
        """The fields in which the trajectory's final databases (the agent's, and the
        user's where the domain has one) differ from the gold ones."""
        from passhat.domains.db_diff import database_differences

        with gc_paused():
            predicted = self.predicted_environment(task, trajectory)
            gold_db, gold_user_db = self.gold_state(task) if domain_data(self.tau2_name).shared else (None, None)
            if gold_db is None or isinstance(gold_db, str) or isinstance(gold_user_db, str):
                gold = self.gold_environment(task)  # kept as a hash only: rebuilt to compare
                gold_db, gold_user_db = gold.tools.db, gold.user_tools.db if gold.user_tools else None
            user_db = predicted.user_tools.db if predicted.user_tools else None
            return [*database_differences(gold_db, predicted.tools.db, "agent"),
                    *database_differences(gold_user_db, user_db, "user")]
