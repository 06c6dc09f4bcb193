"""The NL-assertion judge's reply read as the installed tau2 reads it.

Each reply of a corpus (string booleans, numbers, nulls, missing keys, replies that are
not JSON or not an object) goes through tau2 1.0.x's own evaluator
(NLAssertionsEvaluator.evaluate_nl_assertions, whose model call is answered with the
reply) and through passhat's parse_verdicts: both read the same verdicts, or both refuse
the reply. The whole-run behaviour (tau2 re-runs the simulation after a refused reply)
is compared in tests/parity's irregular-judge group.

Needs tau2 1.0.x (26.3 grades no NL assertions): skipped on 26.3, where the reading is
refused in one line.
"""

from __future__ import annotations

import json

import pytest

from passhat.domains.nl_judge import parse_verdicts
from passhat.domains.tau2_version import RULES, installed_rules

needs_judge = pytest.mark.skipif(not installed_rules().grades_nl_assertions,
                                 reason="needs tau2 1.0.x (the installed tau2 grades no NL assertions)")


def _result(met, **extra) -> dict:  # noqa: ANN001
    return {"expectedOutcome": "The agent refunds the order", "reasoning": "because", "metExpectation": met,
            **extra}


def _reply(*results: dict) -> str:
    return json.dumps({"results": list(results)})


CORPUS = {
    "true": _reply(_result(True)),
    "false": _reply(_result(False)),
    "string false": _reply(_result("false")),
    "string true": _reply(_result("true")),
    "string False": _reply(_result("False")),
    "string no": _reply(_result("no")),
    "string yes": _reply(_result("yes")),
    "string 0": _reply(_result("0")),
    "string maybe": _reply(_result("maybe")),
    "empty string": _reply(_result("")),
    "int 1": _reply(_result(1)),
    "int 0": _reply(_result(0)),
    "int 2": _reply(_result(2)),
    "float 0.0": _reply(_result(0.0)),
    "float 0.5": _reply(_result(0.5)),
    "null": _reply(_result(None)),
    "list": _reply(_result([True])),
    "missing metExpectation": json.dumps({"results": [{"expectedOutcome": "x", "reasoning": "y"}]}),
    "missing reasoning": json.dumps({"results": [{"expectedOutcome": "x", "metExpectation": True}]}),
    "missing expectedOutcome": json.dumps({"results": [{"reasoning": "y", "metExpectation": True}]}),
    "reasoning null": _reply({**_result(True), "reasoning": None}),
    "outcome a number": _reply({**_result(True), "expectedOutcome": 3}),
    "extra key": _reply(_result(True, confidence=0.9)),
    "no results": json.dumps({"verdict": "fine"}),
    "results empty": json.dumps({"results": []}),
    "results null": json.dumps({"results": None}),
    "results an object": json.dumps({"results": {"a": 1}}),
    "results strings": json.dumps({"results": ["yes"]}),
    "a list": json.dumps([_result(True)]),
    "a string": json.dumps("all met"),
    "not JSON": "All expectations are met.",
    "fenced JSON": "```json\n" + _reply(_result(True)) + "\n```",
    "truncated JSON": _reply(_result(True))[:-5],
    "empty": "",
    "no content": None,
    "two results, one string false": _reply(_result(True), _result("false")),
}


def _tau2_reads(content: str | None) -> list[dict] | str:
    """What tau2's own evaluator makes of `content` as its judge's reply: the checks, or
    the name of the exception it raises."""
    from tau2.data_model.message import AssistantMessage
    from tau2.evaluator import evaluator_nl_assertions as module

    real = module.generate
    module.generate = lambda **_: AssistantMessage(role="assistant", content=content)
    try:
        checks = module.NLAssertionsEvaluator.evaluate_nl_assertions([], ["The agent refunds the order"])
        return [c.model_dump() for c in checks]
    except Exception as err:  # noqa: BLE001 - which one tau2 raises is what is compared
        return type(err).__name__
    finally:
        module.generate = real


@needs_judge
@pytest.mark.parametrize("name", list(CORPUS))
def test_a_judge_reply_is_read_as_tau2_reads_it(name):
    content = CORPUS[name]
    theirs = _tau2_reads(content)
    try:
        ours = parse_verdicts(content)
    except ValueError:
        ours = "refused"
    if isinstance(theirs, str):  # tau2 raised: its run re-runs the simulation
        assert ours == "refused", f"tau2 raises {theirs}; passhat reads {ours}"
    else:
        assert ours == theirs


@needs_judge
def test_the_corpus_has_both_readings_and_refusals():
    outcomes = {name: _tau2_reads(content) for name, content in CORPUS.items()}
    assert outcomes["string false"] == [{"nl_assertion": "The agent refunds the order", "met": False,
                                         "justification": "because"}]
    assert isinstance(outcomes["null"], str) and isinstance(outcomes["not JSON"], str)
    assert isinstance(outcomes["missing metExpectation"], str)


def test_a_version_without_nl_assertions_reads_no_verdicts():
    with pytest.raises(ValueError, match="grades no NL assertions"):
        parse_verdicts(CORPUS["true"], RULES["26.3"])
