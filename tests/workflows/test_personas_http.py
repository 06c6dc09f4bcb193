"""User personas over real HTTP: the user model's requests carry the persona's text once,
in its documented place (passhat.personas.with_persona), and nothing else changes; the
agent's requests do not change at all."""

from __future__ import annotations

import json

from passhat.domains.registry import get_domain
from passhat.personas import SECTION_CLOSE, SECTION_OPEN, persona_in, section
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import ScriptedResponder, http_args
from tests.runs import config, run_to_end

# A team's own persona, which the scripted customer does not know: it answers as it
# would without one, so the two runs' conversations are the same turn for turn.
TEXT = "You speak formally and sign every message with your first name."


def _is_user(body: dict) -> bool:
    return "<scenario>" in str(body["messages"][0]["content"])


async def _requests(client, store, **overrides) -> tuple[list[dict], list[dict]]:
    """The user model's and the agent's request bodies of one run of airline task 0."""
    with FaultServer(responder=ScriptedResponder(["airline"]).answer) as srv:
        http = json.dumps(http_args(srv.url))
        cfg = config(agent_models=["openai/oracle"], user_model="openai/customer", agent_args=http,
                     user_args=http, task_ids=["0"], trials=1, concurrency=1, **overrides)
        # One conversation at a time: the default user's, then the persona's.
        summary = await run_to_end(client, store, cfg)
        bodies = srv.requests
    assert all(r.evaluable == r.trials for r in summary.results), summary
    return [b for b in bodies if _is_user(b)], [b for b in bodies if not _is_user(b)]


async def test_a_persona_adds_its_text_once_in_its_place_and_nothing_else(client, sqlite_store, tmp_path):
    persona = tmp_path / "formal.txt"
    persona.write_text(TEXT + "\n")
    plain_user, plain_agent = await _requests(client, sqlite_store)
    user, agent = await _requests(client, sqlite_store, user_personas=[f"file:{persona}"])

    # Without a persona, the user's system prompt is tau2's, exactly.
    base = get_domain("airline").user_system_prompt("0")
    assert plain_user and {b["messages"][0]["content"] for b in plain_user} == {base}
    assert not any(SECTION_OPEN in json.dumps(b) for b in plain_user + plain_agent)

    # The sweep runs tau2's own user too (the baseline), with the same requests as a run
    # without personas; the agent's requests are the same under either user.
    persona_user = [b for b in user if SECTION_OPEN in b["messages"][0]["content"]]
    assert [b for b in user if b not in persona_user] == plain_user
    assert len(persona_user) == len(plain_user) and agent == plain_agent + plain_agent
    for with_, without in zip(persona_user, plain_user):
        system = with_["messages"][0]["content"]
        assert system == without["messages"][0]["content"] + section(TEXT)
        assert json.dumps(with_).count(TEXT) == 1 and json.dumps(with_).count(SECTION_CLOSE) == 1
        assert persona_in(system) == TEXT
        # Everything but the system prompt's end is byte for byte the same.
        rest = {**with_, "messages": with_["messages"][1:]}
        assert rest == {**without, "messages": without["messages"][1:]}


async def test_each_persona_is_a_sweep_axis_with_ids_of_its_own(client, sqlite_store):
    cfg = config(task_ids=["0", "1"], trials=2, user_model="scripted/customer",
                 user_personas=["impatient:2", "changes-mind"])
    assert list(cfg.user_personas) == ["impatient:2", "changes-mind:1"]
    # tau2's own user runs too: the baseline of each persona's drop.
    assert cfg.total_trials() == 3 * 2 * 2
    summary = await run_to_end(client, sqlite_store, cfg)
    assert sorted(r.user_persona or "" for r in summary.results) == ["", "changes-mind:1", "impatient:2"]
    trials = sqlite_store.trials(cfg.run_id)
    assert len({t.trial_id for t in trials}) == 12
    assert {t.user_persona for t in trials} == {None, "impatient:2", "changes-mind:1"}
    for t in trials:
        task = t.trial_id.split("/trial-")[0]
        assert task.endswith(f"/{t.task_id}" if t.user_persona is None else f"/{t.task_id}@{t.user_persona}")
