"""`passhat run --trials K --adaptive`: the run in rounds (passhat.workflows.rounds), one
block of k trials a task each, until its pass^k is known to --precision at --confidence
(passhat.results.precision) or every task has its K trials. Like the gate it is durable:
the same command again with the same --run-id attaches to its rounds, and nothing
finished runs twice."""

from __future__ import annotations

import json

import typer

from passhat.cli.common import out_console
from passhat.cli.run_options import UserInputError


def check(config, metric: str | None, precision: float, confidence: float):  # noqa: ANN001, ANN201
    """The measurement's target, or one line saying what is wrong."""
    from passhat.results import gate
    from passhat.results import precision as measure

    if config.a2a_agents:
        raise UserInputError("passhat run --adaptive measures one agent at a time: give one --agent a2a:URL")
    if len(config.agent_models) != 1:
        raise UserInputError("passhat run --adaptive measures one --agent-model at a time")
    if config.user_personas:  # its precision would pool every user's trials of a task
        raise UserInputError("passhat run --adaptive does not take --user-persona yet: leave out one "
                             "or the other (docs/personas.md)")
    try:
        want = measure.target(gate.parse_metric(metric or "pass^1"), precision, confidence)
    except gate.GateError as err:
        raise UserInputError(str(err).replace("--regression-metric", "--precision-metric"))
    if want.k > config.trials:
        raise UserInputError(f"--precision-metric pass^{want.k} needs --trials of at least {want.k}, "
                             f"got {config.trials}")
    return want


def run_adaptive(config, want, *, workers: int | None, yes: bool, output: str, detach: bool) -> None:  # noqa: ANN001
    """Run the rounds, print the measurement (markdown or -o json); exit 1 when trials
    were left not evaluable or the budget stopped it, as `passhat run` does."""
    from dataclasses import asdict

    from passhat.cli.rounds import run_rounds
    from passhat.results import precision as measure
    from passhat.workflows.round_choice import Measure
    from passhat.workflows.rounds import RoundsRequest

    cap = config.trials - config.trials % want.k
    request = RoundsRequest(config=config, measure=Measure(kind="adaptive", max_trials=cap, target=asdict(want)),
                            fixed_trials=config.trials)
    record = run_rounds(request, workers=workers, yes=yes, output=output, detach=detach)
    if record is None:  # detached: `passhat status` follows it
        return
    if output == "json":
        print(json.dumps(record))
    else:
        out_console.print(measure.markdown(record), markup=False, highlight=False)
    if record["evaluable"] < record["conversations"] or (record["stopped"] or "").startswith("the budget"):
        raise typer.Exit(1)
