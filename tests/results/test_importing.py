"""`import_files` on both store back ends: a results file recorded as one imported run,
in one transaction."""

from __future__ import annotations

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
