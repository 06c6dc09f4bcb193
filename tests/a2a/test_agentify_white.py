"""tau2-bench's own agentify white agent (src/experiments/agentify_tau_bench), its code
unchanged from a tau2-bench mirror, run in its own virtualenv behind its own a2a-sdk 0.3
server (passhat.testing.agentify_white), its model (`openai/gpt-4o`, as its code says)
answered by the scripted models over loopback HTTP: measured by passhat over A2A with
tau2's agentify convention, it scores as the scripted model it is given does, task by
task. Skips when the mirror or the virtualenv is absent (`python bench/agentify_white.py
--setup` makes the virtualenv; the bench measures every airline task)."""

from __future__ import annotations

import pytest

from passhat.domains.tau2_version import installed_rules
from passhat.testing import agentify_white
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder, expected_reward
from tests.runs import config, run_to_end

WHY = agentify_white.unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")


@pytest.mark.parametrize("model, tasks", [
    ("oracle", ["0", "1", "3"]),
    # the white agent sends no seed: the noisy draw is per task; 0 draws a failure, 2 a success
    ("noisy-0.5", ["0", "2"]),
])
async def test_tau2s_white_agent_scores_as_its_scripted_model_does(client, sqlite_store, tmp_path, model, tasks):
    assert {expected_reward(model, None, "airline", t) for t in tasks} == ({1.0} if model == "oracle" else {0.0, 1.0})
    experiment = agentify_white.extract(agentify_white.MIRROR, tmp_path)
    with FaultServer(responder=ScriptedResponder(["airline"], play=model)) as srv:
        with agentify_white.WhiteAgent(experiment, agentify_white.venv_python(), srv.url,
                                       tmp_path / "white.log") as agent:
            cfg = config(agent=f"a2a:{agent.url}", agent_models=[], agent_protocol="agentify",
                         task_ids=tasks, trials=1)
            assert cfg.agent_digests[cfg.agent] == {"card name": agentify_white.CARD_NAME, "card version": "1.0.0",
                                                    "card url": f"{agent.url}/"}
            await run_to_end(client, sqlite_store, cfg)
        asked = srv.requests
    trials = {t.task_id: t for t in sqlite_store.trials(cfg.run_id)}
    rules = installed_rules()
    for t in tasks:
        got = (trials[t].status, trials[t].reward, trials[t].termination_reason)
        if expected_reward(model, None, "airline", t) == 1.0:
            assert got == ("scored", 1.0, "user_stop"), (t, got)
        elif rules.on_model_failure == "rerun":  # 1.0.x re-runs a model's failure, then gives up
            assert got == ("not_evaluable", None, rules.exhausted_reason), (t, got)
        else:  # 26.3: the agent's error, reward 0
            assert got == ("scored", 0.0, "agent_error"), (t, got)
    # the agent's model calls are its own, as its code makes them
    assert asked and {(b["model"], b.get("temperature")) for b in asked} == {("gpt-4o", 0.0)}
    # its tool actions were executed by passhat against the trial's environment
    assert any(s.role == "tool" for t in trials.values() for s in sqlite_store.steps(t.trial_id))
