"""The sweep config file (`passhat run --config`), checked in process: what a good file
sets, the one line each kind of bad file gets, how options given on the command line
override the file, and that runs stored before per-model args existed keep their
identity. The real command with a config file is in tests/cli/test_sweep_run.py; bad
files through the real command in tests/cli/test_bad_input.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passhat.cli import sweep_config
from passhat.cli.run_config import build_config
from passhat.cli.run_options import RunOptions, UserInputError, declared_options, file_keys, options_with_bounds
from passhat.cli.preview import RunSize, describe, direct_calls, needs_confirmation, run_size
from passhat.contracts import RunConfig
from passhat.domains.registry import get_domain
from passhat.domains.tau2_version import installed_rules
from passhat.run_identity import fingerprint

GOOD = """
run_id = "sweep-1"
domains = ["airline", "retail"]
trials = 4
seed = 7
concurrency = 12
max_steps = 50
max_errors = 5
retry_for = "2m"
rate_limits = { openai = "2/s", anthropic = "600/h" }
max_concurrent = { openai = 3 }
max_attempts = 3
model_timeout = 60
max_cost = 2.5
lenient_tool_args = true

[tasks]
airline = ["0", 1]

[user]
model = "scripted/oracle"
args = { temperature = 0.1 }

[[agents]]
model = "openai/gpt-4.1"
args = { temperature = 0.3, max_tokens = 512 }

[[agents]]
model = "anthropic/claude-sonnet-4-5"

[[agents]]
model = "hosted_vllm/qwen"
args = { api_base = "http://localhost:8000/v1", input_cost_per_token = 1e-7, output_cost_per_token = 2e-7 }
"""

def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_good_file_sets_every_key(tmp_path):
    sweep = sweep_config.load(write(tmp_path, GOOD))
    assert sweep.values == {
        "run_id": "sweep-1", "domains": ["airline", "retail"], "trials": 4, "seed": 7,
        "concurrency": 12, "max_steps": 50, "max_errors": 5, "retry_for": 120.0,
        "max_attempts": 3, "model_timeout": 60.0, "max_cost": 2.5, "lenient_tool_args": True,
        "rate_limits": ["openai=2/s", "anthropic=600/h"], "max_concurrent": ["openai=3"],
        "task_ids": {"airline": ["0", "1"]},
        "user_model": "scripted/oracle", "user_args": {"temperature": 0.1},
        "agent_models": ["openai/gpt-4.1", "anthropic/claude-sonnet-4-5", "hosted_vllm/qwen"],
        "agent_model_args": {
            "openai/gpt-4.1": {"temperature": 0.3, "max_tokens": 512},
            "anthropic/claude-sonnet-4-5": {},
            "hosted_vllm/qwen": {"api_base": "http://localhost:8000/v1",
                                 "input_cost_per_token": 1e-7, "output_cost_per_token": 2e-7},
        },
    }
    config = build_config(sweep_config.merge(sweep, RunOptions(), set()))
    # Each agent model's calls carry its own args (temperature 0.0 unless they set one).
    args = {unit.agent_model: unit.agent_args for unit in config.units()}
    assert args == {
        "openai/gpt-4.1": {"temperature": 0.3, "max_tokens": 512},
        "anthropic/claude-sonnet-4-5": {"temperature": 0.0},
        "hosted_vllm/qwen": {"api_base": "http://localhost:8000/v1", "input_cost_per_token": 1e-7,
                             "output_cost_per_token": 2e-7, "temperature": 0.0},
    }
    assert config.user_args == {"temperature": 0.1}
    assert config.task_ids == {"airline": ["0", "1"], "retail": get_domain("retail").task_ids()}
    assert (config.trials, config.seed, config.concurrency, config.max_steps, config.max_errors,
            config.max_cost, config.lenient_tool_arguments) == (4, 7, 12, 50, 5, 2.5, True)
    assert (config.retry.retry_for_s, config.retry.max_attempts, config.retry.model_call_timeout_s) == (120.0, 3, 60.0)
    assert {p: (limit.per_minute, limit.max_concurrent) for p, limit in config.provider_limits.items()} == {
        "openai": (120.0, 3), "anthropic": (10.0, None)}


def test_a_task_file_is_relative_to_the_config(tmp_path):
    from tests.helpers import VALID_TASK

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "mine.json").write_text(json.dumps([VALID_TASK]))
    path = write(tmp_path, 'domains = ["airline"]\ntask_file = "tasks/mine.json"\n[tasks]\nairline = ["t1"]\n')
    sweep = sweep_config.load(path)
    assert sweep.values["task_file"] == str(tmp_path / "tasks" / "mine.json")
    values = sweep_config.merge(sweep, RunOptions(agent_models=["scripted/oracle"], user_model="scripted/oracle"),
                                {"agent_models", "user_model"})
    config = build_config(values)
    assert config.task_ids == {f"airline@{tmp_path / 'tasks' / 'mine.json'}": ["t1"]}


AGENT = '[[agents]]\nmodel = "scripted/oracle"\n'
USER = '[user]\nmodel = "scripted/oracle"\n'
BASE = f'domains = ["airline"]\n{USER}{AGENT}'

# (id, file content, the one line it gets after "<file>: ")
BAD = [
    ("toml-syntax", 'domains = ["airline"]\ntrials = \n', "line 2, column 10: invalid TOML: Invalid value"),
    ("toml-unclosed", 'domains = ["airline"\n', "end of file: invalid TOML:"),
    ("unknown-key", "k = 4\n" + BASE,
     "k: unknown key; known keys: " + ", ".join(sorted(sweep_config.file_keys()))),
    ("plugin-not-importable", 'plugins = ["no_such_plugin"]\n' + BASE,
     "plugins: plugin no_such_plugin failed to import: ModuleNotFoundError: No module named 'no_such_plugin'"),
    ("max-concurrent-zero", 'max_concurrent = { openai = 0 }\n' + BASE,
     "max_concurrent.openai: must be an integer of at least 1, got 0"),
    ("rate-limit-not-a-rate", 'rate_limits = { openai = "fast" }\n' + BASE,
     'rate_limits.openai: must be a rate such as "60/min", "2/s" or "1000/h", got \'fast\''),
    ("unknown-agent-key", BASE + AGENT.replace("[[agents]]\n", "[[agents]]\ntemperature = 0\n").replace("oracle", "noisy-0.5"),
     "agents[1].temperature: unknown key; known keys: model, args"),
    ("key-below-a-table", BASE + "trials = 4\n",
     "agents[0].trials: unknown key; known keys: model, args (a top-level key goes above the first [table] or [[agents]])"),
    ("args-string", BASE + '[[agents]]\nmodel = "scripted/noisy-0.5"\nargs = "hot"\n',
     "agents[1].args: must be a table, got a string"),
    ("agent-secret", f'domains = ["airline"]\n{USER}[[agents]]\nmodel = "openai/gpt-4.1"\nargs = {{ api_key = "sk-abc" }}\n',
     "agents[0].args: api_key would store a secret with the run"),
    ("user-secret-nested", f'domains = ["airline"]\n{AGENT}[user]\nmodel = "scripted/oracle"\n'
     '[user.args.extra_headers]\nAuthorization = "Bearer x"\n',
     "user.args: extra_headers.Authorization would store a secret with the run"),
    ("agent-without-model", BASE + "[[agents]]\nargs = {}\n", "agents[1]: has no model"),
    ("agents-not-array", f'domains = ["airline"]\nagents = "scripted/oracle"\n{USER}',
     "agents: must be an array of tables ([[agents]] with a model each), got a string"),
    ("duplicate-agent", BASE + AGENT, "agents[1].model: 'scripted/oracle' is already agents[0].model"),
    ("unknown-agent-model", BASE + '[[agents]]\nmodel = "nosuchprovider/x"\n',
     "agents[1].model: unknown model 'nosuchprovider/x'"),
    ("user-string", f'domains = ["airline"]\nuser = "scripted/oracle"\n{AGENT}',
     'user: must be a table such as { model = "openai/gpt-4.1" }, got a string'),
    ("trials-zero", "trials = 0\n" + BASE, "trials: must be at least 1, got 0"),
    ("trials-string", 'trials = "4"\n' + BASE, "trials: must be an integer, got a string"),
    ("trials-float", "trials = 2.5\n" + BASE, "trials: must be an integer, got a float"),
    ("seed-bool", "seed = true\n" + BASE, "seed: must be an integer, got a boolean"),
    ("max-cost-zero", "max_cost = 0\n" + BASE, "max_cost: must be more than 0 (USD), got 0"),
    ("retry-for", 'retry_for = "soon"\n' + BASE,
     "retry_for: must be a duration such as 900, \"90s\", \"15m\" or \"2h\", got 'soon'"),
    ("run-id", 'run_id = "my run"\n' + BASE, "run_id: 'my run' must be 1-100 letters"),
    ("domains-string", f'domains = "airline"\n{USER}{AGENT}', "domains: must be an array of strings, got a string"),
    ("unknown-domain", f'domains = ["airline", "nosuchdomain"]\n{USER}{AGENT}',
     "domains[1]: Unknown domain 'nosuchdomain'"),
    ("tasks-other-domain", BASE + '[tasks]\nretail = ["0"]\n', "tasks.retail: 'retail' is not one of domains (airline)"),
    ("unknown-task", BASE + '[tasks]\nairline = ["0", "9999"]\n',
     "tasks.airline: unknown task id(s) 9999 (see `passhat tasks airline`)"),
    ("task-id-table", BASE + '[tasks]\nairline = [{ id = "0" }]\n', "tasks.airline[0]: must be a task id (a string), got a table"),
    ("task-file-missing", 'task_file = "nope.json"\n' + BASE, "task_file: task file {dir}/nope.json does not exist"),
    ("task-file-two-domains", f'domains = ["airline", "retail"]\ntask_file = "t.json"\n{USER}{AGENT}',
     "task_file: replaces the tasks of one domain: give exactly one plain domain in domains"),
]


@pytest.mark.parametrize("content,expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_file_is_one_line_naming_file_key_and_reason(tmp_path, content, expected):
    path = write(tmp_path, content)
    with pytest.raises(UserInputError) as err:
        sweep_config.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: " + expected.replace("{dir}", str(tmp_path))), message


BELOW = {"trials": 0, "concurrency": 0, "max_steps": 0, "max_errors": 0, "max_attempts": -1,
         "model_timeout": 0.5, "retry_for": "0s", "max_cost": 0.0,
         "num_tasks": 0, "timeout": 0}


def test_a_bound_is_said_the_same_by_a_flag_and_a_file_key(tmp_path):
    """Each bound is declared once, on its option: a value out of it gets the same reason
    whether it comes from the command line or from a config file."""
    assert set(options_with_bounds()) == set(BELOW)
    keys = {name: key for key, name in file_keys().items()}
    for name, value in BELOW.items():
        opt = options_with_bounds()[name]
        path = write(tmp_path, f"{keys[name]} = {json.dumps(value)}\n" + BASE)
        with pytest.raises(UserInputError) as from_file:
            sweep_config.load(path)
        with pytest.raises(UserInputError) as from_flag:
            build_config(RunOptions(domains=["airline"], agent_models=["scripted/oracle"],
                                    user_model="scripted/oracle", **{name: value}))
        reason = str(from_flag.value).removeprefix(f"{opt.flags[0]} ")
        assert reason.startswith("must be "), from_flag.value
        assert str(from_file.value) == f"{path}: {keys[name]}: {reason}"


def test_run_has_a_flag_for_every_option_and_a_file_key_for_each_but_model_args():
    import typer

    from passhat.cli.main import app

    run = typer.main.get_command(app).commands["run"]
    flags = {opt for param in run.params for opt in param.opts}
    assert all(set(opt.flags) <= flags for opt in declared_options().values())
    # Model args are tables under their model's key ([[agents]], [user], [judge]).
    assert set(file_keys().values()) == set(declared_options()) - {"agent_args", "user_args", "judge_args"}


def test_the_configuration_docs_list_every_key_a_file_may_have():
    """docs/configuration.md's key table names each key of a sweep file, in the first
    column (`seed`, `concurrency`, ... share a row), and no key a file may not have."""
    import re

    docs = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    table = docs[docs.index("| key | what it sets |"):].split("\n\n")[0]
    listed = {key for row in table.splitlines()[2:] for key in re.findall(r"`([a-z_]+)`", row.split(" | ")[0])}
    assert listed == set(file_keys()) | {sweep_config.GATE_TABLE}


def test_a_missing_or_unreadable_file(tmp_path):
    with pytest.raises(UserInputError, match=r"^nope\.toml: no such config file$"):
        sweep_config.load("nope.toml")
    with pytest.raises(UserInputError, match="is a directory, not a TOML config file"):
        sweep_config.load(str(tmp_path))


def test_options_on_the_command_line_override_the_file(tmp_path):
    sweep = sweep_config.load(write(tmp_path, GOOD))
    given = {"trials", "seed", "max_cost", "domains", "user_args", "agent_args"}
    options = RunOptions(trials=1, seed=300, max_cost=9.0, domains=["airline"],
                         user_args='{"temperature": 0.9}', agent_args='{"max_tokens": 64, "top_p": 0.5}')
    values = sweep_config.merge(sweep, options, given)
    assert (values.trials, values.seed, values.max_cost) == (1, 300, 9.0)  # the options'
    assert (values.concurrency, values.max_steps, values.run_id) == (12, 50, "sweep-1")  # the file's
    # Model args merge key by key, the command line's winning.
    assert values.user_args == {"temperature": 0.9}
    assert values.agent_model_args["openai/gpt-4.1"] == {"temperature": 0.3, "max_tokens": 64, "top_p": 0.5}
    assert values.agent_model_args["anthropic/claude-sonnet-4-5"] == {"max_tokens": 64, "top_p": 0.5}
    # --domain replaces the file's domains; its tasks apply to the domains that run.
    assert values.domains == ["airline"] and values.task_ids == {"airline": ["0", "1"]}
    config = build_config(values)
    assert (config.trials, config.seed, config.max_cost, config.domains) == (1, 300, 9.0, ["airline"])

    # --agent-model replaces the file's agents and their args; --task replaces its tasks.
    values = sweep_config.merge(sweep, RunOptions(agent_models=["scripted/oracle"], task_ids=["2"]),
                                {"agent_models", "task_ids"})
    config = build_config(values)
    assert config.agent_models == ["scripted/oracle"] and config.agent_model_args == {}
    assert config.provider_limits == {}  # the file's caps were on providers no longer called
    assert config.task_ids == {"airline": ["2"], "retail": ["2"]}


JUDGED = """
domains = ["retail"]
[user]
model = "scripted/oracle"
[[agents]]
model = "scripted/oracle"
[judge]
model = "scripted/judge"
args = { temperature = 0.2, max_tokens = 256 }
"""


@pytest.mark.skipif(installed_rules().grades_nl_assertions, reason="the refusal of a tau2 that grades no NL assertions (26.3)")
def test_a_judge_table_is_refused_where_tau2_grades_no_nl_assertions(tmp_path):
    sweep = sweep_config.load(write(tmp_path, JUDGED))
    assert sweep.values["judge_model"] == "scripted/judge"
    with pytest.raises(UserInputError, match=r"\[judge\]\) need tau2 1\.0\.x: the installed tau2 26\.3"):
        build_config(sweep_config.merge(sweep, RunOptions(), set()))


@pytest.mark.skipif(not installed_rules().grades_nl_assertions, reason="needs tau2 1.0.x (NL-assertion judge)")
def test_a_judge_table_sets_the_judge_and_flags_override_it(tmp_path):
    sweep = sweep_config.load(write(tmp_path, JUDGED))
    config = build_config(sweep_config.merge(sweep, RunOptions(), set()))
    assert (config.judge_model, config.judge_args) == ("scripted/judge", {"temperature": 0.2, "max_tokens": 256})
    # --judge-args merges key by key over the file's, --judge-model replaces its model.
    given = RunOptions(judge_model="openai/j", judge_args='{"max_tokens": 64}')
    config = build_config(sweep_config.merge(sweep, given, {"judge_model", "judge_args"}))
    assert (config.judge_model, config.judge_args) == ("openai/j", {"temperature": 0.2, "max_tokens": 64})
    bad = write(tmp_path, JUDGED.replace('model = "scripted/judge"', 'modell = "x"'), "bad.toml")
    with pytest.raises(UserInputError, match=r"bad\.toml: judge\.modell: unknown key"):
        sweep_config.load(bad)


TIMED = 'domains = ["airline"]\ntimeout = 30\n[user]\nmodel = "scripted/oracle"\n[[agents]]\nmodel = "scripted/oracle"\n'


@pytest.mark.skipif(installed_rules().timeout_reason is not None, reason="the refusal of a tau2 without a time limit (26.3)")
def test_a_timeout_is_refused_where_tau2_has_no_time_limit(tmp_path):
    sweep = sweep_config.load(write(tmp_path, TIMED))
    assert sweep.values["timeout"] == 30
    with pytest.raises(UserInputError, match=r"^--timeout \(a sweep file's timeout\) needs tau2 1\.0\.x: "
                                             r"the installed tau2 26\.3 has no time limit on a conversation$"):
        build_config(sweep_config.merge(sweep, RunOptions(), set()))


@pytest.mark.skipif(installed_rules().timeout_reason is None, reason="needs tau2 1.0.x (--timeout)")
def test_a_timeout_is_part_of_the_run_and_the_flag_overrides_the_file(tmp_path):
    sweep = sweep_config.load(write(tmp_path, TIMED))
    config = build_config(sweep_config.merge(sweep, RunOptions(), set()))
    assert config.timeout == 30.0
    untimed = config.model_copy(update={"timeout": None})
    assert fingerprint(config) != fingerprint(untimed)
    config = build_config(sweep_config.merge(sweep, RunOptions(timeout=5.5), {"timeout"}))
    assert config.timeout == 5.5


def test_a_run_needs_domains_models_and_a_user_model_from_somewhere(tmp_path):
    with pytest.raises(UserInputError) as err:
        sweep_config.check_required(sweep_config.merge(None, RunOptions(), set()), " — see help")
    assert str(err.value) == ("Missing options '--domain', '--agent-model', '--user-model' "
                              "(or domains, agents, user in a --config file) — see help")
    sweep = sweep_config.load(write(tmp_path, f'domains = ["airline"]\n{AGENT}'))
    with pytest.raises(UserInputError, match=r"^Missing option '--user-model' \(or user in a --config file\)$"):
        sweep_config.check_required(sweep_config.merge(sweep, RunOptions(), set()), "")


# A run stored before per-model args and budgets existed (config_json as that version
# wrote it) and the fingerprint it was stored with.
LEGACY_JSON = (
    '{"user_model":"openai/gpt-4.1","agent_args":{"temperature":0.0,"api_base":"http://x/v1"},'
    '"user_args":{"temperature":0.0},"max_steps":200,"max_errors":10,"lenient_tool_arguments":false,'
    '"retry":{"retry_for_s":900.0,"max_attempts":0,"initial_interval_s":1.0,"backoff":2.0,'
    '"max_interval_s":60.0,"model_call_timeout_s":300.0,"heartbeat_timeout_s":10.0,"bookkeeping_for_s":600.0},'
    '"run_id":"legacy-1","agent_models":["openai/gpt-4.1","scripted/oracle"],"domains":["airline"],'
    '"task_ids":{"airline":["0","1"]},"trials":4,"seed":300,"concurrency":8}'
)
LEGACY_FINGERPRINT = "c7a158cdf50521f0b55ba360f834ff237a1f46a2fd669579b51ea61376301aa4"


def test_a_stored_run_keeps_its_identity():
    config = RunConfig.model_validate_json(LEGACY_JSON)
    assert fingerprint(config) == LEGACY_FINGERPRINT
    assert config.agent_args_for("scripted/oracle") == {"temperature": 0.0, "api_base": "http://x/v1"}
    # The budget is not part of a run's identity; per-model args are.
    assert fingerprint(config.model_copy(update={"max_cost": 3.0})) == LEGACY_FINGERPRINT
    # Nor is the order its tasks start in; a stored run without estimates keeps its order.
    assert fingerprint(config.model_copy(update={"expected_calls": {"airline": {"1": 9}}})) == LEGACY_FINGERPRINT
    assert [u.task_id for u in config.units()] == [
        t for _ in config.agent_models for d in config.domains for t in config.task_ids[d]
    ]
    per_model = config.model_copy(update={"agent_model_args": {"scripted/oracle": {"temperature": 0.5}}})
    assert fingerprint(per_model) != LEGACY_FINGERPRINT
    assert [u.agent_args for u in per_model.units()][-1] == {"temperature": 0.5}


def test_a_run_starts_its_longest_tasks_first():
    # A long conversation started last runs on alone after the others have ended.
    config = build_config(RunOptions(run_id="order", domains=["airline", "retail"],
                                     task_ids={"airline": ["0", "1", "3", "4"], "retail": ["0", "2"]},
                                     agent_models=["scripted/oracle", "scripted/noisy-0.5"],
                                     user_model="scripted/oracle", trials=2))
    assert config.expected_calls == {"airline": {"0": 3, "1": 5, "3": 5, "4": 9},
                                     "retail": {"0": 8, "2": 14}}
    order = [(u.domain, u.task_id, u.agent_model) for u in config.units()]
    oracle, noisy = "scripted/oracle", "scripted/noisy-0.5"
    # Most estimated calls first; equal estimates in the order given (model, domain, task).
    assert order == [("retail", "2", oracle), ("retail", "2", noisy), ("airline", "4", oracle),
                     ("airline", "4", noisy), ("retail", "0", oracle), ("retail", "0", noisy),
                     ("airline", "1", oracle), ("airline", "3", oracle), ("airline", "1", noisy),
                     ("airline", "3", noisy), ("airline", "0", oracle), ("airline", "0", noisy)]


TELECOM_TASK = "[mobile_data_issue]airplane_mode_on|user_abroad_roaming_enabled_off[PERSONA:None]"


def test_the_size_of_a_run_before_it_starts():
    config = build_config(RunOptions(run_id="size", domains=["airline"], task_ids=["1", "17"],
                                     agent_models=["scripted/oracle", "scripted/noisy-0.5"],
                                     user_model="scripted/oracle", trials=3, max_cost=4.0))
    size = run_size(config)
    # Task 1 has 2 gold actions of the agent's, task 17 has 3: 5 and 6 calls each.
    assert [direct_calls(get_domain("airline").task(t)) for t in ("1", "17")] == [5, 6]
    # Each action the user performs takes two: the agent asks, the user acts.
    telecom = get_domain("telecom").task(TELECOM_TASK)
    assert [a.requestor for a in telecom.gold_actions] == ["user", "user"]
    assert direct_calls(telecom) == 3 + 2 * 2
    assert size == RunSize(conversations=12, tasks=2, model_calls=(5 + 6) * 3 * 2, max_model_calls=12 * 200)
    assert describe(config, size) == (
        "run size: 12 conversations (2 agent models x 2 tasks x 3 trials); about 66 model calls, "
        "estimated as conversations that go straight to each task's gold actions (3 + 1 per "
        "agent action + 2 per user action), up to 2,400 if every conversation runs to "
        "--max-steps 200; budget 4 USD"
    )
    big = RunSize(conversations=1001, tasks=1, model_calls=1, max_model_calls=1)
    assert needs_confirmation(big, yes=False, interactive=True)
    assert not needs_confirmation(big, yes=True, interactive=True)
    assert not needs_confirmation(big, yes=False, interactive=False)
    assert not needs_confirmation(RunSize(1000, 1, 1, 1), yes=False, interactive=True)


def test_the_gate_table_is_checked_by_key_and_type(tmp_path):
    """`passhat gate --config`'s [gate] table: its keys are the gate's flags, each of its
    kind; whole_blocks is true or false, not a number or a string."""
    path = write(tmp_path, BASE + '[gate]\nrequire = ["pass^4 >= 0.8"]\nmax_trials = 16\nwhole_blocks = true\n')
    assert sweep_config.gate_table(path) == {"require": ["pass^4 >= 0.8"], "max_trials": 16, "whole_blocks": True}
    for bad, line in (("whole_blocks = 1", "gate.whole_blocks: must be true or false, got an integer"),
                      ('max_trials = "8"', "gate.max_trials: must be an integer, got a string"),
                      ("rounds = 3", "gate.rounds: unknown key; known keys: baseline, confidence, max_drop, "
                                     "max_persona_drop, max_trials, persona_metric, personas, regression_metric, "
                                     "require, whole_blocks"),
                      ("personas = true", "gate.personas: must be a string, got a boolean")):
        with pytest.raises(UserInputError) as err:
            sweep_config.gate_table(write(tmp_path, BASE + f"[gate]\n{bad}\n"))
        assert str(err.value).endswith(line), str(err.value)
