"""Measurements in rounds from the command line (`passhat gate`, `passhat run --adaptive`):
start their workflow (workflows/rounds.py) with the workers of this process, follow its
rounds with a progress bar each, and return its record.

The rounds themselves are the workflow's: the same command again with the same --run-id
attaches to it (a killed command loses nothing: its round goes on when a worker serves it
again), and a finished one returns its record at once."""

from __future__ import annotations

import asyncio
import contextlib
import sys

from passhat.cli.common import err_console


def outcomes(store, run_ids: list[str]) -> dict[str, list]:  # noqa: ANN001 - a Store
    """domain/task -> outcomes in the order they ran: run by run, trial index within a run."""
    from passhat.activities.results import trial_outcomes

    return trial_outcomes(store, run_ids)


def recorded_rounds(store, run_id: str) -> list[str]:  # noqa: ANN001 - a Store
    """The round runs recorded for run_id, in order."""
    from passhat.workflows.client import rounds_of

    return rounds_of(store, run_id)


def run_rounds(request, *, workers: int | None, yes: bool, output: str, detach: bool) -> dict | None:  # noqa: ANN001
    """Run (or attach to) the measurement's rounds; its record, or None when detached."""
    from passhat.cli.execute import execute_here

    return execute_here(request.config, workers=workers, detach=detach, output=output, yes=yes,
                        preview=True, rounds=request)


async def follow_rounds(handle, store, request, output: str) -> dict:  # noqa: ANN001
    """Follow the rounds to the measurement's record: a line and a progress bar for each
    round that runs while it is followed (rounds finished before are not shown again)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from passhat.outcomes import RUN_COMPLETED
    from passhat.workflows.client import RunEnded
    from temporalio.client import WorkflowFailureError

    what = "gate" if request.measure.kind == "gate" else "run"
    run_id = request.config.run_id
    result = asyncio.ensure_future(handle.result())
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console,
                        disable=output == "json" and not err_console.is_terminal)
    bars: dict[str, int] = {}
    finished_before: set[str] = set()
    first_look = True

    def look() -> None:
        nonlocal first_look
        for rid in recorded_rounds(store, run_id):
            if rid in finished_before:
                continue
            row = store.get_run(rid)
            if rid not in bars:
                if first_look and row.status == RUN_COMPLETED:
                    finished_before.add(rid)
                    continue
                tasks = sum(len(ids) for ids in row.run_config().task_ids.values())
                progress.console.print(f"{what} {run_id}: round {rid.rsplit('-r', 1)[1]} ({rid}): {tasks} task(s) "
                                       f"x {row.run_config().trials_label()}", highlight=False, markup=False)
                bars[rid] = progress.add_task(f"round {rid}", total=row.total_trials)
            p = store.run_progress(rid)
            progress.update(bars[rid], completed=p.done, total=p.total)
        first_look = False

    with progress, contextlib.redirect_stdout(sys.stderr) if output == "json" else contextlib.nullcontext():
        while not result.done():
            await asyncio.to_thread(look)
            await asyncio.wait({result}, timeout=0.5)
        await asyncio.to_thread(look)
    try:
        return result.result()
    except WorkflowFailureError as err:
        raise RunEnded(f"{what} {run_id} ended without a verdict ({err.cause or err}); the same command "
                       "again continues it from the rounds it recorded") from err


def print_status(store, run_id: str, output: str) -> bool:  # noqa: ANN001 - a Store
    """`passhat status` of a gate or an adaptive run: its workflow's state, each round's
    progress and, once it has ended, its record. False when run_id names no such thing."""
    import json

    from passhat.cli.common import out_console
    from passhat.infra.temporal_client import TemporalUnreachable

    try:
        state = asyncio.run(_workflow_state(run_id))
    except TemporalUnreachable as err:
        state = ("unknown", " ".join(str(err).split()), None) if recorded_rounds(store, run_id) else None
    if state is None:
        return False
    workflow, detail, record = state
    rounds = []
    for rid in recorded_rounds(store, run_id):
        p = store.run_progress(rid)
        rounds.append({"run_id": rid, "status": store.get_run(rid).status, "done": p.done, "total": p.total,
                       "not_evaluable": p.not_evaluable})
    if output == "json":
        print(json.dumps({"run_id": run_id, "workflow": workflow, "workflow_detail": detail,
                          "rounds": rounds, "record": record}))
        return True
    lines = [f"{run_id}: measured in rounds; workflow {workflow}" + (f" ({detail})" if detail else "")]
    lines += [f"  round {r['run_id']}: {r['status']}, trials done {r['done']}/{r['total']}, "
              f"not evaluable {r['not_evaluable']}" for r in rounds]
    if record is not None:
        verdict = record.get("verdict") or ("precision reached" if record.get("reached") else "precision not reached")
        lines.append(f"  result: {verdict}, {record['conversations']} conversations in {len(record['rounds'])} "
                     f"round(s); the same command again prints it in full")
    out_console.print("\n".join(lines), highlight=False, markup=False)
    return True


async def _workflow_state(run_id: str):  # noqa: ANN202
    """(state, what to know about it, the record once completed) of the rounds workflow
    under run_id; None when Temporal has no such workflow."""
    from temporalio.client import WorkflowExecutionStatus

    from passhat.infra.temporal_client import connect
    from passhat.workflows.client import workflow_status

    client = await connect(start=False)
    handle = client.get_workflow_handle(run_id)
    try:
        desc = await handle.describe()
    except Exception:  # noqa: BLE001 - no such workflow
        return None
    if desc.workflow_type != "RoundsWorkflow":
        return None
    state, detail = await workflow_status(client, run_id) or ("unknown", None)
    record = await handle.result() if desc.status == WorkflowExecutionStatus.COMPLETED else None
    return state, detail, record
