"""What a run's LLM review (`passhat review`) adds to its results: the errors found,
counted by side and category per agent model, the failed trials the review blames on the
user simulator, and pass^k with those trials left out.

That last figure is a sensitivity line: it says how much of the agent's pass^k the
review attributes to the simulated user's mistakes. It is a judge's opinion, never the
official pass^k, and is always printed labelled as such, beside the official figure.

A run may hold reviews by several judges (and prompt versions); each is one review key.
Unless one is asked for, the most recent review's key is the one summarised."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from passhat import metrics
from passhat.outcomes import TRIAL_SCORED, is_success
from passhat.domains.tau2_review import NOT_CLASSIFIABLE
from passhat.infra import review_store

BLAMED_ON_USER = "failed trials the review blames on the user simulator"
SENSITIVITY = "pass^k leaving those trials out (sensitivity only, NOT the official figure)"
TAU2_USER = "tau2-user"  # tau2's own user, beside the personas (`--user-persona`)


def review_json(row) -> dict[str, Any]:  # noqa: ANN001 - a ReviewRow
    """One trial's review as JSON output and exports carry it."""
    return {"judge_model": row.judge_model, "review_key": row.review_key, "prompt_version": row.prompt_version,
            "status": row.status, "blame": row.blame, "errors": row.errors(), "reason": row.reason,
            "calls": row.calls, "tokens": {"input": row.input_tokens, "output": row.output_tokens},
            "cost": row.cost,
            # tau2 1.0.x's reviewer only (None otherwise): its authentication classification.
            "auth_classification": json.loads(row.auth_classification_json) if row.auth_classification_json else None}


def trial_reviews_json(store, trial_id: str) -> list[dict[str, Any]]:  # noqa: ANN001 - a Store
    return [review_json(r) for r in review_store.trial_reviews(store, trial_id)]


def run_reviews_json(store, run_id: str) -> dict[str, list[dict[str, Any]]]:  # noqa: ANN001 - a Store
    """trial id -> its reviews (every judge's), for a whole run."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in review_store.reviews(store, run_id):
        out[row.trial_id].append(review_json(row))
    return dict(out)


def tau2_reviews(store, run_id: str) -> dict[str, dict[str, str]]:  # noqa: ANN001 - a Store
    """trial id -> what the latest review by tau2 1.0.x's own reviewer made of it, by the
    SimulationRun field tau2 writes it in: "review" (tau2's Review as JSON) and
    "auth_classification" (tau2's AuthenticationClassification as JSON; left out when
    passhat found it not classifiable: tau2 has no such status). Trials with neither are
    left out."""
    out: dict[str, dict[str, str]] = {}
    for row in review_store.reviews(store, run_id):
        auth = row.auth_classification_json
        if auth is not None and json.loads(auth)["status"] == NOT_CLASSIFIABLE:
            auth = None
        fields = {name: text for name, text in (("review", row.tau2_review_json), ("auth_classification", auth))
                  if text is not None}
        if fields:
            out[row.trial_id] = fields
    return out


def latest_key(store, run_id: str) -> str | None:  # noqa: ANN001 - a Store
    rows = review_store.reviews(store, run_id)
    return rows[-1].review_key if rows else None


def summary(store, run_id: str, review_key: str | None = None) -> dict[str, Any] | None:  # noqa: ANN001
    """The review of the run under review_key (default: the latest) summed up; None when
    the run has no review."""
    key = review_key or latest_key(store, run_id)
    if key is None:
        return None
    rows = review_store.reviews(store, run_id, key)
    by_trial = {r.trial_id: r for r in rows}
    trials = store.trials(run_id)
    models: dict[str, Any] = {}
    for model in sorted({t.agent_model for t in trials}):
        mine = [t for t in trials if t.agent_model == model]
        reviewed = [by_trial[t.trial_id] for t in mine if t.trial_id in by_trial]
        categories = Counter(f"{e['side']}/{e['category']}" for r in reviewed for e in r.errors())
        user_blamed = {t.trial_id for t in mine if t.status == TRIAL_SCORED and t.success is False
                       and t.trial_id in by_trial and by_trial[t.trial_id].blame == "user"}
        models[model] = {
            "reviewed": sum(r.status == "reviewed" for r in reviewed),
            "not_reviewable": sum(r.status != "reviewed" for r in reviewed),
            "categories": dict(sorted(categories.items())),
            "blamed_on_user": len(user_blamed),
            "pass_hat_k": _pass_hat(mine, set()),
            "pass_hat_k_without_user_blamed": _pass_hat(mine, user_blamed),
        }
        if any(t.user_persona is not None for t in mine):
            models[model]["users"] = _by_user(mine, user_blamed)
    first = rows[0]
    return {"run_id": run_id, "review_key": key, "judge_model": first.judge_model,
            "prompt_version": first.prompt_version, "trials": len(rows),
            "cost_usd": review_store.review_cost(store, run_id, key), "models": models}


def _by_user(trials: list[Any], user_blamed: set[str]) -> dict[str, dict[str, Any]]:
    """Per user (TAU2_USER, then each persona): is the simulated user still playing its
    task? Its failed scored trials, the share of them the review blames on the user
    simulator, and its pass^k beside the same without those trials (sensitivity only)."""
    out = {}
    for persona in sorted({t.user_persona for t in trials}, key=lambda p: (p is not None, p or "")):
        mine = [t for t in trials if t.user_persona == persona]
        failed = [t for t in mine if t.status == TRIAL_SCORED and t.success is False]
        blamed = sum(t.trial_id in user_blamed for t in failed)
        out[persona or TAU2_USER] = {
            "failed": len(failed), "blamed_on_user": blamed,
            "blamed_share": round(blamed / len(failed), 4) if failed else None,
            "pass_hat_k": _pass_hat(mine, set()),
            "pass_hat_k_without_user_blamed": _pass_hat(mine, user_blamed),
        }
    return out


def _pass_hat(trials: list[Any], left_out: set[str]) -> dict[str, float]:
    """pass^k over the tasks (mean over tasks of each task's pass^j) from the scored
    trials, those in left_out removed; a task under each user persona is a task of its
    own (never pooled with another user's trials)."""
    by_task: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for t in trials:
        if t.status == TRIAL_SCORED and t.reward is not None and t.trial_id not in left_out:
            by_task[(t.domain, t.task_id, t.user_persona or "")].append(is_success(t.reward))
    return metrics.mean_over_tasks([metrics.pass_hat_curve(sum(v), len(v)) for v in by_task.values() if v])


def lines(data: dict[str, Any]) -> list[str]:
    """The review's summary as text lines (report, `passhat review`)."""
    out = [f"review of run {data['run_id']} by {data['judge_model']} ({data['prompt_version']}, key "
           f"{data['review_key']}): {data['trials']} trial(s), cost ${data['cost_usd']:.4f}"]
    for model, m in data["models"].items():
        cats = ", ".join(f"{k} {n}" for k, n in m["categories"].items()) or "no errors found"
        out.append(f"  {model}: reviewed {m['reviewed']}, not reviewable {m['not_reviewable']}; errors: {cats}")
        out.append(f"    {BLAMED_ON_USER}: {m['blamed_on_user']}")
        official = " ".join(f"pass^{j} {v:.3f}" for j, v in m["pass_hat_k"].items())
        without = " ".join(f"pass^{j} {v:.3f}" for j, v in m["pass_hat_k_without_user_blamed"].items())
        out.append(f"    pass^k (official): {official}")
        out.append(f"    {SENSITIVITY}: {without}")
        for user, u in m.get("users", {}).items():
            share = "-" if u["blamed_share"] is None else f"{u['blamed_share']:.0%}"
            out.append(f"    user {user}: {u['blamed_on_user']} of {u['failed']} failed trial(s) blamed on the "
                       f"user simulator ({share})")
            out.append(f"      pass^k (official): {_curve(u['pass_hat_k'])}")
            out.append(f"      {SENSITIVITY}: {_curve(u['pass_hat_k_without_user_blamed'])}")
    return out


def _curve(values: dict[str, float]) -> str:
    return " ".join(f"pass^{j} {v:.3f}" for j, v in values.items()) or "-"
