"""`passhat review` on tau2 1.0.x is tau2's own reviewer: the differential test.

The same trajectories (a scripted run's, as `passhat export --format tau2` writes them)
and the same judge (a deterministic loopback server answering from the request alone,
some answers in the irregular forms tau2's parser accepts) go through `passhat review`
and through tau2 1.0.1's own `review_simulation` (full mode). Then:
- the judge was sent the same review requests and the same authentication-classifier
  requests by both (as multisets);
- each trial's review in passhat's tau2 export (SimulationRun.review) equals the Review
  tau2's reviewer built, and its authentication classification
  (SimulationRun.auth_classification) the one tau2's classifier built, field for field
  (the cost aside: tau2 prices the loopback model itself);
- passhat's own shape (step, side, category, severity, quote) says what tau2's Review says.

Skips where the installed tau2 is not 1.0.x (passhat reviews with its own prompt there)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from passhat.domains.tau2_version import installed_rules
from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import passhat
from passhat.testing.scripted_http import ScriptedResponder, http_args

pytestmark = pytest.mark.skipif(installed_rules().reviewer != "tau2",
                                reason="needs tau2 1.0.x (its own reviewer)")

AUTH_PROMPT = "Classify the user authentication outcome"


class IrregularReviewer(ScriptedResponder):
    """The scripted reviewer over HTTP, its answer to each conversation written one of
    six ways tau2's parser reads (drawn from the request, so both sides get the same
    answer): plain JSON, fenced JSON, prose around it, tags as one string, sources in
    capitals, a severity not in tau2's list. tau2's authentication classification (its
    full mode's second call) is the scripted judge's, written one of AUTH_FORMS' ways:
    plain, fenced, inside prose, with keys tau2 does not read, without its reasoning,
    spread over lines."""

    FORMS = ("plain", "fenced", "prose", "string_tags", "capitals", "odd_severity")
    AUTH_FORMS = ("plain", "fenced", "prose", "extra_keys", "no_reasoning", "spread")

    def answer(self, body: dict) -> dict:
        if _is_auth(body):
            return self.auth_answer(body)
        reply = super().answer(body)
        data = json.loads(reply["content"])
        form = self.form(body)
        if form == "string_tags":
            for e in data["errors"]:
                e["error_tags"] = e["error_tags"][0]
        if form == "odd_severity":  # not in tau2's list: tau2 reads it as none
            for e in data["errors"]:
                e["severity"] = "severe"
        if form == "capitals":
            for e in data["errors"]:
                e["source"] = e["source"].upper()
        text = json.dumps(data)
        if form == "fenced":
            text = f"```json\n{text}\n```"
        if form == "prose":
            text = f"Here is my review.\n{text}\nThat is all."
        return {**reply, "content": text}

    def auth_answer(self, body: dict) -> dict:
        reply = super().answer(body)
        data = json.loads(reply["content"])
        form = self.form(body, self.AUTH_FORMS)
        if form == "extra_keys":
            data = {"confidence": "high", **data, "evidence": "turn 3"}
        if form == "no_reasoning":  # tau2 reads the reasoning as ""
            del data["reasoning"]
        text = json.dumps(data, indent=4 if form == "spread" else None)
        if form == "fenced":
            text = f"```json\n{text}\n```"
        if form == "prose":
            text = f"Looking at the conversation: {text} (done)"
        return {**reply, "content": text}

    @classmethod
    def form(cls, body: dict, forms: tuple[str, ...] = FORMS) -> str:
        conversation = str((body.get("messages") or [{}, {}])[1].get("content"))
        return forms[int(hashlib.sha256(conversation.encode()).hexdigest(), 16) % len(forms)]


def _is_auth(body: dict) -> bool:
    messages = body.get("messages") or []
    return AUTH_PROMPT in str(messages[0].get("content") if messages else "")


def _requests(srv: FaultServer, auth: bool = False) -> Counter:
    """The judge's requests (the reviews', or the authentication classifier's), as a multiset."""
    return Counter(json.dumps(b["messages"], sort_keys=True) for b in srv.requests if _is_auth(b) == auth)


def test_passhat_review_on_tau2_1_0_is_tau2s_reviewer(env, tmp_path, monkeypatch):
    from tau2.data_model.simulation import Results, UserInfo
    from tau2.evaluator.reviewer import ReviewMode, review_simulation
    from tau2.registry import registry
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    ran = passhat("run", "--domain", "airline", *[a for t in range(10) for a in ("--task", str(t))],
                  "--trials", "2", "--agent-model", "scripted/faulty-0.6", "--user-model", "scripted/faulty-user-0.5",
                  "--run-id", "both", "--yes", env=env)
    assert ran.returncode in (0, 1), ran.stderr
    with FaultServer(responder=IrregularReviewer(["airline"])) as srv:
        reviewed = passhat("review", "both", "--all", "--judge-model", "openai/reviewer",
                           "--judge-args", json.dumps(http_args(srv.url)), "-o", "json", env=env)
        assert reviewed.returncode == 0, reviewed.stderr
        passhat_requests, passhat_auth_requests = _requests(srv), _requests(srv, auth=True)
    outcome = json.loads(reviewed.stdout)["review"]
    assert outcome["not_reviewable"] == 0 and outcome["reviewed"] > 10, outcome
    exported = passhat("export", "both", "--format", "tau2", "--output-dir", str(tmp_path / "out"), env=env)
    assert exported.returncode == 0, exported.stderr
    [path] = (tmp_path / "out").glob("*.json")
    results = Results.load(path)
    tasks = {t.id: t for t in results.tasks}
    policy = registry.get_env_constructor("airline")().get_policy()
    user_info = UserInfo(implementation="user_simulator", global_simulation_guidelines=get_global_user_sim_guidelines())

    # tau2's reviewer, as `tau2 review` runs it, on the exported trajectories, same judge.
    with FaultServer(responder=IrregularReviewer(["airline"])) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "loopback-test-key")
        theirs, their_auth = {}, {}
        for sim in results.simulations:
            bare = sim.model_copy(update={"review": None, "auth_classification": None})
            theirs[sim.id], their_auth[sim.id] = review_simulation(
                bare, tasks[sim.task_id], ReviewMode.FULL, user_info, policy=policy, review_model="openai/reviewer")
        tau2_requests, tau2_auth_requests = _requests(srv), _requests(srv, auth=True)

    assert passhat_requests == tau2_requests
    assert passhat_auth_requests == tau2_auth_requests and sum(tau2_auth_requests.values()) == len(results.simulations)
    assert len(results.simulations) == outcome["reviewed"]
    forms, auth_forms, sides, statuses = Counter(), Counter(), Counter(), Counter()
    shown = {}
    for sim in results.simulations:
        assert sim.review is not None, sim.id
        assert sim.review.model_dump(exclude={"cost"}) == theirs[sim.id].model_dump(exclude={"cost"}), sim.id
        assert sim.auth_classification is not None, sim.id
        assert sim.auth_classification.model_dump(exclude={"cost"}) \
            == their_auth[sim.id].model_dump(exclude={"cost"}), sim.id
        statuses[sim.auth_classification.status] += 1
        sides.update(e.source for e in sim.review.errors)
        shown[sim.id] = json.loads(passhat("show", sim.id, "-o", "json", env=env).stdout)["reviews"]
    for request in passhat_requests:
        forms[IrregularReviewer.form({"messages": json.loads(request)})] += 1
    for request in passhat_auth_requests:
        auth_forms[IrregularReviewer.form({"messages": json.loads(request)}, IrregularReviewer.AUTH_FORMS)] += 1
    # Not vacuous: errors on both sides, and every irregular form was read.
    assert sides["agent"] > 0 and sides["user"] > 0, sides
    assert set(forms) == set(IrregularReviewer.FORMS), forms
    assert set(auth_forms) == set(IrregularReviewer.AUTH_FORMS), auth_forms
    assert len(statuses) >= 2, statuses
    # passhat's shape says what tau2's Review says.
    for sim in results.simulations:
        [mine] = shown[sim.id]
        assert mine["prompt_version"].startswith("tau2-1.0")
        assert mine["auth_classification"] == sim.auth_classification.model_dump()
        # The failure is owed to the sides with an error critical to the outcome.
        owing = {e.source for e in sim.review.errors if (e.source, e.severity) in
                 {("agent", "critical"), ("user", "critical_hindered")}}
        assert mine["blame"] == ("both" if len(owing) == 2 else owing.pop() if owing else "none")
        assert [(e["turn"], e["side"], e["tags"], e["severity"], e["explanation"]) for e in mine["errors"]] \
            == [(e.turn_idx, e.source, e.error_tags, e.severity or "unrated", e.reasoning) for e in sim.review.errors]
        for e in mine["errors"]:
            turn = sim.messages[e["turn"]]
            said = turn.content or "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in turn.tool_calls or [])
            assert e["quote"] and e["quote"] in said, (e, said)


@pytest.mark.parametrize(("reply", "status", "reason"), [
    ('{"status": "failed", "reasoning": "no such email"}', "failed", None),
    ('Sure.\n```json\n{"status": "not_needed"}\n```', "not_needed", None),  # tau2 reads reasoning ""
    ("The user was authenticated.", "not_classifiable", "no JSON object"),
    ("{status: succeeded}", "not_classifiable", "not JSON"),
    ('{"reasoning": "looked up"}', "not_classifiable", "no status"),
    ('{"status": "partial", "reasoning": "half"}', "not_classifiable", '"partial" is not one of'),
    (None, "not_classifiable", "no JSON object"),  # the judge's own failure: no answer
])
def test_a_classification_tau2_would_default_is_not_classifiable(reply, status, reason):
    """tau2's parser answers "not_needed" for a reply it cannot read; passhat keeps that as
    not classifiable with the reason, and keeps every reply tau2 reads as tau2 reads it."""
    from tau2.evaluator.auth_classifier import _parse_classification_response

    from passhat.messages import Message
    from passhat.domains import tau2_review

    trajectory = tau2_review.Trajectory([(0, [Message(role="assistant", content="Hi! How can I help?")]),
                                         (1, [Message(role="user", content="Cancel my trip.")])])
    got = tau2_review.read_auth(reply, 0.25, trajectory)
    assert got["status"] == status
    if reason is None:
        assert got == {"status": status, "reasoning": _parse_classification_response(reply)[1], "cost": 0.25}
    else:
        assert _parse_classification_response(reply or "")[0] == "not_needed"  # tau2's fallback
        assert reason in got["reason"], got
