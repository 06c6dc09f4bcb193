"""A run of an agent behind A2A, traced: one span per agent turn in the trial's trace,
and the W3C trace context sent to the agent with each message, so that the agent's own
spans join the trace under that turn. passhat runs as a real process exporting over
OTLP/HTTP to a receiver the test starts; the agent (the reference agent, in front of the
scripted oracle over HTTP) records the `traceparent` header each message came with."""

from __future__ import annotations

import os
import subprocess
import sys

from passhat.infra.store import Store
from passhat.testing.a2a_agents import A2AAgentServer, chat_agent
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder, http_args
from tests.otlp_receiver import OtlpReceiver

RUN = "a2a-traced"


def test_each_turn_is_a_span_and_the_agent_gets_its_trace_context(temporal_server, tmp_path):
    with OtlpReceiver() as receiver, FaultServer(responder=ScriptedResponder(["airline"])) as model, \
            A2AAgentServer(chat_agent("openai/oracle", http_args(model.url))) as agent:
        env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.address, "PASSHAT_HOME": str(tmp_path),
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "passhat-test",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("PASSHAT_DB_URL", None)
        result = subprocess.run(
            [sys.executable, "-m", "passhat.cli.main", "run", "--domain", "airline", "--task", "1",
             "--agent", f"a2a:{agent.url}", "--user-model", "scripted/oracle", "--trials", "1", "--run-id", RUN],
            capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        spans = list(receiver.spans)  # the CLI flushed its spans before exiting
        traceparents = agent.traceparents

    store = Store(f"sqlite:///{tmp_path / 'results.db'}")
    [trial] = store.trials(RUN)
    assert trial.reward == 1.0 and trial.trace_id
    turns = [s for s in store.steps(trial.trial_id) if s.agent_state_json]
    invoked = [s for s in spans if s.name == "invoke_agent passhat example agent"]
    assert len(invoked) == len(turns) == len(traceparents) > 1  # one span a turn, one message a turn
    assert {s.trace_id for s in invoked} == {trial.trace_id}  # in the trial's trace
    for s in invoked:
        a = s.attributes
        assert a["gen_ai.operation.name"] == "invoke_agent" and a["passhat.trial_id"] == trial.trial_id
        assert a["gen_ai.agent.version"] == "1.0.0" and a["a2a.task.state"] == "message"
        assert a["gen_ai.usage.input_tokens"] > 0 and s.status_code != 2
    assert sorted(s.attributes["passhat.step"] for s in invoked) == [t.step for t in turns]
    # each message carried its turn's span as the parent of whatever the agent traces
    received = [tp.split("-") for tp in traceparents]
    assert all(version == "00" and flags == "01" for version, _, _, flags in received)
    assert {trace_id for _, trace_id, _, _ in received} == {trial.trace_id}
    by_id = {s.span_id: s for s in spans}

    def turn_of(span_id: str) -> str | None:  # the invoke_agent span above a span (the SDK's own may be between)
        while span_id in by_id and by_id[span_id].name != invoked[0].name:
            span_id = by_id[span_id].parent_span_id
        return span_id if span_id in by_id else None

    assert sorted(turn_of(parent) for _, _, parent, _ in received) == sorted(s.span_id for s in invoked)
