"""Traces of a real run, exported over OTLP/HTTP to a receiver the test starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from urllib.parse import quote

from passhat.domains.registry import get_domain
from passhat.infra import scripted_provider
from passhat.infra.store import Store
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import http_args
from tests.otlp_receiver import OtlpReceiver
from passhat.contracts import DEFAULT_SEED, trial_seeds

TASK = "1"  # an airline task whose gold actions call tools
RUN = "traced"
AGENT = "openai/agent"


def oracle_agent(body: dict) -> dict:
    return scripted_provider.agent_turn(get_domain("airline").task(TASK), body["messages"])


def test_one_trace_per_trial_with_genai_spans_and_the_failing_step(temporal_server, tmp_path):
    failing_seed = trial_seeds(DEFAULT_SEED, 3)[2]  # trial 2 of the run
    with OtlpReceiver() as receiver, FaultServer(
        responder=oracle_agent,
        faults=lambda n, body: "401" if body.get("seed") == failing_seed else None,
    ) as srv:
        env = dict(os.environ)
        env.update(
            TEMPORAL_ADDRESS=temporal_server.address,
            PASSHAT_HOME=str(tmp_path),
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_SERVICE_NAME="passhat-test",
            PASSHAT_TEMPORAL_UI=temporal_server.ui_url,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        env.pop("PASSHAT_DB_URL", None)
        result = subprocess.run(
            [sys.executable, "-m", "passhat.cli.main", "run", "--domain", "airline", "--task", TASK,
             "--agent-model", AGENT, "--user-model", "scripted/oracle", "--trials", "3",
             "--run-id", RUN, "--agent-args", json.dumps(http_args(srv.url)),
             "--output", "json"],
            capture_output=True, text=True, env=env, timeout=300,
        )
        # One trial could not be evaluated: non-zero exit with the way out.
        assert result.returncode == 1, result.stderr
        assert "not evaluable" in result.stderr and f"passhat resume {RUN}" in result.stderr
        spans = list(receiver.spans)  # the CLI flushed its spans before exiting

        listing = subprocess.run(
            [sys.executable, "-m", "passhat.cli.main", "trials", RUN, "--failed"],
            capture_output=True, text=True, env={**env, "COLUMNS": "400"}, timeout=60,
        )

    store = Store(f"sqlite:///{tmp_path / 'results.db'}")
    trials = {t.trial_id: t for t in store.trials(RUN)}
    assert len(trials) == 3 and all(t.trace_id for t in trials.values())
    by_trace = defaultdict(list)
    for s in spans:
        by_trace[s.trace_id].append(s)
    # One trace per trial, named by the id stored on the trial record.
    for trial in trials.values():
        trace = by_trace[trial.trace_id]
        ids = {s.span_id for s in trace}
        roots = [s for s in trace if not s.parent_span_id]
        assert [r.name for r in roots] == [f"trial {trial.trial_id}"]
        assert all(s.parent_span_id in ids for s in trace if s.parent_span_id)  # no orphans
        assert all(s.service == "passhat-test" for s in trace)
        names = [s.name for s in trace]
        assert "RunActivity:agent_turn" in names  # Temporal's interceptor, in the trial's trace
        assert {s.attributes["passhat.trial_id"] for s in trace if "passhat.trial_id" in s.attributes} == {trial.trial_id}

    good = next(t for t in trials.values() if t.status == "scored")
    trace = by_trace[good.trace_id]
    agent_calls = [s for s in trace if s.name == f"chat {AGENT}"]
    assert agent_calls
    for s in agent_calls:
        a = s.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == AGENT and a["gen_ai.response.model"]
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"] in (["stop"], ["tool_calls"])
        assert a["passhat.role"] == "agent" and a["passhat.run_id"] == RUN
        assert a["passhat.domain"] == "airline" and a["passhat.task_id"] == TASK
        assert isinstance(a["passhat.step"], int) and s.status_code != 2
    user_calls = [s for s in trace if s.name == "chat scripted/oracle"]
    assert user_calls and all(s.attributes["passhat.role"] == "user" for s in user_calls)
    tools = [s for s in trace if s.name.startswith("execute_tool ")]
    assert {s.attributes["gen_ai.tool.name"] for s in tools} == {"get_user_details", "get_reservation_details"}
    assert all(s.attributes["passhat.tool.requestor"] == "assistant" and s.attributes["passhat.tool.error"] is False for s in tools)
    [score] = [s for s in trace if s.name == "passhat.score"]
    assert score.attributes["passhat.reward"] == 1.0 and score.attributes["passhat.reward.DB"] == 1.0

    bad = next(t for t in trials.values() if t.status == "not_evaluable")
    trace = by_trace[bad.trace_id]
    failing = [s for s in trace if s.name == f"chat {AGENT}" and s.status_code == 2]
    assert failing, "the failing model call must be an error span"
    assert failing[0].attributes["error.type"] == "AuthenticationError"
    assert "exception" in failing[0].events and "401" in failing[0].status_message
    [root] = [s for s in trace if not s.parent_span_id]
    assert root.status_code == 2 and root.attributes["passhat.outcome"] == "not_evaluable"

    # `passhat trials --failed` lists exactly that trial, with both links.
    assert listing.returncode == 0, listing.stderr
    assert bad.trial_id in listing.stdout and good.trial_id not in listing.stdout
    assert f"/trace/{bad.trace_id}" in listing.stdout
    assert f"/namespaces/default/workflows/{quote(bad.trial_id, safe='')}" in listing.stdout
