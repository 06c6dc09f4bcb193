"""tau2 1.0.x's NL-assertion grading, split so that passhat can make the judge's model
call as a checkpointed step of its own.

tau2 grades a task whose reward basis holds NL_ASSERTION by one LLM call
(NLAssertionsEvaluator.evaluate_nl_assertions): a fixed prompt, the conversation as
"role: content" lines, the assertions; the reply is JSON with one verdict per assertion.
Here that is three parts:

- `judge_messages`: the exact request messages tau2 would send. They are taken from
  tau2's own evaluator (its generate() is stood in for while the prompt is built, under a
  lock), so the prompt is the installed version's, byte for byte;
- the call itself, made by the conversation activities like any model call;
- `parse_verdicts`: the reply read as the installed tau2 reads it (the version's rules
  name its verdict model: the same coercions and the same errors).
"""

from __future__ import annotations

import importlib
import json
import threading
from functools import cache
from typing import Any

from passhat.contracts import JUDGE_SUFFIX
from passhat.domains.tau2_version import Tau2Rules, installed_rules

_capture_lock = threading.Lock()

# The failure class of a judge's reply tau2 could not read.
JUDGE_ERROR = "JudgeError"


def judge_key(trial_id: str) -> str:
    """Where a trial's judge step is recorded in the results store: beside the
    conversation (whose steps exports read), counted in the trial's tokens and cost."""
    return f"{trial_id}{JUDGE_SUFFIX}"


class _Captured(Exception):  # noqa: N818 - carries the request out of tau2's evaluator
    def __init__(self, messages: list[dict[str, Any]]):
        self.messages = messages


def default_judge() -> tuple[str, dict[str, Any]]:
    """The installed tau2's judge model and its args (tau2.config)."""
    from tau2 import config

    return config.DEFAULT_LLM_NL_ASSERTIONS, dict(config.DEFAULT_LLM_NL_ASSERTIONS_ARGS)


def judge_messages(trajectory: list[Any], assertions: list[str]) -> list[dict[str, Any]]:
    """The chat messages (OpenAI format) tau2's NL-assertion judge is sent for
    `trajectory` (tau2 messages) and `assertions`."""
    from tau2.evaluator import evaluator_nl_assertions as module
    from tau2.utils.llm_utils import to_litellm_messages

    def capture(*, messages: list[Any], **_: Any) -> Any:
        raise _Captured(to_litellm_messages(messages))

    with _capture_lock:
        real = module.generate
        module.generate = capture
        try:
            module.NLAssertionsEvaluator.evaluate_nl_assertions(trajectory, assertions)
        except _Captured as captured:
            return captured.messages
        finally:
            module.generate = real
    raise RuntimeError("tau2's NL-assertion evaluator made no model call")


def parse_verdicts(content: str | None, rules: Tau2Rules | None = None) -> list[dict[str, Any]]:
    """The judge's reply read as the tau2 version of `rules` (default: the installed one)
    reads it: `json.loads` of the text, its `results` (none when absent), each result's
    expectedOutcome, metExpectation and reasoning through the version's verdict model
    (1.0.x: NLAssertionCheck, so "false" is False and null is refused). One check per
    result (nl_assertion, met, justification). Raises ValueError on a reply the version
    could not read: its evaluator raises there too."""
    rules = rules or installed_rules()
    if rules.judge_verdict_model is None:
        raise ValueError(f"tau2 {rules.family} grades no NL assertions")
    verdict = _verdict_model(rules.judge_verdict_model)
    try:
        data = json.loads(content)  # type: ignore[arg-type] - None raises, as in tau2
        return [
            verdict(nl_assertion=r["expectedOutcome"], met=r["metExpectation"],
                    justification=r["reasoning"]).model_dump()
            for r in data.get("results", [])
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # pydantic's errors are ValueErrors
        raise ValueError(f"the judge's reply is not what tau2 {rules.family} reads: "
                         f"{type(err).__name__}: {_first_line(err)}") from None


@cache
def _verdict_model(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return " ".join(text[:3])[:300] if text else ""
