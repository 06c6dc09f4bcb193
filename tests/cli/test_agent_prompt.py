"""--agent-prompt: the template's text is held by the run (not its path), is part of the
run's identity, is shown by its digest, and is the agent's system prompt with the policy
in its place."""

from __future__ import annotations

from passhat.activities.conversation import ConversationActivities
from passhat.contracts import StepRef, prompt_digest
from passhat.domains.registry import get_domain
from passhat.run_identity import fingerprint
from tests.runs import config

TEMPLATE = 'Be brief. Examples look like {"a": 1}.\n<policy>\n{policy}\n</policy>\n'


def test_the_prompt_is_held_by_the_run_and_is_the_agents_system_prompt(tmp_path, sqlite_store):
    path = tmp_path / "prompt.txt"
    path.write_text(TEMPLATE)
    cfg = config(task_ids=["1"], agent_prompt=str(path))
    path.write_text("edited later {policy}")  # the run keeps what it read
    assert cfg.agent_prompt == TEMPLATE
    assert fingerprint(cfg) != fingerprint(cfg.model_copy(update={"agent_prompt": None}))
    assert cfg.agent_label() == f"llm_agent, prompt sha256:{prompt_digest(TEMPLATE)}"
    spec = cfg.units()[0].trial(0)
    _, system, tools = ConversationActivities(sqlite_store)._prompt(StepRef(trial=spec, step=1), "assistant", [])
    policy = get_domain("airline").policy()
    assert system == TEMPLATE.replace("{policy}", policy) and '{"a": 1}' in system
    assert tools == get_domain("airline").agent_tools()

