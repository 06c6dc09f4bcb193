"""The sweep config of `passhat run --config FILE`: a TOML file that says what a run
evaluates, each agent model with litellm args of its own. It is checked whole before
anything starts, and a mistake is one line naming the file, the key and the reason:

    sweep.toml: agents[1].args: must be a table, got a string

Its keys, how each is written and its bounds come from the options declared in
passhat.cli.run_options. Options given on the command line override the file
(`merge`)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

from passhat.cli.run_config import (
    check_model,
    parse_duration,
    parse_json_object,
    parse_provider_limits,
    refuse_secrets,
)
from passhat.cli.run_options import (RunOptions, UserInputError, declared_options, file_keys, given_agents,
                                     out_of_bounds)
from passhat.contracts import RUN_ID_PATTERN, RUN_ID_RULE, provider_of
from passhat.domains.a2a_protocol import A2A_PREFIX

MODEL_KEYS = ("model", "args")  # of each [[agents]] table and of [user]
# `passhat gate`'s criteria and budget: the keys are its flags' names.
GATE_TABLE = "gate"
GATE_KEYS = {"require": list, "baseline": str, "max_drop": float, "regression_metric": str,
             "confidence": float, "max_trials": int, "whole_blocks": bool, "personas": str,
             "max_persona_drop": float, "persona_metric": str}


@dataclass
class Sweep:
    """A checked config file: the RunOptions fields it sets, by field name (a field the
    file does not set is absent). Paths in it are absolute."""

    path: str
    values: dict[str, Any]


def load(path: str) -> Sweep:
    """Read and check a config file; UserInputError names the file, the key and the
    reason. Cheap checks first: models need litellm, domains and tasks need tau2."""
    data = _parse(path)
    check = _Checker(path)
    keys = file_keys()
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == GATE_TABLE:
            continue  # `passhat gate`'s criteria: read by gate_table
        if key not in keys:
            check.fail(key, f"unknown key; known keys: {', '.join(sorted(keys))}")
        values.update(check.value(key, keys[key], value))
    for where, model in check.models:
        check_model(model, f"{path}: {where}")
    check.plugins(values.get("plugins", []))
    base = Path(path).expanduser().absolute().parent
    check.domains_and_tasks(values, base=base)
    if values.get("agent_prompt") is not None:  # relative to the file, as task files are
        values["agent_prompt"] = str((base / Path(values["agent_prompt"]).expanduser()).absolute())
    if values.get("user_personas"):  # a persona's file too
        values["user_personas"] = [
            f"file:{(base / Path(p[len('file:'):]).expanduser()).absolute()}" if p.startswith("file:") else p
            for p in values["user_personas"]]
    return Sweep(path, values)


def gate_table(path: str) -> dict[str, Any]:
    """The file's [gate] table, its keys checked by name and type (values are checked
    as the flags are)."""
    table = _parse(path).get(GATE_TABLE, {})
    check = _Checker(path)
    if not isinstance(table, dict):
        check.fail(GATE_TABLE, f"must be a table, got {_kind(table)}")
    for key, value in table.items():
        want = GATE_KEYS.get(key)
        if want is None:
            check.fail(f"{GATE_TABLE}.{key}", f"unknown key; known keys: {', '.join(sorted(GATE_KEYS))}")
        ok = isinstance(value, want) and not isinstance(value, bool) or (want is float and isinstance(value, int)
                                                                        and not isinstance(value, bool))
        if want is list:
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if want is bool:
            ok = isinstance(value, bool)
        if not ok:
            check.fail(f"{GATE_TABLE}.{key}", f"must be {dict(zip((list, str, float, int, bool), ('a list of strings', 'a string', 'a number', 'an integer', 'true or false')))[want]}, got {_kind(value)}")
    return dict(table)


def merge(sweep: Sweep | None, from_flags: RunOptions, given: set[str]) -> RunOptions:
    """The run's options: an option given on the command line (its field name in
    `given`), else the file's value, else the option's default.

    Model args merge key by key, the command line's winning: --agent-args over each
    agent's args, --user-args over the user's, --judge-args over the judge's. --agent-model replaces the file's agents
    (their args too); --task or --task-file replace its tasks and task_file; the file's
    tasks for a domain (and its task_file) apply when that domain runs. With models from
    the command line, the file's provider caps keep the providers those models call."""
    if sweep is None:
        return from_flags
    cli = vars(from_flags)
    file = sweep.values
    out = {name: cli[name] if name in given or name not in file else file[name] for name in cli}
    if "agent_models" in given:
        out["agent_model_args"] = cli["agent_model_args"]
    elif "agent_models" in file:
        extra = parse_json_object(cli["agent_args"], "--agent-args") if "agent_args" in given else {}
        out["agent_model_args"] = {m: {**args, **extra} for m, args in file["agent_model_args"].items()}
    for side in ("user_args", "judge_args"):
        if side in given and side in file:
            flag = "--" + side.replace("_", "-")
            out[side] = {**file[side], **parse_json_object(cli[side], flag)}
    for caps in ("rate_limits", "max_concurrent"):
        if caps not in given and file.get(caps) and {"agent_models", "user_model"} & given:
            # Models from the command line: the file's caps on providers they do not call go.
            used = {provider_of(m) for m in [*(out["agent_models"] or []), out["user_model"] or ""]}
            out[caps] = [r for r in file[caps] if r.split("=", 1)[0] in used]
    # Plugins add up: the file's and the command line's are all imported.
    out["plugins"] = list(dict.fromkeys([*file.get("plugins", []), *cli["plugins"]]))
    if {"task_ids", "task_file"} & given:
        out["task_ids"], out["task_file"] = cli["task_ids"], cli["task_file"]
    elif "domains" in given:
        run = set(out["domains"])
        out["task_ids"] = {d: ids for d, ids in file.get("task_ids", {}).items() if d in run}
        if file.get("task_file") is not None and run != set(file["domains"]):
            out["task_file"] = None
    return RunOptions(**out)


REQUIRED = ("domains", "agent_models", "user_model")  # a run has none of its own


def check_required(values: RunOptions, help_hint: str) -> None:
    """A run needs domains, agent models and a user model, from options or the file."""
    missing = [name for name in REQUIRED if not getattr(values, name)]
    if any(a.startswith(A2A_PREFIX) for a in given_agents(values)):  # an agent behind A2A has its own models
        missing = [name for name in missing if name != "agent_models"]
    if missing:
        flags = ", ".join(f"'{declared_options()[name].flags[0]}'" for name in missing)
        key_of = {name: key for key, name in file_keys().items()}
        raise UserInputError(
            f"Missing option{'s' if len(missing) > 1 else ''} {flags} (or "
            f"{', '.join(key_of[name] for name in missing)} in a --config file){help_hint}"
        )


def _parse(path: str) -> dict[str, Any]:
    try:
        text = Path(path).expanduser().read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such config file")
    except IsADirectoryError:
        raise UserInputError(f"{path}: is a directory, not a TOML config file")
    except OSError as err:
        raise UserInputError(f"{path}: cannot read the config file ({err.strerror})")
    except UnicodeDecodeError:
        raise UserInputError(f"{path}: not UTF-8 text, as a TOML file must be")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserInputError(f"{path}: {_where(str(err))}") from None


def _where(message: str) -> str:
    """tomllib's "Reason (at line 3, column 7)" as "line 3, column 7: invalid TOML: Reason"."""
    match = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message)
    if match:
        return f"line {match[2]}, column {match[3]}: invalid TOML: {match[1]}"
    match = re.fullmatch(r"(.*) \(at end of document\)", message)
    if match:
        return f"end of file: invalid TOML: {match[1]}"
    return f"invalid TOML: {message}"


def _kind(value: Any) -> str:
    """A TOML value's type, as the file's author wrote it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Checker:
    def __init__(self, path: str):
        self.path = path
        self.models: list[tuple[str, str]] = []  # (key, model string), checked later

    def fail(self, key: str, reason: str) -> NoReturn:
        raise UserInputError(f"{self.path}: {key}: {reason}")

    def value(self, key: str, name: str, value: Any) -> dict[str, Any]:
        """The RunOptions fields one top-level key sets (`name` and, for a model table,
        the field of its args), read as the option's kind says."""
        opt = declared_options()[name]
        if opt.kind == "models":
            models = self._agents(key, value)
            return {name: list(models), opt.args: models}
        if opt.kind == "model":
            model, args = self._model(key, value)
            return {name: model, opt.args: args}
        read: Callable[[str, Any], Any] = getattr(self, f"_{opt.kind}")
        parsed = read(key, value)
        reason = out_of_bounds(opt, parsed)  # None for an option without bounds
        if reason:
            self.fail(key, reason)
        return {name: parsed}

    def _integer(self, key: str, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, f"must be an integer, got {_kind(value)}")
        return value

    def _number(self, key: str, value: Any) -> float:
        if not _is_number(value):
            self.fail(key, f"must be a number, got {_kind(value)}")
        return float(value)

    def _boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, got {_kind(value)}")
        return value

    def _run_id(self, key: str, value: Any) -> str:
        text = self._string(key, value)
        if not re.fullmatch(RUN_ID_PATTERN, text):
            self.fail(key, f"'{text}' {RUN_ID_RULE}")
        return text

    def _rates(self, key: str, value: Any) -> list[str]:
        """`rate_limits = { openai = "60/min" }`: as many `--rate-limit` values."""
        if not isinstance(value, dict):
            self.fail(key, f'must be a table such as {{ openai = "60/min" }}, got {_kind(value)}')
        out = []
        for provider, rate in value.items():
            option = f"{provider}={self._string(f'{key}.{provider}', rate)}"
            try:
                parse_provider_limits([option])
            except UserInputError:
                self.fail(f"{key}.{provider}", f"must be a rate such as \"60/min\", \"2/s\" or \"1000/h\", got '{rate}'")
            out.append(option)
        return out

    def _caps(self, key: str, value: Any) -> list[str]:
        """`max_concurrent = { openai = 8 }`: as many `--max-concurrent` values."""
        if not isinstance(value, dict):
            self.fail(key, f"must be a table such as {{ openai = 8 }}, got {_kind(value)}")
        for provider, n in value.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                self.fail(f"{key}.{provider}", f"must be an integer of at least 1, got {n!r}")
        return [f"{provider}={n}" for provider, n in value.items()]

    def _string(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            self.fail(key, f"must be a string, got {_kind(value)}")
        if not value.strip():
            self.fail(key, "must not be empty")
        return value

    def _strings(self, key: str, value: Any) -> list[str]:
        if not isinstance(value, list):
            self.fail(key, f"must be an array of strings, got {_kind(value)}")
        if not value:
            self.fail(key, "must not be empty")
        return [self._string(f"{key}[{i}]", v) for i, v in enumerate(value)]

    def _agent_names(self, key: str, value: Any) -> str | list[str]:
        """`agent`: one agent's name, or a list of them (a sweep of agents behind A2A)."""
        return self._strings(key, value) if isinstance(value, list) else self._string(key, value)

    def _duration(self, key: str, value: Any) -> float:
        rule = "must be a duration such as 900, \"90s\", \"15m\" or \"2h\""
        if _is_number(value):
            seconds = float(value)
        elif isinstance(value, str):
            try:
                seconds = parse_duration(value, key)
            except UserInputError:
                self.fail(key, f"{rule}, got '{value}'")
        else:
            self.fail(key, f"{rule}, got {_kind(value)}")
        return seconds

    def _model(self, key: str, value: Any) -> tuple[str, dict[str, Any]]:
        """A [user] or [[agents]] table: its model and litellm args."""
        if not isinstance(value, dict):
            self.fail(key, f'must be a table such as {{ model = "openai/gpt-4.1" }}, got {_kind(value)}')
        for k in value:
            if k not in MODEL_KEYS:
                # TOML gives a table every key that follows its header.
                hint = " (a top-level key goes above the first [table] or [[agents]])" if k in file_keys() else ""
                self.fail(f"{key}.{k}", f"unknown key; known keys: {', '.join(MODEL_KEYS)}{hint}")
        if "model" not in value:
            self.fail(key, "has no model (a litellm model string such as openai/gpt-4.1)")
        model = self._string(f"{key}.model", value["model"])
        args = value.get("args", {})
        if not isinstance(args, dict):
            self.fail(f"{key}.args", f"must be a table, got {_kind(args)}")
        try:
            json.dumps(args)
        except TypeError:
            self.fail(f"{key}.args", "must hold only strings, numbers, booleans, arrays and tables (no dates)")
        refuse_secrets(args, f"{self.path}: {key}.args")
        self.models.append((f"{key}.model", model))
        return model, args

    def _agents(self, key: str, value: Any) -> dict[str, dict[str, Any]]:
        """The [[agents]] tables: each model with its args, in the file's order."""
        if not isinstance(value, list):
            self.fail(key, f"must be an array of tables ([[agents]] with a model each), got {_kind(value)}")
        if not value:
            self.fail(key, "must not be empty: give at least one [[agents]] table with a model")
        args: dict[str, dict[str, Any]] = {}
        first: dict[str, int] = {}
        for i, entry in enumerate(value):
            model, model_args = self._model(f"{key}[{i}]", entry)
            if model in first:
                self.fail(f"{key}[{i}].model", f"'{model}' is already {key}[{first[model]}].model")
            first[model] = i
            args[model] = model_args
        return args

    def _tasks(self, key: str, value: Any) -> dict[str, list[str]]:
        if not isinstance(value, dict):
            self.fail(key, f'must be a table of task ids per domain, such as {{ airline = ["0", "1"] }}, got {_kind(value)}')
        out: dict[str, list[str]] = {}
        for domain, ids in value.items():
            where = f"{key}.{domain}"
            if not isinstance(ids, list) or not ids:
                self.fail(where, f"must be a non-empty array of task ids, got {_kind(ids) if ids != [] else 'an empty array'}")
            for i, task in enumerate(ids):
                if not isinstance(task, (str, int)) or isinstance(task, bool):
                    self.fail(f"{where}[{i}]", f"must be a task id (a string), got {_kind(task)}")
            out[domain] = [str(t) for t in ids]
        return out

    def plugins(self, modules: list[str]) -> None:
        """Import the file's plugins now: its domains may be theirs."""
        from passhat.domains.plugins import PluginError, load_plugins

        try:
            load_plugins(modules)
        except PluginError as err:
            self.fail("plugins", str(err))

    def domains_and_tasks(self, values: dict[str, Any], base: Path) -> None:
        """Domains exist, a task file is readable and valid, task ids exist: the file's
        relative paths are relative to the file itself (stored absolute)."""
        from passhat.domains.base import UnknownDomainError
        from passhat.domains.registry import get_domain
        from passhat.domains.task_file import TaskFileError, custom_domain_name, split_domain_name

        def load_domain(key: str, name: str):  # noqa: ANN202 - a Domain
            try:
                return get_domain(name)
            except (UnknownDomainError, TaskFileError) as err:
                self.fail(key, str(err))

        def absolute(path: str) -> str:
            return str((base / Path(path).expanduser()).absolute())

        domains = values.get("domains", [])
        for i, name in enumerate(domains):
            domain, path = split_domain_name(name)
            if path is not None:
                domains[i] = custom_domain_name(domain, absolute(path))
        if values.get("task_file") is not None:
            values["task_file"] = absolute(values["task_file"])
            plain = [split_domain_name(d) for d in domains]
            if len(set(domains)) != 1 or plain[0][1] is not None:
                self.fail("task_file", "replaces the tasks of one domain: give exactly one plain domain in domains")
            runs = {domains[0]: custom_domain_name(domains[0], values["task_file"])}
        else:
            runs = {d: d for d in domains}
        known: dict[str, Callable[[], list[str]]] = {}
        for i, name in enumerate(domains):
            key = f"domains[{i}]" if "task_file" not in values else "task_file"
            known[name] = load_domain(key, runs[name]).task_ids
            known.setdefault(split_domain_name(name)[0], known[name])
        for domain, ids in values.get("task_ids", {}).items():
            if domain not in known:
                self.fail(f"tasks.{domain}", f"'{domain}' is not one of domains ({', '.join(domains) or 'none given'})")
            missing = [t for t in ids if t not in set(known[domain]())]
            if missing:
                self.fail(f"tasks.{domain}", f"unknown task id(s) {', '.join(missing)} (see `passhat tasks {runs[domain]}`)")
