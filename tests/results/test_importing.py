"""`import_files` on both store back ends: a results file recorded as one imported run,
in one transaction."""

from __future__ import annotations

import json

import pytest

from passhat import metrics
from passhat.results.exporting import export_run
from passhat.results.importing import import_files
from passhat.results.records import ResultsError
from tests.results_files import TAU2_MOCK_RESULTS


def test_import_is_one_transaction_on_both_backends(store, tmp_path):
    """The store side of import, on SQLite and PostgreSQL: a run with its trials, steps
    and task results, pass^k as tau2 computes it; a second import of the same file
    changes nothing; a failing one leaves nothing behind."""
    from tau2.data_model.simulation import Results
    from tau2.metrics.agent_metrics import compute_metrics

    result = import_files(store, [str(TAU2_MOCK_RESULTS)])
    assert (result.trials, result.tasks, result.already) == (4, 2, False)
    run = store.get_run(result.run_id)
    assert run.status == "imported" and run.run_config().agent_args == {"api_base": "http://127.0.0.1:8765/v1"}
    assert store.import_source(result.run_id)["files"][0]["format"] == "tau2"
    trials = store.trials(result.run_id)
    assert [(t.task_id, t.trial_index, t.seed, t.success) for t in trials] == [
        ("create_task_1", 0, 626729, True), ("create_task_1", 1, 373753, True),
        ("update_task_1", 0, 626729, False), ("update_task_1", 1, 373753, False)]
    assert [len(store.steps(t.trial_id)) for t in trials] == [6, 6, 6, 6]
    assert trials[0].input_tokens == 44 and trials[0].n_steps == 5
    [summary] = metrics.summarize(result.run_id, store.task_results(result.run_id)).results
    tau2_metrics = compute_metrics(Results.model_validate_json(TAU2_MOCK_RESULTS.read_text()))
    assert summary.pass_hat_k == {str(k): v for k, v in tau2_metrics.pass_hat_ks.items()}
    assert summary.avg_reward == tau2_metrics.avg_reward

    again = import_files(store, [str(TAU2_MOCK_RESULTS)], run_id="another-name")
    assert again.already and again.run_id == result.run_id
    assert [r.run_id for r in store.list_runs()] == [result.run_id]

    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2")
    other = tmp_path / "other.json"
    other.write_text(TAU2_MOCK_RESULTS.read_text().replace("openai/some-model", "openai/x"))
    with pytest.raises(ResultsError, match="is truncated"):
        import_files(store, [str(other), str(broken)])
    assert [r.run_id for r in store.list_runs()] == [result.run_id]

    exported = export_run(store, result.run_id, "jsonl", str(tmp_path / "out"))
    assert exported.trials == 4 and len(exported.paths[0].read_text().splitlines()) == 4


def _sweep_run(store) -> str:  # noqa: ANN001 - a Store
    """A finished sweep of two agent models with their own args, one airline trial each:
    a's succeeds; b's ends as agent_error on a reply (paid for) that a tau2 file does not
    record."""
    from passhat.contracts import RunConfig
    from passhat.messages import Message

    cfg = RunConfig(run_id="sweep", agent_models=["openai/a", "openai/b"], user_model="openai/u",
                    domains=["airline"], task_ids={"airline": ["0"]}, trials=1,
                    agent_model_args={"openai/a": {"temperature": 0.0, "top_p": 0.5},
                                      "openai/b": {"temperature": 0.7}})
    store.create_run(cfg, cfg.total_trials())
    for unit in cfg.units():
        spec = unit.trial(0)
        store.begin_trial(spec)
        store.record_step(spec.trial_id, spec.run_id, 0, "assistant",
                          [Message(role="assistant", content="Hi! How can I help you today?")])
        store.record_step(spec.trial_id, spec.run_id, 1, "user", [Message(role="user", content="Cancel it.")],
                          model="openai/u", input_tokens=300, output_tokens=10, cost=0.001)
        failed = unit.agent_model == "openai/b"
        store.record_step(spec.trial_id, spec.run_id, 2, "assistant",
                          [Message(role="assistant", content=None if failed else "Done.")],
                          model=unit.agent_model, input_tokens=2000, output_tokens=140, cost=0.02,
                          failure_class="EmptyReply" if failed else None,
                          failure="the model answered nothing" if failed else None)
        if not failed:
            store.record_step(spec.trial_id, spec.run_id, 3, "user", [Message(role="user", content="###STOP###")],
                              model="openai/u", input_tokens=320, output_tokens=5, cost=0.001)
        store.finish_trial(spec.trial_id, reward=0.0 if failed else 1.0, success=not failed,
                           termination_reason="agent_error" if failed else "user_stop", n_steps=3,
                           reward_info={"breakdown": {"DB": 1.0}, "reward_basis": ["DB"], "note": None},
                           model_failure=("EmptyReply", "agent", "the model answered nothing") if failed else None)
    store.set_run_status(cfg.run_id, "completed")
    return cfg.run_id


def test_a_sweeps_tau2_export_imports_back_as_one_run_with_its_totals(sqlite_store, tmp_path):
    """passhat's own export of a sweep whose models have their own args imports back as
    one run with those args, and every trial keeps its token and cost totals, the reply
    that ended a failed conversation included (tau2's messages leave it out)."""
    from passhat.infra.store import Store

    run_id = _sweep_run(sqlite_store)
    exported = export_run(sqlite_store, run_id, "tau2", str(tmp_path / "out"))
    assert len(exported.paths) == 2

    target = Store(f"sqlite:///{tmp_path / 'imported.db'}")
    try:
        imported = import_files(target, [str(p) for p in exported.paths])
        config = target.get_run(imported.run_id).run_config()
        assert config.agent_models == ["openai/a", "openai/b"]
        assert config.agent_args_for("openai/a") == {"temperature": 0.0, "top_p": 0.5}
        assert config.agent_args_for("openai/b") == {"temperature": 0.7}

        def totals(store, rid: str) -> dict:  # noqa: ANN001
            return {(t.agent_model, t.task_id): (t.input_tokens, t.output_tokens, round(t.cost, 9))
                    for t in store.trials(rid)}

        assert totals(sqlite_store, run_id) == {("openai/a", "0"): (2620, 155, 0.022),
                                                ("openai/b", "0"): (2300, 150, 0.021)}
        assert totals(target, imported.run_id) == totals(sqlite_store, run_id)

        # And the imported run exports with the same args and totals again.
        again = export_run(target, imported.run_id, "tau2", str(tmp_path / "again"))
        for first, second in zip(sorted(exported.paths), sorted(again.paths)):
            a, b = (json.loads(p.read_text()) for p in (first, second))
            assert a["info"]["agent_info"] == b["info"]["agent_info"]
            assert [s["reward_info"] for s in a["simulations"]] == [s["reward_info"] for s in b["simulations"]]
    finally:
        target.close()


def test_files_that_give_one_model_two_sets_of_args_are_refused(sqlite_store, tmp_path):
    """A run has one set of args per agent model: two files of one model that differ in
    them (two separate runs) still import separately."""
    first = tmp_path / "a.json"
    second = tmp_path / "b.json"
    data = json.loads(TAU2_MOCK_RESULTS.read_text())
    first.write_text(json.dumps(data))
    data["info"]["agent_info"]["llm_args"] = {"temperature": 0.9}
    second.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="give agent model .* different arguments .* import them separately"):
        import_files(sqlite_store, [str(first), str(second)])
