"""`passhat gate`: run a suite in rounds until every criterion on pass^k is decided at its
confidence, or the budget is spent, and exit 0 (PASS), 1 (FAIL) or 3 (INCONCLUSIVE).

The rounds are a workflow's (passhat.workflows.rounds), each a run of its own, `GATE-r0`,
`GATE-r1`, ..., running the tasks passhat.results.gate_rounds.next_round picks from the rounds
before it; the same command again with the same --run-id attaches to that workflow (or
reads back its finished rounds), so nothing finished runs twice."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from passhat.cli.common import check_output, one_line_errors, open_store, out_console
from passhat.cli.preview import CONFIRM_ABOVE
from passhat.cli.rounds import run_rounds
from passhat.cli.run_options import RunOptions, UserInputError, given_agents, given_on_command_line, with_run_options
from passhat.domains.a2a_protocol import is_a2a
from passhat.results.gate_rounds import round_trials
from passhat.results.gate_units import curtailed_baseline_refusal

DEFAULT_MAX_TRIALS = 8  # per task: never more trials than a fixed design of 8 a task


@one_line_errors
@with_run_options(after={"config": "user_model", "yes": "max_cost", "workers": "model_timeout", "detach": "model_timeout",
                         "output": "max_concurrent"})
def gate(
    ctx: typer.Context,
    options: RunOptions,
    config: Optional[str] = typer.Option(None, "--config", help="A sweep config (TOML), as `passhat run --config` takes; its \\[gate] table may set require, baseline, max_drop, regression_metric, confidence, max_trials, whole_blocks, personas, max_persona_drop and persona_metric. Options given on the command line override it."),
    require: list[str] = typer.Option([], "--require", help="An absolute criterion, 'pass^K >= X' (repeat for several)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="RUN", help="A recorded run (or gate) to compare with, task by task, with --max-drop."),
    max_drop: Optional[float] = typer.Option(None, "--max-drop", metavar="D", help="Regression criterion: the metric may be at most D below --baseline's."),
    regression_metric: Optional[str] = typer.Option(None, "--regression-metric", metavar="pass^K", help="The metric of the regression criterion; default pass^1."),
    confidence: Optional[float] = typer.Option(None, "--confidence", help="Confidence of every criterion's verdict; default 0.95."),
    max_persona_drop: Optional[float] = typer.Option(None, "--max-persona-drop", metavar="D", help="With --user-persona and --personas: the metric under each persona named may be at most D below tau2's own user's, decided on pairs of the same tasks and seeds (docs/gate.md, A persona's drop)."),
    persona_metric: Optional[str] = typer.Option(None, "--persona-metric", metavar="pass^K", help="The metric of --max-persona-drop; default pass^1."),
    personas: Optional[str] = typer.Option(None, "--personas", metavar="all|P1,P2", help="With --user-persona: check every criterion under each of these personas (all: every one given), on that persona's trials alone, its error rate split across them (Bonferroni; docs/personas.md, Gating)."),
    max_trials: Optional[int] = typer.Option(None, "--max-trials", metavar="N", help=f"Budget: most trials any one task gets; default {DEFAULT_MAX_TRIALS}."),
    force: bool = typer.Option(False, "--force", help="Run even when an agent that never fails could not PASS every criterion within --max-trials (the gate refuses such a budget before the first conversation, naming one that could)."),
    whole_blocks: bool = typer.Option(False, "--whole-blocks", help="Run a pass^k block's k trials at once: a round takes one conversation's time instead of up to k, but a block whose first trial fails still runs all k (by default a block stops at its first failure; docs/gate.md, Curtailed blocks)."),
    junit: Optional[str] = typer.Option(None, "--junit", metavar="FILE", help="Write JUnit XML: one test case per task per criterion."),
    summary: Optional[str] = typer.Option(None, "--summary", metavar="FILE", help="Write the markdown summary (it is also appended to $GITHUB_STEP_SUMMARY when that is set)."),
    yes: bool = typer.Option(False, "--yes", "-y", help=f"Start without asking (a round of more than {CONFIRM_ABOVE} conversations asks on a terminal)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Worker processes serving the rounds; default: the machine's cores."),
    detach: bool = typer.Option(False, "--detach", help="Start the gate and return; `passhat status RUN` follows it (a `passhat worker` must be running)."),
    output: str = typer.Option("table", "--output", "-o", help="table (the markdown summary) or json (one JSON object with the same content)."),
) -> None:
    """Decide whether an agent meets pass^k criteria, spending trials in rounds only
    until the verdict is known. Exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE, 2 usage error."""
    from passhat.cli import sweep_config
    from passhat.cli.run_config import build_config
    from passhat.results import gate as decide

    check_output(output)
    if workers is not None and workers < 1:
        raise UserInputError(f"--workers must be at least 1, got {workers}")
    table = sweep_config.gate_table(config) if config else {}
    given = {"require": require or None, "baseline": baseline, "max_drop": max_drop,
             "regression_metric": regression_metric, "confidence": confidence, "max_trials": max_trials,
             "whole_blocks": whole_blocks or None, "personas": personas, "max_persona_drop": max_persona_drop,
             "persona_metric": persona_metric}
    settings = {key: value if value is not None else table.get(key) for key, value in given.items()}
    options = sweep_config.merge(sweep_config.load(config) if config else None, options, given_on_command_line(ctx))
    sweep_config.check_required(options, f" — see `{ctx.command_path} --help`")
    try:
        criteria = _criteria(settings, decide)
    except decide.GateError as err:
        key = getattr(err, "key", None)  # a value from the [gate] table: say which file and key
        raise UserInputError(f"{config}: gate.{key}: {err}" if key and given.get(key) is None and key in table
                             else str(err))
    cap = settings["max_trials"] if settings["max_trials"] is not None else DEFAULT_MAX_TRIALS
    if cap < round_trials(criteria):
        raise UserInputError(f"--max-trials must be at least {round_trials(criteria)} "
                             f"(one round of the largest k), got {cap}")
    if "trials" in given_on_command_line(ctx):
        raise UserInputError("passhat gate chooses the trials per task round by round; "
                             "bound them with --max-trials N")
    agents = given_agents(options)
    if len(agents) > 1:  # a sweep of agents behind A2A: a gate decides for one agent
        raise UserInputError("passhat gate decides for one agent at a time: give one --agent a2a:URL "
                             "(a sweep of agents is `passhat run`'s)")
    if len(options.agent_models) != 1 and not any(map(is_a2a, agents)):  # an A2A agent is its own model
        raise UserInputError("passhat gate decides for one --agent-model at a time")
    base = build_config(options)
    criteria = _persona_criteria(criteria, settings, list(base.user_personas))
    store = open_store()
    request = _request(store, base, criteria, settings["baseline"], cap, bool(settings["whole_blocks"]))
    if not _recorded(store, base.run_id):  # a new gate: say what its budget can decide before spending
        _before_spending(request, criteria, force)
    record = run_rounds(request, workers=workers, yes=yes, output=output, detach=detach)
    if record is None:  # detached: `passhat status` follows it
        return
    _emit(record, output, junit=junit, summary=summary)
    raise typer.Exit(decide.EXIT_CODES[record["verdict"]])


def _criteria(settings: dict[str, Any], decide) -> list:  # noqa: ANN001 - the gate module
    def read(key: str, parse):  # noqa: ANN001, ANN202 - a GateError says which setting it came from
        try:
            return parse()
        except decide.GateError as err:
            err.key = key
            raise

    conf = settings["confidence"] if settings["confidence"] is not None else decide.DEFAULT_CONFIDENCE
    if settings["confidence"] is not None:
        read("confidence", lambda: decide.absolute(1, 0.0, conf))
    criteria = [read("require", lambda text=text: decide.parse_requirement(text, conf))
                for text in settings["require"] or []]
    if (settings["baseline"] is None) != (settings["max_drop"] is None):
        raise decide.GateError("--baseline and --max-drop go together: the regression criterion needs both")
    if settings["baseline"] is not None:
        k = read("regression_metric", lambda: decide.parse_metric(settings["regression_metric"] or "pass^1"))
        criteria.append(read("max_drop", lambda: decide.regression(k, settings["max_drop"], conf)))
    elif settings["regression_metric"] is not None:
        raise decide.GateError("--regression-metric needs --baseline RUN --max-drop D")
    if settings.get("max_persona_drop") is not None:
        from passhat.results import paired_drop

        k = read("persona_metric", lambda: decide.parse_metric(settings["persona_metric"] or "pass^1"))
        criteria.append(read("max_persona_drop",
                             lambda: paired_drop.criterion(k, settings["max_persona_drop"], conf)))
    elif settings.get("persona_metric") is not None:
        raise decide.GateError("--persona-metric needs --max-persona-drop D")
    if not criteria:
        raise decide.GateError("give a criterion: --require 'pass^K >= X', --baseline RUN --max-drop D, or "
                               "--max-persona-drop D with --user-persona (or a [gate] table in --config)")
    return criteria


def _persona_criteria(criteria: list, settings: dict[str, Any], personas: list[str]) -> list:
    """Each criterion under each persona --personas names, at its share of alpha
    (passhat.results.gate_personas); the criteria as they are without personas."""
    from passhat.results.gate import GateError
    from passhat.results.gate_personas import named, per_persona

    try:
        chosen = named(settings["personas"], personas)
    except GateError as err:
        raise UserInputError(str(err))
    if not chosen and any(c.kind == "persona_drop" for c in criteria):
        raise UserInputError("--max-persona-drop bounds a persona's drop against tau2's own user: give the personas "
                             "with --user-persona NAME and --personas all (or some of them)")
    if chosen and settings["baseline"] is not None:
        raise UserInputError("--baseline with --user-persona is not supported yet: gate the personas with "
                             "--require, and the regression without --user-persona")
    return per_persona(criteria, chosen)


def _baseline_outcomes(store, run_id: str, k: int):  # noqa: ANN001, ANN202
    """A run's outcomes; or a gate's, one mapping per round in the order they ran, so its
    blocks are bet in the order the gate chose them (passhat.results.gate.baseline_blocks),
    with the block sizes its rounds were curtailed to (none when they ran whole); and the
    seeds its runs sent. k: the regression's pass^k, which such a gate must be able to give."""
    from passhat.cli.rounds import outcomes, recorded_rounds

    runs = [run_id] if store.get_run(run_id) is not None else recorded_rounds(store, run_id)
    if not runs:
        raise UserInputError(f"--baseline: no run or gate '{run_id}' in the results store "
                             f"({store.safe_url}); `passhat runs` lists them")
    models = {t.agent_model for r in runs for t in store.trials(r)}
    if len(models) > 1:
        raise UserInputError(f"--baseline {run_id} has several agent models ({', '.join(sorted(models))}); "
                             "give a run of one")
    configs = [store.get_run(r).run_config() for r in runs]
    curtail = sorted({size for c in configs for size in c.curtail})
    if curtail and k != 1 and k not in curtail:
        raise UserInputError(f"--baseline {run_id}: {curtailed_baseline_refusal(curtail, k)}")
    seeds = {c.seed for c in configs}
    return (outcomes(store, runs) if runs == [run_id] else [outcomes(store, [r]) for r in runs]), curtail, seeds


def _request(store, base, criteria, baseline: str | None, cap: int, whole_blocks: bool = False):  # noqa: ANN001, ANN202
    """The gate's rounds: its criteria, the baseline's outcomes, and seeds that never
    coincide with the baseline's."""
    from passhat.results.gate_personas import criterion_fields
    from passhat.workflows.round_choice import Measure
    from passhat.workflows.rounds import RoundsRequest

    regression = next((c for c in criteria if c.kind == "regression"), None)
    reference, curtail, seeds = _baseline_outcomes(store, baseline, regression.k) if baseline else (None, [], set())
    measure = Measure(kind="gate", max_trials=cap, criteria=[criterion_fields(c) for c in criteria], baseline=reference,
                      whole_blocks=whole_blocks, baseline_curtail=curtail)
    return RoundsRequest(config=base, measure=measure, fixed_trials=cap,
                         seed_offset=seed_offset(base.seed, seeds, cap // round_trials(criteria)))


def _recorded(store, run_id: str) -> bool:  # noqa: ANN001 - a Store
    from passhat.cli.rounds import recorded_rounds

    return bool(recorded_rounds(store, run_id))


def _before_spending(request, criteria, force: bool) -> None:  # noqa: ANN001
    """Before a new gate's first conversation: refuse (exit 2) a budget in which an agent
    that never fails could not PASS every criterion, naming one that could, unless --force;
    then say, with the first round's preview, how likely a PASS is at this budget
    (passhat.results.gate_budget, the bench's simulation)."""
    from passhat.cli.common import err_console
    from passhat.results.gate_budget import Budget, check, preview
    from passhat.results.gate_personas import unpersonaed

    m = request.measure
    # Every persona's copy of the suite is alike to an agent that never fails: check each
    # criterion once, at its split confidence.
    budget = Budget(tuple(unpersonaed(criteria)), request.tasks(), m.max_trials, m.baseline, tuple(m.baseline_curtail),
                    m.whole_blocks)
    gate_id = request.config.run_id
    problem = check(budget)
    split = max(c.split for c in criteria)
    if problem and split > 1:  # the check ran each criterion at its persona's share of alpha
        problem += f" (each of {split} personas decided at alpha / {split}, Bonferroni)"
    if problem and not force:
        raise UserInputError(f"gate {gate_id}: {problem}; --force runs it anyway")
    said = preview(budget) + ([f"the figures above are each persona's alone, at alpha / {split} (Bonferroni)"]
                              if split > 1 else [])
    for line in ([f"{problem} (--force: running it anyway)"] if problem else []) + said:
        err_console.print(f"gate {gate_id}: {line}", highlight=False, markup=False, soft_wrap=True)


def seed_offset(seed: int, taken: set[int], rounds: int) -> int:
    """The least shift of the rounds' seeds (round r runs with seed + shift + r) for which
    none of `rounds` rounds sends a seed in `taken` (the baseline's runs'): a candidate's
    trials must be new draws, not the baseline's again."""
    offset = 0
    while any(seed + offset + r in taken for r in range(rounds)):
        offset += 1
    return offset


def _emit(record: dict, output: str, *, junit: str | None, summary: str | None) -> None:
    from passhat.results.gate_outputs import junit as junit_xml
    from passhat.results.gate_outputs import markdown

    text = markdown(record)
    if output == "json":
        print(json.dumps(record))
    else:
        out_console.print(text, markup=False, highlight=False)
    for path, body in ((summary, text), (junit, junit_xml(record) if junit else None)):
        if path:
            Path(path).write_text(body)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a") as f:
            f.write(text)
