"""Turning a run's options into a checked RunConfig (`build_config`; which agent it
measures is cli/agent_choice.py's), and the checks of the values one option or
sweep-file key holds: JSON model args without secrets, model strings litellm can route,
durations, provider caps, run ids."""

from __future__ import annotations

import json
import os
import re
import secrets
from datetime import datetime, timezone
from typing import Any

from passhat.cli.agent_choice import a2a_agents_of, agent_tools_of, check_agent_runs, registered_agent
from passhat.cli.run_options import RunOptions, UserInputError, check_bounds, options_with_bounds
from passhat.contracts import DEFAULT_TEMPERATURE, RUN_ID_PATTERN, RUN_ID_RULE, ProviderLimit, RunConfig, provider_of



def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("run-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def parse_json_object(text: str | None, option: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserInputError(f"{option} is not valid JSON ({err.msg} at column {err.colno}): {text}")
    if not isinstance(value, dict):
        raise UserInputError(f'{option} must be a JSON object such as \'{{"temperature": 0}}\', got: {text}')
    return value


def refuse_secrets(args: dict[str, Any], option: str) -> None:
    """Model arguments are stored with the run and are the input of every workflow the
    Temporal UI shows: a key must stay in the workers' environment instead."""
    from passhat.infra import secrets

    fields = secrets.secret_fields(args)
    if fields:
        raise UserInputError(
            f"{option}: {', '.join(fields)} would store a secret with the run (and show it in "
            "the Temporal UI); put the key in an environment variable of the workers and "
            f'pass {{"{secrets.API_KEY_ENV}": "VARIABLE_NAME"}} instead, or use the '
            "provider's usual variable (e.g. OPENAI_API_KEY)"
        )


def check_model(model: str, option: str) -> None:
    """Refuse a model string litellm cannot route before anything is started."""
    from passhat.infra import scripted_provider as scripted

    if model.startswith(f"{scripted.PROVIDER}/"):
        try:
            scripted.parse_name(model.split("/", 1)[1])
        except scripted.ScriptedModelError as err:
            raise UserInputError(f"{option}: {err}")
        return
    from passhat.infra.llm import quiet_litellm

    try:
        quiet_litellm().get_llm_provider(model)
    except Exception:
        raise UserInputError(
            f"{option}: unknown model '{model}'. Use a litellm model string with its provider, "
            "e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, hosted_vllm/<name>, or scripted/oracle"
        )


def check_api_base(value: Any, option: str) -> None:
    """Refuse an api_base no request can be sent to (every call would fail, reported by
    litellm as a connection error)."""
    from urllib.parse import urlsplit

    try:
        url = urlsplit(value) if isinstance(value, str) else None
        valid = url is not None and url.scheme in ("http", "https") and bool(url.hostname)
        valid = valid and (url.port is None or url.port > 0)  # .port raises past 65535
    except ValueError:
        valid = False
    if not valid:
        raise UserInputError(f"{option}: api_base {json.dumps(value)} is not an http(s) URL "
                             "such as http://127.0.0.1:8000/v1")


def check_keys(config: RunConfig) -> None:
    """Refuse a run whose models' keys are not in this environment, which the workers
    this command starts inherit: every call would fail (litellm's openai client reports
    the missing key as an HTTP 500). The key variable is the one `api_key_env` names, or
    the provider's own, as litellm knows it. Scripted models need none."""
    from passhat.infra import scripted_provider as scripted
    from passhat.infra.llm import missing_key_variables

    sides = [(f"agent model {m}", m, config.agent_args_for(m)) for m in config.agent_models
             if m not in config.a2a_agents]  # an agent behind A2A calls its models with its own keys
    sides.append((f"user model {config.user_model}", config.user_model, config.user_args))
    missing: dict[str, list[str]] = {}
    for who, model, args in sides:
        if not model.startswith(f"{scripted.PROVIDER}/"):
            for name in missing_key_variables(model, args):
                missing.setdefault(name, []).append(who)
    if missing:
        what = " and ".join(f"{name} (for the {', '.join(who)})" for name, who in missing.items())
        raise UserInputError(
            f"{what} {'is' if len(missing) == 1 else 'are'} not set in this environment; export "
            f"{'it' if len(missing) == 1 else 'them'} (the workers this command starts inherit it), or "
            f'name the variable that holds the key with {{"api_key_env": "NAME"}} in the model\'s args'
        )


def parse_duration(value: str | float, option: str) -> float:
    """Seconds from "900", "90s", "15m" or "2h"."""
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not match:
        raise UserInputError(f"{option} must be a duration such as 900, 90s, 15m or 2h, got '{value}'")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


_RATE_UNITS = {"s": 60.0, "sec": 60.0, "min": 1.0, "m": 1.0, "h": 1 / 60, "hour": 1 / 60}


def parse_provider_limits(
    rate_limits: list[str], max_concurrent: list[str] | None = None, models: list[str] | None = None
) -> dict[str, ProviderLimit]:
    """Provider caps from `--rate-limit PROVIDER=N/min` and `--max-concurrent PROVIDER=N`.
    With `models`, a provider none of them uses is refused: the cap would hold nothing."""
    limits: dict[str, ProviderLimit] = {}
    for text in rate_limits:
        match = re.fullmatch(r"\s*([\w.-]+)\s*=\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|m|min|h|hour)\s*", text)
        if not match or float(match.group(2)) <= 0:
            raise UserInputError(
                f"--rate-limit must be PROVIDER=N/min (or N/s, N/h) with N > 0, e.g. openai=60/min; got '{text}'"
            )
        limits.setdefault(match.group(1), ProviderLimit()).per_minute = (
            float(match.group(2)) * _RATE_UNITS[match.group(3)])
    for text in max_concurrent or []:
        match = re.fullmatch(r"\s*([\w.-]+)\s*=\s*(\d+)\s*", text)
        if not match or int(match.group(2)) < 1:
            raise UserInputError(f"--max-concurrent must be PROVIDER=N with N >= 1, e.g. openai=8; got '{text}'")
        limits.setdefault(match.group(1), ProviderLimit()).max_concurrent = int(match.group(2))
    if models is not None:
        used = sorted({provider_of(m) for m in models})
        for provider in limits:
            if provider not in used:
                raise UserInputError(
                    f"no model of the run uses provider '{provider}' (its models use: {', '.join(used)}); "
                    "the provider is the part of the model string before '/'"
                )
    return limits


def provider_limit_args(limits: dict[str, ProviderLimit]) -> list[str]:
    """The `passhat worker` options that give a worker these caps."""
    args: list[str] = []
    for provider, limit in sorted(limits.items()):
        if limit.per_minute is not None:
            args += ["--rate-limit", f"{provider}={limit.per_minute:g}/min"]
    return args


def build_config(options: RunOptions, *, limit: int | None = None) -> RunConfig:
    """A validated RunConfig. `options.task_ids` is one list for every domain, or per
    domain (a sweep config's tasks; a domain it does not name runs every task); model args
    are JSON text (the options) or already parsed (a sweep config). `limit` (demo's
    --tasks) takes the first tasks of each domain."""
    from passhat.cli.preview import direct_calls
    from passhat.domains.base import UnknownDomainError
    from passhat.domains.agent_identity import agent_digests
    from passhat.domains.digest import run_digests
    from passhat.domains.task_sets import split_variant
    from passhat.domains.plugins import load_plugins, run_plugins
    from passhat.domains.registry import get_domain
    from passhat.domains.task_file import TaskFileError, custom_domain_name, split_domain_name
    from passhat.domains.tau2_version import UnknownTau2VersionError, data_digest, family_of, installed_version
    from passhat.personas import persona_digests

    domains, task_ids, agent_models = options.domains, options.task_ids, options.agent_models
    if not domains:
        raise UserInputError("give at least one --domain (see `passhat domains`)")
    if options.task_file is not None:
        if len(set(domains)) != 1 or split_domain_name(domains[0])[1] is not None:
            raise UserInputError(
                "--task-file replaces the tasks of one domain: give exactly one plain "
                "--domain with it, e.g. --domain airline --task-file my_tasks.json"
            )
        domains = [custom_domain_name(domains[0], options.task_file)]
    if options.task_set_name is not None or options.task_split_name is not None:
        domains = _task_set_domains(domains, options)
    # "domain@file" given directly is recorded with an absolute path too: workers may
    # run in another directory.
    domains = [
        custom_domain_name(base, path) if path is not None else base
        for base, path in map(split_domain_name, domains)
    ]
    a2a = a2a_agents_of(options)  # the cards are read before anything else is checked
    if a2a is not None:
        if agent_models or options.agent_args:
            raise UserInputError(
                f"--agent {' --agent '.join(a2a.names())} "
                f"{'are deployed agents that call their' if a2a.sweep() else 'is a deployed agent that calls its'} own models: "
                "leave out --agent-model (and --agent-args)")
        agent_models = a2a.agent_models()
    if not agent_models:
        raise UserInputError("give at least one --agent-model")
    values = {**vars(options), "retry_for": parse_duration(options.retry_for, "--retry-for")}
    for name in options_with_bounds():
        if values[name] is not None:
            check_bounds(name, values[name])
    if limit is not None and limit < 1:
        raise UserInputError(f"--tasks must be at least 1, got {limit}")
    run_id = options.run_id
    if run_id is not None and not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise UserInputError(f"--run-id '{run_id}' {RUN_ID_RULE}")
    # Cheap checks first: loading a domain takes seconds.
    agent_args = _model_args(options.agent_args, "--agent-args")
    user_args = _model_args(options.user_args, "--user-args")
    per_model = {m: _model_args(dict(a), f"the args of agent model {m}")
                 for m, a in options.agent_model_args.items()}
    unknown = [m for m in per_model if m not in agent_models]
    if unknown:
        raise UserInputError(f"args given for agent model(s) the run does not have: {', '.join(unknown)}")
    for model in agent_models if a2a is None else []:
        check_model(model, "--agent-model")
    check_model(options.user_model, "--user-model")
    provider_limits = parse_provider_limits(options.rate_limits, options.max_concurrent,
                                            models=[*agent_models, options.user_model])
    plugins = run_plugins(options.plugins)
    load_plugins(plugins)  # before the agent and the domains: a plugin may register them
    agent, agent_prompt = registered_agent(options) if a2a is None else (a2a.agent(), None)
    user_personas = _user_personas(options.user_personas)
    per_domain: dict[str, list[str]] = {}
    for domain_name in dict.fromkeys(domains):
        try:
            domain = get_domain(domain_name)
        except (UnknownDomainError, TaskFileError) as err:
            raise UserInputError(str(err))
        if (agent_prompt is not None or a2a is not None) and not callable(getattr(domain, "policy", None)):
            what = "--agent-prompt" if a2a is None else f"--agent {a2a.names()[0]}"
            raise UserInputError(f"{what} needs a domain with a policy; {domain_name} has none")
        known = domain.task_ids()
        if limit is not None and limit > len(known):
            raise UserInputError(
                f"--tasks must be between 1 and {len(known)} ({domain_name} has {len(known)} tasks), got {limit}"
            )
        wanted = task_ids
        if isinstance(task_ids, dict):  # per domain, by its name or its base domain's
            wanted = task_ids.get(domain_name, task_ids.get(split_domain_name(domain_name)[0], []))
        if wanted:
            missing = [t for t in wanted if t not in set(known)]
            if (len(domains) == 1 or isinstance(task_ids, dict)) and missing:
                raise UserInputError(
                    f"unknown task id(s) for domain {domain_name}: {', '.join(missing)} "
                    f"(see `passhat tasks {domain_name}`)"
                )
            chosen = [t for t in known if t in set(wanted)]
        else:
            chosen = known[:limit] if limit else known
        if options.num_tasks is not None:  # after the task ids, as tau2 run applies it
            chosen = chosen[:options.num_tasks]
        per_domain[domain_name] = chosen
    if task_ids and not any(per_domain.values()):
        raise UserInputError(f"none of the --task ids exist in {', '.join(per_domain)}")
    if agent is not None and a2a is None:
        check_agent_runs(agent, per_domain, agent_models[0], per_model.get(agent_models[0], agent_args))
    try:
        tau2_version = installed_version()
        family_of(tau2_version)
    except UnknownTau2VersionError as err:
        raise UserInputError(str(err))
    judge_model, judge_args = _judge(options)
    _check_timeout(options.timeout)
    return RunConfig(
        tau2_version=tau2_version,
        tau2_data=data_digest([split_variant(split_domain_name(d)[0])[0] for d in per_domain]),
        domain_digests=run_digests(list(per_domain)),
        agent_digests=agent_digests(agent, agent_prompt, *(a2a.sweep() if a2a else [])),
        user_personas=user_personas,
        persona_digests=persona_digests(list(user_personas)) or None,
        judge_model=judge_model,
        judge_args=judge_args,
        run_id=run_id or new_run_id(),
        agent_models=list(dict.fromkeys(agent_models)),
        user_model=options.user_model,
        domains=list(per_domain),
        task_ids=per_domain,
        trials=options.trials,
        concurrency=options.concurrency,
        agent_args=agent_args,
        user_args=user_args,
        agent_model_args=per_model,
        provider_limits=provider_limits,
        max_steps=options.max_steps,
        max_errors=options.max_errors,
        timeout=options.timeout,
        seed=options.seed,
        lenient_tool_arguments=options.lenient_tool_args,
        rejudge=_rejudge(options.rejudge),
        agent=agent,
        agent_protocol=a2a and a2a.protocol(),
        a2a_agents=a2a.sweep() if a2a else {},
        agent_tools=agent_tools_of(options),
        agent_prompt=agent_prompt,
        plugins=plugins,
        retry={"max_attempts": options.max_attempts, "model_call_timeout_s": options.model_timeout,
               "retry_for_s": values["retry_for"]},
        max_cost=options.max_cost,
        expected_calls={name: {t: direct_calls(get_domain(name).task(t)) for t in chosen}
                        for name, chosen in per_domain.items()},
    )


def _user_personas(specs: list[str]) -> dict[str, str]:
    """The run's personas, {label: text} (passhat.personas); a team's file by its absolute
    path, as workers in another directory and a later resume read it."""
    from passhat.personas import FILE_PREFIX, PersonaError, parse_all

    absolute = [FILE_PREFIX + os.path.abspath(s.strip()[len(FILE_PREFIX):]) if s.strip().startswith(FILE_PREFIX)
                else s for s in specs]
    try:
        return parse_all(absolute)
    except PersonaError as err:
        raise UserInputError(str(err)) from None


def _task_set_domains(domains: list[str], options: RunOptions) -> list[str]:
    """The domains with the tasks of --task-set-name / --task-split-name
    (domains.task_sets names them "telecom:telecom_full/small")."""
    from passhat.domains.task_file import split_domain_name
    from passhat.domains.task_sets import MARK, variant_name

    if options.task_file is not None or any(split_domain_name(d)[1] or MARK in d for d in domains):
        raise UserInputError("--task-set-name/--task-split-name choose the tasks of tau2's registry; "
                             "a --task-file brings its own: give one or the other")
    if options.task_set_name is not None and len(set(domains)) > 1:
        raise UserInputError("--task-set-name takes the tasks of one task set: give exactly one --domain with it")
    return [variant_name(d, options.task_set_name, options.task_split_name) for d in domains]


def _judge(options: RunOptions) -> tuple[str | None, dict[str, Any]]:
    """The NL-assertion judge and its args: given, or the installed tau2's default; none
    under a tau2 that grades no NL assertions."""
    from passhat.domains.tau2_version import installed_rules, installed_version

    if not installed_rules().grades_nl_assertions:
        if options.judge_model is not None or options.judge_args is not None:
            raise UserInputError(
                "--judge-model/--judge-args (a sweep file's [judge]) need tau2 1.0.x: the "
                f"installed tau2 {installed_version()} grades no NL assertions"
            )
        return None, {}
    from passhat.domains.nl_judge import default_judge

    model, args = default_judge()
    if options.judge_model is not None:
        model = options.judge_model
    check_model(model, "--judge-model")
    if options.judge_args is not None:
        args = _model_args(options.judge_args, "--judge-args")
    return model, args


def _rejudge(rejudge: bool) -> bool:
    """--rejudge, refused where the installed tau2 has no judge to re-ask."""
    from passhat.domains.tau2_version import installed_rules

    if rejudge and not installed_rules().grades_nl_assertions:
        raise UserInputError(
            "--rejudge (a sweep file's rejudge) needs tau2 1.0.x: the installed tau2 "
            "grades no NL assertions"
        )
    return rejudge


def _check_timeout(timeout: float | None) -> None:
    """A time limit only under a tau2 that has one: 26.3 runs a conversation until it
    stops or reaches max_steps, and passhat decides as the installed tau2 does."""
    from passhat.domains.tau2_version import installed_rules, installed_version

    if timeout is not None and installed_rules().timeout_reason is None:
        raise UserInputError(
            f"--timeout (a sweep file's timeout) needs tau2 1.0.x: the installed tau2 "
            f"{installed_version()} has no time limit on a conversation"
        )


def _model_args(args: str | dict[str, Any] | None, option: str) -> dict[str, Any]:
    """litellm args of one side or model, checked: a JSON object (text from an option,
    or already parsed), without secrets, and at temperature 0.0 (tau2 run's default)
    unless it sets one."""
    parsed = dict(args) if isinstance(args, dict) else parse_json_object(args, option)
    refuse_secrets(parsed, option)
    if "api_base" in parsed:
        check_api_base(parsed["api_base"], option)
    parsed.setdefault("temperature", DEFAULT_TEMPERATURE)
    return parsed
