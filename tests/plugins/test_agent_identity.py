"""The agent is part of the run's identity: a plugin agent's module sources are digested
when the run is recorded, a run whose agent changed since is refused (naming the
module) when the same command runs again or the run is resumed, and show, report, the
tau2 and JSON-lines exports and an import of the tau2 files carry the agent's name and
digest. The plugin is a copy of the test agents' module, so a line of it can change."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

from passhat.infra.store import Store
from passhat.run_identity import agent_identity
from passhat.testing.harness import passhat
from tests.helpers import PLUGIN_MODULES, TEST_AGENTS, one_error_line, store_rows

RUN = ("run", "--plugin", TEST_AGENTS, "--domain", "airline", "--agent", "notes_agent",
       "--agent-model", "scripted/oracle", "--user-model", "scripted/oracle",
       "--task", "1", "--trials", "1", "--run-id", "mine")


def test_a_changed_agent_module_is_refused_and_the_agent_travels_with_the_results(temporal_server, tmp_path):
    modules = tmp_path / "modules"
    modules.mkdir()
    module = modules / f"{TEST_AGENTS}.py"
    shutil.copy(PLUGIN_MODULES / f"{TEST_AGENTS}.py", module)
    home = tmp_path / "home"
    env = {**os.environ, "PASSHAT_HOME": str(home), "TEMPORAL_ADDRESS": temporal_server.address,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(modules)}
    env.pop("PASSHAT_DB_URL", None)

    first = passhat(*RUN, "--output", "json", env=env)
    assert first.returncode == 0, first.stderr
    store = Store(f"sqlite:///{home / 'results.db'}")
    try:
        config = store.get_run("mine").run_config()
        source = hashlib.sha256(module.read_bytes()).hexdigest()[:16]
        assert config.agent_digests == {"notes_agent": {f"module {TEST_AGENTS}": source}}
        agent = agent_identity(config, "scripted/oracle")
        [trial] = store.trials("mine")

        # show, report and both exports name the agent and its digest.
        shown = passhat("show", trial.trial_id, env=env)
        assert f"agent notes_agent sha256:{agent.digest} (module {TEST_AGENTS} {source[:8]})" in shown.stdout
        assert json.loads(passhat("show", trial.trial_id, "-o", "json", env=env).stdout)["agent"] == \
            agent.model_dump()
        report = passhat("report", "mine", env=env)
        assert f"agent with scripted/oracle: notes_agent sha256:{agent.digest}" in report.stdout
        out = tmp_path / "out"
        for fmt in ("tau2", "jsonl"):
            done = passhat("export", "mine", "--format", fmt, "--output-dir", str(out), env=env)
            assert done.returncode == 0, done.stderr
        [tau2_file] = out.glob("*.json")
        agent_info = json.loads(tau2_file.read_text())["info"]["agent_info"]
        assert (agent_info["implementation"], agent_info["llm"]) == ("notes_agent", "scripted/oracle")
        assert agent_info["passhat_agent"] == {"digest": agent.digest, "parts": agent.parts}
        [line] = (out / "mine.jsonl").read_text().splitlines()
        assert json.loads(line)["agent"] == agent.model_dump()
        # An import of the tau2 file keeps the agent: the same name and digest.
        imported = passhat("import", str(tau2_file), "--run-id", "mine-imported", env=env)
        assert imported.returncode == 0, imported.stderr
        again = store.get_run("mine-imported").run_config()
        assert (again.agent, again.agent_digests) == ("notes_agent", config.agent_digests)
        assert agent_identity(again, "scripted/oracle") == agent

        # One line of the agent's module changes: the same command, and resume, are
        # refused naming the module, and nothing recorded changes.
        before = store_rows(store)
        original = module.read_text()
        module.write_text(original.replace("GIVE_UP_TURN = 2", "GIVE_UP_TURN = 3"))
        refusal = ("error: the agent changed since run 'mine' was recorded: notes_agent (module "
                   f"{TEST_AGENTS}) differ; restore the agent to go on with this run, or use a new --run-id")
        assert one_error_line(passhat(*RUN, env=env)) == refusal
        assert one_error_line(passhat("resume", "mine", env=env)) == refusal
        assert store_rows(store) == before
        module.write_text(original)
        assert passhat(*RUN, "--output", "json", env=env).returncode == 0
    finally:
        store.close()
