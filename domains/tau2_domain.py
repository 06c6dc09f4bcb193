"""tau2's domains (airline, retail, telecom, mock, and any a plugin registers) behind passhat's Domain interface.

tau2 does the real work: its tasks, tools, environments, prompts and evaluator are used
as a library, so a reward computed here is the reward tau2 gives the same conversation.
What this module adds is speed for a worker that runs thousands of trials in one process:

- tau2's environment constructors re-read the domain's database file (airline: 7 MB of
  JSON) every time, and its evaluator builds two environments per scoring, one of them
  the gold final state, which is the same for every trial of a task. Here each database
  is parsed once per process, every environment shares the records it does not touch
  (shared_db), and the gold state is computed once per task (the environment check is
  passhat.domains.tau2_environment).
- A conversation's environment is kept between tool calls (`session`), so a tool call
  does not replay the whole conversation unless this worker has not seen it yet.

tau2 is imported inside functions only: importing it takes seconds, which `passhat --help`
and anything else that merely lists domains must not pay. tau2's data, parsed once per
process, is in passhat.domains.tau2_data; the conversion of conversations to tau2's
messages in passhat.domains.tau2_messages.
"""

from __future__ import annotations

from typing import Any

from passhat.messages import GoldAction, Message, Score, TaskInfo, ToolCall
from passhat.domains.base import UnknownDomainError, UnknownTaskError
from passhat.domains.tau2_environment import EnvironmentReplay
from passhat.domains.tau2_catalog import is_tau2_domain
from passhat.domains.tau2_data import PROMPT_ONLY, SessionCache, domain_data, gc_paused
from passhat.domains.tau2_messages import (
    initial_messages,
    invalid_arguments_answer,
    replayable,
    to_score,
    to_tau2_call,
    to_tau2_trajectory,
    tool_trace,
    with_initial_messages,
)
from passhat.domains.tau2_version import installed_rules

# One entry per conversation a worker process can have in flight (it runs at most 64
# activities at once, and a trial's tool steps run in the process that runs its
# workflow). An airline or retail environment holds only the records its conversation
# touched (shared_db), a few hundred kB, so 64 entries cost far less than a copy of the
# whole database each would.
# A miss costs a rebuild: a fresh environment and a replay of the conversation's calls.
DEFAULT_SESSION_CACHE_SIZE = 64


class Tau2Domain:
    """One tau2 domain. Cheap to create: tau2's data is loaded on first use."""

    def __init__(
        self,
        name: str,
        session_cache_size: int = DEFAULT_SESSION_CACHE_SIZE,
        *,
        tasks: list[Any] | None = None,
        label: str | None = None,
    ):
        """`tasks` (tau2 Task models) replaces the domain's own task set, for a user's
        task file; `label` is then the name the registry knows this variant by. Tools,
        policy, database and scoring stay tau2's for `name`."""
        if not is_tau2_domain(name):
            raise UnknownDomainError(f"tau2's registry has no domain {name!r}")
        self.name = label or name
        self.tau2_name = name
        self._tasks = None if tasks is None else {task.id: task for task in tasks}
        self._sessions = SessionCache(session_cache_size)
        self._replay = EnvironmentReplay(name)
        self._user_prompts: dict[str, str] = {}

    # -- tasks and prompts -------------------------------------------------------------

    def task_ids(self) -> list[str]:
        return list(self._task_set())

    def task(self, task_id: str) -> TaskInfo:
        task = self._tau2_task(task_id)
        instructions = task.user_scenario.instructions
        criteria = task.evaluation_criteria
        return TaskInfo(
            id=task.id,
            # tau2's run hands the user simulator exactly this string.
            user_scenario=str(task.user_scenario),
            reason_for_call=getattr(instructions, "reason_for_call", None),
            known_info=getattr(instructions, "known_info", None),
            unknown_info=getattr(instructions, "unknown_info", None),
            gold_actions=[
                GoldAction(name=a.name, arguments=a.arguments, requestor=a.requestor)
                for a in (criteria.actions or [] if criteria else [])
            ],
            communicate_info=list(criteria.communicate_info or []) if criteria else [],
            initial_messages=initial_messages(task),
        )

    # Prompts and tool schemas are asked for on every model call and never change: they
    # are built once (per domain, and per task for the user) and shared, not copied, so
    # callers must not modify them.

    def agent_tools(self) -> list[dict[str, Any]]:
        return domain_data(self.tau2_name).agent_tool_schemas

    def user_tools(self) -> list[dict[str, Any]] | None:
        return domain_data(self.tau2_name).user_tool_schemas

    def agent_system_prompt(self) -> str:
        return domain_data(self.tau2_name).agent_system_prompt()

    def policy(self) -> str:
        """The domain's policy, as tau2's agents receive it (an agent prompt of the
        user's own puts it where its template says)."""
        return domain_data(self.tau2_name).policy

    def database_json(self) -> str:
        """The domain's initial databases (the agent's, then the user's where it has
        one) as JSON, for the run's domain digest (domains/digest.py)."""
        env = domain_data(self.tau2_name).new_environment()
        dbs = [kit.db for kit in (env.tools, env.user_tools) if getattr(kit, "db", None) is not None]
        with gc_paused():
            return "[" + ",".join(db.model_dump_json() for db in dbs) + "]"

    def tool_kinds(self) -> dict[str, str]:
        """Each tool's tau2 type (read, write, think, generic), agent's and user's."""
        return domain_data(self.tau2_name).tool_kinds

    def user_system_prompt(self, task_id: str) -> str:
        prompt = self._user_prompts.get(task_id)
        if prompt is None:
            from tau2.user.user_simulator import UserSimulator

            task = self._tau2_task(task_id)
            # The guidelines differ with and without user tools, as in tau2's run.
            # The model is never called: only the prompt is read (1.0.x requires one).
            user = UserSimulator(
                tools=domain_data(self.tau2_name).user_tools,
                instructions=str(task.user_scenario),
                llm=PROMPT_ONLY,
            )
            prompt = self._user_prompts[task_id] = user.system_prompt
        return prompt

    def tau2_agent_parts(self) -> tuple[list[Any], str]:
        """What tau2's run hands a registered agent: the agent's tau2 tools (a list of
        its own, which the agent may change) and the policy."""
        data = domain_data(self.tau2_name)
        return list(data.agent_tools), data.policy

    def tau2_task(self, task_id: str) -> Any:
        """tau2's Task model (for agents that are handed the task, as tau2's GT agent, and
        for what reads it as tau2's evaluator and reviewer do)."""
        return self._tau2_task(task_id)

    # -- tools -------------------------------------------------------------------------

    def execute(
        self,
        task_id: str,
        history: list[Message],
        calls: list[ToolCall],
        session: str | None = None,
    ) -> list[Message]:
        """Run `calls` against the state left by the task's initial state and `history`.

        `history` is the conversation so far; it may start with the task's initial
        messages or leave them out (they are replayed either way). Tool messages in it
        must carry the content this domain returned: a rebuild replays every answered
        call and tau2 refuses a history whose answers it cannot reproduce.
        """
        task = self._tau2_task(task_id)
        history = with_initial_messages(task, history)
        trace = tool_trace(history)
        key = (task_id, session)
        env = self._sessions.take(key, trace) if session is not None else None
        if env is None:
            env = self._rebuild(task, history)

        answers = []
        for call in calls:
            if call.invalid_arguments is not None:
                answers.append(invalid_arguments_answer(call))
                continue
            response = env.get_response(to_tau2_call(call))
            answers.append(
                Message(
                    role="tool",
                    content=response.content,
                    tool_call_id=call.id,
                    requestor=call.requestor,
                    error=response.error,
                )
            )
        # tau2's orchestrator syncs user and agent state once more after every step.
        env.sync_tools()

        if session is not None:
            trace += tuple((a.tool_call_id, a.content) for a in answers)
            self._sessions.put(key, env, trace)
        return answers

    def _rebuild(self, task: Any, history: list[Message]) -> Any:
        """A fresh environment in the state after the task's initial state and every
        answered tool call of `history` (tau2's set_state replays them)."""
        env = domain_data(self.tau2_name).new_environment()
        init = task.initial_state
        env.set_state(
            initialization_data=init.initialization_data if init else None,
            initialization_actions=init.initialization_actions if init else None,
            message_history=replayable(history),
        )
        return env

    # -- scoring -----------------------------------------------------------------------

    def judge_request(
        self, task_id: str, messages: list[Message], termination_reason: str
    ) -> list[dict[str, Any]] | None:
        """The messages of the NL-assertion judge's call that grading this conversation
        needs (tau2 1.0.x, a stopped conversation of a task with NL assertions in its
        reward basis), or None when grading needs no judge."""
        from tau2.data_model.tasks import RewardType

        from passhat.domains.nl_judge import judge_messages

        task = self._tau2_task(task_id)
        criteria = task.evaluation_criteria
        if (
            not installed_rules().grades_nl_assertions
            or termination_reason not in ("user_stop", "agent_stop")
            or criteria is None
            or RewardType.NL_ASSERTION not in criteria.reward_basis
            or not criteria.nl_assertions
        ):
            return None
        trajectory = to_tau2_trajectory(with_initial_messages(task, messages))
        return judge_messages(trajectory, criteria.nl_assertions)

    def score(
        self,
        task_id: str,
        messages: list[Message],
        termination_reason: str,
        nl_checks: list[dict[str, Any]] | None = None,
    ) -> Score:
        """tau2's reward for the conversation ("all" evaluation: environment, actions,
        communication). The gold final state is the same for every trial of a task, so
        its hashes are computed once per task (tau2 rebuilds it for every trial)."""
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.data_model.tasks import RewardType
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
        from tau2.utils.utils import get_now

        task = self._tau2_task(task_id)
        if termination_reason not in {r.value for r in TerminationReason}:
            # Not a reason tau2 knows, so not a stop either: tau2 scores those 0.
            return Score(
                reward=0.0,
                info={"note": f"Not a tau2 stop reason: {termination_reason!r}"},
            )
        trajectory = to_tau2_trajectory(with_initial_messages(task, messages))
        if installed_rules().evaluator_replay == "tau2":
            return self._score_as_tau2(task, trajectory, termination_reason, nl_checks)
        stopped = termination_reason in (TerminationReason.AGENT_STOP, TerminationReason.USER_STOP)
        criteria = task.evaluation_criteria
        data = domain_data(self.tau2_name)
        if (not stopped or criteria is None or RewardType.NL_ASSERTION in criteria.reward_basis
                or not data.shared):
            # tau2's evaluator answers these without building any environment: a trial
            # that did not stop scores 0, a task without criteria 1, and NL assertions
            # are refused under "all". A plugin's domain is scored by it whole.
            now = get_now()
            simulation = SimulationRun(
                id=f"passhat-{task_id}", task_id=task_id, start_time=now, end_time=now,
                duration=0.0, termination_reason=termination_reason, messages=trajectory,
            )
            return to_score(evaluate_simulation(
                simulation=simulation, task=task, evaluation_type=EvaluationType.ALL,
                solo_mode=False, domain=domain_data(self.tau2_name).evaluator_domain,
            ))
        with gc_paused():
            return to_score(self._evaluate_all(task, trajectory))

    def _score_as_tau2(
        self, task: Any, trajectory: list[Any], termination_reason: str,
        nl_checks: list[dict[str, Any]] | None,
    ) -> Score:
        """tau2's own "all" evaluation (1.0.x: its replay is the version's), with the NL
        assertions graded from `nl_checks`, the judge's verdicts passhat recorded: the
        rest of the reward basis is evaluated by tau2 and multiplied by the NL part, as
        tau2 multiplies the parts of a basis."""
        from tau2.data_model.simulation import NLAssertionCheck, SimulationRun
        from tau2.data_model.tasks import RewardType
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
        from tau2.utils.utils import get_now

        criteria = task.evaluation_criteria
        needs_nl = (
            termination_reason in ("user_stop", "agent_stop")
            and criteria is not None
            and RewardType.NL_ASSERTION in criteria.reward_basis
        )
        graded = task
        if needs_nl:
            graded = task.model_copy(deep=True)
            graded.evaluation_criteria.reward_basis = [
                b for b in criteria.reward_basis if b != RewardType.NL_ASSERTION
            ]
        now = get_now()
        simulation = SimulationRun(
            id=f"passhat-{task.id}", task_id=task.id, start_time=now, end_time=now,
            duration=0.0, termination_reason=termination_reason, messages=trajectory,
        )
        with gc_paused():
            result = evaluate_simulation(
                simulation=simulation, task=graded, evaluation_type=EvaluationType.ALL,
                solo_mode=False, domain=domain_data(self.tau2_name).evaluator_domain,
            )
        if needs_nl:
            if criteria.nl_assertions and nl_checks is None:
                raise ValueError(f"task {task.id} is graded by NL assertions: the judge's verdicts are needed")
            checks = [NLAssertionCheck(**c) for c in nl_checks or []]
            nl_reward = 1.0 if all(c.met for c in checks) else 0.0
            result.reward *= nl_reward
            result.nl_assertions = checks
            result.reward_basis = criteria.reward_basis
            result.reward_breakdown = {**(result.reward_breakdown or {}), RewardType.NL_ASSERTION: nl_reward}
        return to_score(result)

    def _evaluate_all(self, task: Any, trajectory: list[Any]) -> Any:
        """tau2's "all" evaluation of a stopped trajectory, as its evaluate_simulation
        combines it: the reward is the product of the parts in the task's reward basis."""
        from tau2.data_model.simulation import RewardInfo
        from tau2.data_model.tasks import RewardType
        from tau2.evaluator.evaluator_action import ActionEvaluator
        from tau2.evaluator.evaluator_communicate import CommunicateEvaluator

        criteria = task.evaluation_criteria
        env = self._replay.reward(task, trajectory)
        action = ActionEvaluator.calculate_reward(task=task, full_trajectory=trajectory)
        communicate = CommunicateEvaluator.calculate_reward(task=task, full_trajectory=trajectory)
        basis = set(criteria.reward_basis)
        reward, breakdown = 1.0, {}
        for part, kinds in (
            (env, {RewardType.DB, RewardType.ENV_ASSERTION}),
            (action, {RewardType.ACTION}),
            (communicate, {RewardType.COMMUNICATE}),
        ):
            if basis & kinds:
                breakdown.update(part.reward_breakdown or {})
                reward *= part.reward
        return RewardInfo(
            reward=reward,
            db_check=env.db_check,
            env_assertions=env.env_assertions,
            action_checks=action.action_checks,
            communicate_checks=communicate.communicate_checks,
            reward_basis=criteria.reward_basis,
            reward_breakdown=breakdown,
            info={"env": env.info, "nl": None, "communicate": communicate.info, "action": action.info},
        )

    def database_differences(self, task_id: str, messages: list[Message]) -> list[dict[str, Any]]:
        """The fields in which the conversation's final databases (the agent's, and the
        user's where the domain has one) differ from the gold ones (domains/db_diff.py)."""
        task = self._tau2_task(task_id)
        if task.evaluation_criteria is None:
            return []
        return self._replay.database_differences(task, to_tau2_trajectory(with_initial_messages(task, messages)))

    def diagnose(
        self, task_id: str, steps: list[tuple[int, list[Message]]], reward_info: dict[str, Any],
        termination_reason: str | None,
    ) -> dict[str, Any]:
        """The failed trial's diagnosis against the task's gold path (domains/diagnosis.py)."""
        from passhat.domains.diagnosis import diagnose

        criteria = self._tau2_task(task_id).evaluation_criteria
        gold = [
            {"name": a.name, "arguments": dict(a.arguments), "compare_args": a.compare_args}
            for a in (criteria.actions or [] if criteria else [])
            if getattr(a, "requestor", "assistant") == "assistant"
        ]
        info = list(criteria.communicate_info or []) if criteria else []
        diagnosis = diagnose(gold, info, self.tool_kinds(), steps, reward_info, termination_reason)
        if "DB" in diagnosis["failed_parts"]:
            messages = [m for _, step in steps for m in step]
            try:
                diagnosis["db_differences"] = self.database_differences(task_id, messages)
            except Exception as err:  # noqa: BLE001 - e.g. an imported conversation tau2 cannot replay
                # The rest of the diagnosis stands; the diff says why it is missing.
                diagnosis["db_differences_error"] = f"{type(err).__name__}: {str(err)[:300]}"
        return diagnosis

    # -- helpers -----------------------------------------------------------------------

    def _task_set(self) -> dict[str, Any]:
        return self._tasks if self._tasks is not None else domain_data(self.tau2_name).tasks

    def _tau2_task(self, task_id: str) -> Any:
        try:
            return self._task_set()[task_id]
        except KeyError:
            raise UnknownTaskError(f"{self.name} has no task {task_id!r}") from None
