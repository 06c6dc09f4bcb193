"""`passhat run --trials K --adaptive`: the run in rounds (passhat.cli.rounds), one block
of k trials a task each, until its pass^k is known to --precision at --confidence
(passhat.results.precision) or every task has its K trials. Like the gate it is durable:
the same command again with the same --run-id reads back finished rounds and resumes the
interrupted one."""

from __future__ import annotations

import json

import typer

from passhat.cli.common import open_store, out_console
from passhat.cli.run_options import UserInputError


def check(config, metric: str | None, precision: float, confidence: float, detach: bool):  # noqa: ANN001, ANN201
    """The measurement's target, or one line saying what is wrong."""
    from passhat.results import gate
    from passhat.results import precision as measure

    if detach:
        raise UserInputError("passhat run --adaptive follows its rounds from this process: it cannot --detach")
    if len(config.agent_models) != 1:
        raise UserInputError("passhat run --adaptive measures one --agent-model at a time")
    try:
        want = measure.target(gate.parse_metric(metric or "pass^1"), precision, confidence)
    except gate.GateError as err:
        raise UserInputError(str(err).replace("--regression-metric", "--precision-metric"))
    if want.k > config.trials:
        raise UserInputError(f"--precision-metric pass^{want.k} needs --trials of at least {want.k}, "
                             f"got {config.trials}")
    return want


def run_adaptive(config, want, *, workers: int | None, yes: bool, output: str) -> None:  # noqa: ANN001
    """Run the rounds, print the measurement (markdown or -o json); exit 1 when trials
    were left not evaluable or the budget stopped it, as `passhat run` does."""
    from passhat.cli.rounds import run_rounds
    from passhat.results import precision as measure

    store = open_store()
    cap = config.trials - config.trials % want.k

    def choose(data: list, spent: float) -> tuple[list[str], str | None]:
        return measure.next_round(want, cap, data)

    rounds, data, stopped = run_rounds(store, config, want.k, choose, workers=workers, yes=yes,
                                       output=output, what="run")
    record = measure.record(config.run_id, measure.measure(want, data), rounds=rounds,
                            fixed_trials=config.trials, cost_usd=sum(store.run_cost(r) for r in rounds),
                            stopped=stopped)
    if output == "json":
        print(json.dumps(record))
    else:
        out_console.print(measure.markdown(record), markup=False, highlight=False)
    if record["evaluable"] < record["conversations"] or (stopped or "").startswith("the budget"):
        raise typer.Exit(1)
