"""`scripted/customer`: an offline user that plays its task's scenario as a cooperative
customer, for agents that ask questions. (`scripted/oracle` as the user states its
request and everything it knows at once, and stops at the agent's first message that
does not ask it to act: an agent that asks "Shall I check it out to you?" is left alone.)

It opens with its request (the scenario's reason for calling in the first person;
neither the task id nor the facts it holds), then answers each message of the agent:

- the agent asks it to act on its side (`[gold-N]` tags, as the oracle agent asks it
  in telecom): it makes those tool calls, and once they are answered says it did;
- the agent asks for facts ("Could you give me your user id?", "What is your date of
  birth?", "Which store would you like?"): it gives the sentences of its scenario (known
  info, unknown info, the request's own details) that share the most words with the
  question; when none does, every fact it knows;
- the agent asks a yes/no question ("Shall I check it out to you?", "Do you want me to
  proceed?"): yes;
- the agent says it is working on it ("Let me check that for you."): go on;
- anything else (the request done, or refused, or "anything else I can help with?"):
  it thanks the agent and stops (###STOP###).

An agent that says the same thing a third time running (asking again and again) is
answered with a stop, so a conversation cannot circle until max_steps.

Each reply is a pure function of the task and the conversation, as every scripted
model's is: a retried or resumed call answers the same, and over HTTP
(passhat.testing.scripted_http) it answers as in process.

Personas (users that are not ideal, an axis of a sweep) build on this class: `Customer`
reads the agent's message once (`read`, a `Reading`) and answers each kind of turn with
one method (`opening`, `perform`, `after_acting`, `give_facts`, `confirm`, `go_on`,
`close`). A persona is a subclass that overrides the methods of the behaviour it
changes, with the `Conversation` (the agent's turns, its own, how often a fact was
asked for) at hand; it changes how the user speaks, never what the task is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from passhat.messages import STOP_TOKEN, TaskInfo

# How the oracle agent asks the user to act on its side: "[gold-3] toggle_roaming({})".
GOLD_TAG = re.compile(r"\[gold-(\d+)\]")

_WORD = re.compile(r"[a-z0-9][a-z0-9_#@.\-]*[a-z0-9]|[a-z0-9]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Words that say nothing of which fact is asked for.
_STOPWORDS = frozenset("""
a an the to of for and or in on at by with from into about as is are was were be been being
do does did done i you your yours my me mine we us our it its this that these those there here
please could would can will shall should may might must have has had what which who whom
when where how why any anything else so if then than just also not no yes ok okay sure thank
thanks want wanted like need needs help let check one moment confirm proceed provide give
tell share know verify kindly now first before after again all some more other same very
go ahead right correct get got make able
""".split())
# The same fact said in other words.
_SYNONYMS = {"dob": "birth", "born": "birth", "birthday": "birth", "e-mail": "email", "mail": "email",
             "booking": "reservation", "postal": "zip", "zipcode": "zip", "surname": "name",
             "telephone": "phone", "mobile": "phone", "identifier": "id", "username": "id"}
# The agent asks for information (rather than a yes or a no).
_ASKS_FOR = ("provide", "give me", "tell me", "share", "what ", "what's", "which", "when ", "where",
             "how many", "how much", "may i have", "can i have", "could i have", "can i get",
             "could i get", "need your", "need the", "verify your", "confirm your", "spell")
_YES_NO = ("shall", "should", "can", "could", "would", "will", "do", "does", "did", "is", "are",
           "may", "want", "ok", "okay", "confirm", "just", "please")
_ANYTHING_ELSE = ("anything else", "something else", "any other")
_WORKING = ("let me", "one moment", "a moment", "i will", "i'll", "i am checking", "i'm checking",
            "checking", "looking into", "please hold", "please wait", "bear with me")
# Second person to first, longest first (the scenario speaks to the user as "you").
_PRONOUNS = [("you are", "I am"), ("you were", "I was"), ("you're", "I'm"), ("you've", "I've"),
             ("you'd", "I'd"), ("you'll", "I'll"), ("yourself", "myself"), ("yours", "mine"),
             ("your", "my"), ("you", "I")]
_PRONOUN = re.compile(r"\b(" + "|".join(re.escape(p) for p, _ in _PRONOUNS) + r")\b", re.IGNORECASE)


def first_person(text: str) -> str:
    """The scenario's "You want to renew your loan" as the customer says it: "I want
    to renew my loan". ("you" after a verb or a preposition becomes "me".)"""
    swaps = dict(_PRONOUNS)

    def swap(match: re.Match) -> str:
        said = match.group(0)
        word = swaps[said.lower()]
        before = match.string[:match.start()].rstrip().lower()
        if said.lower() == "you" and before and not before.endswith((".", "!", "?", ":", ";", ",", "\n", "that",
                                                                      "and", "but", "if", "when", "because")):
            word = "me"
        return word[0].upper() + word[1:] if said[0].isupper() or word == "I" else word

    return _PRONOUN.sub(swap, text)


def _sentences(text: str | None) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text or "") if s.strip()]


def _words(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        word = _SYNONYMS.get(word, word)
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]  # reservations, ids
        if word not in _STOPWORDS:
            out.add(word)
    return out


@dataclass(frozen=True)
class Scenario:
    """What the customer knows, from the task's scenario, in the first person."""

    request: str  # what it calls for
    facts: tuple[str, ...]  # its known info and what it does not know, a sentence each
    details: tuple[str, ...]  # the request's own sentences, for questions about it

    @classmethod
    def of(cls, task: TaskInfo) -> Scenario:
        request = first_person(task.reason_for_call or _instructions(task.user_scenario)).strip()
        facts = [first_person(s) for part in (task.known_info, task.unknown_info) for s in _sentences(part)]
        return cls(request=request, facts=tuple(facts), details=tuple(_sentences(request)))


def _instructions(user_scenario: str) -> str:
    """A scenario without a reason for calling (free-text instructions, as tau2's mock
    domain has): the text after its "Instructions:" heading."""
    return user_scenario.partition("Instructions:")[2].strip() or user_scenario


# What the agent's last message asks of the customer: its opening (not said yet), to act
# on its side, to go on after acting, facts, a yes, patience, or nothing more (done).
ReadingKind = Literal["opening", "perform", "after_acting", "facts", "confirm", "working", "done"]


@dataclass(frozen=True)
class Reading:
    """What the agent's last message asks of the customer."""

    kind: ReadingKind
    question: str = ""  # the agent's questions (facts, confirm)
    asked: tuple[int, ...] = ()  # perform: the gold actions it is asked to make


class Conversation:
    """The customer's view of the conversation (its own messages are `assistant`, the
    agent's `user`, answers to its own tool calls `tool`)."""

    def __init__(self, messages: list[dict]):
        self.messages = messages
        self.own = [m for m in messages if m.get("role") == "assistant"]
        self.agent = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]

    @property
    def last(self) -> dict:
        return self.messages[-1] if self.messages else {}

    def own_texts(self) -> list[str]:
        return [str(m.get("content") or "") for m in self.own if not m.get("tool_calls")]

    def stated(self, opening: str) -> bool:
        """Whether it has said its opening (a task's initial conversation may hold
        earlier user turns, which are not it)."""
        return any(text.startswith(opening) for text in self.own_texts())

    def times_asked(self, fact: str) -> int:
        """How many of the agent's messages asked for `fact` (shared a word with it)."""
        wanted = _words(fact)
        return sum(1 for text in self.agent if _questions(text) and wanted & _words(_questions(text)))


def _questions(text: str) -> str:
    """The sentences of a message that ask something: questions, and requests such as
    "Please provide your user id."."""
    return " ".join(s for s in _sentences(text)
                    if s.endswith("?") or (s.lower().startswith("please") and _asks_for(s)))


def _asks_for(text: str) -> bool:
    lowered = f" {text.lower()} "
    return any(cue in lowered for cue in _ASKS_FOR)


def _yes_no(question: str) -> bool:
    """A question answered by yes or no: it opens with an auxiliary ("Shall I ...?",
    "Do you want ...?") or offers the two."""
    lowered = question.lower()
    if "(yes/no)" in lowered or "yes or no" in lowered:
        return True
    return any(_WORD.findall(s.lower())[:1] in ([w] for w in _YES_NO) for s in _sentences(question))


def asked_user_calls(task: TaskInfo, messages: list[dict]) -> list[dict]:
    """The tool calls the agent's last message asks the user to make (its `[gold-N]`
    tags, as the oracle agent asks), those not made yet, as OpenAI tool calls."""
    last = messages[-1] if messages else {}
    asked = [int(t) for t in GOLD_TAG.findall(last.get("content") or "")]
    already = {c["id"] for m in messages if m.get("role") == "assistant" for c in (m.get("tool_calls") or [])}
    return [
        {"id": f"user-gold-{i}", "type": "function",
         "function": {"name": task.gold_actions[i].name, "arguments": json.dumps(task.gold_actions[i].arguments)}}
        for i in asked if f"user-gold-{i}" not in already and i < len(task.gold_actions)
    ]


class Customer:
    """The cooperative customer. Each method answers one kind of turn with its text (or,
    `perform`, its message); a persona overrides the ones it changes."""

    # An agent message answered this many times running is not answered again: the
    # customer stops.
    MAX_SAME_QUESTION = 2

    def reply(self, task: TaskInfo, messages: list[dict]) -> dict:
        scenario, conversation = Scenario.of(task), Conversation(messages)
        reading = self.read(task, scenario, conversation)
        if reading.kind == "perform":
            return self.perform(task, conversation, reading)
        text = {
            "opening": self.opening,
            "after_acting": self.after_acting,
            "facts": self.give_facts,
            "confirm": self.confirm,
            "working": self.go_on,
            "done": self.close,
        }[reading.kind](scenario, conversation, reading)
        asked = conversation.agent[-(self.MAX_SAME_QUESTION + 1):]
        if STOP_TOKEN not in text and len(asked) > self.MAX_SAME_QUESTION and len(set(asked)) == 1:
            text = self.give_up(scenario, conversation, reading)
        return {"role": "assistant", "content": text}

    def read(self, task: TaskInfo, scenario: Scenario, conversation: Conversation) -> Reading:
        """What the agent's last message asks of it."""
        if not conversation.stated(self.opening(scenario, conversation, Reading("opening"))):
            return Reading("opening")
        last = conversation.last
        if last.get("role") == "tool":
            return Reading("after_acting")
        text = str(last.get("content") or "")
        calls = asked_user_calls(task, conversation.messages)
        if calls:
            return Reading("perform", asked=tuple(int(c["id"].rsplit("-", 1)[1]) for c in calls))
        question = _questions(text)
        lowered = question.lower()
        if question and not any(cue in lowered for cue in _ANYTHING_ELSE):
            # "Could you confirm your date of birth?" and "Do you want it at Main Street or
            # Harbor Plaza?" ask for a fact; "Could you confirm you want the refill?" for a
            # yes, as does any yes/no question on no fact it holds.
            asks = _asks_for(question) or (" or " in lowered and "yes or no" not in lowered)  # a choice
            if _yes_no(question) and not (asks and self.facts_asked(scenario, question)):
                return Reading("confirm", question=question)
            return Reading("facts", question=question)
        if not question and any(cue in text.lower() for cue in _WORKING):
            return Reading("working")
        return Reading("done")

    # -- one method per kind of turn -----------------------------------------------------

    def opening(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return scenario.request

    def perform(self, task: TaskInfo, conversation: Conversation, reading: Reading) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": asked_user_calls(task, conversation.messages)}

    def after_acting(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return "Done, I did that."

    def give_facts(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        facts = self.facts_asked(scenario, reading.question)
        if facts:
            return " ".join(facts)
        if scenario.facts:
            return "Here is what I know: " + " ".join(scenario.facts)
        return "I'm sorry, I don't have that information."

    def confirm(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return "Yes, please go ahead."

    def go_on(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return "Okay, please go on."

    def close(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return f"Thank you, that is all I needed. {STOP_TOKEN}"

    def give_up(self, scenario: Scenario, conversation: Conversation, reading: Reading) -> str:
        return f"We are going in circles; I will call back another time. {STOP_TOKEN}"

    # -- helpers for the methods above (and personas) ------------------------------------

    @staticmethod
    def facts_asked(scenario: Scenario, question: str) -> list[str]:
        """The sentences of the scenario (facts, then the request's details) that share
        the most words with the question; none when no sentence shares one."""
        asked = _words(question)
        scored = [(len(asked & _words(s)), s) for s in (*scenario.facts, *scenario.details)]
        best = max((n for n, _ in scored), default=0)
        return [s for n, s in scored if n and n == best]


CUSTOMER = Customer()


def customer_turn(task: TaskInfo, messages: list[dict], customer: Any = CUSTOMER) -> dict:
    """scripted/customer's next turn (OpenAI message dict), as the user."""
    return customer.reply(task, messages)
