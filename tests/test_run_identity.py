"""passhat.run_identity: what a run is and what may change under its id, checked where
a run is recorded or attached to (activities.results.record_run, which `passhat run`,
`resume` and a gate's rounds go through), on a real store."""

from __future__ import annotations

import pytest

from passhat.activities.results import check_run, record_run
from passhat.domains.digest import MEASURE
from passhat.run_identity import (
    MEASURED,
    BudgetChangeRefused,
    ConfigMismatchError,
    agent_identity,
    budget_refusal,
    fingerprint,
)
from tests.helpers import make_config

DOMAIN = {"mock": {"policy": "p1", "tools": "t1", "db": "d1", "tasks": "k1"}}
AGENT = {"my_agent": {"module my_agents": "a1", "module my_helpers": "h1"}}


def mock_config(run_id: str = "r1", **overrides):  # noqa: ANN201
    return make_config(run_id, **{"task_ids": {"mock": ["t"]}, **overrides})


def test_the_same_experiment_attaches_and_another_is_refused_naming_what_differs(sqlite_store):
    row = record_run(sqlite_store, mock_config())
    assert row is None and sqlite_store.get_run("r1").fingerprint == fingerprint(mock_config())
    # How it runs is not what it measures: concurrency, retries, budget, task order.
    assert record_run(sqlite_store, mock_config(concurrency=99, max_cost=2.0)) is not None
    with pytest.raises(ConfigMismatchError) as err:
        record_run(sqlite_store, mock_config(user_model="other-user", trials=2))
    assert str(err.value) == (
        "run 'r1' already exists with a different configuration (user_model: user-m in the run, "
        "other-user now; trials: 3 in the run, 2 now); resume it with the same settings, or use a new --run-id")
    assert sqlite_store.get_run("r1").run_config().user_model == "user-m"


@pytest.mark.parametrize("field, recorded, changed, words", [
    ("domain_digests", DOMAIN, {"mock": {**DOMAIN["mock"], "db": "d2", "tasks": "k2"}},
     "the domain changed since run 'r1' was recorded: mock (db, tasks) differ; restore the domain"),
    ("agent_digests", AGENT, {"my_agent": {**AGENT["my_agent"], "module my_agents": "a2"}},
     "the agent changed since run 'r1' was recorded: my_agent (module my_agents) differ; restore the agent"),
    ("agent_digests", AGENT, {"my_agent": {"module my_agents": "a1"}},  # a module it no longer imports
     "the agent changed since run 'r1' was recorded: my_agent (module my_helpers) differ"),
    ("persona_digests", {"file:/p.txt": {"text": "x1"}}, {"file:/p.txt": {"text": "x2"}},
     "the user persona changed since run 'r1' was recorded: file:/p.txt (text) differ; restore the user persona"),
])
def test_a_measured_subject_that_changed_is_refused_naming_its_part(sqlite_store, field, recorded, changed, words):
    """A run recorded without the subject (by an earlier passhat) attaches to a
    configuration that has it; one recorded with it is refused when a part differs."""
    record_run(sqlite_store, mock_config("old"))
    assert record_run(sqlite_store, mock_config("old", **{field: recorded})) is not None
    record_run(sqlite_store, mock_config(**{field: recorded}))
    with pytest.raises(ConfigMismatchError) as err:
        record_run(sqlite_store, mock_config(**{field: changed}))
    assert str(err.value).startswith(words)
    assert "\n" not in str(err.value)


def test_a_changed_agent_name_is_a_difference_of_the_configuration(sqlite_store):
    record_run(sqlite_store, mock_config(agent="my_agent", agent_digests=AGENT))
    with pytest.raises(ConfigMismatchError, match=r"\(agent: my_agent in the run, other_agent now\)"):
        check_run(sqlite_store, mock_config(agent="other_agent", agent_digests={"other_agent": {}}))


def test_a_task_file_that_changed_is_refused_naming_its_tasks(sqlite_store, tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text('[{"id": "a", "x": 1}, {"id": "b", "x": 2}]')
    cfg = mock_config(domains=[f"mock@{path}"], task_ids={f"mock@{path}": ["a", "b"]})
    record_run(sqlite_store, cfg)
    path.write_text('[{"id": "b", "x": 2}, {"id": "a", "x": 1}]')  # reordered: the same tasks
    assert check_run(sqlite_store, cfg).stored is not None
    path.write_text('[{"id": "a", "x": 9}, {"id": "c", "x": 3}]')
    with pytest.raises(ConfigMismatchError) as err:
        check_run(sqlite_store, cfg)
    assert str(err.value) == (
        f"task file {path} changed since run r1 recorded its tasks (tasks that differ: a (changed), "
        "c (added), b (removed)); restore the file to go on with this run, or give the changed tasks a new --run-id")


def test_the_budget_changes_only_through_resume_once_the_run_has_stopped():
    stored, asked = make_config(), make_config(max_cost=5.0)
    assert budget_refusal(stored, stored, resume=False, running=True) is None
    refused = budget_refusal(stored, asked, resume=False, running=False)
    assert isinstance(refused, BudgetChangeRefused) and str(refused) == (
        "run r1 exists with no budget; `passhat resume r1 --max-cost USD` continues it with another")
    assert "is running with no budget: a new budget applies once it has stopped" in str(
        budget_refusal(stored, asked, resume=True, running=True))
    assert budget_refusal(stored, asked, resume=True, running=False) is None


def test_the_agents_digest_covers_its_parts_model_and_args():
    cfg = make_config(agent="my_agent", agent_digests=AGENT, agent_models=["m1", "m2"],
                      agent_model_args={"m2": {"temperature": 0.5}})
    one, two = agent_identity(cfg, "m1"), agent_identity(cfg, "m2")
    assert (one.name, one.parts) == ("my_agent", AGENT["my_agent"])
    assert one.digest != two.digest and len(one.digest) == 12
    edited = cfg.model_copy(update={"agent_digests": {"my_agent": {**AGENT["my_agent"], "module my_agents": "a2"}}})
    assert agent_identity(edited, "m1").digest != one.digest
    assert one.words() == f"my_agent sha256:{one.digest} (module my_agents a1, module my_helpers h1)"
    # A run recorded before passhat measured its agent: the name, no digest.
    assert agent_identity(make_config(), "agent-m").model_dump() == {"name": "llm_agent", "digest": None, "parts": {}}


def test_every_measured_subject_is_measured_again_on_resume():
    assert {m.field for m in MEASURED} == set(MEASURE)
