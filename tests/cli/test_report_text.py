"""What the read-only commands print, on runs written straight into a SQLite store (no
Temporal, no workflows): a report's words, widths, headings and charts, `show` of a
trial still running, error lines that name their class once, `tasks`."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from passhat.contracts import TaskUnit
from passhat.messages import Message
from passhat.infra.store import Store
from passhat.results.report import build_report
from passhat.testing.harness import passhat
from tests.helpers import cli_env, make_config, one_error_line

# Long enough that a paired comparison's one sentence is twice 80 columns.
MODELS = ["openai/a-rather-long-agent-model-name", "openai/another-long-agent-model-name"]
TASKS = ["t1", "t2"]
ERROR_401 = "AuthenticationError (HTTP 401) calling openai/x: Incorrect API key provided."


def _spec(run_id: str, model: str, task_id: str, index: int = 0):  # noqa: ANN202 - a TrialSpec
    unit = TaskUnit(run_id=run_id, agent_model=model, user_model="user-m", domain="mock",
                    task_id=task_id, seeds=[11, 22])
    return unit.trial(index)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """`lost`: its only trial not evaluable. `live`: a trial still running, two steps
    on record. `pair`: two models that succeed on every trial of two tasks, k=2."""
    home = tmp_path_factory.mktemp("text")
    url = f"sqlite:///{home / 'results.db'}"
    store = Store(url)
    store.create_run(make_config("lost", agent_models=["openai/x"], trials=1,
                                 task_ids={"mock": ["t1"]}), 1)
    lost = _spec("lost", "openai/x", "t1")
    store.begin_trial(lost)
    store.mark_not_evaluable(lost.trial_id, ERROR_401, "AuthenticationError")
    store.set_run_status("lost", "completed")

    store.create_run(make_config("live", agent_models=["openai/x"], trials=1,
                                 task_ids={"mock": ["t1"]}), 1)
    live = _spec("live", "openai/x", "t1")
    store.begin_trial(live)
    store.record_step(live.trial_id, "live", 0, "assistant", [Message(role="assistant", content="Hi")],
                      input_tokens=100, output_tokens=20, cost=0.01)
    store.record_step(live.trial_id, "live", 1, "user", [Message(role="user", content="Help")],
                      input_tokens=50, output_tokens=5, cost=0.002)

    store.create_run(make_config("pair", agent_models=MODELS, trials=2, task_ids={"mock": TASKS}), 8)
    for model in MODELS:
        for task_id in TASKS:
            for index in range(2):
                spec = _spec("pair", model, task_id, index)
                store.begin_trial(spec)
                store.finish_trial(spec.trial_id, 1.0, True, {"reward": 1.0}, "user_stop", 4)
    store.set_run_status("pair", "completed")

    # `failed`: one failed trial with its diagnosis.
    store.create_run(make_config("failed", agent_models=["openai/x"], trials=1, task_ids={"mock": ["t1"]}), 1)
    failed = _spec("failed", "openai/x", "t1")
    store.begin_trial(failed)
    store.finish_trial(failed.trial_id, 0.0, False, {"reward": 0.0, "breakdown": {"DB": 1.0, "COMMUNICATE": 0.0}},
                       "user_stop", 4, diagnosis=DIAGNOSIS)
    store.set_run_status("failed", "completed")
    store.close()
    return SimpleNamespace(url=url, home=home, live=live.trial_id, lost=lost.trial_id, failed=failed.trial_id)


DIAGNOSIS = {
    "version": 3, "failed_parts": ["COMMUNICATE"],
    "actions": [{"action": "renew_loan", "matched": True, "step": 4}],
    "unexplained_writes": [], "communicate_missing": ["2024-06-01"], "nl_failed": [], "db_differences": [],
    "attempted_writes": [{"step": 6, "tool": "renew_loan", "arguments": {"loan_id": "L1"},
                          "error": "Error: This loan was already renewed once"}],
    "first_off_path": {"kind": "missing_info", "step": 8, "tool": None, "detail": "2024-06-01"},
    "ended_by": {"termination_reason": "user_stop", "how": "user stopped"},
}


@pytest.fixture
def env(runs, tmp_path):
    return cli_env(runs.url, tmp_path)


def test_a_run_that_scored_nothing_is_not_complete(runs, env):
    result = passhat("report", "lost", "-o", "json", env=env)
    assert result.returncode == 0, result.stderr
    completeness = json.loads(result.stdout)["runs"][0]["completeness"]
    assert completeness["complete"] is False
    assert completeness["note"] == "PARTIAL: run completed, 0 of 1 trials scored; 1 not evaluable (left out of pass^k)"
    html = passhat("report", "lost", "-o", "html", env=env).stdout
    assert '<p class="partial">lost: PARTIAL: run completed' in html  # amber, and PARTIAL once
    assert 'class="complete"' not in html


def test_error_class_is_named_once(runs, env):
    shown = passhat("show", runs.lost, env=env).stdout
    listed = passhat("trials", "lost", env=env).stdout
    html = passhat("report", "lost", "-o", "html", env=env).stdout
    for text in (shown, listed, html):
        assert "AuthenticationError (HTTP 401) calling openai/x" in text, text
        assert "AuthenticationError: AuthenticationError" not in text, text


def test_the_html_report_gives_each_failed_trial_the_diagnosis_show_prints(runs, env):
    from html import escape

    shown = passhat("show", runs.failed, env=env).stdout.splitlines()
    lines = [line.strip() for line in shown[shown.index(next(x for x in shown if x.startswith("diagnosis: "))):]]
    lines = [lines[0].removeprefix("diagnosis: "), *lines[1:3]]
    assert lines == ["missing_info at step 8 (never said '2024-06-01'); user stopped",
                     "attempted write, the tool refused it: renew_loan at step 6: Error: This loan was already renewed once",
                     "never told the user: '2024-06-01'"]
    html = passhat("report", "failed", "-o", "html", env=env).stdout
    trial = html[html.index(f'{runs.failed} — '):]
    assert f'<p class="diagnosis"><b>{escape(lines[0])}</b></p>' in trial
    assert all(f"<li>{escape(line)}</li>" in trial for line in lines[1:])


def test_show_of_a_running_trial_counts_its_recorded_steps(runs, env):
    shown = passhat("show", runs.live, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "steps 2, tokens 150 in / 25 out, cost $0.0120" in shown.stdout
    body = json.loads(passhat("show", runs.live, "-o", "json", env=env).stdout)
    assert (body["n_steps"], body["tokens"], body["cost"]) == (2, {"input": 150, "output": 25}, 0.012)


def test_unwritable_plot_or_out_fails_before_any_report(runs, env, tmp_path):
    (tmp_path / "folder.png").mkdir()
    for option, path in (("--plot", "/nonexistent/p.png"), ("--out", "/nonexistent/r.txt"),
                         ("--plot", str(tmp_path / "folder.png"))):
        result = passhat("report", "pair", option, path, env=env)
        assert f"cannot write {option} " in one_error_line(result)
        assert result.stdout == ""


def test_by_is_refused_where_it_changes_nothing(runs, env):
    for output in ("json", "html"):
        line = one_error_line(passhat("report", "pair", "-o", output, "--by", "task", env=env))
        assert "--by applies to table, csv and markdown" in line
    assert passhat("report", "pair", "-o", "csv", "--by", "task", env=env).returncode == 0


def test_markdown_starts_with_its_title(runs, env):
    md = passhat("report", "pair", "lost", "-o", "markdown", env=env).stdout
    assert md.splitlines()[0] == "# passhat report pair, lost"
    assert len(re.findall(r"^# ", md, re.MULTILINE)) == 1  # one title; runs and models below it
    assert "## run pair" in md and f"### pair:{MODELS[0]} (user user-m) on mock" in md


def test_piped_table_keeps_80_columns(runs, env):
    for by in ("model", "task"):
        text = passhat("report", "pair", "--by", by, env=env).stdout
        assert max(map(len, text.splitlines())) <= 80, text
        if by == "task":  # the legend is one line, not cut mid-phrase
            assert "  trials: + success, x failure, ! not evaluable, . unfinished\n" in text, text
        else:
            assert f"  a {MODELS[0]}\n  b {MODELS[1]} on mock\n" in text, text
            assert "    a - b: pass^1 +0.000 [+0.000, +0.000] over 2 shared tasks\n" in text, text


def test_piped_output_takes_its_width_from_columns(runs, env, tmp_path):
    """COLUMNS sets the width of a report in a pipe or a file, as on a terminal (80
    columns without it)."""
    narrow = {**env, "COLUMNS": "60"}
    passhat("report", "pair", "--by", "task", "--out", str(tmp_path / "r.txt"), env=narrow)
    for by in ("model", "task"):
        usual = passhat("report", "pair", "--by", by, env=env).stdout
        piped = passhat("report", "pair", "--by", by, env=narrow).stdout
        assert max(map(len, piped.splitlines())) <= 60 < max(map(len, usual.splitlines())), piped
    assert max(map(len, (tmp_path / "r.txt").read_text().splitlines())) <= 60


def test_equal_curves_are_all_visible(runs):
    from passhat.cli import plots

    store = Store(runs.url)
    try:
        report = build_report(store, ["pair"])
    finally:
        store.close()
    fig = plots.pass_hat_figure(report)
    try:
        first, second = [line for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")]
        assert list(first.get_ydata()) == list(second.get_ydata()) == [1.0, 1.0]  # equal curves
        assert all(a != b for a, b in zip(first.get_xdata(), second.get_xdata()))  # set apart
        assert (first.get_marker(), first.get_linestyle()) != (second.get_marker(), second.get_linestyle())
    finally:
        plots.save(fig, runs.home / "pair.png")


def test_tasks_cut_reasons_at_a_word_with_an_ellipsis(env):
    from passhat.domains.registry import get_domain

    result = passhat("tasks", "airline", env=env)
    assert result.returncode == 0, result.stderr
    domain = get_domain("airline")
    cut = 0
    for line in result.stdout.splitlines():
        task_id, shown = line.split("\t")
        reason = " ".join(domain.task(task_id).reason_for_call.strip().splitlines()[0].split())
        if shown != reason:
            cut += 1
            assert shown.endswith(" …") and len(shown) <= 100, shown
            assert reason.startswith(shown[:-2]) and reason[len(shown) - 2] == " ", (shown, reason)
    assert cut  # some airline reasons are longer than a line
