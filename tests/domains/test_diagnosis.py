"""The diagnosis of failed trials, checked against the mistakes scripted/faulty-P injects
on a real run (Temporal, store, scoring activity)."""

from __future__ import annotations

import json

import pytest
from passhat.infra.temporal_client import connect

from passhat.domains.registry import get_domain
from passhat.infra import scripted_faults
from passhat.testing.harness import passhat
from tests.helpers import cli_env
from tests.runs import config, run_to_end

SEEN_KINDS = {"wrong_argument", "skipped_write", "extra_write", "wrong_tool", "missing_info"}


async def test_diagnosis_names_the_injected_mistake_and_its_step(temporal_server, sqlite_store, tmp_path):
    client = await connect(temporal_server.address)
    cfg = config(limit=20, agent_models=["scripted/faulty-1.0"])
    await run_to_end(client, sqlite_store, cfg)
    domain = get_domain("airline")
    facts = scripted_faults.facts_of(domain)
    checked = 0
    for row in sqlite_store.trials(cfg.run_id):
        diagnosis = sqlite_store.trial_diagnosis(cfg.run_id, row.trial_id)
        if row.success:
            assert diagnosis is None
            continue
        assert diagnosis is not None and diagnosis["version"] == 1
        task = domain.task(row.task_id)
        fault = scripted_faults.planned_fault("airline", task, facts, row.seed, 1.0)
        if fault is None or fault.kind not in SEEN_KINDS:
            continue
        steps = [(s.step, s.message_list()) for s in sqlite_store.steps(row.trial_id)]
        expected = {"kind": fault.kind, "step": scripted_faults.fault_step(fault, task, steps)}
        first = diagnosis["first_off_path"]
        assert first is not None, (row.task_id, fault)
        assert {"kind": first["kind"], "step": first["step"]} == expected, (row.task_id, fault, diagnosis)
        checked += 1
    assert checked >= 3
    # The commands carry it: in full under "diagnosis" in JSON, one line in the table,
    # above the transcript in `show`.
    env = cli_env(f"sqlite:///{tmp_path / 'results.db'}", tmp_path)
    listed = json.loads(passhat("trials", cfg.run_id, "--failed", "-o", "json", env=env, timeout=180).stdout)
    failed = listed["trials"][0]
    assert failed["diagnosis"] == sqlite_store.trial_diagnosis(cfg.run_id, failed["trial_id"])
    shown = json.loads(passhat("show", failed["trial_id"], "-o", "json", env=env, timeout=180).stdout)
    assert shown["diagnosis"] == failed["diagnosis"]
    text = passhat("show", failed["trial_id"], env=env, timeout=180).stdout
    assert text.index("diagnosis: ") < text.index("agent:") if "agent:" in text else "diagnosis: " in text
