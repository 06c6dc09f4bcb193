"""Differential test: tau2's own runner and passhat, against the same deterministic model.

Both runners talk to `passhat.testing.parity_model.ParityModel` over loopback HTTP (one
FaultServer per runner and group), with model `openai/parity` for agent and user. The
model's answer is a pure function of the request body, and its behaviour per
conversation (oracle, wrong action, invalid JSON, unknown tool, empty answer, text next
to tool calls, endless chat, repeated tool errors, each stop token, telecom user tools,
mock's initial conversations) is a hash of (domain, task, seed); `select_tasks` picks
tasks of all four domains so that every behaviour occurs.

tau2 runs in-process through `tau2.run.run_tasks` exactly as `tau2 run` would call it
(seed 300, temperature 0.0 for both sides, explicit max_steps/max_errors), with
`skip_failed_samples=True` so that a simulation tau2 aborts (invalid JSON arguments, an
empty answer after its resends) is recorded as an `agent_error` placeholder with reward
0. passhat runs on the session's Temporal dev server with a real worker on a task queue
of the test's own.

Per conversation (group, domain, task, trial) the test asserts:
  * the request sequences are identical (every request body, in order);
  * termination reason and reward are identical.
On failure the assertion message is a compact report (also written to $PARITY_REPORT,
default /tmp/parity/report.txt): a table of outcome mismatches, the kinds of request
differences with their counts, and for each conversation its first differing request
as a unified diff of the JSON.

A third group runs both with an agent of the user's own instead of tau2's LLM agent:
`notes_agent` (tests/plugin_modules/passhat_test_agents.py), an LLMAgent subclass with a
state of its own that it writes into every request, registered with tau2's registry when
its module is imported; tau2's side imports it as a tau2 user would and runs
`run_tasks(agent="notes_agent")`, passhat's run loads it as a plugin (`plugins`) and runs
`--agent notes_agent`; its tasks are those of the
main selection on which the agent's side does something of its own
(`test_custom_agent_conversations_match` checks that they occurred).

`test_tau2_reference_exercises_every_rule` checks the harness itself: tau2 must show
every intended behaviour (if it fails, the model or the selection is wrong, not passhat).
Run: `bash /tmp/parity/run_parity.sh` or
`LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python -m pytest tests/parity -q`.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import hashlib
import importlib
import json
import os
import random
import re
import sys
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from passhat.domains.tau2_version import installed_rules
from passhat.testing import parity_model as pm
from passhat.testing.fault_server import FaultServer
from passhat.testing.scripted_http import http_args as passhat_http_args
from tests.helpers import PLUGIN_MODULES, TEST_AGENTS

DOMAINS = ("airline", "retail", "telecom", "mock")
MODEL = "openai/parity"
BASE_SEED = 300  # tau2 run's default --seed
TRIALS = 2
MAX_ERRORS = 4
MIN_CONVERSATIONS = 48  # main group; the odd group adds a few more
PASSHAT_TIMEOUT_S = 900  # per group; a run that takes longer is reported, not awaited
REPORT_PATH = Path(os.environ.get("PARITY_REPORT", "/tmp/parity/report.txt"))


@dataclass(frozen=True)
class Group:
    """One pair of runs (tau2 and passhat) with one max_steps. Two groups because user
    turns always land on odd steps and agent turns on even ones (without an initial
    conversation): max_steps 30 lets an agent tool call land on the limit (tau2 still
    executes it), max_steps 29 lets a user ###STOP### land on it (max_steps wins)."""

    name: str
    max_steps: int
    max_errors: int = MAX_ERRORS
    agent: str = "llm_agent"  # a name in tau2's agent registry
    # Modules of tests/plugin_modules that register the group's agent or domain: tau2's
    # side imports them, passhat's run is given them as its plugins.
    plugins: tuple[str, ...] = ()
    # tau2 1.0.x's --timeout (seconds). The model then takes at least this long over
    # every answer, so the limit has passed at the first step it is checked on, however
    # fast the machine: the comparison shows where each runner checks it.
    timeout: float | None = None
    # How the NL-assertion judge (tau2 1.0.x) answers: "regular" (pm.judge_answer), or
    # "irregular" (pm.irregular_judge_answer: string booleans, nulls, prose, missing keys).
    judge: str = "regular"


MAIN = Group("main", max_steps=30)
ODD = Group("odd", max_steps=29)
# An agent of the user's own, written to tau2's agent contract (an LLMAgent subclass with
# a state of its own, which it writes into every request), in a plugin module.
CUSTOM = Group("agent", max_steps=30, agent="notes_agent", plugins=(TEST_AGENTS,))
GROUPS = (MAIN, ODD, CUSTOM)


def tau2_seeds(seed: int = BASE_SEED, trials: int = TRIALS) -> list[int]:
    """tau2's per-trial seeds (run.py): random.seed(seed); randint(0, 1e6) per trial."""
    rng = random.Random(seed)  # same Mersenne Twister stream as the global random.seed
    return [rng.randint(0, 1000000) for _ in range(trials)]


# --------------------------------------------------------------------------- selection

# Behaviours that must occur in a given domain (besides all behaviours overall).
REQUIRED_PER_DOMAIN = {
    "airline": {"oracle", "wrong"},
    "retail": {"oracle", "wrong"},
    "telecom": {"oracle", "bad_json_user", "errors_user", "user_text_and_tools"},
    "mock": {"oracle"},
}
# mock tasks that start with an initial conversation (they share one user prompt, so at
# most one of them can be in a selection).
MOCK_HISTORY_TASK = "update_task_with_message_history"


def _candidates() -> dict[str, list[tuple[str, str, bool]]]:
    """Per domain, (task_id, user prompt, has user gold actions), in the domain's order."""
    from passhat.domains.registry import get_domain

    out = {}
    for d in DOMAINS:
        dom = get_domain(d)
        out[d] = [
            (t, dom.user_system_prompt(t), any(a.requestor == "user" for a in dom.task(t).gold_actions))
            for t in dom.task_ids()
        ]
    return out


def _judged_tasks(domain: str) -> set[str]:
    """Tasks whose grading calls tau2 1.0.x's judge (NL assertions in the reward basis,
    and assertions to judge)."""
    from passhat.domains.tau2_data import default_tasks

    return {
        t.id for t in default_tasks(domain)
        if t.evaluation_criteria and "NL_ASSERTION" in {str(getattr(b, "value", b)) for b in t.evaluation_criteria.reward_basis}
        and t.evaluation_criteria.nl_assertions
    }


def select_tasks(seeds: list[int]) -> dict[str, list[str]]:
    """Tasks for the main group: every behaviour (and variant, see pm.facets) at least once, each domain's required
    ones in that domain, mock's initial-conversation task, at least MIN_CONVERSATIONS
    conversations. Deterministic (greedy in task order). At most one task per user
    prompt: tasks with the same prompt are indistinguishable to any model."""
    cands = _candidates()
    chosen: dict[str, list[str]] = {d: [] for d in DOMAINS}
    prompts: set[str] = set()
    covered: dict[str, set[str]] = {d: set() for d in DOMAINS}

    def behaviours(d: str, t: str, has_user_actions: bool) -> set[str]:
        got = set().union(*(pm.facets(d, t, s) for s in seeds))
        if not has_user_actions:  # nothing for the user to do: it would be an oracle run
            got.discard("user_text_and_tools")
        return got

    def add(d: str, t: str, prompt: str, b: set[str]) -> None:
        chosen[d].append(t)
        prompts.add(prompt)
        covered[d] |= b

    def free(d: str):
        for t, prompt, ua in cands[d]:
            if prompt not in prompts and t not in chosen[d]:
                yield t, prompt, behaviours(d, t, ua)

    for t, prompt, ua in cands["mock"]:
        if t == MOCK_HISTORY_TASK:
            add("mock", t, prompt, behaviours("mock", t, ua))

    def greedy(d: str, wanted) -> bool:
        best = max(free(d), key=lambda c: len(c[2] & wanted()), default=None)
        if best is None or not best[2] & wanted():
            return False
        add(d, *best)
        return True

    for d in DOMAINS:
        while greedy(d, lambda d=d: REQUIRED_PER_DOMAIN[d] - covered[d]):
            pass
    everything = pm.all_facets()
    while True:
        missing = everything - set().union(*covered.values())
        if not missing:
            break
        # the domain with the fewest tasks first, to spread the behaviours
        for d in sorted(DOMAINS, key=lambda d: len(chosen[d])):
            if greedy(d, lambda: everything - set().union(*covered.values())):
                break
        else:
            break  # nothing can cover the rest; the reference test reports it
    # tau2 1.0.x: tasks graded by the NL-assertion judge (with assertions to judge),
    # two per domain that has them, preferring conversations that end in a stop.
    if installed_rules().grades_nl_assertions:
        for d in DOMAINS:
            judged = _judged_tasks(d)
            for _ in range(2 - len(set(chosen[d]) & judged)):
                best = max((c for c in free(d) if c[0] in judged),
                           key=lambda c: "oracle" in c[2], default=None)
                if best is not None:
                    add(d, *best)
    # Fill up, round robin over the domains, preferring oracle conversations
    # (successes) and new behaviours for the domain.
    while sum(map(len, chosen.values())) * len(seeds) < MIN_CONVERSATIONS:
        added = False
        for d in DOMAINS:
            best = max(
                free(d),
                key=lambda c: (("oracle" in c[2]) + len(c[2] - covered[d])),
                default=None,
            )
            if best is not None:
                add(d, *best)
                added = True
        if not added:
            break
    return {d: ts for d, ts in chosen.items() if ts}


def select_odd(main: dict[str, list[str]], seeds: list[int]) -> dict[str, list[str]]:
    """Tasks for the odd group: ones with `endless_stop`, `endless_errors` and `endless`
    trials."""
    out: dict[str, list[str]] = defaultdict(list)
    for wanted in ("endless_stop", "endless_errors", "endless"):
        if any(pm.behaviour_for(d, t, s) == wanted for d, ts in out.items() for t in ts for s in seeds):
            continue
        for d, ts in main.items():
            hit = next((t for t in ts if any(pm.behaviour_for(d, t, s) == wanted for s in seeds)), None)
            if hit is not None:
                out[d].append(hit)
                break
    return dict(out)


# The behaviours in which the agent's side does something of its own.
AGENT_BEHAVIOURS = frozenset({
    "oracle", "oracle_batched", "text_and_tools", "wrong", "transfer", "oos", "bad_json_agent",
    "unknown_tool", "errors_agent", "empty_agent", "endless",
})


def select_custom(main: dict[str, list[str]], seeds: list[int]) -> dict[str, list[str]]:
    """Tasks for the custom agent's group, from the main selection: mock's initial
    conversation (the agent's first state starts from it), then tasks until every agent
    behaviour occurs and every domain has one."""
    out: dict[str, list[str]] = defaultdict(list)
    covered: set[str] = set()
    for d, ts in main.items():
        for t in ts:
            got = {pm.behaviour_for(d, t, s) for s in seeds} & AGENT_BEHAVIOURS
            if not out[d] or t == MOCK_HISTORY_TASK or got - covered:
                out[d].append(t)
                covered |= got
    return dict(out)


def import_for_tau2(group: Group) -> None:
    """Import the group's plugin modules as a tau2 user imports the module that registers
    their agent or domain (from tests/plugin_modules, on the import path as PYTHONPATH
    would put it). passhat's run loads them itself, as its plugins."""
    if str(PLUGIN_MODULES) not in sys.path:
        sys.path.insert(0, str(PLUGIN_MODULES))
    for module in group.plugins:
        importlib.import_module(module)


# --------------------------------------------------------------------------- runners


@dataclass
class Outcome:
    termination_reason: str | None
    reward: float | None
    note: str = ""  # passhat: status / error when not scored
    last_role: str | None = None  # tau2: role of the trajectory's last message


@dataclass
class RunnerResult:
    # (group, domain, task_id, trial) -> outcome
    outcomes: dict[tuple, Outcome] = field(default_factory=dict)
    # (group, domain, task_id, trial) -> request bodies in order
    requests: dict[tuple, list[dict]] = field(default_factory=lambda: defaultdict(list))
    unplaced: list[dict] = field(default_factory=list)  # requests the model could not place
    responder_errors: list[str] = field(default_factory=list)
    seed_alias: dict[int, int] = field(default_factory=dict)  # passhat seed -> tau2 seed played
    failures: list[str] = field(default_factory=list)  # the runner itself failed
    judge_requests: list[dict] = field(default_factory=list)  # tau2 1.0.x's NL judge


class AnswerLog:
    """Wraps the model to record which answers each distinct request body got, so the
    test can check the model really is a pure function of the body (over both runners)."""

    def __init__(self) -> None:
        self.answers: dict[str, set[str]] = defaultdict(set)

    def wrap(self, model: pm.ParityModel):
        def responder(body: dict) -> dict:
            answer = model(body)
            key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            self.answers[key].add(json.dumps(answer))
            return answer

        return responder


ANSWERS = AnswerLog()


def http_args(srv: FaultServer, **extra: Any) -> dict[str, Any]:
    """tau2's llm args for the loopback server (passhat names the key's variable instead:
    a run's settings never hold a key)."""
    return {"api_base": srv.url + "/v1", "api_key": "x", **extra}


def collect_requests(
    result: RunnerResult, group: Group, model: pm.ParityModel, srv: FaultServer,
    seed_to_trial: dict[tuple[str, str, Any], int],
) -> None:
    """Group a server's requests per conversation, keeping arrival order (requests of one
    conversation are sequential in both runners)."""
    for body in srv.requests:
        if isinstance(body, dict) and pm.judge_answer(body) is not None:
            result.judge_requests.append(body)  # no seed: not one conversation's
            continue
        key = model.key(body) if isinstance(body, dict) else None
        trial = None if key is None else seed_to_trial.get((key.domain, key.task_id, key.seed))
        if key is None or trial is None:
            result.unplaced.append(body)
            continue
        result.requests[(group.name, key.domain, key.task_id, trial)].append(body)
    result.responder_errors += [f"{type(e).__name__}: {e}" for e in srv.errors]


def run_tau2(group: Group, tasks: dict[str, list[str]], model: pm.ParityModel, result: RunnerResult) -> None:
    """tau2's run_tasks in-process, one call per domain, as `tau2 run` would run it."""
    from tau2.run import get_tasks, run_tasks

    import_for_tau2(group)
    seeds = tau2_seeds()
    state = random.getstate()  # run_tasks reseeds the global random module
    rules = installed_rules()
    with FaultServer(responder=responder_for(group, model)) as srv, _tau2_judge(srv):
        args = http_args(srv, temperature=0.0)  # `tau2 run`'s default llm args
        # How a failed simulation is handled is the version's: 26.3 records it as an
        # agent_error placeholder (--skip-failed-samples); 1.0.x re-runs it
        # (--max-retries) and then records infrastructure_error.
        failures = (
            {"max_retries": rules.simulation_retries, "retry_delay": 0.0}
            if rules.on_model_failure == "rerun" else {"skip_failed_samples": True}
        )
        for domain, ids in tasks.items():
            run = run_tasks if group.timeout is None else _timed_run_tasks(group.timeout)
            res = run(
                domain=domain,
                tasks=get_tasks(domain, task_split_name="base", task_ids=ids),
                agent=group.agent,
                user="user_simulator",
                llm_agent=MODEL,
                llm_args_agent=dict(args),
                llm_user=MODEL,
                llm_args_user=dict(args),
                num_trials=TRIALS,
                max_steps=group.max_steps,
                max_errors=group.max_errors,
                save_to=None,
                console_display=False,
                max_concurrency=2,
                seed=BASE_SEED,
                **failures,
                log_level="ERROR",
            )
            for sim in res.simulations:
                result.outcomes[(group.name, domain, sim.task_id, sim.trial)] = Outcome(
                    sim.termination_reason.value,
                    sim.reward_info.reward if sim.reward_info else None,
                    "skipped (tau2 raised)" if getattr(sim, "skipped", False) else "",
                    sim.messages[-1].role if sim.messages else None,
                )
        random.setstate(state)
        seed_to_trial = {
            (d, t, s): i for d, ids in tasks.items() for t in ids for i, s in enumerate(seeds)
        }
        collect_requests(result, group, model, srv, seed_to_trial)


def responder_for(group: Group, model: pm.ParityModel):  # noqa: ANN201
    """The model's answers for a group's server: at once, or (a timed group) each after
    the group's timeout has passed."""
    if group.judge == "irregular":
        model = _with_irregular_judge(model)
    answer = ANSWERS.wrap(model)
    if group.timeout is None:
        return answer

    async def slow(body: dict) -> dict:
        await asyncio.sleep(group.timeout)
        return answer(body)

    return slow


def _with_irregular_judge(model: pm.ParityModel):  # noqa: ANN202
    """The model, with its judge answering as pm.irregular_judge_answer does."""
    def answer(body: dict) -> dict:
        irregular = pm.irregular_judge_answer(body)
        return irregular if irregular is not None else model(body)

    return answer


def _timed_run_tasks(timeout: float):  # noqa: ANN202
    """tau2 1.0.x's run_tasks with a --timeout: its flat-argument run_tasks has none, so
    the run's config is built as `tau2 run --timeout` builds it."""
    from tau2.data_model.simulation import TextRunConfig
    from tau2.runner.batch import run_tasks as run_config

    def run(*, domain: str, tasks: list, save_to: None, console_display: bool, **settings: Any):  # noqa: ANN202
        config = TextRunConfig(domain=domain, timeout=timeout, **settings)
        return run_config(config, tasks, save_path=save_to, console_display=console_display)

    return run


@contextlib.contextmanager
def _tau2_judge(srv: FaultServer):
    """tau2 1.0.x grades NL assertions with the judge named in its config; for the test
    it is the parity model on the loopback server (tau2 offers no option for it)."""
    if not installed_rules().grades_nl_assertions:
        yield
        return
    from tau2.evaluator import evaluator_nl_assertions as module

    saved = module.DEFAULT_LLM_NL_ASSERTIONS, module.DEFAULT_LLM_NL_ASSERTIONS_ARGS
    module.DEFAULT_LLM_NL_ASSERTIONS = MODEL
    module.DEFAULT_LLM_NL_ASSERTIONS_ARGS = http_args(srv, temperature=0.0)
    try:
        yield
    finally:
        module.DEFAULT_LLM_NL_ASSERTIONS, module.DEFAULT_LLM_NL_ASSERTIONS_ARGS = saved


async def run_passhat(
    client, store, group: Group, tasks: dict[str, list[str]], result: RunnerResult,
) -> None:
    """passhat runs (one per domain: task ids such as "3" exist in several domains) on a
    worker of the test's own, all followed at once."""
    from passhat.workflows.client import follow, start_run
    from passhat.cli.run_config import build_config
    from passhat.cli.run_options import RunOptions
    from passhat.workflows.worker import build_worker

    with FaultServer() as srv:
        # passhat's own defaults are under test: temperature (0.0) and seed (300) are
        # not given, while tau2 gets them as `tau2 run` passes its defaults.
        args = json.dumps(passhat_http_args(srv.url))
        configs = [
            build_config(RunOptions(
                run_id=f"parity-{group.name}-{domain}-{uuid.uuid4().hex[:6]}",
                domains=[domain], task_ids=ids, agent_models=[MODEL], user_model=MODEL,
                trials=TRIALS, concurrency=8, agent_args=args, user_args=args,
                max_steps=group.max_steps, max_errors=group.max_errors, max_attempts=2,
                model_timeout=60.0, plugins=list(group.plugins),
                **({"agent": group.agent} if group.agent != "llm_agent" else {}),
                **({"timeout": group.timeout} if group.timeout is not None else {}),
                **({"judge_model": MODEL, "judge_args": args} if installed_rules().grades_nl_assertions else {}),
            ))
            for domain, ids in tasks.items()
        ]
        # If passhat's trial seeds are not tau2's, the model plays each passhat trial as
        # the tau2 trial with the same index (the seed itself still differs in every
        # request and is reported): otherwise every conversation would play another
        # behaviour and nothing past the seed could be compared.
        seeds = tau2_seeds()
        try:
            alias = {
                unit.trial(i).seed: seeds[i] for cfg in configs for unit in cfg.units() for i in range(unit.trials)
            }
        except Exception:  # noqa: BLE001  (passhat's config API changed: no aliasing)
            alias = {}
        alias = {k: v for k, v in alias.items() if k != v}
        model = pm.ParityModel(tasks, seed_alias=alias)
        srv.responder = responder_for(group, model)
        queue = f"parity-{uuid.uuid4().hex[:8]}"
        async with build_worker(client, store, task_queue=queue):
            handles = [await start_run(client, store, cfg, task_queue=queue) for cfg in configs]
            try:
                await asyncio.wait_for(asyncio.gather(*(
                    follow(h, store, cfg.run_id, lambda *a: None, poll_s=0.5) for h, cfg in zip(handles, configs)
                )), PASSHAT_TIMEOUT_S)
            except Exception as err:  # noqa: BLE001  (compare what was recorded; report the failure)
                result.failures.append(f"[{group.name}] passhat run failed: {type(err).__name__}: {err}"[:500])
                for h in handles:
                    with contextlib.suppress(Exception):  # already closed
                        await h.terminate(reason="parity test: run did not finish")
        result.seed_alias.update(alias)
        seed_to_trial = {}
        for cfg in configs:
            for row in store.trials(cfg.run_id):
                seed_to_trial[(row.domain, row.task_id, alias.get(row.seed, row.seed))] = row.trial_index
                result.outcomes[(group.name, row.domain, row.task_id, row.trial_index)] = Outcome(
                    row.termination_reason, row.reward,
                    "" if row.status == "scored" else f"{row.status}: {row.error_class}: {(row.error or '')[:120]}",
                )
        collect_requests(result, group, model, srv, seed_to_trial)


# --------------------------------------------------------------------------- comparison


def normalise(body: dict) -> dict:
    """A request body as compared. Bodies are compared as parsed JSON, so key order and
    whitespace of the HTTP body are ignored (transport noise: no OpenAI-compatible server
    reads them). Nothing else is normalised: model, seed, temperature, tools,
    tool_choice, messages (system prompts included) and any extra key must be equal."""
    return body


def _short(body: dict, other: dict | None) -> dict:
    """For display only: a tools array equal on both sides is shown as a summary."""
    out = dict(body)
    if other is not None and "tools" in out and out.get("tools") == other.get("tools"):
        out["tools"] = f"<{len(out['tools'])} tool schemas, identical>"
    return out


def diff_paths(a: Any, b: Any, path: str = "", depth: int = 0) -> list[str]:
    """Where two JSON values differ, as short paths (a difference kind for the report)."""
    if a == b:
        return []
    if depth >= 6 or type(a) is not type(b):
        return [path or "<body>"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k} (only passhat)")
            elif k not in b:
                out.append(f"{path}.{k} (only tau2)")
            else:
                out += diff_paths(a[k], b[k], f"{path}.{k}", depth + 1)
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path} (length {len(a)} vs {len(b)})"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff_paths(x, y, f"{path}[{i}]", depth + 1)
        return out
    return [path]


def _kind(paths: list[str]) -> str:
    """Paths with list indices removed: one kind per sort of difference."""
    return ", ".join(sorted({re.sub(r"\[\d+\]", "[]", p) for p in paths}))


def side_of(body: dict) -> str:
    msgs = body.get("messages") or [{}]
    return "user" if pm.SCENARIO_TAG in str(msgs[0].get("content")) else "agent"


def unified(a: dict, b: dict, max_lines: int = 40, width: int = 220) -> list[str]:
    left = json.dumps(_short(a, b), indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    right = json.dumps(_short(b, a), indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    lines = list(difflib.unified_diff(left, right, "tau2", "passhat", n=2, lineterm=""))
    lines = [ln if len(ln) <= width else ln[:width] + " ..." for ln in lines]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return lines


def _behaviour(conv: tuple, seeds: list[int]) -> str:
    _, d, t, trial = conv
    return pm.behaviour_for(d, t, seeds[trial]) if trial < len(seeds) else "?"


def _fmt(o: Outcome | None) -> str:
    if o is None:
        return "(missing)"
    r = "None" if o.reward is None else f"{o.reward:g}"
    return f"{o.termination_reason}/{r}" + (f" [{o.note}]" if o.note else "")


@dataclass
class Comparison:
    outcome_rows: list[str]
    request_diffs: dict[tuple, dict]  # conv -> first strict difference
    report: str


_SEGMENT = re.compile(r"\.([^.\[\] ]+)|(\[\d*\])")


def _pattern(path: str) -> str:
    """A diff path without list indices: '.messages[3].tool_calls[0].name (only tau2)'
    -> '.messages[].tool_calls[].name (only tau2)'."""
    return re.sub(r"\[\d+\]", "[]", path)


def _peelable(pattern: str) -> bool:
    """Differences the layered report may leave out to look behind them: a key only one
    side sends, or a top-level scalar such as seed or temperature. Never the content
    of the conversation itself."""
    if pattern.endswith(("(only tau2)", "(only passhat)")):
        return True
    name = pattern[1:]
    return pattern.startswith(".") and name.isidentifier() and name not in ("messages", "tools")


def _drop(obj: Any, segments: list[str]) -> None:
    if not segments:
        return
    head, rest = segments[0], segments[1:]
    if head == "[]":
        if isinstance(obj, list):
            for x in obj:
                _drop(x, rest)
    elif isinstance(obj, dict) and head in obj:
        if rest:
            _drop(obj[head], rest)
        else:
            del obj[head]


def leave_out(body: dict, patterns: list[str]) -> dict:
    """A copy of `body` without what the diff-path patterns point at (report only)."""
    if not patterns:
        return body
    body = json.loads(json.dumps(body))
    for p in patterns:
        segs = [m.group(1) or "[]" for m in _SEGMENT.finditer(p.split(" (only")[0])]
        _drop(body, segs)
    return body


def first_diffs(tau2: RunnerResult, passhat: RunnerResult, convs: list[tuple], drop: list[str]) -> dict[tuple, dict]:
    """Per conversation, its first request that differs once what the patterns in
    `drop` point at is left out of both sides."""
    out: dict[tuple, dict] = {}
    for conv in convs:
        ra, rb = tau2.requests.get(conv, []), passhat.requests.get(conv, [])
        for i in range(max(len(ra), len(rb))):
            a = leave_out(normalise(ra[i]), drop) if i < len(ra) else None
            b = leave_out(normalise(rb[i]), drop) if i < len(rb) else None
            if a == b:
                continue
            if a is None or b is None:
                present = a if a is not None else b
                who = "passhat" if a is None else "tau2"
                mine = rb if a is None else ra
                resend = i > 0 and mine[i] == mine[i - 1]
                paths: list[str] = []
                kind = f"only {who} sends request #n ({side_of(present)}{', a resend' if resend else ''})"
                detail = [f"only {who} sent request #{i} ({side_of(present)})"
                          + (f", identical to its request #{i - 1} (a resend)" if resend else "")
                          + f"; its last message: "
                          f"{json.dumps((present.get('messages') or [{}])[-1], ensure_ascii=False)[:300]}"]
            elif side_of(a) != side_of(b):
                paths = []
                kind = f"tau2 calls the {side_of(a)}, passhat the {side_of(b)}"
                detail = [f"request #{i}: tau2 calls the {side_of(a)}, passhat the {side_of(b)}; last messages:",
                          f"  tau2:    {json.dumps((a.get('messages') or [{}])[-1], ensure_ascii=False)[:300]}",
                          f"  passhat: {json.dumps((b.get('messages') or [{}])[-1], ensure_ascii=False)[:300]}"]
            else:
                paths = diff_paths(a, b)
                kind = _kind(paths)
                detail = unified(a, b)
            out[conv] = {"index": i, "side": side_of(a or b), "kind": kind, "paths": paths,
                         "detail": detail, "counts": (len(ra), len(rb))}
            break
    return out


def _conv_name(conv: tuple) -> str:
    return f"{conv[0]}/{conv[1]}/{conv[2]}/trial{conv[3]}"


def _headline(conv: tuple, v: dict, seeds: list[int]) -> str:
    return (f"[{conv[0]}] {conv[1]}/{conv[2]} trial {conv[3]} ({_behaviour(conv, seeds)}): "
            f"request #{v['index']} ({v['side']}) differs; tau2 sent {v['counts'][0]}, "
            f"passhat {v['counts'][1]} requests")


def compare(tau2: RunnerResult, passhat: RunnerResult, seeds: list[int], examples_per_kind: int = 2) -> Comparison:
    convs = sorted(set(tau2.outcomes) | set(passhat.outcomes) | set(tau2.requests) | set(passhat.requests),
                   key=lambda c: (c[0] != "main", c[1], c[2], c[3]))
    outcome_rows = []
    for conv in convs:
        a, b = tau2.outcomes.get(conv), passhat.outcomes.get(conv)
        same = a is not None and b is not None and a.termination_reason == b.termination_reason and (
            a.reward == b.reward
        )
        if not same:
            g, d, t, trial = conv
            outcome_rows.append(
                f"{g:<5} {d:<8} {t[:40]:<40} {trial}  {_behaviour(conv, seeds):<19} "
                f"tau2 {_fmt(a):<22} passhat {_fmt(b)}"
            )
    strict = first_diffs(tau2, passhat, convs, [])

    lines = [
        (f"PARITY REPORT: {len(convs)} conversations; {len(outcome_rows)} with different outcomes, "
         f"{len(strict)} with different request sequences"),
        "  per group: " + ", ".join(
            f"{g.name} ({g.agent}) {sum(c[0] == g.name for c in convs)}" for g in GROUPS),
    ]
    if passhat.seed_alias:
        lines.append("  NOTE: passhat's trial seeds are not tau2's; the model played each passhat trial as "
                     "the tau2 trial with the same index (seed_alias), so the rest stays comparable.")
    for name, res in (("tau2", tau2), ("passhat", passhat)):
        lines += [f"  {name}: {f}" for f in res.failures]
        if res.unplaced or res.responder_errors:
            lines.append(f"  {name}: {len(res.unplaced)} requests the model could not place, "
                         f"{len(res.responder_errors)} responder errors {res.responder_errors[:2]}")
    if outcome_rows:
        lines += ["", "== Outcome mismatches (termination_reason/reward) ==",
                  f"{'group':<5} {'domain':<8} {'task':<40} tr {'behaviour':<19} tau2 / passhat"]
        lines += outcome_rows
    if strict:
        # Systematic differences (a key one side always/never sends, the seed value) hide
        # everything behind them: peel them off one at a time, most frequent first, and
        # show one example of each; then what still differs.
        lines += ["", "== Request differences, systematic ones first (each left out before looking further) =="]
        drop: list[str] = []
        diffs = strict
        for _ in range(8):
            counts = Counter(p for v in diffs.values() for p in {_pattern(x) for x in v["paths"]} if _peelable(p))
            if not counts:
                break
            pattern, n = counts.most_common(1)[0]
            conv, v = next((c, v) for c, v in diffs.items() if pattern in {_pattern(x) for x in v["paths"]})
            lines.append(f"{len(drop) + 1}. {pattern}: in the first remaining difference of {n} conversations")
            lines.append(f"   e.g. {_headline(conv, v, seeds)}")
            lines += ["     " + ln for ln in v["detail"][:24]]
            drop.append(pattern)
            diffs = first_diffs(tau2, passhat, convs, drop)
        lines += ["", (f"== Leaving those out, {len(diffs)} conversations still differ; kinds of their "
                       "first difference ==")]
        kinds = Counter(v["kind"] for v in diffs.values())
        for kind, n in kinds.most_common():
            lines.append(f"{n:>3} x {kind}   e.g. "
                         + "; ".join(_conv_name(c) for c, v in diffs.items() if v["kind"] == kind)[:200])
        shown: Counter[str] = Counter()
        for conv, v in diffs.items():
            if shown[v["kind"]] >= examples_per_kind:
                continue
            shown[v["kind"]] += 1
            lines.append(_headline(conv, v, seeds))
            lines += ["  " + ln for ln in v["detail"]]
        if len(diffs) > sum(shown.values()):
            lines.append(f"({len(diffs) - sum(shown.values())} more conversations with a kind already shown)")
    return Comparison(outcome_rows, strict, "\n".join(lines))


# --------------------------------------------------------------------------- fixture


@dataclass
class Parity:
    seeds: list[int]
    selection: dict[str, dict[str, list[str]]]  # group -> domain -> tasks
    tau2: RunnerResult
    passhat: RunnerResult
    comparison: Comparison


@pytest.fixture(scope="module")
async def parity(temporal_server, tmp_path_factory) -> Parity:
    seeds = tau2_seeds()
    main = select_tasks(seeds)
    odd = select_odd(main, seeds)
    selection = {MAIN.name: main, ODD.name: odd, CUSTOM.name: select_custom(main, seeds)}
    tau2, ours = await run_both(temporal_server, tmp_path_factory, "parity",
                                [(g, selection[g.name]) for g in GROUPS if selection[g.name]])
    if os.environ.get("PARITY_DUMP"):  # raw results, to rework the report offline
        import pickle

        Path(os.environ["PARITY_DUMP"]).write_bytes(pickle.dumps((seeds, selection, tau2, ours)))
    comparison = compare(tau2, ours, seeds)
    REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
    REPORT_PATH.write_text(comparison.report + "\n")
    return Parity(seeds, selection, tau2, ours, comparison)


# --------------------------------------------------------------------------- tests

# What tau2 must do with each behaviour (group -> reason); checked on tau2 only.
EXPECTED_TAU2 = {
    "errors_agent": "too_many_errors", "errors_user": "too_many_errors",
    "bad_json_agent": "agent_error", "bad_json_user": "agent_error",
    "empty_agent": "agent_error", "empty_user": "agent_error",
    "endless": "max_steps",
}


def expected_tau2_reason(group: str, behaviour: str) -> str:
    rules = installed_rules()
    if rules.on_model_failure == "rerun" and EXPECTED_TAU2.get(behaviour) == "agent_error":
        return rules.exhausted_reason  # re-run, failed every time
    if behaviour == "endless_stop":
        return "max_steps" if group == ODD.name else "user_stop"
    if behaviour == "endless_errors":
        return "max_steps" if group == ODD.name else "too_many_errors"
    return EXPECTED_TAU2.get(behaviour, "user_stop")


async def test_tau2_reference_exercises_every_rule(parity: Parity):
    """The harness, not passhat: tau2's own run shows every behaviour the model plays."""
    t = parity.tau2
    assert not t.unplaced, f"requests the model could not place: {t.unplaced[:2]}"
    assert not t.responder_errors, t.responder_errors[:3]
    n_conv = sum(len(ts) for ts in parity.selection[MAIN.name].values()) * TRIALS
    assert n_conv >= 40
    seen = Counter()
    wrong = []
    for conv, o in sorted(t.outcomes.items()):
        b = _behaviour(conv, parity.seeds)
        seen.update(pm.facets(conv[1], conv[2], parity.seeds[conv[3]]))
        want = expected_tau2_reason(conv[0], b)
        if o.termination_reason != want:
            wrong.append(f"{conv} {b}: tau2 {o.termination_reason}, expected {want}")
    assert not wrong, "\n".join(wrong)
    assert pm.all_facets() <= set(seen), f"behaviours never played: {pm.all_facets() - set(seen)}"
    reasons = Counter(o.termination_reason for o in t.outcomes.values())
    failed = installed_rules().exhausted_reason or "agent_error"
    assert {"user_stop", "max_steps", "too_many_errors", failed} <= set(reasons), reasons
    rewards = Counter(o.reward for o in t.outcomes.values())
    assert {0.0, 1.0} <= set(rewards), rewards
    assert all(set(ts) for ts in parity.selection[MAIN.name].values())
    assert set(parity.selection[MAIN.name]) == set(DOMAINS)
    # mock's initial conversation and telecom's user tools were really exercised
    assert any(c[1] == "mock" and c[2] == MOCK_HISTORY_TASK for c in t.outcomes)
    assert any(
        m.get("role") == "tool" for c, reqs in t.requests.items() if c[1] == "telecom"
        for body in reqs if side_of(body) == "user" for m in body["messages"]
    ), "no telecom user tool result was ever sent to the user simulator"
    # over the limit: an agent tool call on step max_steps is still executed (the
    # trajectory ends with its result)
    assert any(
        o.termination_reason == "max_steps" and o.last_role == "tool" for o in t.outcomes.values()
    ), "no conversation reached max_steps on a tool call"


async def test_model_is_a_pure_function_of_the_body(parity: Parity):
    """Every distinct request body (over both runners, resends included) got one answer."""
    assert ANSWERS.answers
    impure = [k for k, v in ANSWERS.answers.items() if len(v) > 1]
    assert not impure, f"{len(impure)} request bodies got different answers"


async def test_request_sequences_match(parity: Parity):
    c = parity.comparison
    p = parity.passhat
    problems = list(p.failures)
    if p.unplaced:
        problems.append(f"passhat sent {len(p.unplaced)} requests the model could not place")
    if c.request_diffs:
        problems.append(f"{len(c.request_diffs)} conversations with different request sequences")
    if problems:
        pytest.fail("; ".join(problems) + "\n\n" + c.report, pytrace=False)


@pytest.mark.skipif(not installed_rules().grades_nl_assertions,
                    reason="needs tau2 1.0.x: 26.3 grades no NL assertions")
async def test_judge_requests_match(parity: Parity):
    """tau2 1.0.x's NL-assertion judge: passhat sends the same judge requests (a
    multiset: they carry no seed, so they belong to no one conversation), and some
    conversations were graded by it with either verdict."""
    def bag(bodies: list[dict]) -> Counter:
        return Counter(json.dumps(b, sort_keys=True) for b in bodies)

    tau2, ours = bag(parity.tau2.judge_requests), bag(parity.passhat.judge_requests)
    assert tau2, "tau2 never called the judge: no task with NL assertions was graded"
    assert tau2 == ours, (
        f"judge requests differ: {sum((tau2 - ours).values())} only tau2's, "
        f"{sum((ours - tau2).values())} only passhat's"
        + "".join("\n" + ln for ln in unified(json.loads(next(iter(tau2 - ours), "{}")),
                                               json.loads(next(iter(ours - tau2), "{}")))[:40])
    )


async def test_outcomes_match(parity: Parity):
    c = parity.comparison
    if c.outcome_rows or parity.passhat.failures:
        pytest.fail(f"{len(c.outcome_rows)} conversations with different termination/reward\n\n" + c.report,
                    pytrace=False)


async def test_custom_agent_conversations_match(parity: Parity):
    """The custom agent's group was run by both runners, with the agent's own state in
    every agent request, and its agent behaviours all occurred (the comparison itself is
    in the two tests above, over every group)."""
    convs = {c for c in parity.tau2.outcomes if c[0] == CUSTOM.name}
    assert len(convs) >= 10 and convs == {c for c in parity.passhat.outcomes if c[0] == CUSTOM.name}
    played = {_behaviour(c, parity.seeds) for c in convs}
    assert AGENT_BEHAVIOURS <= played, AGENT_BEHAVIOURS - played
    for runner in (parity.tau2, parity.passhat):
        notes = [re.search(r"<notes>turn (\d+);", body["messages"][0]["content"] or "")
                 for c, reqs in runner.requests.items() if c[0] == CUSTOM.name
                 for body in reqs if side_of(body) == "agent"]
        # every agent request carries the agent's state, which grows turn by turn
        assert notes and all(notes) and max(int(m.group(1)) for m in notes) > 3
    different = [c for c in parity.comparison.request_diffs if c[0] == CUSTOM.name]
    assert not different, different


# --------------------------------------------------------------------------- a plugin domain

# tests/plugin_modules/home_internet: a domain written to tau2's contract, with user
# tools, a user database, write tools and an environment that overrides sync_tools. It
# is imported as a plugin is (it registers itself with tau2's registry), and both
# runners run every one of its tasks.
PLUGIN_DOMAIN = "home_internet"
PLUGIN = Group("plugin", max_steps=30, plugins=(PLUGIN_DOMAIN,))


async def run_both(temporal_server, tmp_path_factory, name: str,  # noqa: ANN001
                   groups: list[tuple[Group, dict[str, list[str]]]]) -> tuple[RunnerResult, RunnerResult]:
    """Each group's tasks through tau2's runner and through passhat (on a store named
    `name`); passhat's failure to run is kept in its result, for the report."""
    from passhat.infra.store import Store
    from passhat.infra.temporal_client import connect

    tau2, ours = RunnerResult(), RunnerResult()
    client = await connect(temporal_server.address)
    store = Store(f"sqlite:///{tmp_path_factory.mktemp(name) / 'results.db'}")
    try:
        for group, tasks in groups:
            await asyncio.to_thread(run_tau2, group, tasks, pm.ParityModel(tasks), tau2)
            try:
                await run_passhat(client, store, group, tasks, ours)
            except Exception as err:  # noqa: BLE001  (keep tau2's side, report passhat's failure)
                ours.failures.append(f"[{group.name}] passhat could not run: {type(err).__name__}: {err}"[:800])
    finally:
        store.close()
    return tau2, ours


@pytest.fixture(scope="module")
async def plugin_parity(temporal_server, tmp_path_factory) -> Parity:
    from passhat.domains.registry import get_domain

    import_for_tau2(PLUGIN)  # and so for get_domain in this process
    seeds = tau2_seeds()
    tasks = {PLUGIN_DOMAIN: get_domain(PLUGIN_DOMAIN).task_ids()}
    tau2, ours = await run_both(temporal_server, tmp_path_factory, "parity-plugin", [(PLUGIN, tasks)])
    comparison = compare(tau2, ours, seeds)
    path = REPORT_PATH.with_name("report-plugin.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    outcomes = Counter(f"{o.termination_reason}/{o.reward:g}" for o in tau2.outcomes.values() if o.reward is not None)
    path.write_text(comparison.report + f"\n{sum(map(len, tau2.requests.values()))} requests by tau2, "
                    f"{sum(map(len, ours.requests.values()))} by passhat; tau2's outcomes {dict(outcomes)}\n")
    return Parity(seeds, {PLUGIN.name: tasks}, tau2, ours, comparison)


async def test_a_plugin_domain_with_user_tools_and_sync_tools_runs_as_tau2_runs_it(plugin_parity: Parity):
    """Every task of the plugin domain, both trials: the same request sequences, the
    same terminations and rewards; and the reference really exercised the domain: user
    tool calls whose answers show what sync_tools carried over from the agent's writes,
    and both rewards."""
    t = plugin_parity.tau2
    assert not t.unplaced and not t.responder_errors, (t.unplaced[:2], t.responder_errors[:2])
    assert len(t.outcomes) == len(plugin_parity.selection[PLUGIN.name][PLUGIN_DOMAIN]) * TRIALS
    assert {0.0, 1.0} <= {o.reward for o in t.outcomes.values()}, t.outcomes
    user_tool_answers = [
        pm.message_text(m.get("content")) for reqs in t.requests.values() for body in reqs
        if side_of(body) == "user" for m in body["messages"] if m.get("role") == "tool"
    ]
    assert "1000 Mbps" in user_tool_answers, user_tool_answers  # the agent's plan change, synced
    fail_on_differences(plugin_parity)


def fail_on_differences(parity: Parity) -> None:
    """Fail with the report if passhat did not run, sent requests the model could not
    place, or any conversation's requests, termination or reward differ from tau2's."""
    p, c = parity.passhat, parity.comparison
    problems = list(p.failures)
    if p.unplaced:
        problems.append(f"passhat sent {len(p.unplaced)} requests the model could not place")
    if c.request_diffs:
        problems.append(f"{len(c.request_diffs)} conversations with different request sequences")
    if c.outcome_rows:
        problems.append(f"{len(c.outcome_rows)} conversations with different termination/reward")
    if problems:
        pytest.fail("; ".join(problems) + "\n\n" + c.report, pytrace=False)


# --------------------------------------------------------------------------- a time limit

# tau2 1.0.x's --timeout, with a model slower than the limit: both runners end every
# conversation where they first check the limit (after the user's first answer).
TIMED = Group("timeout", max_steps=30, timeout=1.0)
needs_timeout = pytest.mark.skipif(installed_rules().timeout_reason is None,
                                   reason="needs tau2 1.0.x: the installed tau2 has no --timeout")


@pytest.fixture(scope="module")
async def timeout_parity(temporal_server, tmp_path_factory) -> Parity:
    seeds = tau2_seeds()
    # Two tasks of each domain, mock's initial conversation among them.
    tasks = {d: ts[:2] for d, ts in select_tasks(seeds).items()}
    tau2, ours = await run_both(temporal_server, tmp_path_factory, "parity-timeout", [(TIMED, tasks)])
    comparison = compare(tau2, ours, seeds)
    path = REPORT_PATH.with_name("report-timeout.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(comparison.report + f"\n{len(tau2.outcomes)} conversations; tau2's outcomes "
                    f"{dict(Counter(_fmt(o) for o in tau2.outcomes.values()))}\n")
    return Parity(seeds, {TIMED.name: tasks}, tau2, ours, comparison)


@needs_timeout
async def test_a_time_limit_ends_conversations_where_tau2_ends_them(timeout_parity: Parity):
    """Every conversation ends as timeout with reward 0 after the user's first answer,
    in tau2 (the reference) and in passhat, with the same requests."""
    t = timeout_parity.tau2
    assert not t.unplaced and not t.responder_errors, (t.unplaced[:2], t.responder_errors[:2])
    assert len(t.outcomes) == sum(map(len, timeout_parity.selection[TIMED.name].values())) * TRIALS
    assert {(o.termination_reason, o.reward) for o in t.outcomes.values()} == {("timeout", 0.0)}
    assert all([side_of(b) for b in reqs] == ["user"] for reqs in t.requests.values())
    fail_on_differences(timeout_parity)


# --------------------------------------------------------------------------- an irregular judge

# tau2 1.0.x's NL-assertion judge answering as LLM judges get its format wrong (string
# booleans, words, numbers, nulls, prose, fenced JSON, missing keys, no results), on every
# retail task graded by it: tau2 reads each reply through its pydantic model and re-runs
# the whole simulation after one it cannot read (then infrastructure_error); passhat must
# score, re-run and give up exactly as it does.
IRREGULAR = Group("judge", max_steps=30, judge="irregular")
needs_judge = pytest.mark.skipif(not installed_rules().grades_nl_assertions,
                                 reason="needs tau2 1.0.x: 26.3 grades no NL assertions")


@pytest.fixture(scope="module")
async def irregular_judge_parity(temporal_server, tmp_path_factory) -> Parity:
    seeds = tau2_seeds()
    tasks = {"retail": sorted(_judged_tasks("retail"), key=lambda t: int(t) if t.isdigit() else t)}
    tau2, ours = await run_both(temporal_server, tmp_path_factory, "parity-judge", [(IRREGULAR, tasks)])
    comparison = compare(tau2, ours, seeds)
    per_task = defaultdict(list)
    for conv in set(tau2.outcomes) | set(ours.outcomes):
        a, b = tau2.outcomes.get(conv), ours.outcomes.get(conv)
        per_task[conv[2]].append(
            a is not None and b is not None and (a.termination_reason, a.reward) == (b.termination_reason, b.reward)
            and conv not in comparison.request_diffs)
    kinds = Counter(pm.irregular_kind(b) for b in tau2.judge_requests)
    path = REPORT_PATH.with_name("report-judge.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        comparison.report
        + f"\n{sum(all(v) for v in per_task.values())}/{len(per_task)} tasks equal in reward, termination "
        f"and requests; {len(tau2.outcomes)} conversations; tau2's outcomes "
        f"{dict(Counter(_fmt(o) for o in tau2.outcomes.values()))}\n"
        f"{sum(map(len, tau2.requests.values()))} requests by tau2, {sum(map(len, ours.requests.values()))} "
        f"by passhat; judge requests {len(tau2.judge_requests)} by tau2, {len(ours.judge_requests)} by "
        f"passhat; judge replies by kind (tau2) {dict(kinds)}\n")
    return Parity(seeds, {IRREGULAR.name: tasks}, tau2, ours, comparison)


@needs_judge
@pytest.mark.timeout(2400)  # 80 conversations, a third of them run 4 times, on each side
async def test_an_irregular_judge_is_read_and_re_run_as_tau2_does(irregular_judge_parity: Parity):
    """Every retail task graded by the judge, both trials: the same requests (judge's
    included), terminations and rewards; and the reference really met every kind of
    reply, scored some with replies it coerced and gave up on some."""
    parity = irregular_judge_parity
    t = parity.tau2
    assert not t.unplaced and not t.responder_errors, (t.unplaced[:2], t.responder_errors[:2])
    assert len(parity.selection[IRREGULAR.name]["retail"]) == 40
    assert len(t.outcomes) == 40 * TRIALS
    kinds = Counter(pm.irregular_kind(b) for b in t.judge_requests)
    assert set(kinds) == set(pm.IRREGULAR_REPLIES), kinds
    outcomes = {(o.termination_reason, o.reward) for o in t.outcomes.values()}
    assert {("user_stop", 1.0), ("user_stop", 0.0), ("infrastructure_error", None)} <= outcomes, outcomes

    def bag(bodies: list[dict]) -> Counter:
        return Counter(json.dumps(b, sort_keys=True) for b in bodies)

    assert bag(t.judge_requests) == bag(parity.passhat.judge_requests)
    fail_on_differences(parity)
