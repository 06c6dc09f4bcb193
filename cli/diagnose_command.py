"""`passhat diagnose RUN`: diagnose again the failed trials of a run scored by an older
passhat (or imported from tau2 results files), in a worker (workflows/rediagnosis.py):
the diagnosis made at scoring time, for trials that have none or an older version."""

from __future__ import annotations

import asyncio
import json

import typer

from passhat.cli.common import check_output, existing_run, one_line_errors, open_store, out_console


@one_line_errors
def diagnose(
    run_id: str = typer.Argument(..., help="Run id."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (json prints exactly one JSON object)."),
) -> None:
    """Diagnose a run's failed trials again where their diagnosis is missing or older
    (docs/failures.md); trials already of this version are left as they are."""
    from passhat.domains.plugins import load_plugins

    check_output(output)
    store = open_store()
    config = existing_run(store, run_id).run_config()
    load_plugins(config.plugins)
    result = asyncio.run(_serve(run_id, config, store))
    if output == "json":
        print(json.dumps(result.model_dump()))
        return
    out_console.print(
        f"run {run_id}: diagnosed {result.diagnosed} failed trial(s); {result.current} already current"
        + (f"; {result.not_diagnosable} in a domain that does not diagnose" if result.not_diagnosable else ""),
        highlight=False, markup=False)


async def _serve(run_id: str, config, store):  # noqa: ANN001, ANN202 - a RunConfig, a Store; a Rediagnosis
    from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

    from passhat.infra.temporal_client import connect
    from passhat.workflows.rediagnosis import RediagnosisWorkflow, workflow_id
    from passhat.workflows.worker import build_worker

    client = await connect()
    async with build_worker(client, store, max_concurrent_activities=4, plugins=config.plugins):
        handle = await client.start_workflow(
            RediagnosisWorkflow.run, run_id, id=workflow_id(run_id), task_queue=config.task_queue(),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"passhat diagnose {run_id}",
        )
        return await handle.result()
