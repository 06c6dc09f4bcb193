"""A run's options, declared once: each field of RunOptions carries its flags, help text,
bounds and sweep-file key. `passhat run` reads the fields as its flags
(`with_run_options`), a sweep file (passhat.cli.sweep_config) reads them as its keys,
and passhat.cli.run_config's `build_config` turns either into a RunConfig."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from passhat.contracts import DEFAULT_MAX_ERRORS, DEFAULT_MAX_STEPS, DEFAULT_SEED, RetryConfig


class UserInputError(Exception):
    """A mistake in what the user asked for; the message says how to fix it."""


@dataclass(frozen=True)
class Option:
    """How one field of RunOptions is given on the command line and in a sweep file."""

    flags: tuple[str, ...]
    help: str
    # Its key in a sweep file: a name, _IN_FILE for the field's own name, or None for
    # an option of the command line only.
    file_key: Any
    # How a sweep file writes it: integer, number, boolean, string, strings, run_id,
    # duration, tasks, models, model, agent_names, rates or caps (sweep_config has a
    # reader for each).
    kind: str | None
    at_least: float | None = None
    more_than: float | None = None
    unit: str | None = None  # said with a bound
    metavar: str | None = None
    cli_type: Any = None  # the flag's type, where the field holds more (parsed file values)
    args: str | None = None  # the field that takes the model args a file's model table sets


_IN_FILE = object()  # option(): the file key is the field's own name


def option(default: Any, *flags: str, help: str, kind: str | None, file_key: Any = _IN_FILE,
           **rest: Any) -> Any:
    """A RunOptions field declared as an Option."""
    meta = {"option": Option(flags, help, file_key, kind, **rest)}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.copy(default), metadata=meta)
    return field(default=default, metadata=meta)


_RETRY = RetryConfig()  # the defaults the options show


@dataclass
class RunOptions:
    """What a run evaluates and how, as `passhat run`'s options or a sweep file give it.
    Fields are in the order `passhat run --help` lists them."""

    domains: list[str] = option(
        [], "--domain", "-d", kind="strings",
        help="Domain to evaluate (repeat for several): see `passhat domains` (a --plugin may add some). Required unless --config has domains.")
    agent_models: list[str] = option(
        [], "--agent-model", "-m", kind="models", file_key="agents", args="agent_model_args",
        help="litellm model string for the agent (repeat for a sweep), e.g. openai/gpt-4.1 or scripted/oracle. Required unless --config has agents.")
    # One agent's name; a list only for a sweep of agents behind A2A (__post_init__).
    agent: str | list[str] | None = option(
        None, "--agent", kind="agent_names", metavar="NAME", cli_type=Optional[list[str]],
        help="An agent registered in tau2's agent registry (e.g. by a plugin) plays the agent side, with the --agent-model and --agent-args handed to it as tau2 hands them; or a2a:URL, a deployed agent behind A2A at URL (its agent card names it; no --agent-model: it calls its own models; repeat for a sweep of such agents). Default: tau2's LLM agent (llm_agent).")
    agent_protocol: Optional[str] = option(
        None, "--agent-protocol", kind="string", metavar="agentify|agentbeats",
        help="With --agent a2a:URL: the messages' convention, tau2's agentify green agent's or the AgentBeats tau2 green agent's (docs/agents.md); default: agentbeats when the agent card mentions AgentBeats, else agentify.")
    agent_tools: Optional[str] = option(
        None, "--agent-tools", kind="string", metavar="text|mcp",
        help="With --agent a2a:URL: how the agent gets the domain's tools. text: as JSON in the first message, one action a reply (default); mcp: served over MCP (streamable HTTP) at a URL of the trial's own, given in the first message's metadata and text, and the replies are the agent's words to the user (docs/agents.md).")
    agent_prompt: Optional[str] = option(
        None, "--agent-prompt", kind="string", metavar="FILE",
        help="Replace the system prompt of tau2's LLM agent with this template; {policy} in it is replaced by the domain's policy. Its digest is part of the run's identity.")
    user_model: Optional[str] = option(
        None, "--user-model", "-u", kind="model", file_key="user", args="user_args",
        help="litellm model string for the user simulator. Required unless --config has a user.")
    user_personas: list[str] = option(
        [], "--user-persona", kind="strings", file_key="personas", metavar="PERSONA",
        help="Run every task and trial also under this user persona (repeat for several; a sweep axis like --agent-model): impatient, confused, skeptical, incoherent or changes-mind, optionally with an intensity 1-3 (impatient:2), or file:PATH for your own. Its text is added to the user simulator's prompt (docs/personas.md); default: tau2's user alone.")
    max_cost: Optional[float] = option(
        None, "--max-cost", kind="number", more_than=0, unit="USD", metavar="USD",
        help="Budget: once the run's recorded model cost reaches it, no new conversation starts; those in flight finish and the run ends as budget_exhausted (`passhat resume RUN --max-cost USD` continues it).")
    task_ids: list[str] | dict[str, list[str]] = option(
        [], "--task", "-t", kind="tasks", file_key="tasks", cli_type=list[str],
        help="Task id to run (repeat); default: every task of the domain.")
    plugins: list[str] = option(
        [], "--plugin", kind="strings", metavar="MODULE",
        help="Import this module first (repeat for several): it registers your domains or agents. Every worker of the run imports it too (see docs/plugins.md).")
    task_file: Optional[str] = option(
        None, "--task-file", kind="string",
        help="JSON list of your own tasks in tau2's format, run with the one --domain's tools and policy.")
    task_set_name: Optional[str] = option(
        None, "--task-set-name", kind="string", metavar="NAME",
        help="As tau2 run's: take the tasks from this task set of tau2's registry (see `passhat domains`, e.g. telecom_full) and run them with the --domain's tools and policy; default: the domain's own.")
    task_split_name: Optional[str] = option(
        None, "--task-split-name", kind="string", metavar="NAME",
        help="As tau2 run's: the split of the task set to run (e.g. base, train, test); default: the task set's own default (base where it has splits).")
    num_tasks: Optional[int] = option(
        None, "--num-tasks", kind="integer", at_least=1,
        help="As tau2 run's: run only the first N tasks (of those --task selects, if given).")
    trials: int = option(1, "--trials", "-k", kind="integer", at_least=1,
                         help="Independent trials per task (the k of pass^k).")
    concurrency: int = option(8, "--concurrency", "-c", kind="integer", at_least=1,
                              help="Conversations in flight at once.")
    run_id: Optional[str] = option(
        None, "--run-id", kind="run_id",
        help="Name the run; starting an existing run id with the same configuration attaches to it.")
    agent_args: str | dict[str, Any] | None = option(
        None, "--agent-args", kind=None, file_key=None, cli_type=Optional[str],
        help='JSON passed to litellm for agent calls, e.g. \'{"api_base": "http://..."}\'; temperature is 0.0 (tau2 run\'s default) unless it sets one.')
    user_args: str | dict[str, Any] | None = option(
        None, "--user-args", kind=None, file_key=None, cli_type=Optional[str],
        help="JSON passed to litellm for user-simulator calls; temperature 0.0 unless it sets one.")
    judge_model: Optional[str] = option(
        None, "--judge-model", kind="model", file_key="judge", args="judge_args",
        help="tau2 1.0.x: litellm model string of the judge that grades NL assertions; default: the installed tau2's (its config's DEFAULT_LLM_NL_ASSERTIONS). scripted/judge grades offline.")
    judge_args: str | dict[str, Any] | None = option(
        None, "--judge-args", kind=None, file_key=None, cli_type=Optional[str],
        help="tau2 1.0.x: JSON passed to litellm for the judge's calls; default: the installed tau2's judge args.")
    max_steps: int = option(
        DEFAULT_MAX_STEPS, "--max-steps", kind="integer", at_least=1,
        help="Steps (messages and tool batches) after which a conversation ends as max_steps; tau2 run's default.")
    max_errors: int = option(
        DEFAULT_MAX_ERRORS, "--max-errors", kind="integer", at_least=1,
        help="Tool errors in a conversation after which it ends as too_many_errors; tau2 run's default.")
    timeout: Optional[float] = option(
        None, "--timeout", kind="number", more_than=0, unit="seconds", metavar="SECONDS",
        help="tau2 1.0.x's --timeout: a conversation still running this many seconds after it started ends as timeout, reward 0 (checked where tau2 checks it); default: no limit.")
    seed: int = option(
        DEFAULT_SEED, "--seed", kind="integer",
        help="tau2 run's --seed: trial i of every task sends the provider the i-th seed tau2 derives from it.")
    lenient_tool_args: bool = option(
        False, "--lenient-tool-args", kind="boolean",
        help="Departure from tau2, recorded on the run and shown in reports: answer tool arguments that are not valid JSON with a tool error instead of ending the conversation as agent_error.")
    rejudge: bool = option(
        False, "--rejudge", kind="boolean",
        help="Departure from tau2 1.0.x, recorded on the run and shown in reports: a judge reply tau2 cannot read re-asks the judge alone (up to tau2's number of re-runs), keeping the conversation, instead of re-running the whole simulation as tau2 does.")
    retry_for: str | float = option(
        f"{_RETRY.retry_for_s / 60:g}m", "--retry-for", kind="duration", at_least=1, unit="seconds",
        cli_type=str,
        help="How long a model call is retried on transient provider errors (rate limits, 5xx, timeouts, dropped connections), e.g. 90s, 15m, 2h; then the trial is not evaluable.")
    max_attempts: int = option(
        _RETRY.max_attempts, "--max-attempts", kind="integer", at_least=0,
        help="Attempts per model call within --retry-for; 0 means no limit.")
    model_timeout: float = option(
        _RETRY.model_call_timeout_s, "--model-timeout", kind="number", at_least=1, unit="seconds",
        help="Seconds one model call may take before it is retried as a timeout.")
    rate_limits: list[str] = option(
        [], "--rate-limit", kind="rates", metavar="PROVIDER=N/min",
        help="Cap a provider's model calls per minute (repeat per provider; also N/s, N/h), for every worker of the run: enforced by the Temporal server on the provider's own task queue.")
    max_concurrent: list[str] = option(
        [], "--max-concurrent", kind="caps", metavar="PROVIDER=N",
        help="Cap a provider's model calls in flight (repeat per provider), over every worker of the run: the run workflow starts no more conversations that call it.")
    # Set only by a sweep file: each [[agents]] table's args, which replace --agent-args
    # for that model.
    agent_model_args: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # --agent given once (or a file's one agent) is that agent's name, as before it
        # could be repeated; several stay a list (cli.agent_choice reads them).
        if isinstance(self.agent, list):
            agents = list(dict.fromkeys(self.agent))
            self.agent = None if not agents else agents[0] if len(agents) == 1 else agents


def given_agents(options: RunOptions) -> list[str]:
    """The --agent values given (none, one, or a sweep of agents behind A2A)."""
    agent = options.agent
    return [] if agent is None else [agent] if isinstance(agent, str) else list(agent)


def declared_options() -> dict[str, Option]:
    """Every RunOptions field that is an option, by field name, in declaration order."""
    return {f.name: f.metadata["option"] for f in dataclasses.fields(RunOptions) if "option" in f.metadata}


def file_keys() -> dict[str, str]:
    """The field each sweep-file key sets."""
    return {name if opt.file_key is _IN_FILE else opt.file_key: name
            for name, opt in declared_options().items() if opt.file_key is not None}


def options_with_bounds() -> dict[str, Option]:
    """The options whose numbers have bounds (in seconds for a duration)."""
    return {name: opt for name, opt in declared_options().items()
            if opt.at_least is not None or opt.more_than is not None}


def out_of_bounds(opt: Option, value: float) -> str | None:
    """What is wrong with a number for this option, said the same for a flag and a file key."""
    unit = f" ({opt.unit})" if opt.unit else ""
    if opt.at_least is not None and value < opt.at_least:
        return f"must be at least {opt.at_least:g}{unit}, got {value:g}"
    if opt.more_than is not None and not value > opt.more_than:  # NaN too
        return f"must be more than {opt.more_than:g}{unit}, got {value:g}"
    return None


def check_bounds(name: str, value: float) -> None:
    """Refuse an option's number out of its bounds, naming its flag."""
    opt = declared_options()[name]
    reason = out_of_bounds(opt, value)
    if reason:
        raise UserInputError(f"{opt.flags[0]} {reason}")


def check_budget(max_cost: float | None) -> None:
    if max_cost is not None:
        check_bounds("max_cost", max_cost)


def with_run_options(*, after: dict[str, str]) -> Callable[[Callable], Callable]:
    """Give a typer command every run option as a flag. The command declares its own
    parameters and one `options: RunOptions`, which it receives filled in; `after` places
    each of its own options after the run option it follows in --help (the others go
    first)."""
    import typer

    hints, defaults = typing.get_type_hints(RunOptions), RunOptions()
    flags = {
        name: inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, annotation=opt.cli_type or hints[name],
            default=typer.Option(getattr(defaults, name), *opt.flags, help=opt.help, metavar=opt.metavar),
        )
        for name, opt in declared_options().items()
    }

    def decorate(command: Callable) -> Callable:
        types = typing.get_type_hints(command)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=types.get(p.name, p.annotation))
               for p in inspect.signature(command).parameters.values() if p.name != "options"]
        params = [p for p in own if p.name not in after]
        for name, param in flags.items():
            params.append(param)
            params += [p for p in own if after.get(p.name) == name]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            filled = RunOptions(**{name: kwargs.pop(name) for name in flags})
            return command(options=filled, **kwargs)

        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **{p.name: p.annotation for p in own}, **{n: p.annotation for n, p in flags.items()}}
        return wrapper

    return decorate


def given_on_command_line(ctx: Any) -> set[str]:  # a click Context
    """The RunOptions fields whose flags were given on the command line."""
    from typer._click.core import ParameterSource

    return {name for name in declared_options()
            if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}
