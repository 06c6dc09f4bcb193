"""`passhat report -o html`, opened from disk by headless Chromium: one self-contained
file whose charts, outcome grid, failure taxonomy and per-trial drill-down are all in
the page as the browser builds it, with nothing fetched from anywhere. The screenshot
is kept as a test artifact."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from PIL import Image, ImageChops

from passhat.testing.harness import agent_that_succeeds, passhat
from tests.helpers import cli_env
from tests.results_files import TAU2_MOCK_RESULTS
from tests.runs import config, run_to_end
from tests.ui.chromium import ARTIFACTS, chromium

INJECTED = "<b id=\"injected\">bold</b><script>document.title='owned'</script>"
TEMPORAL_UI = "http://127.0.0.1:9/temporal"  # known to the report; never opened


async def test_html_report_in_a_browser(client, sqlite_store, tmp_path):
    cfg = config(agent_models=["scripted/oracle", agent_that_succeeds("0.5")], limit=3, trials=2)
    await run_to_end(client, sqlite_store, cfg)
    # Trace ids are recorded when tracing is on (not in this test's worker): give one.
    trials = sqlite_store.trials(cfg.run_id)
    first, trace_id = trials[0], "0af7651916cd43dd8448eb211c80319c"
    sqlite_store.set_trace_id(first.trial_id, trace_id)
    # An imported run whose transcript holds markup: it must show as text.
    results = json.loads(TAU2_MOCK_RESULTS.read_text())
    results["simulations"][0]["messages"][1]["content"] = INJECTED
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(results))
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    env["PASSHAT_TEMPORAL_UI"] = TEMPORAL_UI
    imported = passhat("import", str(tampered), "--run-id", "imported", env=env)
    assert imported.returncode == 0, imported.stderr

    page = tmp_path / "report.html"
    result = passhat("report", cfg.run_id, "imported", "-o", "html", "--out", str(page), env=env)
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    # Self-contained: no external script, stylesheet, image or font (url(#id) is the
    # charts' own clip paths); the only links leave to the Temporal UI and Jaeger.
    assert not re.search(r"<script[^>]+src|<link|<img|<iframe|url\((?!#)|@import", html, re.I)
    assert {h.split("/")[2] for h in re.findall(r'href="(http[^"]*)"', html)} == {"127.0.0.1:9", "localhost:16686"}

    dom = chromium(["--dump-dom", page.as_uri()], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    sections = dict(re.findall(r'<section id="(\w+)"[^>]*>(.*?)</section>', text, re.S))
    assert {"status", "summary", "curves", "cost", "taxonomy", "grid", "trials"} <= set(sections)
    assert "<svg" in sections["curves"] and "<svg" in sections["cost"]
    assert "failed part" in sections["taxonomy"] and "user_stop" in sections["taxonomy"]

    # The grid: one coloured cell per trial, linked to the trial's drill-down.
    successes = sum(t.success for t in trials)
    assert len(re.findall(r'class="o-success"><a href="#trial-', sections["grid"])) == successes + 2
    assert len(re.findall(r'class="o-failure"><a href="#trial-', sections["grid"])) == len(trials) - successes + 2
    # The drill-down: every trial of both runs, with its transcript and reward breakdown.
    assert text.count('<details class="trial"') == len(trials) + 4
    assert f"{first.trial_id} — " in text
    assert "Hi! How can I help you today?" in sections["trials"]
    assert 'class="breakdown"' in sections["trials"] and "calls <code>" in sections["trials"]
    workflow = f'href="{TEMPORAL_UI}/namespaces/default/workflows/{quote(first.trial_id, safe="")}"'
    assert workflow in text and f'href="http://localhost:16686/trace/{trace_id}"' in text
    assert "no workflow links (imported run" in text
    # Markup from the store is text, never elements.
    assert '<b id="injected">' not in text and "owned" not in text.split("</title>")[0]
    assert "&lt;b id=\"injected\"&gt;bold&lt;/b&gt;" in text

    ARTIFACTS.mkdir(exist_ok=True)
    shot, blank = ARTIFACTS / "html-report.png", tmp_path / "blank.png"
    shot.unlink(missing_ok=True)
    blank_page = tmp_path / "blank.html"
    blank_page.write_text("<!DOCTYPE html><html><body></body></html>")
    for target, url, profile in ((shot, page.as_uri(), "profile-shot"), (blank, blank_page.as_uri(), "profile-blank")):
        taken = chromium([f"--screenshot={target}", url], tmp_path / profile)
        assert taken.returncode == 0 and target.exists(), taken.stderr[-2000:]
    with Image.open(shot) as a, Image.open(blank) as b:
        assert a.size == b.size
        diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).convert("L")
        changed = sum(1 for v in diff.getdata() if v > 16) / (a.size[0] * a.size[1])
    # Ink, not layout: a blank or unstyled-empty page changes ~0%; the report's text, table
    # and (pale-banded) plot change a few percent of the first screen.
    assert changed > 0.02, f"the report's screenshot differs from a blank page in {changed:.1%} of pixels"

