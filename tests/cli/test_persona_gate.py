"""Personas end to end through the real CLI (issue 45's "done means"): a sweep of two scripted
agents under three scripted personas (passhat.infra.scripted_personas, effects known) gives a
report with per-persona pass^k and the paired drop with its interval, a persona x k chart,
an LLM review that says per user how many failures it blames on the user simulator with the
sensitivity pass^k beside the official one, and a gate decided per persona at alpha / 3
(Bonferroni) with one JUnit verdict per persona x criterion."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from passhat.testing.harness import passhat

SUITE = ["--domain", "airline", "--task", "7", "--task", "8", "--task", "17", "--user-model", "scripted/customer",
         "--user-persona", "skeptical:2", "--user-persona", "incoherent", "--user-persona", "impatient:3", "--yes"]
PERSONAS = ["skeptical:2", "incoherent:1", "impatient:3"]


def test_a_persona_sweep_is_reported_reviewed_and_gated_per_persona(env, tmp_path):
    ran = passhat("run", *SUITE, "-m", "scripted/oracle", "-m", "scripted/verifier", "--trials", "2",
                  "--run-id", "sweep", env=env, timeout=600)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(passhat("report", "sweep", "-o", "json", env=env).stdout)
    drops = {(r["agent_model"], r["user_persona"]): (r["pass_hat_k"]["2"]["value"], r["drop"]["2"])
             for r in report["robustness"]}
    assert drops == {**{("scripted/oracle", p): (1.0, {"value": 0.0, "low": 0.0, "high": 0.0}) for p in PERSONAS},
                     ("scripted/verifier", "skeptical:2"): (0.0, {"value": 1.0, "low": 1.0, "high": 1.0}),
                     ("scripted/verifier", "incoherent:1"): (1.0, {"value": 0.0, "low": 0.0, "high": 0.0}),
                     ("scripted/verifier", "impatient:3"): (0.0, {"value": 1.0, "low": 1.0, "high": 1.0})}
    page = passhat("report", "sweep", "-o", "html", env=env).stdout
    chart = page[page.index('<div id="persona-chart"'):]
    assert "<svg" in chart[:200] and "pass^k by user persona and k" in chart

    # The review: the verifier's failures under the two personas that break it are the
    # user simulator's doing (the scripted judge blames a user that leaves early), so
    # leaving them out is a sensitivity line beside pass^k, never in its place.
    reviewed = passhat("review", "sweep", "--judge-model", "scripted/reviewer", env=env, timeout=600)
    assert reviewed.returncode == 0, reviewed.stderr
    text = passhat("report", "sweep", env=env).stdout
    verifier = text[text.index("  scripted/verifier: reviewed"):]
    for line in ("    user tau2-user: 0 of 0 failed trial(s) blamed on the user simulator (-)",
                 "    user impatient:3: 6 of 6 failed trial(s) blamed on the user simulator (100%)",
                 "      pass^k (official): pass^1 0.000 pass^2 0.000",
                 "      pass^k leaving those trials out (sensitivity only, NOT the official figure): -",
                 "    pass^k (official): pass^1 0.500 pass^2 0.500",
                 "    pass^k leaving those trials out (sensitivity only, NOT the official figure): pass^1 1.000 pass^2 1.000"):
        assert line in verifier.splitlines(), verifier
    users = json.loads(passhat("report", "sweep", "-o", "json", env=env).stdout)["reviews"]["sweep"]["models"]
    assert {u: v["blamed_share"] for u, v in users["scripted/verifier"]["users"].items()} == {
        "tau2-user": None, "impatient:3": 1.0, "incoherent:1": None, "skeptical:2": 1.0}

    # The gate: the verifier meets pass^2 >= 0.5 under incoherent:1 only.
    gated = passhat("gate", *SUITE, "-m", "scripted/verifier", "--require", "pass^2 >= 0.5", "--personas", "all",
                    "--run-id", "gate", "--junit", str(tmp_path / "gate.xml"), "--summary", str(tmp_path / "gate.md"),
                    "-o", "json", env=env, timeout=900)
    assert gated.returncode == 1, gated.stderr
    record = json.loads(gated.stdout)
    assert record["verdict"] == "FAIL"
    assert [(c["persona"], c["verdict"], c["split"], round(c["confidence"], 4)) for c in record["criteria"]] == [
        ("skeptical:2", "FAIL", 3, 0.9833), ("incoherent:1", "PASS", 3, 0.9833), ("impatient:3", "FAIL", 3, 0.9833)]
    assert "at alpha / 3 = 0.01667 (Bonferroni)" in (tmp_path / "gate.md").read_text()
    verdicts = {case.get("persona"): case for case in ET.parse(tmp_path / "gate.xml").getroot().iter("testcase")
                if case.get("name") == "verdict"}
    assert sorted(verdicts) == sorted(PERSONAS)
    assert "split over 3 personas (Bonferroni)" in verdicts["skeptical:2"].find("failure").get("message")
    assert verdicts["incoherent:1"].find("failure") is None
