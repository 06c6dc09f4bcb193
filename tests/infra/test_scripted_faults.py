"""The faulty scripted models on real runs (Temporal dev server, tau2's airline): the agent
makes exactly the one planned mistake at the planned step, P=0 is the oracle, and the
erring user does what its plan says. Each faulty trial is compared with the oracle's
trial of the same task and seed in the same run, not with the plan's own code."""

from __future__ import annotations

from passhat.contracts import DEFAULT_SEED, trial_seeds
from passhat.messages import STOP_TOKEN
from passhat.outcomes import is_success
from passhat.domains.registry import get_domain
from passhat.infra.scripted_faults import (
    AGENT_FAULT_KINDS,
    facts_of,
    fault_step,
    planned_fault,
    planned_user_fault,
    user_fault_step,
)
from tests.runs import config, run_to_end

def _first_task_of_each_kind(plan, kinds) -> list[str]:  # noqa: ANN001
    """The first airline task (of the installed tau2's) whose trial 0, at the default seed,
    draws each kind of planned mistake: 26.3's and 1.0.x's tasks differ, so the tasks
    that draw a kind do too (26.3: 0, 2, 7, 9, 12, 27)."""
    domain = get_domain("airline")
    facts, seed = facts_of(domain), trial_seeds(DEFAULT_SEED, 1)[0]
    first: dict[str, str] = {}
    for task_id in domain.task_ids():
        fault = plan("airline", domain.task(task_id), facts, seed, 1.0)
        if fault is not None and fault.kind in kinds:
            first.setdefault(fault.kind, task_id)
    assert set(first) == set(kinds), f"no airline task draws {set(kinds) - set(first)}"
    return sorted(first.values(), key=domain.task_ids().index)


def kind_tasks() -> list[str]:
    return _first_task_of_each_kind(planned_fault, AGENT_FAULT_KINDS)


def _recorded(store, trial_id):  # noqa: ANN001, ANN202
    return [(s.step, s.message_list()) for s in store.steps(trial_id)]


def _agent_calls(steps) -> list[tuple[int, str, dict]]:  # noqa: ANN001
    return [(n, c.name, c.arguments) for n, ms in steps for m in ms if m.role == "assistant"
            for c in m.tool_calls or []]


def _closing(steps) -> tuple[int, str]:  # noqa: ANN001
    return [(n, m.content) for n, ms in steps for m in ms if m.role == "assistant" and m.has_text()][-1]


def _by_task(store, run_id, model):  # noqa: ANN001, ANN202
    return {(t.task_id, t.trial_index): t for t in store.trials(run_id) if t.agent_model == model}


async def test_faulty_agent_makes_one_planned_mistake_at_the_planned_step(client, sqlite_store):
    store = sqlite_store
    cfg = config(agent_models=["scripted/faulty-1", "scripted/oracle"], task_ids=kind_tasks(), trials=1)
    await run_to_end(client, store, cfg)
    domain = get_domain("airline")
    facts = facts_of(domain)
    kinds = domain.tool_kinds()
    oracle = _by_task(store, cfg.run_id, "scripted/oracle")
    seen = set()
    for key, trial in _by_task(store, cfg.run_id, "scripted/faulty-1").items():
        task = domain.task(trial.task_id)
        fault = planned_fault("airline", task, facts, trial.seed, 1.0)
        seen.add(fault.kind)
        assert oracle[key].seed == trial.seed
        right_steps, steps = _recorded(store, oracle[key].trial_id), _recorded(store, trial.trial_id)
        right, made = _agent_calls(right_steps), _agent_calls(steps)
        at = next((i for i, (r, m) in enumerate(zip(right, made)) if r[1:] != m[1:]), min(len(right), len(made)))
        # The step where the faulty trial first departs from the oracle's.
        departs = made[at][0] if at < len(made) else _closing(steps)[0]
        if fault.kind == "missing_info":
            assert [c[1:] for c in made] == [c[1:] for c in right]
            assert fault.info in _closing(right_steps)[1] and fault.info not in _closing(steps)[1]
            departs = _closing(steps)[0]
        elif fault.kind in ("wrong_argument", "wrong_tool"):
            assert len(made) == len(right)
            assert [c[1:] for c in made[at + 1:]] == [c[1:] for c in right[at + 1:]]
            assert kinds[right[at][1]] == "write"
            if fault.kind == "wrong_argument":
                assert made[at][1] == right[at][1] and made[at][2] != right[at][2]
            else:
                assert made[at][1] != right[at][1] and kinds[made[at][1]] == "write"
        elif fault.kind == "extra_write":
            assert [c[1:] for c in made[:at] + made[at + 1:]] == [c[1:] for c in right]
            assert kinds[made[at][1]] == "write"
        else:  # one gold call left out: a write, or the read just before a write
            assert [c[1:] for c in made] == [c[1:] for c in right[:at] + right[at + 1:]]
            if fault.kind == "skipped_write":
                assert kinds[right[at][1]] == "write"
            else:
                assert kinds[right[at][1]] == "read" and kinds[right[at + 1][1]] == "write"
        assert fault_step(fault, task, steps) == departs, (trial.task_id, fault)
        # A write made without its read changes nothing tau2 rewards on airline.
        assert is_success(trial.reward) == (fault.kind == "write_before_read"), (trial.task_id, fault)
    assert seen == set(AGENT_FAULT_KINDS)


async def test_faulty_agent_with_p_zero_is_the_oracle(client, sqlite_store):
    store = sqlite_store
    cfg = config(agent_models=["scripted/faulty-0", "scripted/oracle"], task_ids=kind_tasks()[:4], trials=2)
    await run_to_end(client, store, cfg)
    oracle = _by_task(store, cfg.run_id, "scripted/oracle")
    faulty = _by_task(store, cfg.run_id, "scripted/faulty-0")
    assert faulty.keys() == oracle.keys() and len(faulty) == 8
    for key, trial in faulty.items():
        assert trial.reward == 1.0
        said = [[m.model_dump() for m in ms] for _, ms in _recorded(store, trial.trial_id)]
        assert said == [[m.model_dump() for m in ms] for _, ms in _recorded(store, oracle[key].trial_id)]


async def test_faulty_user_does_what_its_plan_says(client, sqlite_store):
    """The first tasks whose trial 0 draws an invented detail and an early stop (26.3: 0, 2)."""
    store = sqlite_store
    tasks = _first_task_of_each_kind(planned_user_fault, ("user_invented_detail", "user_early_stop"))
    cfg = config(user_model="scripted/faulty-user-1", task_ids=tasks, trials=1)
    await run_to_end(client, store, cfg)
    domain = get_domain("airline")
    facts = facts_of(domain)
    seen = set()
    for trial in store.trials(cfg.run_id):
        task = domain.task(trial.task_id)
        fault = planned_user_fault("airline", task, facts, trial.seed, 1.0)
        seen.add(fault.kind)
        steps = _recorded(store, trial.trial_id)
        step = user_fault_step(fault, task, steps)
        [said] = [ms[-1].content for n, ms in steps if n == step]
        assert fault.text in said
        if fault.kind == "user_invented_detail":
            assert fault.text not in task.user_scenario
            assert trial.reward == 1.0  # the oracle agent does not act on it
        else:
            # It ends the conversation there, before the agent did anything.
            assert said.endswith(STOP_TOKEN) and step == steps[-1][0]
            assert trial.termination_reason == "user_stop" and trial.reward == 0.0
            assert not _agent_calls(steps)
    assert seen == {"user_invented_detail", "user_early_stop"}
