"""A deterministic chat-completions model for the tau2-vs-passhat parity test.

    model = ParityModel({"airline": ["0", "3"], "telecom": [...]})
    with FaultServer(responder=model) as srv:
        ... tau2's run_tasks or passhat, both with model "openai/parity" and
            api_base srv.url + "/v1" ...
    model.key(srv.requests[0])   # -> ConversationKey(domain, task_id, seed, side)

The answer is a pure function of the request body (given the task selection the model
was built with): no server-side state, so two runners that send the same requests get
the same answers, byte for byte, and a runner that sends a different request sees the
conversation diverge right there.

What the model reads from a request:

  * side: the user simulator when the system prompt is tau2's user prompt (it holds a
    `<scenario>` block), the agent otherwise;
  * task: user side, the selected task whose user system prompt is the system message
    (or, failing an exact match, whose scenario text it contains); agent side, the
    `[ref XXXXXXXXXX]` tag the user put in its opening message (a hash of domain and
    task id), or for a task that starts with an initial conversation and no tag yet,
    that conversation's first user message;
  * seed: the request's `seed` (per trial, the same for agent and user in tau2), or
    what `seed_alias` maps it to;
  * progress: how many of its own turns the side has already taken: its messages carry
    a turn marker (`[a3]`, `[u3]`) in their text and/or tool-call ids `call_a3_0`,
    `call_u3_0`; messages of a task's initial conversation carry neither.

A conversation's *behaviour* is `behaviour_for(domain, task_id, seed)`, a hash of the
three, picked from `behaviours_for(domain)`. The behaviours (and the tau2 rule each one
exercises) are documented in BEHAVIOURS. Some behaviours also draw variants (which
empty answer, which invalid arguments, at which turn) from a second hash: `facets()`
names everything a conversation exercises. Selections of tasks that cover every facet
are the test's job (see `tests/parity/test_tau2_parity.py`).

Tasks whose user system prompts are identical (many telecom tasks share one scenario;
some mock tasks too) cannot be told apart from any request, so a selection may hold at
most one task of each such group; the constructor refuses otherwise.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from passhat.messages import TaskInfo
from passhat.testing.scripted_http import message_text

SCENARIO_TAG = "<scenario>"
STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"

# The user turn at which `endless_stop` says ###STOP###: with no agent tool calls the
# user speaks at steps 1, 3, 5, ..., so its turn 14 is step 29. With max_steps 29 the
# stop lands on the step that reaches the limit (tau2: max_steps wins); with 30 it is a
# plain user_stop.
ENDLESS_STOP_TURN = 14

# behaviour -> what it exercises (and what tau2 does with it).
BEHAVIOURS: dict[str, str] = {
    "oracle": "agent plays the gold actions one per message (asking the user to do the "
              "user-side ones, which the user does one call per message), tells the "
              "communicate_info; user ends with ###STOP### inside its text -> user_stop, "
              "usually reward 1",
    "oracle_batched": "as oracle, but consecutive gold calls go in one message (several "
                      "tool calls in one step) with content \"\" next to the calls and "
                      "compact JSON arguments; the user does all asked actions in one message",
    "text_and_tools": "as oracle, but every agent tool-call message also has text (routed "
                      "to the environment; the text never reaches the user)",
    "wrong": "agent calls a gold tool with a corrupted argument (or transfers when there is "
             "no gold call), then says it is done without the communicate_info -> "
             "user_stop, reward 0",
    "transfer": "agent plays the gold calls, calls transfer_to_human_agents, user answers "
                "###TRANSFER### -> user_stop",
    "oos": "agent first asks a question; user answers ###OUT-OF-SCOPE### -> user_stop",
    "bad_json_agent": "agent's first message, or its second after a harmless tool call, is "
                      "a tool call whose arguments are not a JSON object (truncated JSON, "
                      "\"\" or a JSON list) -> tau2 raises, recorded as agent_error, reward 0",
    "unknown_tool": "agent first calls a tool that does not exist, with compact non-ASCII "
                    "JSON arguments (error tool message, one error), then plays the oracle",
    "errors_agent": "agent only makes failing calls (unknown tool, unknown argument name, "
                    "then two unknown tools in one message) -> too_many_errors (max_errors 4)",
    "empty_agent": "agent's first answer, or its second after a harmless tool call, is "
                   "empty (\"\", null or blank): tau2 resends the identical request 3 "
                   "times, then agent_error",
    "empty_user": "the user's second answer is empty: tau2 resends 3 times, then the "
                  "simulation fails (agent_error placeholder)",
    "endless": "agent and user chat forever; the agent calls a harmless tool every third "
               "turn (one such call lands on step 30) and once says ###STOP### (which "
               "means nothing from the agent) -> max_steps",
    "endless_errors": "as endless, but the agent's 2nd to 5th tool calls are unknown tools: "
                      "the 4th error comes with the env step after step 30, where max_steps "
                      "and too_many_errors both hold (tau2: too_many_errors wins); with "
                      "max_steps 29 the limit comes first",
    "endless_stop": "agent and user chat, no tools; the user says ###STOP### at its turn "
                    "14 (step 29) -> user_stop with max_steps 30, max_steps with 29",
    # domains where the user has no tools
    "user_calls_without_tools": "the user's second answer is a tool call although it has no "
                                "tools (tau2: error tool message 'User tools not available', "
                                "counted as an error, routed back to the user); then oracle",
    # telecom only (the user has tools there)
    "bad_json_user": "the user's second answer is a tool call with invalid JSON arguments "
                     "-> tau2 raises, agent_error",
    "errors_user": "the user only makes failing tool calls after its opening (unknown tool, "
                   "unknown argument name) -> too_many_errors",
    "user_text_and_tools": "as oracle, but the user's tool-call messages carry text that "
                           "contains ###STOP### (a message with tool calls never stops) and "
                           "compact JSON arguments",
}

COMMON_BEHAVIOURS = (
    "oracle", "oracle", "oracle_batched", "text_and_tools", "wrong", "transfer", "oos",
    "bad_json_agent", "unknown_tool", "errors_agent", "empty_agent", "empty_user",
    "endless", "endless_errors", "endless_stop",
)
USER_TOOL_BEHAVIOURS = ("bad_json_user", "errors_user", "user_text_and_tools", "oracle")
NO_USER_TOOL_BEHAVIOURS = ("user_calls_without_tools",)

# The domains whose user has tools: telecom, and the parity test's plugin domain
# (tests/plugin_modules/home_internet).
USER_TOOL_DOMAINS = ("telecom", "home_internet")

# A harmless agent tool per domain for the endless chat (no error, no state change).
HARMLESS_CALL = {
    "home_internet": ("get_account", {"account_id": "a100"}),
    "airline": ("calculate", {"expression": "2 + 3"}),
    "retail": ("calculate", {"expression": "7 * 6"}),
    "telecom": ("transfer_to_human_agents", {"summary": "parity check, nothing to do"}),
    "mock": ("get_users", {}),
}
INVALID_ARGUMENTS = ('{"reason": "truncated', "", "[1, 2]")

_REF = re.compile(r"\[ref ([0-9a-f]{10})\]")
_DO = re.compile(r"\[do:([0-9,]+)\]")
_AGENT_MARK = re.compile(r"\[a\d+\]")
_USER_MARK = re.compile(r"\[u\d+\]")


class ParityModelError(ValueError):
    """A request the model cannot place (answered as HTTP 500 by the FaultServer)."""


@dataclass(frozen=True)
class ConversationKey:
    domain: str
    task_id: str
    seed: int | None
    side: str  # "agent" | "user"

    @property
    def conversation(self) -> tuple[str, str, int | None]:
        return (self.domain, self.task_id, self.seed)


def _hash(*parts: Any) -> int:
    text = "\x1f".join(str(p) for p in parts)
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def ref_of(domain: str, task_id: str) -> str:
    """The tag the user puts in its opening so the agent side can tell the task."""
    return hashlib.sha256(f"{domain}\x1f{task_id}".encode()).hexdigest()[:10]


def behaviours_for(domain: str, has_user_tools: bool | None = None) -> tuple[str, ...]:
    if has_user_tools is None:
        has_user_tools = domain in USER_TOOL_DOMAINS
    return COMMON_BEHAVIOURS + (USER_TOOL_BEHAVIOURS if has_user_tools else NO_USER_TOOL_BEHAVIOURS)


def behaviour_for(domain: str, task_id: str, seed: int | None) -> str:
    options = behaviours_for(domain)
    return options[_hash("behaviour", domain, task_id, seed) % len(options)]


def variant(domain: str, task_id: str, seed: int | None, name: str, n: int) -> int:
    """A second, independent deterministic choice for a conversation (0..n-1)."""
    return _hash("variant", name, domain, task_id, seed) % n


# The variants a behaviour draws (name -> how many), for coverage: "behaviour/name=i".
VARIANTS: dict[str, dict[str, int]] = {
    "empty_agent": {"empty_at": 2, "empty_kind": 3},
    "empty_user": {"empty_kind": 3},
    "bad_json_agent": {"bad_at": 2, "bad_kind": len(INVALID_ARGUMENTS)},
}


def facets(domain: str, task_id: str, seed: int | None) -> set[str]:
    """What a conversation exercises: its behaviour, and "behaviour/variant=i" for each
    variant the behaviour draws (which empty answer, which invalid arguments, when)."""
    b = behaviour_for(domain, task_id, seed)
    return {b} | {f"{b}/{name}={variant(domain, task_id, seed, name, n)}" for name, n in VARIANTS.get(b, {}).items()}


def all_facets() -> set[str]:
    return set(BEHAVIOURS) | {
        f"{b}/{name}={i}" for b, vs in VARIANTS.items() for name, n in vs.items() for i in range(n)
    }


@dataclass
class _Task:
    domain: str
    info: TaskInfo
    user_prompt: str
    ref: str
    first_history_user: str | None




JUDGE_TAG = "expectedOutcome"  # in tau2 1.0.x's NL-assertion judge prompt


def judge_answer(body: dict) -> dict | None:
    """The answer to tau2 1.0.x's NL-assertion judge, or None for any other request.
    A pure function of the request like the rest: each assertion is met unless a hash
    of (conversation, assertion) says otherwise (about one in four), so both verdicts
    occur. The judge's request has no seed, so it belongs to no single conversation."""
    import ast

    messages = body.get("messages") or []
    if len(messages) != 2 or JUDGE_TAG not in message_text(messages[0].get("content")):
        return None
    text = message_text(messages[1].get("content"))
    head, _, listed = text.rpartition("expectedOutcomes:")
    try:
        assertions = ast.literal_eval(listed.strip())
    except (ValueError, SyntaxError):
        assertions = []
    results = [
        {"expectedOutcome": a, "reasoning": "parity", "metExpectation": _hash(head, a) % 4 != 0}
        for a in assertions
    ]
    return {"content": json.dumps({"results": results})}


# How an irregular judge writes its verdicts, one way per conversation: the ways LLM
# judges get tau2 1.0.x's JSON format wrong, and the regular one.
IRREGULAR_REPLIES = (
    "regular",          # true / false
    "string_booleans",  # "true" / "false" (tau2's pydantic model reads them as booleans)
    "words",            # "yes" / "no" / "maybe" (the last one is refused)
    "numbers",          # 1 / 0
    "null",             # null for one assertion (refused)
    "not_json",         # prose
    "fenced",           # the JSON inside a markdown fence (not JSON)
    "missing_key",      # a result without metExpectation (refused)
    "no_reasoning",     # a result without reasoning (refused)
    "no_results",       # no "results" key at all (no assertion checked: all met)
)


def irregular_kind(body: dict) -> str | None:
    """Which way the irregular judge answers the judge request `body` (None: not a judge
    request): a hash of the conversation it grades."""
    messages = body.get("messages") or []
    if len(messages) != 2 or JUDGE_TAG not in message_text(messages[0].get("content")):
        return None
    head = message_text(messages[1].get("content")).rpartition("expectedOutcomes:")[0]
    return IRREGULAR_REPLIES[_hash("irregular", head) % len(IRREGULAR_REPLIES)]


def irregular_judge_answer(body: dict) -> dict | None:
    """A judge that answers tau2 1.0.x's NL-assertion judge irregularly (irregular_kind),
    and is a pure function of the request like every answer here; None for any other
    request."""
    kind = irregular_kind(body)
    if kind is None:
        return None
    regular = json.loads(judge_answer(body)["content"])
    results = regular["results"]
    if kind == "not_json":
        return {"content": "I checked the conversation: every expected outcome is met."}
    if kind == "fenced":
        return {"content": "```json\n" + json.dumps(regular) + "\n```"}
    if kind == "no_results":
        return {"content": json.dumps({"verdict": "met"})}
    for i, r in enumerate(results):
        met = r["metExpectation"]
        if kind == "string_booleans":
            r["metExpectation"] = "true" if met else "false"
        elif kind == "words":
            r["metExpectation"] = "maybe" if _hash("maybe", r["expectedOutcome"]) % 5 == 0 else ("yes" if met else "no")
        elif kind == "numbers":
            r["metExpectation"] = int(met)
        elif kind == "null" and i == len(results) - 1:
            r["metExpectation"] = None
        elif kind == "missing_key" and i == 0:
            del r["metExpectation"]
        elif kind == "no_reasoning" and i == 0:
            del r["reasoning"]
    return {"content": json.dumps({"results": results})}


def _call(cid: str, name: str, arguments: Any, compact: bool = False) -> dict:
    """A tool call. `compact` writes the arguments without spaces and with raw non-ASCII
    characters, unlike json.dumps' defaults (tau2 re-serialises parsed arguments with
    the defaults, so a runner that forwards the model's string would show)."""
    if isinstance(arguments, str):
        args = arguments
    elif compact:
        args = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    else:
        args = json.dumps(arguments)
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _ids(message: dict) -> list[str]:
    return [str(c.get("id", "")) for c in (message.get("tool_calls") or [])]


class ParityModel:
    """The responder. Build it with the tasks a run will use (domain -> task ids)."""

    def __init__(self, tasks: Mapping[str, Iterable[str]], seed_alias: Mapping[int, int] | None = None):
        """`seed_alias` maps a request's seed to the seed the model plays it as (and
        reports in `key`). A differential test uses it when the runner under test does
        not (yet) send the reference runner's seeds: its conversations then still play
        the same behaviours, so differences past the seed stay visible."""
        from passhat.domains.registry import get_domain

        self.seed_alias = dict(seed_alias or {})
        self.tasks: dict[tuple[str, str], _Task] = {}
        self.by_prompt: dict[str, tuple[str, str]] = {}
        self.by_ref: dict[str, tuple[str, str]] = {}
        self.by_history: dict[str, list[tuple[str, str]]] = {}
        self.user_tools: dict[str, bool] = {}
        for domain_name, ids in tasks.items():
            domain = get_domain(domain_name)
            self.user_tools[domain_name] = domain.user_tools() is not None
            for task_id in ids:
                info = domain.task(task_id)
                prompt = domain.user_system_prompt(task_id)
                key = (domain_name, task_id)
                if prompt in self.by_prompt:
                    other = self.by_prompt[prompt]
                    raise ParityModelError(
                        f"{key} and {other} have the same user system prompt: no request "
                        "can tell them apart; select one of them"
                    )
                first_user = next(
                    (m.content for m in info.initial_messages if m.role == "user" and m.content), None
                )
                t = _Task(domain_name, info, prompt, ref_of(domain_name, task_id), first_user)
                self.tasks[key] = t
                self.by_prompt[prompt] = key
                self.by_ref[t.ref] = key
                if first_user:
                    self.by_history.setdefault(first_user, []).append(key)

    # ------------------------------------------------------------------ identification

    def key(self, body: dict) -> ConversationKey | None:
        """Which conversation and side a request belongs to; None if it cannot be placed."""
        try:
            return self._identify(body)[0]
        except ParityModelError:
            return None

    def _identify(self, body: dict) -> tuple[ConversationKey, _Task, list[dict]]:
        messages = list(body.get("messages") or [])
        system = ""
        if messages and messages[0].get("role") == "system":
            system = message_text(messages[0].get("content"))
            messages = messages[1:]
        seed = body.get("seed")
        if isinstance(seed, int):
            seed = self.seed_alias.get(seed, seed)
        if SCENARIO_TAG in system:
            key = self.by_prompt.get(system)
            if key is None:  # lenient: a prompt that differs around the scenario
                found = [
                    (len(t.info.user_scenario), k) for k, t in self.tasks.items()
                    if t.info.user_scenario and t.info.user_scenario in system
                ]
                if not found:
                    raise ParityModelError("user request whose scenario matches no selected task")
                found.sort(reverse=True)
                if len(found) > 1 and found[0][0] == found[1][0]:
                    raise ParityModelError(f"user request matches several tasks: {found[:3]}")
                key = found[0][1]
            side = "user"
        else:
            key = None
            for m in messages:
                if m.get("role") == "user":
                    match = _REF.search(message_text(m.get("content")))
                    if match and match.group(1) in self.by_ref:
                        key = self.by_ref[match.group(1)]
                        break
            if key is None:
                first_user = next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), None)
                candidates = self.by_history.get(first_user or "", [])
                if len(candidates) != 1:
                    raise ParityModelError(
                        f"agent request with no task tag; first user message {str(first_user)[:80]!r}"
                    )
                key = candidates[0]
            side = "agent"
        task = self.tasks[key]
        return ConversationKey(key[0], key[1], seed, side), task, messages

    # ------------------------------------------------------------------ answering

    def __call__(self, body: dict) -> dict:
        return self.answer(body)

    def answer(self, body: dict) -> dict:
        verdicts = judge_answer(body)
        if verdicts is not None:
            return verdicts
        key, task, messages = self._identify(body)
        behaviour = behaviour_for(key.domain, key.task_id, key.seed)
        if key.side == "user":
            return self._user(key, task, behaviour, messages)
        return self._agent(key, task, behaviour, messages)

    def behaviour(self, body: dict) -> str | None:
        key = self.key(body)
        return None if key is None else behaviour_for(key.domain, key.task_id, key.seed)

    # ---- agent

    def _agent(self, key: ConversationKey, task: _Task, behaviour: str, messages: list[dict]) -> dict:
        n = sum(
            1 for m in messages
            if m.get("role") == "assistant"
            and (_AGENT_MARK.search(message_text(m.get("content"))) or any(i.startswith("call_a") for i in _ids(m)))
        )
        mark = f"[a{n}]"
        pick = lambda name, k: variant(key.domain, key.task_id, key.seed, name, k)

        if behaviour in ("endless", "endless_errors"):
            if n % 3 == 2:
                name, args = HARMLESS_CALL[key.domain]
                if behaviour == "endless_errors" and n > 2:
                    name, args = "no_such_tool", {"turn": n}
                return {"content": None, "tool_calls": [_call(f"call_a{n}_0", name, args)]}
            extra = " ###STOP### (that token means nothing from me)" if n == 1 else ""
            return {"content": f"Could you tell me a little more about that?{extra} {mark}"}
        if behaviour == "endless_stop":
            return {"content": f"I see. Anything else you can tell me? {mark}"}
        if behaviour == "errors_agent":
            gold = [a for a in task.info.gold_actions if a.requestor == "assistant"]
            real = gold[0].name if gold else HARMLESS_CALL[key.domain][0]
            if n % 3 == 0:
                calls = [_call(f"call_a{n}_0", "no_such_tool", {})]
            elif n % 3 == 1:
                calls = [_call(f"call_a{n}_0", real, {"no_such_argument": 1})]
            else:
                calls = [_call(f"call_a{n}_0", "no_such_tool", {"x": 1}),
                         _call(f"call_a{n}_1", "also_no_such_tool", {})]
            return {"content": None, "tool_calls": calls}
        if behaviour == "empty_agent" and n == pick("empty_at", 2):
            return {"content": ("", None, "  \n ")[pick("empty_kind", 3)]}
        if behaviour == "bad_json_agent" and n == pick("bad_at", 2):
            gold = [a for a in task.info.gold_actions if a.requestor == "assistant"]
            name = gold[0].name if gold else "transfer_to_human_agents"
            bad = INVALID_ARGUMENTS[pick("bad_kind", len(INVALID_ARGUMENTS))]
            return {"content": None, "tool_calls": [_call(f"call_a{n}_0", name, bad)]}

        moves = self._agent_moves(key, task, behaviour)
        move = moves[n] if n < len(moves) else ("text", "Is there anything else I can do for you? [end]")
        kind, payload = move
        if kind == "text":
            return {"content": f"{payload} {mark}"}
        compact = behaviour in ("oracle_batched", "unknown_tool")
        calls = [_call(f"call_a{n}_{j}", name, args, compact) for j, (name, args) in enumerate(payload)]
        if behaviour == "text_and_tools":
            content: str | None = f"One moment, I am taking care of that. {mark}"
        elif behaviour == "oracle_batched":
            content = ""
        else:
            content = None
        return {"content": content, "tool_calls": calls}

    def _agent_moves(self, key: ConversationKey, task: _Task, behaviour: str) -> list[tuple[str, Any]]:
        info = task.info
        gold = info.gold_actions
        batched = behaviour == "oracle_batched"
        moves: list[tuple[str, Any]] = []
        at = {"empty_agent": "empty_at", "bad_json_agent": "bad_at"}.get(behaviour)
        if at and variant(key.domain, key.task_id, key.seed, at, 2) == 1:
            # The failing answer is the second one: make the first a harmless tool call,
            # so that it comes right after a tool result (and never after the end).
            name, args = HARMLESS_CALL[key.domain]
            moves.append(("calls", [(name, args)]))
        if behaviour == "oos":
            moves.append(("text", "Before we start, could you tell me your membership number?"))
        if behaviour == "unknown_tool":
            moves.append(("calls", [("no_such_tool", {"query": "caf\u00e9 \u2713", "n": 1})]))
        if behaviour == "wrong":
            assistant_gold = [a for a in gold if a.requestor == "assistant"]
            if assistant_gold:
                action = assistant_gold[-1]
                args = dict(action.arguments)
                for k, v in args.items():
                    if isinstance(v, str):
                        args[k] = v + "_WRONG"
                        break
                else:
                    args["unexpected_argument"] = "WRONG"
                moves.append(("calls", [(action.name, args)]))
            else:
                moves.append(("calls", [("transfer_to_human_agents", {"summary": "wrong path"})]))
            moves.append(("text", "All done, your request has been handled. [end]"))
            return moves
        i = 0
        while i < len(gold):
            if gold[i].requestor == "assistant":
                run = [gold[i]]
                i += 1
                while batched and i < len(gold) and gold[i].requestor == "assistant":
                    run.append(gold[i])
                    i += 1
                moves.append(("calls", [(a.name, dict(a.arguments)) for a in run]))
            else:
                asked = []
                while i < len(gold) and gold[i].requestor == "user":
                    asked.append(i)
                    i += 1
                steps = "; ".join(f"{gold[j].name}({json.dumps(gold[j].arguments)})" for j in asked)
                moves.append(("text", f"Please do this on your phone: {steps} [do:{','.join(map(str, asked))}]"))
        if behaviour == "transfer":
            moves.append(("calls", [("transfer_to_human_agents", {"summary": "customer asked for a human"})]))
            moves.append(("text", "I have transferred you to a human agent. [end]"))
            return moves
        said = " ".join(s.replace(",", "") for s in info.communicate_info)
        final = f"Here is what you need to know: {said}" if said else "Your request has been handled."
        moves.append(("text", final + " [end]"))
        return moves

    # ---- user

    def _user(self, key: ConversationKey, task: _Task, behaviour: str, messages: list[dict]) -> dict:
        own = [
            m for m in messages
            if m.get("role") == "assistant"
            and (_USER_MARK.search(message_text(m.get("content"))) or any(i.startswith("call_u") for i in _ids(m)))
        ]
        n = len(own)
        mark = f"[u{n}]"
        pick = lambda name, k: variant(key.domain, key.task_id, key.seed, name, k)
        info = task.info

        if n == 0:
            request = "\n".join(p for p in (info.reason_for_call, info.known_info) if p) or info.user_scenario
            return {"content": f"Hello. {request} [ref {task.ref}] {mark}"}
        if behaviour == "errors_user":
            if n % 2:
                call = _call(f"call_u{n}_0", "no_such_user_tool", {})
            else:
                call = _call(f"call_u{n}_0", "toggle_airplane_mode", {"no_such_argument": "\u00e9t\u00e9"}, True)
            return {"content": None, "tool_calls": [call]}
        if behaviour == "bad_json_user" and n == 1:
            return {"content": None, "tool_calls": [_call(f"call_u{n}_0", "check_status_bar", '{"oops": ')]}
        if behaviour == "empty_user" and n == 1:
            return {"content": ("", None, "   ")[pick("empty_kind", 3)]}
        if behaviour == "oos" and n == 1:
            return {"content": f"I don't have that information. {OUT_OF_SCOPE} {mark}"}
        if behaviour == "user_calls_without_tools" and n == 1:
            return {"content": None, "tool_calls": [_call(f"call_u{n}_0", "check_status_bar", {})]}
        if behaviour in ("endless", "endless_errors", "endless_stop"):
            if behaviour == "endless_stop" and n == ENDLESS_STOP_TURN:
                return {"content": f"Never mind, that is all. {STOP} {mark}"}
            return {"content": f"Let me think... my issue is still there. {mark}"}

        # The reactive oracle user: do what the last agent text asked, then stop at [end].
        last_agent = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        agent_text = message_text(messages[last_agent].get("content")) if last_agent >= 0 else ""
        done_calls = [m for m in messages[last_agent + 1:] if m.get("role") == "assistant" and m.get("tool_calls")]
        asked_match = _DO.search(agent_text)
        if asked_match:
            asked = [int(x) for x in asked_match.group(1).split(",") if int(x) < len(info.gold_actions)]
            if behaviour == "oracle_batched":
                todo = asked if not done_calls else []
            else:
                todo = asked[len(done_calls):len(done_calls) + 1]
            if todo:
                calls = [
                    _call(f"call_u{n}_{j}", info.gold_actions[i].name, dict(info.gold_actions[i].arguments),
                          compact=behaviour == "user_text_and_tools")
                    for j, i in enumerate(todo)
                ]
                content = None
                if behaviour == "user_text_and_tools":
                    content = f"Doing it now. {STOP} {mark}"
                return {"content": content, "tool_calls": calls}
            return {"content": f"Done, I did all of that. {mark}"}
        if "[end]" in agent_text and messages and messages[-1].get("role") == "user":
            if behaviour == "transfer":
                return {"content": f"{TRANSFER} {mark}"}
            return {"content": f"Perfect, thank you! {STOP} Have a nice day. {mark}"}
        return {"content": f"Okay, thank you. What else do you need from me? {mark}"}
