"""The gate's bound on a persona's drop against tau2's own user, end to end through the real
CLI (docs/gate.md, A persona's drop): scripted/verifier on airline tasks, under a scripted
persona that does not move it (incoherent:1) and one that breaks it (skeptical:2; effects
known: passhat.infra.scripted_personas). The bound is decided on pairs of the same task's
trials under both users, and the JUnit says the verdict per persona."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from passhat.testing.harness import passhat

SUITE = ["--domain", "airline", "--task", "7", "--task", "8", "--task", "17", "--user-model", "scripted/customer",
         "-m", "scripted/verifier", "--max-persona-drop", "0.3", "--personas", "all", "--yes"]


def gate(env, tmp_path, persona: str, run_id: str):  # noqa: ANN001, ANN201
    done = passhat("gate", *SUITE, "--user-persona", persona, "--run-id", run_id,
                   "--junit", str(tmp_path / f"{run_id}.xml"), "-o", "json", env=env, timeout=900)
    return done, json.loads(done.stdout) if done.stdout.strip() else None


def test_a_persona_that_does_not_hurt_the_agent_passes_the_drop_bound_and_one_that_breaks_it_fails(env, tmp_path):
    passed, record = gate(env, tmp_path, "incoherent", "drop-pass")
    assert passed.returncode == 0, passed.stderr
    assert "smallest drop of pass^1 it can detect (FAIL) at this budget: 0.67" in passed.stderr
    [criterion] = record["criteria"]
    assert (criterion["kind"], criterion["persona"], criterion["verdict"]) == ("persona_drop", "incoherent:1", "PASS")
    assert criterion["criterion"] == "pass^1 not worse than under tau2's user by more than 0.3 [persona incoherent:1]"
    assert criterion["estimate"] == 0.0 and criterion["low"] > -0.3
    # Every round ran every task under both users: 3 tasks x 2 users a round.
    assert record["conversations"] == 6 * len(record["rounds"])
    assert [(t["estimate"], t["baseline"]) for t in criterion["tasks"]] == [(1.0, 1.0)] * 3
    assert ET.parse(tmp_path / "drop-pass.xml").getroot().find(".//testcase[@name='verdict']/failure") is None

    failed, record = gate(env, tmp_path, "skeptical:2", "drop-fail")
    assert failed.returncode == 1, failed.stderr
    [criterion] = record["criteria"]
    assert (criterion["persona"], criterion["verdict"]) == ("skeptical:2", "FAIL")
    assert criterion["estimate"] == -1.0 and criterion["high"] < -0.3
    assert [(t["estimate"], t["baseline"], t["passed"]) for t in criterion["tasks"]] == [(0.0, 1.0, False)] * 3
    verdict = ET.parse(tmp_path / "drop-fail.xml").getroot().find(".//testcase[@name='verdict']")
    assert verdict.get("persona") == "skeptical:2" and verdict.find("failure") is not None


def test_the_drop_bound_needs_personas(env, tmp_path):
    done = passhat("gate", "--domain", "airline", "--task", "7", "--user-model", "scripted/customer",
                   "-m", "scripted/verifier", "--max-persona-drop", "0.3", "--yes", env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: --max-persona-drop bounds a persona's drop")
    done = passhat("gate", "--domain", "airline", "--task", "7", "--user-model", "scripted/customer",
                   "-m", "scripted/verifier", "--max-persona-drop", "1.5", "--user-persona", "incoherent",
                   "--personas", "all", "--yes", env=env)
    assert done.returncode == 2 and "--max-persona-drop must be within 0..1" in done.stderr
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[gate]\nmax_persona_drop = 1.5\npersonas = "all"\n')
    done = passhat("gate", "--domain", "airline", "--task", "7", "--user-model", "scripted/customer",
                   "-m", "scripted/verifier", "--user-persona", "incoherent", "--config", str(sweep), "--yes", env=env)
    assert done.returncode == 2
    assert f"{sweep}: gate.max_persona_drop: --max-persona-drop must be within 0..1" in done.stderr
