"""passhat's scripted models served over real HTTP, as a responder for passhat.testing.fault_server.

    responder = ScriptedResponder(["airline"], latency=0.2)
    with FaultServer(responder=responder) as srv:
        passhat run --agent-model openai/oracle --user-model openai/oracle \\
            --agent-args '{"api_base": "<srv.url>/v1", "api_key_env": "PASSHAT_TEST_API_KEY"}' ...

so trials travel litellm's real `openai/...` path (HTTP, the OpenAI client, its errors)
while the answers are exactly those of `scripted/oracle`, `scripted/customer` (as the user)
and `scripted/noisy-P` (and of the
review judges `reviewer`, `reviewer-misquote` and `reviewer-garbled`, which answer from
the request alone: passhat.infra.scripted_review).

One more model name exists only here: `fixed-N` (N >= 3) makes every conversation exactly
N model calls long, whatever the task, as in the setup issue 10 measured throughput on
(8 model calls per conversation). The user opens with the oracle's request and stops at
the Nth call; the agent answers with tool calls (the task's gold actions in turn, or a
tool without required arguments when the task has none) and short replies, arranged so
that its last reply is call N-1. Every message after the opening carries its call number
(`[call n]` in text, `fixed-n` as a tool call's id), so each side can count the calls,
including the agent's tool calls the user never sees. Tool calls that repeat or fail are
part of the workload; the rewards are whatever tau2's evaluator makes of the outcome.

A model call over HTTP carries none of passhat's metadata, so the responder works out
from the request itself which task it plays and on which side:

  * role: the user simulator when the system prompt is tau2's user prompt (it holds a
    `<scenario>` block), the agent otherwise;
  * domain and task: for the user, the task whose `user_scenario` appears in that system
    prompt; for the agent, the domain whose agent system prompt it is and the task whose
    opening request (what `passhat.infra.scripted_provider.user_turn` says first, which
    ends with the task id, or what scripted/customer says first) is the first user-role
    message. When several tasks match (some
    share a scenario), the answer is used if every candidate gives the same one, and the
    request fails with an explanation if not.

An agent request with no system prompt of a domain's and no tools, whose first user
message is an A2A evaluator's first message (tau2's agentify prompt or the AgentBeats
one), is the model behind an agent in A2A text mode: it is answered with the oracle's next
action as `<json>` text (passhat.infra.scripted_agentify), the task found by the policy
and the opening request in that message.

Such a first message of passhat's in MCP mode, with the tools as the request's own, is
the model behind an agent with its tools over MCP: it is answered with the oracle's turn
as it is (its tool calls' ids say its progress, as in tool mode).

A request whose system prompt is the installed tau2's NL-assertion judge prompt (tau2
1.0.x grades such assertions with one model call, `gpt-4.1-2025-04-14` by default, an
OpenAI model, so it comes here too) is answered as `scripted/judge` answers it: every
assertion is met (passhat.infra.scripted_provider.judge_turn), whatever model it names.

One more agent model exists only here: `skip-write` is the oracle that leaves out the
task's first write of its own (scripted_faults' skipped_write at that action); on a task
with none it is the oracle.

The answers come from passhat.infra.scripted_provider.agent_turn / user_turn; the model
name (`oracle`, `noisy-P`), the request's `seed` and the task decide whether a noisy
agent succeeds, with the same seeded draw passhat.infra.scripted_provider uses, so a
trial answers the same over HTTP as in process.

`play` answers every request as that scripted model (`oracle`, `noisy-P`), whatever model
it names: for an agent whose model is fixed in its code, such as tau2-bench's agentify
white agent (`openai/gpt-4o`).

`latency` delays each answer on the server's event loop (other requests proceed).
`freeze()` makes answers wait at a gate (after their latency) until `thaw()`: tests use
it to hold every model call of a run in flight before killing something, and `held` says
how many are waiting. Requests are never held longer than `max_hold_s`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections import Counter
from typing import Any, Iterable

from passhat.domains.nl_judge import judge_messages
from passhat.domains.registry import get_domain
from passhat.infra import scripted_agentify, scripted_faults, scripted_provider, scripted_review
from passhat.infra.scripted_customer import customer_turn
from passhat.infra.scripted_personas import customer_for
from passhat.messages import STOP_TOKEN, TaskInfo

SCENARIO_TAG = "<scenario>"
FIXED_MODEL = re.compile(r"fixed-(\d+)")
CALL_TAG = re.compile(r"\[call (\d+)\]")


class ScriptedHTTPError(ValueError):
    """The request cannot be mapped to exactly one task (answered as a 500 by the server)."""


def opening_request(task: TaskInfo) -> str:
    """What the scripted user says first: exactly scripted_provider.user_turn's opening."""
    return scripted_provider.user_turn(task, [])["content"]


def openings(task: TaskInfo) -> list[str]:
    """What each scripted user says first: the oracle's (which ends with the task id)
    and scripted/customer's (its request alone: tasks whose requests read alike, as
    telecom's do, cannot be told apart by it)."""
    return [opening_request(task), customer_turn(task, [])["content"]]


def success_probability(model: str) -> float:
    """`oracle` -> 1.0, `noisy-P` -> P; an `openai/` (or any) provider prefix is ignored."""
    return scripted_provider.parse_name(model.rsplit("/", 1)[-1])


def noisy_succeeds(model: str, seed: int | None, domain: str, task_id: str) -> bool:
    """Whether a scripted agent of this model name succeeds on this trial of this task:
    the same seeded draw as passhat.infra.scripted_provider."""
    return scripted_provider.agent_succeeds(success_probability(model), seed, domain, task_id)


def expected_reward(model: str, seed: int | None, domain: str, task_id: str) -> float:
    """The reward a scripted agent earns on a task the oracle solves: 1.0 when the seeded
    draw succeeds, 0.0 when it fails (its empty answers end the trial as an agent
    error)."""
    return 1.0 if noisy_succeeds(model, seed, domain, task_id) else 0.0


def request_key(body: dict) -> str:
    """Identity of one model call: the same (trial, step) always sends the same model,
    seed and messages, and different ones never do. Two served requests with one key are
    one model call executed twice."""
    return json.dumps(
        [body.get("model"), body.get("seed"), body.get("messages")], sort_keys=True
    )


class _DomainIndex:
    """One domain's tasks, indexed by what a request can show of them."""

    def __init__(self, name: str):
        domain = get_domain(name)
        self.name = name
        self.agent_prompt = domain.agent_system_prompt()
        self.policy = domain.policy() if callable(getattr(domain, "policy", None)) else None
        self.facts = scripted_faults.facts_of(domain)
        self.tasks: dict[str, TaskInfo] = {t: domain.task(t) for t in domain.task_ids()}
        self.by_scenario: dict[str, list[str]] = {}
        self.by_opening: dict[str, list[str]] = {}
        for task_id, task in self.tasks.items():
            self.by_scenario.setdefault(task.user_scenario, []).append(task_id)
            for opening in dict.fromkeys(openings(task)):
                self.by_opening.setdefault(opening, []).append(task_id)

    def scenario_matches(self, system_prompt: str) -> list[str]:
        # The user prompt embeds the scenario text verbatim; most prompts contain exactly
        # one, but a scenario may be a prefix of another, so keep the longest matches.
        found = [s for s in self.by_scenario if s and s in system_prompt]
        if not found:
            return []
        longest = max(len(s) for s in found)
        return [t for s in found if len(s) == longest for t in self.by_scenario[s]]


class ScriptedResponder:
    """A FaultServer responder that plays scripted/oracle and scripted/noisy-P."""

    def __init__(
        self,
        domains: Iterable[str] = ("airline",),
        *,
        latency: float = 0.0,
        max_hold_s: float = 300.0,
        play: str | None = None,
    ):
        # Built here, once per domain: the responder runs on the server's event loop,
        # where loading tau2 data would stall every request.
        self.indexes = [_DomainIndex(d) for d in domains]
        self.judge_prompt = message_text(judge_messages([], [])[0]["content"])  # tau2's own, for any trajectory
        self.latency = latency
        self.play = play
        self.max_hold_s = max_hold_s
        self._lock = threading.Lock()
        self._open = True
        self._held: Counter[str] = Counter()  # request_key -> how many copies are held
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- the gate

    @property
    def held(self) -> int:
        """Requests waiting at the gate right now."""
        with self._lock:
            return sum(self._held.values())

    def held_keys(self) -> set[str]:
        """request_key() of every request waiting at the gate right now."""
        with self._lock:
            return set(self._held)

    def freeze(self) -> None:
        """From now on answers wait at the gate (after their latency) until thaw()."""
        with self._lock:
            self._open = False
            loop, gate = self._loop, self._gate
        if loop is not None and gate is not None:
            loop.call_soon_threadsafe(gate.clear)

    def thaw(self) -> None:
        """Release every held answer, and stop holding new ones."""
        with self._lock:
            self._open = True
            loop, gate = self._loop, self._gate
        if loop is not None and gate is not None:
            loop.call_soon_threadsafe(gate.set)

    async def _pass_gate(self, key: str) -> None:
        with self._lock:
            if self._gate is None:
                self._loop = asyncio.get_running_loop()
                self._gate = asyncio.Event()
            # We run on the gate's loop here, so its state can follow _open directly.
            (self._gate.set if self._open else self._gate.clear)()
            if self._open:
                return
            self._held[key] += 1
            gate = self._gate
        try:
            await asyncio.wait_for(gate.wait(), self.max_hold_s)
        except asyncio.TimeoutError:
            pass  # bounded: never hold a request forever, whatever the test does
        finally:
            with self._lock:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]

    # ---- answering

    async def __call__(self, body: dict) -> dict:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        await self._pass_gate(request_key(body))
        return self.answer(body)

    def answer(self, body: dict) -> dict:
        """The scripted model's reply to one chat-completions request (sync, no delay)."""
        messages = list(body.get("messages") or [])
        system = ""
        if messages and messages[0].get("role") == "system":
            system = message_text(messages[0].get("content"))
            messages = messages[1:]
        model = self.play or str(body.get("model", ""))
        if model.rsplit("/", 1)[-1] in scripted_review.MODELS:  # a review judge (passhat review)
            return scripted_review.review_turn(model, list(body.get("messages") or []))  # its system prompt too
        if system == self.judge_prompt:  # tau2 1.0.x's NL-assertion judge
            return scripted_provider.judge_turn(messages)
        seed = body.get("seed")
        calls = fixed_length(model)
        if calls is not None:
            if SCENARIO_TAG in system:
                return self._unique(self._user_candidates(system),
                                    lambda _, task: fixed_user_turn(task, messages, calls))
            tools = list(body.get("tools") or [])
            return self._unique(self._agent_candidates(system, messages),
                                lambda _, task: fixed_agent_turn(task, messages, tools, calls))
        if SCENARIO_TAG in system:
            if model.rsplit("/", 1)[-1] == "customer":  # playing the persona its prompt holds, if any
                customer = customer_for(system)
                return self._unique(self._user_candidates(system),
                                    lambda _, task: customer_turn(task, messages, customer))
            return self._unique(self._user_candidates(system), lambda _, task: scripted_provider.user_turn(task, messages))

        name = model.rsplit("/", 1)[-1]

        def agent(index: _DomainIndex, task: TaskInfo) -> dict:
            if name == SKIP_WRITE:
                return scripted_provider.agent_turn(task, messages, skipped_write(index, task))
            if not noisy_succeeds(model, seed, index.name, task.id):
                return {"role": "assistant", "content": ""}
            return scripted_provider.agent_turn(task, messages, parallel=name == "parallel")

        if body.get("tools") and scripted_agentify.is_mcp_chat(messages, message_text):
            # the model behind an A2A agent whose tools are served over MCP
            return self._unique(self._agentify_candidates(message_text(messages[0].get("content"))), agent)

        if not body.get("tools") and scripted_agentify.is_agentify_chat(messages, message_text):
            # the model behind an A2A agent in text mode (passhat.infra.scripted_agentify)
            def agentify(index: _DomainIndex, task: TaskInfo) -> dict:
                if not noisy_succeeds(model, seed, index.name, task.id):
                    return {"role": "assistant", "content": ""}
                chat = scripted_agentify.oracle_chat(task, messages, message_text)
                return scripted_agentify.as_action_text(scripted_provider.agent_turn(task, chat))

            return self._unique(self._agentify_candidates(system + message_text(messages[0].get("content"))),
                                agentify)
        return self._unique(self._agent_candidates(system, messages), agent)

    def _agentify_candidates(self, first: str) -> list[tuple[_DomainIndex, TaskInfo]]:
        """The tasks an evaluator's first message is of: its domain's policy is in it,
        and its observation is the task's opening request."""
        opening = scripted_agentify.opening_of(first)
        out = [(i, i.tasks[t]) for i in self.indexes if i.policy and i.policy in first
               for t in i.by_opening.get(opening, [])]
        if not out:
            raise ScriptedHTTPError(f"agentify request whose policy and opening match no task: {opening[:80]!r}")
        return out

    def _user_candidates(self, system: str) -> list[tuple[_DomainIndex, TaskInfo]]:
        out = [(i, i.tasks[t]) for i in self.indexes for t in i.scenario_matches(system)]
        if not out:
            raise ScriptedHTTPError(
                "user-simulator request whose scenario matches no task of "
                f"{[i.name for i in self.indexes]}"
            )
        return out

    def _agent_candidates(self, system: str, messages: list[dict]) -> list[tuple[_DomainIndex, TaskInfo]]:
        indexes = [i for i in self.indexes if i.agent_prompt == system]
        if not indexes:
            raise ScriptedHTTPError(
                f"agent request whose system prompt is none of {[i.name for i in self.indexes]}'s"
            )
        first_user = next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), None)
        if first_user is None:
            raise ScriptedHTTPError("agent request without a user message: cannot tell the task")
        out = [(i, i.tasks[t]) for i in indexes for t in i.by_opening.get(first_user, [])]
        if not out:
            raise ScriptedHTTPError(f"agent request whose opening matches no task: {first_user[:80]!r}")
        return out

    def _unique(self, candidates, reply) -> dict:  # noqa: ANN001
        answers = [reply(index, task) for index, task in candidates]
        if all(a == answers[0] for a in answers):
            return answers[0]
        names = [f"{i.name}/{t.id}" for i, t in candidates]
        raise ScriptedHTTPError(f"request matches tasks {names} that answer differently")


SKIP_WRITE = "skip-write"


def skipped_write(index: _DomainIndex, task: TaskInfo) -> scripted_faults.AgentFault | None:
    """The `skip-write` model's mistake on a task: its first write of the agent's left out."""
    at = next((i for i, a in enumerate(task.gold_actions) if a.requestor == "assistant"
               and index.facts.tool_kinds.get(a.name) == scripted_faults.WRITE), None)
    return None if at is None else scripted_faults.AgentFault(kind="skipped_write", index=at)


def fixed_length(model: str) -> int | None:
    """N for a `fixed-N` model name (any provider prefix), None for every other name."""
    match = FIXED_MODEL.fullmatch(model.rsplit("/", 1)[-1])
    if match is None:
        return None
    if int(match.group(1)) < 3:
        raise ScriptedHTTPError(f"{model}: a fixed-length conversation needs at least 3 model calls")
    return int(match.group(1))


def calls_so_far(messages: list[dict]) -> int:
    """The highest call number a fixed-N conversation's messages carry (0 if none)."""
    numbers = [int(n) for m in messages for n in CALL_TAG.findall(message_text(m.get("content")))]
    numbers += [int(c["id"].split("-", 1)[1]) for m in messages for c in (m.get("tool_calls") or [])
                if FIXED_MODEL.fullmatch(str(c.get("id", "")))]
    return max(numbers, default=0)


def fixed_user_turn(task: TaskInfo, messages: list[dict], calls: int) -> dict:
    """The user of a fixed-N conversation: the oracle's request, then thanks, then stop."""
    n = calls_so_far(messages) + 1
    if n == 1:
        return {"role": "assistant", "content": opening_request(task)}
    if n >= calls:
        return {"role": "assistant", "content": STOP_TOKEN}
    return {"role": "assistant", "content": f"Thank you. Please go on. [call {n}]"}


def fixed_agent_turn(task: TaskInfo, messages: list[dict], tools: list[dict], calls: int) -> dict:
    """The agent of a fixed-N conversation. Its reply must be call N-1 (the user's stop is
    call N): after the user it calls a tool unless this is call N-1; after a tool result
    it replies, unless this is call N-2, where a reply would leave the user's turn and
    the agent's next one past N-1, so it calls one more tool."""
    n = max(calls_so_far(messages), 1) + 1  # the untagged opening is call 1
    after_tool = bool(messages) and messages[-1].get("role") == "tool"
    use_tool = n < calls - 1 and (not after_tool or n == calls - 2)
    call = _next_tool_call(task, messages, tools) if use_tool else None
    if call is None:
        return {"role": "assistant", "content": f"Noted. [call {n}]"}
    name, arguments = call
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"fixed-{n}", "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }]}


def _next_tool_call(task: TaskInfo, messages: list[dict], tools: list[dict]) -> tuple[str, dict] | None:
    """The task's gold actions of the agent in turn (from the first again when all are
    done); for a task without any, the first offered tool without required arguments.
    None if there is no such tool: the agent then replies instead, and the conversation
    may take a call more than N."""
    gold = [a for a in task.gold_actions if a.requestor == "assistant"]
    made = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
    if gold:
        action = gold[made % len(gold)]
        return action.name, dict(action.arguments)
    for tool in tools:
        fn = tool.get("function") or {}
        if not (fn.get("parameters") or {}).get("required"):
            return fn.get("name"), {}
    return None


def message_text(content: Any) -> str:
    """Message content as text (OpenAI allows a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


# The loopback servers accept any key; runs name this variable, which http_args sets in
# this process (worker processes started from it inherit it).
TEST_KEY_ENV = "PASSHAT_TEST_API_KEY"


def http_args(server_url: str, **extra: Any) -> dict[str, Any]:
    """--agent-args / --user-args that send a model's calls to the fault server."""
    os.environ.setdefault(TEST_KEY_ENV, "loopback-test-key")
    return {"api_base": server_url.rstrip("/") + "/v1", "api_key_env": TEST_KEY_ENV, **extra}
