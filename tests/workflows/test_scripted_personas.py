"""The offline ground truth of personas (passhat.infra.scripted_personas): scripted/customer
plays each built-in persona its prompt carries in a known way, and each known behaviour
breaks the scripted agents it should, and only those."""

from __future__ import annotations

from passhat.domains.registry import get_domain
from passhat.infra.scripted_personas import BACK, CHANGED, FED_UP, WHY, customer_for
from passhat.infra.scripted_provider import VERIFY, verifier_turn
from passhat.personas import parse, with_persona
from tests.runs import config, run_to_end

TASK = get_domain("airline").task("2")  # known info: "... Your user id is noah_muller_9847."
USER_ID = "noah_muller_9847"


def _system(persona: str | None) -> str:
    return with_persona("guidelines <scenario>...</scenario>", None if persona is None else parse(persona).text)


def _reply(persona: str | None, agent_says: list[str]) -> list[str]:
    """What the customer under `persona` says: its opening, then its answer to each of
    the agent's messages in turn."""
    customer = customer_for(_system(persona))
    messages: list[dict] = []
    messages.append(customer.reply(TASK, messages))  # its opening
    for text in agent_says:
        messages.append({"role": "user", "content": text})
        messages.append(customer.reply(TASK, messages))
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_skeptical_withholds_a_fact_until_asked_one_more_time_than_its_intensity():
    assert USER_ID in _reply(None, [VERIFY])[-1]
    said = _reply("skeptical:1", [VERIFY, VERIFY])
    assert said[1] == WHY and USER_ID in said[2]
    assert _reply("skeptical:2", [VERIFY, VERIFY])[-1] == WHY


def test_incoherent_answers_in_fragments_the_next_each_time_asked():
    assert _reply("incoherent:3", [VERIFY, VERIFY])[1:] == ["My", "user"]  # a word at a time
    assert _reply("incoherent:1", [VERIFY, VERIFY])[1:] == ["My user id", f"is {USER_ID}."]


def test_impatient_stops_at_the_agents_question_its_patience_runs_out_at():
    asks = ["Could you give me your name?", "Shall I go ahead?"]
    assert FED_UP not in _reply("impatient:1", asks)
    assert _reply("impatient:2", asks)[-1] == FED_UP
    assert _reply("impatient:3", asks[:1])[-1] == FED_UP


def test_changes_mind_once_then_back_to_its_request():
    said = _reply("changes-mind", ["Done.", "What else?", "Here you are."])
    assert said[1] == CHANGED and said[2].startswith(BACK) and said[2].endswith(said[0])
    assert CHANGED not in said[3:]


def test_a_persona_without_a_scripted_behaviour_is_the_cooperative_customer():
    for persona in ("confused:3", None):
        assert _reply(persona, [VERIFY]) == _reply(None, [VERIFY])
    assert verifier_turn(TASK, [{"role": "user", "content": "hi"}])["content"] == VERIFY


async def test_each_known_behaviour_breaks_the_scripted_agents_it_should(client, sqlite_store):
    """The oracle agent acts whatever the user says: no persona moves it. The verifier
    asks for the user id twice at most: a customer that withholds it past the second ask
    (skeptical:2) or gives it in more than two fragments (incoherent:3) breaks it, as
    does one that answers its first ask by changing its mind and its second by going
    back; one that gives it by the second ask (skeptical:1, incoherent:1) does not."""
    personas = ["skeptical:1", "skeptical:2", "incoherent:1", "incoherent:3", "changes-mind:1", "impatient:1"]
    # Tasks whose gold actions write to the database on both tau2 versions: one that
    # only reads (1.0.x's airline 2 and 9) is solved by an agent that does nothing.
    cfg = config(agent_models=["scripted/oracle", "scripted/verifier"], user_model="scripted/customer",
                 task_ids=["7", "8", "17"], trials=1, user_personas=personas)
    summary = await run_to_end(client, sqlite_store, cfg)
    got = {(r.agent_model, r.user_persona): r.pass_hat_k["1"] for r in summary.results}
    assert all(r.evaluable == r.trials == 3 for r in summary.results)
    assert {p: got[("scripted/oracle", p)] for p in [None, *personas]} == dict.fromkeys([None, *personas], 1.0)
    verifier = {p: got[("scripted/verifier", p)] for p in [None, *personas]}
    assert verifier == {None: 1.0, "skeptical:1": 1.0, "skeptical:2": 0.0, "incoherent:1": 1.0,
                        "incoherent:3": 0.0, "changes-mind:1": 0.0, "impatient:1": 1.0}, verifier
