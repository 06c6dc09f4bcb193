"""scripted/customer (infra/scripted_customer.py): the offline user that plays its
task's scenario as a cooperative customer. Each reply is read from the conversation the
way the user model receives it (its own messages `assistant`, the agent's `user`)."""

from __future__ import annotations

from passhat.messages import STOP_TOKEN, GoldAction, TaskInfo
from passhat.infra.scripted_customer import Customer, customer_turn, first_person
from passhat.infra.scripted_provider import model_family, user_turn

TASK = TaskInfo(
    id="refill_main_street",
    user_scenario="(the scenario as tau2 prints it)",
    reason_for_call="You want to refill your Lisinopril for pickup at the Main Street store.",
    known_info="You are Ana Ruiz, patient id p100, born 1980-04-02. Your prescription is rx1.",
    unknown_info="You do not remember your email address.",
    gold_actions=[GoldAction(name="request_refill", arguments={"rx_id": "rx1", "store_id": "s1"}),
                  GoldAction(name="toggle_airplane_mode", requestor="user")],
)


class Talk:
    """A conversation as the customer sees it; `agent(text)` is the agent's next message
    and returns the customer's answer."""

    def __init__(self, task: TaskInfo = TASK, customer: Customer | None = None):
        self.task, self.customer = task, customer or Customer()
        self.messages: list[dict] = [{"role": "user", "content": "Hi! How can I help you today?"}]
        self.opening = self.answer()

    def answer(self) -> str | None:
        reply = customer_turn(self.task, self.messages, self.customer)
        # Pure: the same conversation always gets the same reply (a retried call too).
        assert customer_turn(self.task, list(self.messages), self.customer) == reply
        self.messages.append(reply)
        return reply["content"]

    def agent(self, text: str) -> str | None:
        self.messages.append({"role": "user", "content": text})
        return self.answer()


def test_it_opens_with_its_request_alone_in_the_first_person():
    talk = Talk()
    assert talk.opening == "I want to refill my Lisinopril for pickup at the Main Street store."
    assert TASK.id not in talk.opening and "p100" not in talk.opening
    # The oracle user still names the task (the oracle agent over HTTP finds its task by it).
    assert user_turn(TASK, [])["content"].endswith(f"(task {TASK.id})")


def test_it_gives_the_facts_it_is_asked_for():
    talk = Talk()
    assert talk.agent("Sure. Could you give me your patient id and date of birth?") == (
        "I am Ana Ruiz, patient id p100, born 1980-04-02.")
    assert talk.agent("Thanks. Which prescription would you like refilled?") == "My prescription is rx1."
    assert talk.agent("What is your email address?") == "I do not remember my email address."
    # A choice is answered from the request's own words.
    assert talk.agent("Which store: Main Street or Harbor Plaza?") == talk.opening
    # "Confirm your ..." asks for a fact too.
    assert talk.agent("Could you confirm your date of birth?") == "I am Ana Ruiz, patient id p100, born 1980-04-02."
    # A question on nothing it holds: everything it knows.
    assert talk.agent("What is your favourite colour?") == (
        "Here is what I know: I am Ana Ruiz, patient id p100, born 1980-04-02. My prescription is rx1. "
        "I do not remember my email address.")


def test_it_says_yes_to_confirmations_and_lets_the_agent_work():
    talk = Talk()
    for question in ("Shall I check it out to you?", "Do you want me to proceed with the refill of rx1?",
                     "I found rx1. Would you like me to request the refill now (yes/no)?",
                     "Can you confirm you want the refill at Main Street?"):
        assert talk.agent(question) == "Yes, please go ahead.", question
    assert talk.agent("Let me check that for you.") == "Okay, please go on."


def test_it_stops_when_the_request_is_done_or_refused():
    for closing in ("Your refill rf1 is requested for pickup at Main Street.",
                    "I'm sorry, controlled substances cannot be refilled here.",
                    "Done. Is there anything else I can help you with?"):
        assert Talk().agent(closing) == f"Thank you, that is all I needed. {STOP_TOKEN}", closing


def test_it_acts_on_its_side_when_asked_as_the_oracle_user_does():
    talk = Talk()
    talk.messages.append({"role": "user", "content": "Please do this on your side: [gold-1] toggle_airplane_mode({})"})
    reply = customer_turn(TASK, talk.messages)
    assert [c["function"]["name"] for c in reply["tool_calls"]] == ["toggle_airplane_mode"]
    talk.messages += [reply, {"role": "tool", "content": "Airplane mode is now OFF.", "tool_call_id": "user-gold-1"}]
    assert talk.answer() == "Done, I did that."


def test_an_agent_that_asks_the_same_thing_again_and_again_is_left():
    talk = Talk()
    answers = [talk.agent("Could you give me your patient id?") for _ in range(3)]
    assert answers[0] == answers[1] != answers[2]
    assert answers[2].endswith(STOP_TOKEN)


def test_a_persona_overrides_one_kind_of_turn():
    """How a persona builds on it: a customer that holds back a fact until asked twice."""

    class Guarded(Customer):
        def give_facts(self, scenario, conversation, reading):  # noqa: ANN001, ANN201
            facts = self.facts_asked(scenario, reading.question)
            if facts and any(conversation.times_asked(f) < 2 for f in facts):
                return "Why do you need that?"
            return super().give_facts(scenario, conversation, reading)

    talk = Talk(customer=Guarded())
    assert talk.agent("Could you give me your patient id?") == "Why do you need that?"
    assert talk.agent("To find your prescription. Could you give me your patient id?") == (
        "I am Ana Ruiz, patient id p100, born 1980-04-02.")


def test_the_model_name_and_first_person():
    assert model_family("customer") == ("customer", 1.0)
    assert first_person("If the agent tells you that you were out of town, say yes.") == (
        "If the agent tells me that I was out of town, say yes.")
