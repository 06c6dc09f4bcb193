"""`export_run` on a store: what a tau2 file keeps of a run's model arguments. No
Temporal: the run is written through the store's own methods."""

from __future__ import annotations

import json

import pytest

from passhat.contracts import RunConfig
from passhat.messages import Message
from passhat.results.exporting import export_run
from passhat.results.records import ResultsError


def finished_run(store, agent_args: dict) -> str:  # noqa: ANN001 - a Store
    """One airline trial scored 1, its run completed. The config is made directly:
    `passhat run` refuses secrets in model arguments, but an imported run or a store
    from an older passhat may hold some."""
    cfg = RunConfig(run_id="priced", agent_models=["openai/priced"], user_model="scripted/oracle",
                    domains=["airline"], task_ids={"airline": ["0"]}, trials=1,
                    agent_args=agent_args, user_args={"token": "user-token", "temperature": 0.0})
    store.create_run(cfg, cfg.total_trials())
    [spec] = [unit.trial(0) for unit in cfg.units()]
    store.begin_trial(spec)
    store.record_step(spec.trial_id, spec.run_id, 0, "assistant",
                      [Message(role="assistant", content="Hi! How can I help you today?")])
    store.record_step(spec.trial_id, spec.run_id, 1, "user", [Message(role="user", content="###STOP###")],
                      model="scripted/oracle")
    store.finish_trial(spec.trial_id, reward=1.0, success=True, termination_reason="user_stop", n_steps=1,
                       reward_info={"breakdown": {"DB": 1.0}, "reward_basis": ["DB"], "note": None})
    store.set_run_status(cfg.run_id, "completed")
    return cfg.run_id


def test_export_keeps_prices_and_drops_keys_named_auth_or_token(sqlite_store, tmp_path):
    """The export's secret check is infra.secrets': a price per token is not a secret,
    `auth` and `token` are."""
    run_id = finished_run(sqlite_store, {
        "input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "auth": "auth-secret",
        "token": "token-secret", "extra_headers": {"Authorization": "Bearer x"}, "temperature": 0.0,
    })
    exported = export_run(sqlite_store, run_id, "tau2", str(tmp_path))
    [path] = exported.paths
    text = path.read_text()
    info = json.loads(text)["info"]
    assert info["agent_info"]["llm_args"] == {
        "input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "extra_headers": {},
        "temperature": 0.0}
    assert info["user_info"]["llm_args"] == {"temperature": 0.0}
    assert "auth-secret" not in text and "token-secret" not in text and "user-token" not in text


def test_an_unfinished_run_is_refused_without_partial(sqlite_store, tmp_path):
    run_id = finished_run(sqlite_store, {})
    sqlite_store.set_run_status(run_id, "running")
    with pytest.raises(ResultsError, match=r"run priced is running \(1/1 trials finished\).*--partial"):
        export_run(sqlite_store, run_id, "tau2", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
