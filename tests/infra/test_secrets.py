"""No secret is stored, traced, put in Temporal's history or printed: keys stay out of
run settings, and error text (even a provider's 401 that quotes the key) is redacted."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path


from passhat.infra import secrets
from passhat.infra.store import Store
from passhat.infra.temporal_client import connect
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import passhat
from tests.otlp_receiver import OtlpReceiver

CANARY = "canary-0f1e2d3c4b5a69788796a5b4c3d2e1f0"  # a key only the environment knows
SK_CANARY = "sk-" + "canary4OPENAI0123456789abcdef"  # key-shaped, in the provider's variable


def test_secret_fields_are_found_nested():
    args = {"api_base": "http://x", "api_key": "k", "max_tokens": 5,
            "extra_headers": {"Authorization": "Bearer k", "X-Trace": "1"},
            "api_key_env": "MY_KEY", "aws_secret_access_key": "s"}
    assert secrets.secret_fields(args) == ["api_key", "extra_headers.Authorization", "aws_secret_access_key"]


def test_prices_per_token_are_not_secrets():
    """litellm's custom prices (what --max-cost counts for a model it has no price for)
    pass; a token still does not."""
    args = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "hf_token": "t", "token": "t"}
    assert secrets.secret_fields(args) == ["hf_token", "token"]


def test_without_secrets_drops_what_secret_fields_names_at_any_depth():
    args = {
        "api_key": "sk-1", "apiKey": "sk-2", "token": "t", "auth": "a", "aws_secret_access_key": "s",
        "aws_access_key_id": "i", "vertex_credentials": "c",
        "extra_headers": {"Authorization": "Bearer x", "Cookie": "session=1", "X-Trace": "1"},
        "max_tokens": 100, "max_completion_tokens": 5, "temperature": 0.0, "input_cost_per_token": 1e-6,
        "api_base": "http://h/v1", "fallbacks": [{"password": "p", "seed": 1}],
        "api_key_env": "PROVIDER_KEY",  # the name of a variable, not a key
    }
    kept = {
        "extra_headers": {"X-Trace": "1"}, "max_tokens": 100, "max_completion_tokens": 5,
        "temperature": 0.0, "input_cost_per_token": 1e-6, "api_base": "http://h/v1",
        "fallbacks": [{"seed": 1}], "api_key_env": "PROVIDER_KEY",
    }
    assert secrets.without_secrets(args) == kept
    # One detector: what is dropped is exactly what a run refuses.
    assert secrets.secret_fields(args) == [
        "api_key", "apiKey", "token", "auth", "aws_secret_access_key", "aws_access_key_id",
        "vertex_credentials", "extra_headers.Authorization", "extra_headers.Cookie",
        "fallbacks.0.password"]


def test_redact_removes_environment_keys_and_key_shaped_strings(monkeypatch):
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", CANARY)
    text = f"bad key {CANARY}; also {'sk-' + 'abcdefghijklmnop1234'} and a plain word"
    assert secrets.redact(text) == "bad key [REDACTED]; also [REDACTED] and a plain word"


def test_a_key_in_model_arguments_is_refused(temporal_server, tmp_path):
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "PASSHAT_HOME": str(tmp_path)}
    env.pop("PASSHAT_DB_URL", None)
    out = passhat("run", "--domain", "airline", "--task", "1", "--agent-model", "openai/agent",
                  "--user-model", "scripted/oracle", "--agent-args", json.dumps({"api_key": SK_CANARY}),
                  "--run-id", "with-key", env=env)
    assert out.returncode == 2
    assert "api_key_env" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert SK_CANARY not in out.stdout + out.stderr
    db = tmp_path / "results.db"
    assert not db.exists() or Store(f"sqlite:///{db}").get_run("with-key") is None


def decoded_history(history_json: str) -> str:
    """A workflow history as text, with every payload's base64 data decoded."""
    parts = [history_json]

    def walk(node) -> None:  # noqa: ANN001
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    try:
                        parts.append(base64.b64decode(value).decode("utf-8", "replace"))
                    except ValueError:
                        pass
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(history_json))
    return "\n".join(parts)


async def test_a_key_echoed_by_the_provider_is_found_nowhere(temporal_server, tmp_path):
    run_id = "canary"
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "PASSHAT_HOME": str(tmp_path),
           "PASSHAT_CANARY_API_KEY": CANARY, "OPENAI_API_KEY": SK_CANARY,
           "OTEL_SERVICE_NAME": "passhat-canary"}
    env.pop("PASSHAT_DB_URL", None)
    with OtlpReceiver() as receiver, FaultServer(faults=lambda n, body: "401_echo") as srv:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        args = {"api_base": srv.url + "/v1", "api_key_env": "PASSHAT_CANARY_API_KEY"}
        outputs = [passhat("run", "--domain", "airline", "--task", "1", "--agent-model", "openai/agent",
                           "--user-model", "scripted/oracle", "--agent-args", json.dumps(args),
                           "--run-id", run_id, env=env)]
        assert outputs[0].returncode == 1, outputs[0].stderr  # the trial is not evaluable
        store = Store(f"sqlite:///{tmp_path / 'results.db'}")
        [trial] = store.trials(run_id)
        # The provider did quote the key, and what was recorded has it redacted.
        assert trial.error_class == "AuthenticationError" and secrets.REDACTED in trial.error
        for command in (("trials", run_id, "--failed"), ("show", trial.trial_id),
                        ("status", run_id), ("report", run_id)):
            outputs.append(passhat(*command, env=env))
    printed = "\n".join(o.stdout + o.stderr for o in outputs)
    client = await connect(temporal_server.address)
    histories = [
        decoded_history((await client.get_workflow_handle(wf_id).fetch_history()).to_json())
        for wf_id in (run_id, trial.trial_id)  # the run starts its trials itself (workflows/window.py)
    ]
    files = [p.read_bytes().decode("utf-8", "replace") for p in Path(tmp_path).rglob("*") if p.is_file()]
    spans = repr(receiver.spans)
    assert receiver.spans, "no spans were exported"
    for where, text in [("CLI output", printed), ("spans", spans),
                        *(("history", h) for h in histories), *(("file", f) for f in files)]:
        assert CANARY not in text and SK_CANARY not in text, f"a key leaked into {where}"
