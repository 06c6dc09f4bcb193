"""Where the k trials of a task part, on real runs whose mistakes are known:
scripted/faulty-P makes one planned mistake on some trials (infra/scripted_faults.py) and
plays the oracle on the others, so each flaky task's failing trials must part from the
passing ones exactly where their mistake shows. Checked on airline and on a plugin
domain with user tools (tests/plugin_modules/home_internet), through `passhat report`."""

from __future__ import annotations

import csv
import io
import json

import pytest

from passhat.domains.plugins import load_plugins
from passhat.domains.registry import get_domain
from passhat.infra import scripted_faults
from passhat.infra.store import Store
from passhat.results.divergence import cause_changes
from passhat.results.report import build_report
from passhat.testing.harness import Passhat, stopping_workers
from tests.helpers import PLUGIN_MODULES

P = 0.5
AGENT = f"scripted/faulty-{P}"


@pytest.fixture
def ph(temporal_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(PLUGIN_MODULES))
    yield from stopping_workers(Passhat(tmp_path / "home", temporal_server.address))


def run(ph, run_id: str, *args: str, agent: str = AGENT) -> None:  # noqa: ANN001
    result = ph.cli("run", *args, "--agent-model", agent, "--user-model", "scripted/oracle",
                    "--trials", "4", "--run-id", run_id, timeout=600)
    assert result.returncode == 0, result.stderr


def check_parting_points(store: Store, run_id: str, domain_name: str) -> int:
    """Every failing trial of a flaky task parts where its planned mistake shows; the
    number of trials checked so."""
    [group] = build_report(store, [run_id]).runs[0].groups
    domain = get_domain(domain_name)
    facts = scripted_faults.facts_of(domain)
    rows = {(r.task_id, r.trial_index): r for r in store.trials(run_id)}
    checked = 0
    for result in group.task_results:
        task = domain.task(result.task_id)
        trials = [rows[(result.task_id, i)] for i in range(result.trials)]
        fault = {r.trial_id: scripted_faults.planned_fault(domain_name, task, facts, r.seed, P) for r in trials}
        failing, passing = [r for r in trials if not r.success], [r for r in trials if r.success]
        divergence = result.divergence
        if not failing:
            assert divergence is None
            continue
        if not passing:
            assert divergence.kind == "all_failed" and divergence.first_off_path is not None
            continue
        assert divergence.kind == "flaky" and divergence.line == "; ".join(g.sentence for g in divergence.groups)
        placed = {t: (g, step) for g in divergence.groups for t, step in zip(g.trials, g.steps)}
        assert set(placed) == {r.trial_id for r in failing}
        # A passing trial that skipped a read (write_before_read passes) parts from the
        # failing ones earlier: the mistake's step is the parting point against an oracle's.
        if not any(fault[r.trial_id] is None for r in passing):
            continue
        for row in failing:
            mistake, (where, step) = fault[row.trial_id], placed[row.trial_id]
            steps = [(s.step, s.message_list()) for s in store.steps(row.trial_id)]
            assert step == scripted_faults.fault_step(mistake, task, steps), (row.trial_id, mistake, where)
            assert where.passing_trial in {r.trial_id for r in passing}
            if mistake.kind == "missing_info":  # the same calls: only the closing words differ
                assert (where.failing, where.first_off_path) == ("same actions", "missing_info")
            elif mistake.kind in ("wrong_tool", "extra_write"):
                assert where.failing == f"called {mistake.action.name}", where
            elif mistake.kind == "wrong_argument":
                assert where.failing == where.passing == f"called {mistake.action.name}"
                assert where.differing_arguments, where
            else:  # skipped_write: it moved on to its next call, or ended, where the oracle wrote
                assert where.passing == f"called {task.gold_actions[mistake.index].name}", where
            checked += 1
    return checked


def test_airline_trials_part_where_the_injected_mistake_shows_and_report_says_so(ph):
    run(ph, "parting", "--domain", "airline", "--num-tasks", "10")
    store = Store(ph.db_url)
    assert check_parting_points(store, "parting", "airline") >= 8
    group = build_report(store, ["parting"]).runs[0].groups[0]
    flaky = [t for t in group.task_results if t.divergence and t.divergence.kind == "flaky"]
    assert len(flaky) >= 5

    # The one line per task under `report --by task`, and in full in `report -o json`.
    text = ph.cli("report", "parting", "--by", "task", "--out", str(ph.home / "by-task.txt"))
    assert text.returncode == 0, text.stderr
    table = " ".join((ph.home / "by-task.txt").read_text().split())
    assert "why trials failed, per task:" in table
    for task in flaky:  # every parting point, each on a line of its own
        for part in task.divergence.groups:
            assert f"{task.task_id}: {part.sentence}" in table
    rows = list(csv.DictReader(io.StringIO(ph.cli("report", "parting", "--by", "task", "-o", "csv").stdout)))
    assert {r["task_id"]: r["diagnosis"] for r in rows} == {
        t.task_id: t.divergence.line if t.divergence else "" for t in group.task_results}
    reported = json.loads(ph.cli("report", "parting", "-o", "json").stdout)
    tasks = {t["task_id"]: t for t in reported["runs"][0]["groups"][0]["task_results"]}
    for task in flaky:
        assert tasks[task.task_id]["divergence"] == json.loads(task.divergence.model_dump_json())
    # The causes: the stored diagnoses' first steps off the path, counted.
    kinds = [((r.diagnosis() or {}).get("first_off_path") or {}).get("kind", "on the gold path")
             for r in store.trials("parting") if r.diagnosis_json]
    causes = reported["runs"][0]["groups"][0]["failures"]["causes"]
    assert causes == {k: kinds.count(k) for k in set(kinds)} and sum(causes.values()) == group.failures.below_one

    # `report A B`: which causes grew or shrank. Every trial of B errs.
    run(ph, "parting-all", "--domain", "airline", "--num-tasks", "10", agent="scripted/faulty-1.0")
    # There a task whose every trial failed (write_before_read passes) is named by its
    # most common first step off the gold path, as the stored diagnoses give it.
    firsts: dict[str, list[tuple]] = {}
    for r in store.trials("parting-all"):
        first = (r.diagnosis() or {}).get("first_off_path") if r.diagnosis_json else "passed"
        if first != "passed":
            firsts.setdefault(r.task_id, []).append((first["kind"], first["tool"]) if first else ("on the gold path", None))
    all_failed = [t for t in build_report(store, ["parting-all"]).runs[0].groups[0].task_results
                  if t.divergence and t.divergence.kind == "all_failed"]
    assert len(all_failed) >= 5 and all(len(firsts[t.task_id]) == 4 for t in all_failed)
    for task in all_failed:
        found, seen = task.divergence.first_off_path, firsts[task.task_id]
        assert found["diagnosed"] == 4 and found["count"] == max(seen.count(f) for f in seen)
        assert seen.count((found["kind"], found["tool"])) == found["count"]
    both = json.loads(ph.cli("report", "parting", "parting-all", "-o", "json").stdout)
    [comparison] = both["comparisons"]
    a, b = (r["groups"][0]["failures"]["causes"] for r in both["runs"])
    assert comparison["causes"] == [json.loads(c.model_dump_json()) for c in cause_changes(a, b)]
    assert any(c["change"] == "grew" for c in comparison["causes"])
    compared = ph.cli("report", "parting", "parting-all", "--out", str(ph.home / "ab.txt"))
    assert compared.returncode == 0, compared.stderr
    words = " ".join((ph.home / "ab.txt").read_text().split())
    grew = next(c for c in comparison["causes"] if c["change"] == "grew")
    assert "first step off the gold path, a -> b: " in words
    assert f"{grew['cause']} {grew['a']} -> {grew['b']} (grew)" in words


def test_plugin_domain_with_user_tools_parts_where_the_mistake_shows(ph, monkeypatch):
    run(ph, "home-parting", "--plugin", "home_internet", "--domain", "home_internet")
    monkeypatch.syspath_prepend(str(PLUGIN_MODULES))
    load_plugins(["home_internet"])
    store = Store(ph.db_url)
    # The user's tool calls (check_speed, restart_router) are between the agent's, and
    # are not the agent's actions.
    user_calls = [c for r in store.trials("home-parting") for s in store.steps(r.trial_id)
                  for m in s.message_list() for c in m.tool_calls or [] if c.requestor == "user"]
    assert user_calls
    assert check_parting_points(store, "home-parting", "home_internet") >= 3
