"""The offline ground truth of user personas: `scripted/customer` playing a built-in
persona (passhat.personas) in a known way, so tests and bench/personas.py can show what a
persona does to an agent and that a reported drop is the persona's.

The customer finds its persona where an LLM user simulator reads it, in the `<persona>`
section of its system prompt (passhat.personas.builtin_in), and plays it as below; a
team's own persona, and `confused`, which has no scripted behaviour, play the
cooperative customer. Each behaviour changes how the customer speaks, never what it
wants or knows, and each is a pure function of the task and the conversation, as every
scripted model's reply is. At intensity n (1 to 3):

- impatient: ends early when the agent is slow to act: at the agent's (4 - n)-th message
  since the customer's request that asks it something, it says it has no time for this
  and stops (###STOP###).
- skeptical: withholds a fact until asked n + 1 times ("Why do you need that?"), twice at
  intensity 1.
- incoherent: answers in fragments of 4 - n words, the next fragment each time the
  agent asks again.
- changes-mind: changes its request once (its first turn after the opening), then at its
  next turn goes back to it, restating it; then plays the cooperative customer.

What that does to the scripted agents (bench/personas.py measures it): `scripted/oracle`
acts on the task's gold actions whatever the user says, so no persona breaks it;
`scripted/verifier` (passhat.infra.scripted_provider) acts only once the user has given
its identifying detail, asking at most twice, so the customer that withholds it too long
or gives it in too many fragments breaks it; an agent that asks before it acts (the test
plugin asking_agent) is broken by impatience.
"""

from __future__ import annotations

from passhat.messages import STOP_TOKEN, TaskInfo
from passhat.infra.scripted_customer import (
    CUSTOMER,
    Conversation,
    Customer,
    Reading,
    Scenario,
    _questions,
    asked_user_calls,
)
from passhat.personas import MAX_INTENSITY, builtin_in

FED_UP = f"I don't have time for all these questions. I will sort this out another way. {STOP_TOKEN}"
WHY = "Why do you need that? I'd rather not give out my details."
CHANGED = "Actually, I've changed my mind: I'd like something else instead. Can you help me with that?"
BACK = "Sorry, I was wrong, forget that. What I want is what I asked at first: "


class Impatient(Customer):
    def __init__(self, intensity: int):
        self.patience = MAX_INTENSITY + 1 - intensity  # questions it answers, less one

    def reply(self, task: TaskInfo, messages: list[dict]) -> dict:
        # The agent's questions since the customer stated its request (tau2's greeting,
        # "How can I help you today?", comes before it and does not count).
        request = Scenario.of(task).request
        opened = next((k for k, m in enumerate(messages) if m.get("role") == "assistant"
                       and str(m.get("content") or "").startswith(request)), len(messages))
        asked = [str(m.get("content") or "") for m in messages[opened:] if m.get("role") == "user"]
        questions = sum(1 for text in asked if _questions(text))
        if asked and _questions(asked[-1]) and questions >= self.patience:
            return {"role": "assistant", "content": FED_UP}
        return super().reply(task, messages)


class Skeptical(Customer):
    def __init__(self, intensity: int):
        self.asks_needed = intensity + 1

    def give_facts(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        facts = self.facts_asked(scenario, reading.question) or list(scenario.facts)
        if facts and min(conversation.times_asked(f) for f in facts) < self.asks_needed:
            return WHY
        return super().give_facts(scenario, conversation, reading)


class Incoherent(Customer):
    def __init__(self, intensity: int):
        self.words = MAX_INTENSITY + 1 - intensity

    def give_facts(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        words = super().give_facts(scenario, conversation, reading).split()
        fragments = [" ".join(words[i:i + self.words]) for i in range(0, len(words), self.words)]
        given = sum(1 for text in conversation.own_texts() if text in fragments)
        return fragments[min(given, len(fragments) - 1)]


class ChangesMind(Customer):
    def __init__(self, intensity: int):
        self.intensity = intensity

    def reply(self, task: TaskInfo, messages: list[dict]) -> dict:
        conversation = Conversation(messages)
        scenario = Scenario.of(task)
        texts = conversation.own_texts()
        turns_after = next((len(texts) - k - 1 for k, t in enumerate(texts) if t.startswith(scenario.request)), None)
        # It changes its mind, and goes back, only where the agent does not ask it to act.
        last_is_text = conversation.last.get("role") == "user" and not asked_user_calls(task, messages)
        if last_is_text and turns_after == 0 and CHANGED not in texts:
            return {"role": "assistant", "content": CHANGED}
        if last_is_text and texts and texts[-1] == CHANGED:
            return {"role": "assistant", "content": BACK + scenario.request}
        return super().reply(task, messages)


BEHAVIOURS: dict[str, type[Customer]] = {
    "impatient": Impatient, "skeptical": Skeptical, "incoherent": Incoherent, "changes-mind": ChangesMind,
}


def customer_for(system_prompt: str) -> Customer:
    """The customer a user-simulator system prompt asks for: a built-in persona's, else
    the cooperative one."""
    found = builtin_in(system_prompt)
    if found is None or found[0] not in BEHAVIOURS:
        return CUSTOMER
    name, intensity = found
    return BEHAVIOURS[name](intensity)


def system_of(messages: list[dict]) -> str:
    first = messages[0] if messages else {}
    return str(first.get("content") or "") if first.get("role") == "system" else ""
